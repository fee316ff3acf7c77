#!/usr/bin/env bash
# Binarize your own document-aligned parallel corpus (docs/data-preparation.md,
# "Your own corpus"): the same as the console script fairseq-ctx-prepare-corpus.
#
#   bash scripts/prepare-corpus.sh --source-lang SRC --target-lang TGT \
#        --train PREFIX --valid PREFIX --test PREFIX --dest DIR \
#        [--format tsv|docids|blank] [--subword sentencepiece|bpe] [--vocab-size N] ...
#
# Runs python3 -m fairseq_ctx_prep.user_corpus from this checkout (torch-free:
# only fairseq-preprocess, run as a subprocess, loads torch). PYTHON picks the
# interpreter (default python3).
set -euo pipefail

PY=${PYTHON:-python3}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m fairseq_ctx_prep.user_corpus "$@"
