#!/usr/bin/env bash
# Everything a GPU machine should check, in one command, for a machine with
# no network (the offline kit of ../shared/gpu, copied to .gpu/):
#
#   bash scripts/gpu-check.sh [OUT]          # OUT defaults to benchmarks/gpu
#
# 1. installs fairseq and the project from .gpu/ (about 30 s);
# 2. `pytest -m gpu` (the architecture contract on CUDA for every variant in
#    fp32/fp16/bf16 with each attention backend forced, fairseq-train 50
#    updates in --fp16 and --bf16 then fairseq-generate, per variant);
# 3. the GPU benchmark in fp16 and bf16: Base size, 16,384-token batches,
#    10 untimed then 50 timed updates, beam-4 decoding of 1,024 validation
#    sentences in batches of 128, synchronized timing; every variant's
#    tokens/s against the baseline beside its FLOP bound, and MFU.
# Needs data/bible (bash scripts/prepare-bible.sh, carried along). Logs and
# JSON go to OUT; the exit status is the first failing step's.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-benchmarks/gpu}
mkdir -p "$OUT"
die() { echo "gpu-check: error: $*" >&2; exit 1; }
[ -d .gpu ] || die ".gpu/ not found (cp -r ../shared/gpu .gpu before sending the checkout)"
[ -f data/bible/bin/dict.es.txt ] || die "data/bible/bin not found (bash scripts/prepare-bible.sh, and carry data/bible)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt"

start=$(date +%s)
bash .gpu/install.sh "$HOME/fsq" > "$OUT/install.log" 2>&1 || { tail -20 "$OUT/install.log"; die "install failed"; }
export PYTHONPATH=$PWD:$HOME/fsq/src:$HOME/fsq/site PYTHONUNBUFFERED=1
echo "[gpu-check] installed in $(( $(date +%s) - start )) s"

status=0
t=$(date +%s)
python3 -m pytest tests -m gpu -q -p no:cacheprovider -n 4 > "$OUT/pytest-gpu.log" 2>&1 || status=$?
echo "[gpu-check] pytest -m gpu: exit $status in $(( $(date +%s) - t )) s: $(tail -1 "$OUT/pytest-gpu.log")"

for precision in fp16 bf16; do
  t=$(date +%s)
  python3 scripts/benchmark.py data/bible/bin --size base --device cuda --precision "$precision" \
    --max-tokens 16384 --warmup-updates 10 --train-updates 50 --decode-sentences 1024 --decode-batch-size 128 \
    --no-doc-order --json "$OUT/gpu-base-$precision.json" > "$OUT/benchmark-$precision.log" 2>&1
  code=$?
  [ $status -eq 0 ] && status=$code
  echo "[gpu-check] benchmark $precision: exit $code in $(( $(date +%s) - t )) s"
done
echo "[gpu-check] done in $(( $(date +%s) - start )) s; logs and JSON in $OUT"
exit $status
