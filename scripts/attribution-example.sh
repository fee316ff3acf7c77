#!/bin/bash
# The attribution report on a model whose answer is known: the synthetic
# context task (fairseq_ctx/evaluation/synthetic_context_task.py), a tiny
# transformer_ctxenc trained 400 updates on it (the model tests/test_attribution.py
# trains), and fairseq-ctx-context-usage --attribution on its test split.
# Writes OUT/{usage.json,attribution.json,attribution.html} (default
# benchmarks/attribution-synthetic) and, where chromium-headless-shell is
# installed, a screenshot of the page to docs/images/attribution-synthetic.png.
# About 2 CPU minutes.
#   bash scripts/attribution-example.sh [OUT]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$(realpath -m "${1:-$ROOT/benchmarks/attribution-synthetic}")"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=1 PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
TINY=$(python3 -c "from fairseq_ctx.architectures import TINY_FLAGS; print(' '.join(TINY_FLAGS))")
python3 -m fairseq_ctx.evaluation.synthetic_context_task "$WORK/raw" >/dev/null
fairseq-preprocess --source-lang src --target-lang tgt --trainpref "$WORK/raw/train" \
    --validpref "$WORK/raw/valid" --testpref "$WORK/raw/test" --destdir "$WORK/bin" \
    --joined-dictionary --workers 1 >/dev/null
for s in train valid test; do cp "$WORK/raw/$s.docids" "$WORK/bin/$s.src-tgt.docids"; done
# shellcheck disable=SC2086
fairseq-train "$WORK/bin" --user-dir "$ROOT/fairseq_ctx" --arch transformer_ctxenc $TINY \
    --task document_translation --context-size 1 --optimizer adam --lr 0.01 \
    --lr-scheduler inverse_sqrt --warmup-updates 20 --criterion label_smoothed_cross_entropy \
    --label-smoothing 0 --max-tokens 600 --max-update 400 --save-dir "$WORK/ckpt" --no-progress-bar \
    --num-workers 0 --seed 1 --cpu --no-epoch-checkpoints --required-batch-size-multiple 1 \
    --no-save-optimizer-state --disable-validation --log-format simple --log-interval 100 > "$WORK/train.log"
mkdir -p "$OUT"
fairseq-ctx-context-usage "$WORK/bin" --path "$WORK/ckpt/checkpoint_last.pt" --task document_translation \
    --context-size 1 --cpu --results "$OUT/usage.json" --attribution "$OUT/attribution.json" \
    --attribution-html "$OUT/attribution.html" --attribution-max-items 200
BROWSER="$(command -v chromium-headless-shell || true)"
if [ -n "$BROWSER" ]; then
  mkdir -p "$ROOT/docs/images"
  "$BROWSER" --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
      --window-size=1100,800 --user-data-dir="$WORK/browser" \
      --screenshot="$ROOT/docs/images/attribution-synthetic.png" "file://$OUT/attribution.html" 2>/dev/null
  echo "screenshot: docs/images/attribution-synthetic.png"
else
  echo "no chromium-headless-shell: no screenshot (bash scripts/install-system-packages.sh installs it)"
fi
