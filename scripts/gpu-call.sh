#!/usr/bin/env bash
# One call of the GPU runbook (docs/distributed-and-precision.md, "On a GPU"):
# a GPU machine lent one command of at most 8 minutes at a time. Every step
# writes its results under OUT piece by piece (one JSON per cell, test or
# benchmark child, written the moment it is done), so a call killed at its
# time limit keeps everything finished before it.
#
#   bash scripts/gpu-call.sh STEP OUT [ARGS...]
#
#   diagnose  install, then scripts/speed_diagnosis.py for at most 120 s
#             (ARGS go to it; cells already in benchmarks/gpu/diagnosis/ are
#             skipped)
#   tests     install, then pytest -m gpu with one JSON per test in OUT/tests
#             (tests passed in an earlier call, their JSON carried back into
#             benchmarks/gpu/tests/, are deselected); ARGS go to pytest
#   bench     install, then scripts/benchmark.py at Base size with GPU-sized
#             but short work, one JSON per child in OUT/bench; ARGS pick the
#             precision and the variants (--precision bf16 --variants ctxsan dc)
#   study     install, then scripts/gpu-study.sh with the seconds left of ARGS[0]
#
# The machine needs the offline kit in .gpu/ and data/bible/bin (both ignored
# by git: name them in the run tool's carry). Installing is skipped when a
# previous call on the same machine left it working. With --device cpu among
# ARGS (diagnose, bench) nothing is installed: a rehearsal on this machine's
# own environment. DATA_BIN overrides data/bible/bin; GPU_CALL_BUDGET_S (default
# 450) is the call's time in seconds, from which each step's deadline is cut.
set -uo pipefail
cd "$(dirname "$0")/.."
STEP=${1:-}
OUT=${2:-}
die() { echo "fairseq_ctx: error: $*" >&2; exit 2; }
case "$STEP" in diagnose|tests|bench|study) ;; *) die "gpu-call.sh STEP OUT [ARGS...]: STEP is one of diagnose, tests, bench, study (got '${STEP}')";; esac
[ -n "$OUT" ] || die "gpu-call.sh $STEP OUT: OUT (the directory for the results) is missing"
shift 2
ARGS=("$@")
mkdir -p "$OUT"
START=$(date +%s)
BUDGET=${GPU_CALL_BUDGET_S:-450}
DATA=${DATA_BIN:-data/bible/bin}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
log() { echo "[gpu-call $STEP +$(( $(date +%s) - START ))s] $*" | tee -a "$OUT/call.log"; }

DEVICE=cuda
for ((i = 0; i < ${#ARGS[@]}; i++)); do
  [ "${ARGS[$i]}" = "--device" ] && DEVICE=${ARGS[$((i + 1))]:-cuda}
done
[ -f "$DATA/dict.es.txt" ] || [ -n "${DATA_BIN:-}" ] || die "$DATA not found (bash scripts/prepare-bible.sh here, and carry data/bible/bin)"

if [ "$DEVICE" = cuda ]; then
  [ -d .gpu ] || die ".gpu/ not found (cp -r ../shared/gpu .gpu here, and carry .gpu)"
  export PYTHONPATH=$PWD:$HOME/fsq/src:$HOME/fsq/site PYTHONUNBUFFERED=1
  if python3 -c "import fairseq, fairseq_ctx, fairseq_ctx.models" > /dev/null 2>&1; then
    log "fairseq and the project import: install skipped"
  else
    bash .gpu/install.sh "$HOME/fsq" > "$OUT/install.log" 2>&1 || { tail -20 "$OUT/install.log"; die "install failed (OUT/install.log)"; }
    log "installed"
  fi
  { nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1
    python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
    git rev-parse HEAD 2>/dev/null; } > "$OUT/machine.txt"
else
  log "device $DEVICE: a rehearsal in this machine's environment, nothing installed"
fi

case "$STEP" in
  diagnose)
    deadline=$(( $(left) < 120 ? $(left) : 120 ))
    mkdir -p "$OUT/diagnosis"
    # cells of earlier calls (carried back into the checkout) are not measured again
    [ -d benchmarks/gpu/diagnosis ] && [ "$DEVICE" = cuda ] && cp -n benchmarks/gpu/diagnosis/*.json "$OUT/diagnosis/" 2>/dev/null
    log "speed diagnosis, deadline ${deadline} s"
    python3 scripts/speed_diagnosis.py "$DATA" --out "$OUT/diagnosis" --deadline-s "$deadline" "${ARGS[@]}" \
      > "$OUT/diagnosis.log" 2>&1
    code=$?
    tail -n 60 "$OUT/diagnosis.log"
    ;;
  tests)
    mkdir -p "$OUT/tests"
    # --device is this script's, not pytest's; on CPU (every GPU test skips) one worker
    PYTEST_ARGS=()
    for ((i = 0; i < ${#ARGS[@]}; i++)); do
      if [ "${ARGS[$i]}" = "--device" ]; then i=$((i + 1)); else PYTEST_ARGS+=("${ARGS[$i]}"); fi
    done
    workers=4; [ "$DEVICE" = cuda ] || workers=1
    log "pytest -m gpu, stopped at $(( $(left) - 20 )) s"
    # SIGINT: pytest stops, reports and exits; every finished test's JSON is written already
    timeout --signal=INT --kill-after=15 $(( $(left) - 20 )) \
      python3 -m pytest tests -m gpu -q -p no:cacheprovider -n "$workers" -p tests.piece_results \
        --pieces "$OUT/tests" --skip-passed benchmarks/gpu/tests "${PYTEST_ARGS[@]}" > "$OUT/pytest.log" 2>&1
    code=$?
    tail -n 30 "$OUT/pytest.log"
    ;;
  bench)
    mkdir -p "$OUT/bench"
    log "benchmark, deadline $(( $(left) - 10 )) s"
    # GPU-sized work in short children (~1 min each; --deadline-s starts none that would not end in time)
    python3 scripts/benchmark.py "$DATA" --size base --device cuda --max-tokens 8192 --warmup-updates 5 \
      --train-updates 20 --decode-sentences 256 --decode-batch-size 64 --no-doc-order \
      --pieces "$OUT/bench" --deadline-s $(( $(left) - 10 )) --json "$OUT/bench.json" "${ARGS[@]}" \
      > "$OUT/bench.log" 2>&1
    code=$?
    tail -n 30 "$OUT/bench.log"
    ;;
  study)
    [ -f scripts/gpu-study.sh ] || die "scripts/gpu-study.sh not found"
    total=${ARGS[0]:-}
    [[ "$total" =~ ^[0-9]+$ ]] || die "gpu-call.sh study OUT DEADLINE_S: DEADLINE_S (seconds) is missing"
    remaining=$(( total - ($(date +%s) - START) ))
    (( remaining >= 1 )) || remaining=1  # the install ate the deadline: gpu-study.sh stops at once and evaluates
    log "scripts/gpu-study.sh $remaining"
    # OUT is this call's (the results, logs and figures are copied there), not the caller's environment's
    OUT="$OUT" bash scripts/gpu-study.sh "$remaining" "${ARGS[@]:1}"
    code=$?
    ;;
esac
log "exit $code"
exit $code
