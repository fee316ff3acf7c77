#!/usr/bin/env bash
# The shipped model's first result: translate the Bible test set with the
# study's baseline in models/bible-baseline/, score it, and report its context
# use (a sentence-level model: CXMI 0).
#
#   bash scripts/first-model.sh [OUT]      # OUT: default runs/first-model
#
# One thread per tool (OMP_NUM_THREADS, default 1): the time does not
# collapse when another process holds a core. Prints BLEU/chrF and CXMI;
# writes OUT/test.baseline.en, OUT/scores.json and OUT/usage.json.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODEL=${FAIRSEQ_CTX_MODEL:-$REPO/models/bible-baseline}
OUT=${1:-runs/first-model}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
for f in checkpoint.pt spm.model dict.es.txt test.es test.en test.docids; do
  [ -f "$MODEL/$f" ] || { echo "fairseq_ctx: error: $MODEL/$f is missing (the shipped model)" >&2; exit 1; }
done
mkdir -p "$OUT"
start=$(date +%s)
fairseq-ctx-translate "$MODEL" --path "$MODEL/checkpoint.pt" --cpu \
    --input "$MODEL/test.es" --docids "$MODEL/test.docids" \
    --bpe sentencepiece --sentencepiece-model "$MODEL/spm.model" \
    --beam 4 --max-len-a 1.5 --max-len-b 10 --output "$OUT/test.baseline.en"
fairseq-ctx-score --ref "$MODEL/test.en" --docids "$MODEL/test.docids" \
    --hyp baseline="$OUT/test.baseline.en" --json "$OUT/scores.json"
fairseq-ctx-context-usage "$MODEL" --path "$MODEL/checkpoint.pt" --cpu \
    --task document_translation --context-size 1 --no-generated --results "$OUT/usage.json"
echo "first-model: done in $(( $(date +%s) - start )) s (OMP_NUM_THREADS=$OMP_NUM_THREADS); outputs in $OUT"
