#!/usr/bin/env bash
# Prepare WMT16 Romanian-English (the GRET paper's Ro-En).
#
#   bash scripts/prepare-wmt16-ro-en.sh [--direction ro-en|en-ro] [--dest DIR]
#        [--from DIR | --mirror PREFIX] [--merges 32000] [--workers N] [--force] ...
#
# Sources (as rsennrich/wmt16-scripts sample/download_files.sh):
#   https://www.statmt.org/europarl/v7/ro-en.tgz
#   https://object.pouta.csc.fi/OPUS-SETIMES/v2/moses/en-ro.txt.zip   (SETimes2)
#   https://data.statmt.org/wmt16/translation-task/dev.tgz    newsdev2016 (valid)
#   https://data.statmt.org/wmt16/translation-task/test.tgz   newstest2016 (test)
# (GRET names newstest2015/2016, but WMT15 had no Romanian: the WMT16 dev and
# test sets are used.) Processing: sacremoses normalize + tokenize -a
# (escaping off; s/t-cedilla written as comma-below), joint subword-nmt BPE
# with 32000 merges (GRET's 32K vocabulary), train cleaned after BPE (ratio
# 1.5, 1..250), fairseq-preprocess --joined-dictionary.
# Output: DEST (default data/wmt16-ro-en)/bin. Re-running skips finished steps.
#
# Runs python3 -m fairseq_ctx_prep.wmt16_ro_en from this checkout (torch-free: only
# fairseq-preprocess, run as a subprocess, loads torch);
# --from DIR takes already-downloaded files (archives under their names or
# their unpacked contents), --mirror PREFIX downloads PREFIX/NAME instead of
# the official URLs. PYTHON picks the interpreter (default python3).
set -euo pipefail

PY=${PYTHON:-python3}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m fairseq_ctx_prep.wmt16_ro_en "$@"
