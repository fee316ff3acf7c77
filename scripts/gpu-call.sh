#!/usr/bin/env bash
# One call of the GPU runbook (docs/distributed-and-precision.md, "On a GPU"):
# a GPU machine lent one command of at most 8 minutes at a time. Every step
# writes its results piece by piece (one JSON per cell, test or benchmark
# child, written the moment it is done) into a work directory, and the work
# directory is packed into OUT/results.tgz every GPU_CALL_SNAPSHOT_S seconds
# (default 20) and once more at the end: the GPU tool returns at most 8 files
# from OUT, so a call killed at its time limit returns everything finished up
# to its last snapshot in one archive, laid out as benchmarks/gpu/
# (diagnosis/, tests/, bench/CALL/, study/, logs/; checkpoints left out):
#
#   mkdir -p benchmarks/gpu && tar xzf FILES_AT/results.tgz -C benchmarks/gpu
#
# OUT itself holds results.tgz, call.log and (on a GPU) machine.txt.
#
#   bash scripts/gpu-call.sh STEP OUT [ARGS...]
#
#   diagnose  install, then scripts/speed_diagnosis.py for at most 120 s
#             (ARGS go to it; cells already in benchmarks/gpu/diagnosis/ are
#             skipped)
#   tests     install, then pytest -m gpu with one JSON per test in tests/
#             (tests passed in an earlier call, their JSON carried back into
#             benchmarks/gpu/tests/, are deselected); ARGS go to pytest
#   bench     install, then scripts/benchmark.py at Base size with GPU-sized
#             but short work, one JSON per child in bench/CALL/; ARGS pick the
#             precision and the variants (--precision bf16 --variants ctxsan dc)
#   study     install, then scripts/gpu-study.sh with the seconds left of ARGS[0]
#
# The machine needs the offline kit in .gpu/ and data/bible/bin (both ignored
# by git: name them in the run tool's carry); fairseq's libbleu, which the kit
# leaves out, is compiled after it (scripts/build_libbleu.py). Installing is
# skipped when a previous call on the same machine left it working. With --device cpu among
# ARGS (diagnose, bench) nothing is installed: a rehearsal on this machine's
# own environment. DATA_BIN overrides data/bible/bin; GPU_CALL_BUDGET_S (default
# 450) is the call's time in seconds, from which each step's deadline is cut;
# GPU_CALL_WORK (default /tmp/gpu-call-work) is the work directory, kept
# between calls on a warm machine, so that a second call goes on from it.
set -uo pipefail
STEP=${1:-}
OUT=${2:-}
die() { echo "fairseq_ctx: error: $*" >&2; exit 2; }
case "$STEP" in diagnose|tests|bench|study) ;; *) die "gpu-call.sh STEP OUT [ARGS...]: STEP is one of diagnose, tests, bench, study (got '${STEP}')";; esac
[ -n "$OUT" ] || die "gpu-call.sh $STEP OUT: OUT (the directory for the results) is missing"
shift 2
ARGS=("$@")
mkdir -p "$OUT"
OUT=$(CDPATH= cd "$OUT" && pwd)  # a relative OUT is the caller's, before the cd below
cd "$(dirname "$0")/.."
START=$(date +%s)
BUDGET=${GPU_CALL_BUDGET_S:-450}
DATA=${DATA_BIN:-data/bible/bin}
WORK=${GPU_CALL_WORK:-/tmp/gpu-call-work}
CALL=$(date -u +%Y%m%dT%H%M%SZ)-$STEP
mkdir -p "$WORK/logs"
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
log() { echo "[gpu-call $STEP +$(( $(date +%s) - START ))s] $*" | tee -a "$OUT/call.log" "$WORK/logs/$CALL.call.log"; }

# the archive: written beside and renamed over, so OUT/results.tgz is always whole. Left
# out: checkpoints and every file on its way to its name (pieces' NAME.tmpPID, fairseq's
# .pt.tmp, the study's .tmp and .part), run locks and the diagnosis's to-do lists. Files
# that change or go while tar reads them are no error (tar's status 1): they are in
# the next snapshot
SNAPSHOT_EXCLUDES=(--exclude='*.pt' --exclude='*.pt.tmp' --exclude='*.tmp' --exclude='*.tmp[0-9]*'
                   --exclude='*.part' --exclude='*.lock' --exclude='*.todo')
snapshot() {
  local part="$OUT/.results.tgz.$BASHPID.part"
  tar czf "$part" "${SNAPSHOT_EXCLUDES[@]}" --warning=no-file-changed --warning=no-file-removed \
    --warning=no-file-shrank -C "$WORK" . 2> /dev/null
  if (( $? <= 1 )); then mv -f "$part" "$OUT/results.tgz"; else rm -f "$part"; fi
}
# every GPU_CALL_SNAPSHOT_S seconds; TERM ends the wait, or the loop after the snapshot under way
( stop=; trap 'stop=1' TERM
  while [ -z "$stop" ]; do
    sleep "${GPU_CALL_SNAPSHOT_S:-20}" & wait $!
    [ -n "$stop" ] && { kill $! 2> /dev/null; break; }
    snapshot
  done ) > /dev/null 2>&1 &
SNAPPER=$!
# the last snapshot after the loop's own, so that the final state wins
finish() { kill -TERM "$SNAPPER" 2> /dev/null; wait "$SNAPPER" 2> /dev/null; snapshot; }
trap finish EXIT

# the commit the checkout is at: the copy a GPU machine is sent may come without git's
# directory, so the session writes it to .gpu/commit before a loan (docs); the study's
# records take it from FAIRSEQ_CTX_COMMIT then
COMMIT=$(git rev-parse HEAD 2> /dev/null) || COMMIT=$(cat .gpu/commit 2> /dev/null) || COMMIT=
[ -n "$COMMIT" ] && export FAIRSEQ_CTX_COMMIT=$COMMIT

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
    bash .gpu/install.sh "$HOME/fsq" > "$WORK/logs/$CALL.install.log" 2>&1 \
      || { tail -20 "$WORK/logs/$CALL.install.log"; die "install failed (logs/$CALL.install.log in results.tgz)"; }
    log "installed"
  fi
  # the kit compiles fairseq's Cython modules only; fairseq-generate scores with libbleu
  if ! compgen -G "$HOME/fsq/src/fairseq/libbleu*.so" > /dev/null; then
    if (builder=$PWD/scripts/build_libbleu.py; cd "$HOME/fsq/src" && python3 "$builder") > "$WORK/logs/$CALL.libbleu.log" 2>&1; then
      log "fairseq's libbleu built"
    else
      tail -5 "$WORK/logs/$CALL.libbleu.log"
      log "fairseq's libbleu did not build (logs/$CALL.libbleu.log): fairseq-generate stops where it scores BLEU"
    fi
  fi
  { nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1
    python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
    echo "commit ${COMMIT:-unknown}"; } > "$OUT/machine.txt"
  cp "$OUT/machine.txt" "$WORK/logs/$CALL.machine.txt"
else
  log "device $DEVICE: a rehearsal in this machine's environment, nothing installed"
fi

case "$STEP" in
  diagnose)
    deadline=$(( $(left) < 120 ? $(left) : 120 ))
    (( deadline >= 1 )) || deadline=1  # the install ate the budget: 0 would be no deadline at all
    mkdir -p "$WORK/diagnosis"
    # cells of earlier calls (carried back into the checkout) are not measured again
    [ -d benchmarks/gpu/diagnosis ] && [ "$DEVICE" = cuda ] && cp -n benchmarks/gpu/diagnosis/*.json "$WORK/diagnosis/" 2>/dev/null
    log "speed diagnosis, deadline ${deadline} s"
    python3 scripts/speed_diagnosis.py "$DATA" --out "$WORK/diagnosis" --deadline-s "$deadline" "${ARGS[@]}" \
      > "$WORK/logs/$CALL.log" 2>&1
    code=$?
    tail -n 60 "$WORK/logs/$CALL.log"
    ;;
  tests)
    mkdir -p "$WORK/tests"
    # tests passed in earlier calls (carried back into the checkout, or in a warm machine's
    # work directory) are deselected
    [ -d benchmarks/gpu/tests ] && [ "$DEVICE" = cuda ] && cp -n benchmarks/gpu/tests/*.json "$WORK/tests/" 2>/dev/null
    # --device is this script's, not pytest's; on CPU (every GPU test skips) one worker
    PYTEST_ARGS=()
    for ((i = 0; i < ${#ARGS[@]}; i++)); do
      if [ "${ARGS[$i]}" = "--device" ]; then i=$((i + 1)); else PYTEST_ARGS+=("${ARGS[$i]}"); fi
    done
    # 8 workers of 2 threads on the GPU machine's 16 cores; on CPU one
    workers=8; [ "$DEVICE" = cuda ] || workers=1
    stop=$(( $(left) - 20 )); (( stop >= 1 )) || stop=1  # timeout 0 would be no limit at all
    log "pytest -m gpu, stopped at $stop s"
    # SIGINT: pytest stops, reports and exits; every finished test's JSON is written already.
    # A worker whose CUDA context broke ends (tests/cuda_guard.py): xdist replaces it every time.
    # --rootdir: test ids from the checkout, whatever ini file lies above it (on the H200 of
    # 2026-11-30 pytest took "/" and named the tests work/main/tests/...)
    OMP_NUM_THREADS=2 timeout --signal=INT --kill-after=15 "$stop" \
      python3 -m pytest tests -m gpu -q -p no:cacheprovider --rootdir . -n "$workers" --max-worker-restart 1000 \
        -p tests.piece_results \
        --pieces "$WORK/tests" --skip-passed "$WORK/tests" "${PYTEST_ARGS[@]}" > "$WORK/logs/$CALL.log" 2>&1
    code=$?
    tail -n 30 "$WORK/logs/$CALL.log"
    ;;
  bench)
    mkdir -p "$WORK/bench/$CALL"
    deadline=$(( $(left) - 10 )); (( deadline >= 1 )) || deadline=1  # 0 would be no deadline at all
    log "benchmark, deadline ${deadline} s"
    # GPU-sized work in short children (~1 min each; --deadline-s starts none that would not end in time)
    python3 scripts/benchmark.py "$DATA" --size base --device cuda --max-tokens 8192 --warmup-updates 5 \
      --train-updates 20 --decode-sentences 256 --decode-batch-size 64 --no-doc-order --profile-steps \
      --pieces "$WORK/bench/$CALL" --deadline-s "$deadline" --json "$WORK/logs/$CALL.json" "${ARGS[@]}" \
      > "$WORK/logs/$CALL.log" 2>&1
    code=$?
    tail -n 30 "$WORK/logs/$CALL.log"
    ;;
  study)
    [ -f scripts/gpu-study.sh ] || die "scripts/gpu-study.sh not found"
    total=${ARGS[0]:-}
    [[ "$total" =~ ^[0-9]+$ ]] || die "gpu-call.sh study OUT DEADLINE_S: DEADLINE_S (seconds) is missing"
    remaining=$(( total - ($(date +%s) - START) ))
    (( remaining >= 1 )) || remaining=1  # the install ate the deadline: gpu-study.sh stops at once and evaluates
    log "scripts/gpu-study.sh $remaining"
    # the runs train in the work directory (their logs are in every snapshot; checkpoints are not);
    # the results file and its figures are copied to the work directory's study/ at the end
    STUDY_OUT=${STUDY_OUT:-$WORK/study/runs} OUT="$WORK" bash scripts/gpu-study.sh "$remaining" "${ARGS[@]:1}" \
      2>&1 | tee "$WORK/logs/$CALL.log"
    code=${PIPESTATUS[0]}
    ;;
esac
log "exit $code"
exit $code
