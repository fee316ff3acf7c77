#!/usr/bin/env bash
# The shipped models' first result: translate the Bible test set with the
# study's baseline and context encoder in models/bible/ (one per core, side
# by side), score both, and report the context encoder's context use (CXMI
# against no, shuffled and random context).
#
#   bash scripts/first-model.sh [OUT]      # OUT: default runs/first-model
#
# One thread per tool (OMP_NUM_THREADS, default 1): the time does not
# collapse when another process holds a core. Prints BLEU/chrF of both and
# the CXMI; writes OUT/test.{baseline,ctxenc}.en, OUT/scores.json and
# OUT/usage.json.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODEL=${FAIRSEQ_CTX_MODEL:-$REPO/models/bible}
OUT=${1:-runs/first-model}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
for f in baseline.pt ctxenc.pt spm.model dict.es.txt test.es test.en test.docids; do
  [ -f "$MODEL/$f" ] || { echo "fairseq_ctx: error: $MODEL/$f is missing (the shipped models)" >&2; exit 1; }
done
mkdir -p "$OUT"
start=$(date +%s)
translate() {  # NAME: the model's translation of the test set, its log beside it
  fairseq-ctx-translate "$MODEL" --path "$MODEL/$1.pt" --cpu \
      --input "$MODEL/test.es" --docids "$MODEL/test.docids" \
      --bpe sentencepiece --sentencepiece-model "$MODEL/spm.model" \
      --beam 4 --max-len-a 1.5 --max-len-b 10 --output "$OUT/test.$1.en" > "$OUT/translate.$1.log" 2>&1 \
    || { cat "$OUT/translate.$1.log" >&2; return 1; }
  cat "$OUT/translate.$1.log"
}
translate baseline & baseline=$!
translate ctxenc & ctxenc=$!
status=0
wait $baseline || status=1
wait $ctxenc || status=1
[ $status -eq 0 ] || exit 1
fairseq-ctx-score --ref "$MODEL/test.en" --docids "$MODEL/test.docids" \
    --hyp baseline="$OUT/test.baseline.en" --hyp ctxenc="$OUT/test.ctxenc.en" --json "$OUT/scores.json"
fairseq-ctx-context-usage "$MODEL" --path "$MODEL/ctxenc.pt" --cpu \
    --task document_translation --context-size 1 --no-generated --results "$OUT/usage.json"
echo "first-model: done in $(( $(date +%s) - start )) s (OMP_NUM_THREADS=$OMP_NUM_THREADS); outputs in $OUT"
