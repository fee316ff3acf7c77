#!/usr/bin/env bash
# The study's remaining runs on one GPU until a deadline, in whole runs:
#
#   bash scripts/gpu-study.sh DEADLINE_S [ARGS...]
#
# Trains with `python3 -m fairseq_ctx.study --device cuda --jobs JOBS` (one
# fairseq process per run, JOBS runs sharing the GPU; each job evaluates its
# runs as they finish) until DEADLINE_S seconds from now less EVAL_RESERVE_S
# (default 90: the last evaluations and the results file), then stops the
# runs still training (they resume with the same command on a machine that
# keeps runs/study) and evaluates what finished. ARGS go to the study (e.g.
# --runs ..., --device cpu --smoke for a rehearsal; --runs transformer
# transformer_dc --results benchmarks/gpu/study/study-gpu.json for the
# GPU-against-CPU agreement check, fairseq_ctx/study/agreement.py). JOBS
# defaults to 6.
# STUDY_RESULTS names the results file (default: the driver's; a --results
# in ARGS overrides both, and is the file copied to OUT; relative paths are
# from the repository's root) and STUDY_OUT the runs' directory (default
# runs/study).
# With OUT set (the run tool's result folder), the results file, its
# figures, translations and usage reports, and every run's train.done, logs
# and evaluation outputs (not the averaged checkpoint) are copied there as
# they are when the script ends: where the results file is missing (the last
# evaluation failed, or a kill cut scripts/gpu-call.sh's snapshots short of
# it), `--stage evaluate --out OUT/study/runs --runs RUNS` rebuilds the
# records of the runs evaluated from them, decoding nothing.
#
# The study needs data/bible/study (built here by the first study command:
# carry it), data/bible/bin/dict.{es,en}.txt, data/bible/spm/{spm.model,test.es}
# and data/bible/raw (test.en the reference; every split's Spanish for the
# lexicon of the context models' gender-cue share).
set -uo pipefail
cd "$(dirname "$0")/.."
die() { echo "fairseq_ctx: error: $*" >&2; exit 2; }
DEADLINE=${1:-}
[[ "$DEADLINE" =~ ^[0-9]+$ ]] || die "gpu-study.sh DEADLINE_S [ARGS...]: DEADLINE_S (whole seconds) is missing"
shift
RESERVE=${EVAL_RESERVE_S:-90}
TRAIN_S=$(( DEADLINE > RESERVE ? DEADLINE - RESERVE : 1 ))
DEVICE_ARGS=(--device cuda)
for a in "$@"; do [ "$a" = "--device" ] && DEVICE_ARGS=(); done
# STUDY_RESULTS names the results file; without it the driver chooses (runs
# at a budget of their own, --runs RUN@N ..., go to a file of their own) and
# says which, by its own rule, for the copy to OUT below
RESULTS_ARGS=()
[ -n "${STUDY_RESULTS:-}" ] && RESULTS_ARGS=(--results "$STUDY_RESULTS")
PATHS=$(python3 -c 'import sys; from fairseq_ctx.study.__main__ import figures_dir, results_path
r = results_path(sys.argv[1:]); print(r); print(figures_dir(r) if r else "")' "${RESULTS_ARGS[@]}" "$@")
RESULTS=$(sed -n 1p <<< "$PATHS"); FIGURES=$(sed -n 2p <<< "$PATHS")
RUNS_DIR=${STUDY_OUT:-runs/study}

python3 -m fairseq_ctx.study "${DEVICE_ARGS[@]}" --jobs "${JOBS:-6}" --deadline "$TRAIN_S" --stage all \
  --out "$RUNS_DIR" "${RESULTS_ARGS[@]}" "$@"
code=$?

if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT/study"
  [ -n "$RESULTS" ] && [ -f "$RESULTS" ] && cp "$RESULTS" "$OUT/study/"
  [ -n "$FIGURES" ] && [ -d "$FIGURES" ] && cp -r "$FIGURES" "$OUT/study/"
  # runs trained in OUT/study/runs itself (scripts/gpu-call.sh's) are there already
  [ "$(cd "$RUNS_DIR" 2> /dev/null && pwd)" = "$(cd "$OUT/study" && pwd)/runs" ] || for run in "$RUNS_DIR"/*/; do
    [ -d "$run/logs" ] || continue
    name=$(basename "$run")
    mkdir -p "$OUT/study/runs/$name"
    cp -r "$run/logs" "$OUT/study/runs/$name/"
    [ -f "$run/train.done" ] && cp "$run/train.done" "$OUT/study/runs/$name/"
    # its evaluation outputs but the averaged checkpoint: they rebuild its record (--stage evaluate)
    [ -d "$run/eval" ] && tar -C "$run" -cf - --exclude='*.pt' --exclude='*.part' eval | tar -C "$OUT/study/runs/$name" -xf -
  done
fi
exit $code
