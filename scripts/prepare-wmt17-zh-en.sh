#!/usr/bin/env bash
# Prepare WMT17 Chinese-English (the ctxsan and GRET papers' Zh-En).
#
#   bash scripts/prepare-wmt17-zh-en.sh [--dest DIR] [--from DIR | --mirror PREFIX]
#        [--corpora nc-v12,un] [--extra-train PREFIX]... [--merges 32000]
#        [--zh-vocab-size 32000] [--workers N] [--force] ...   (--help: all flags)
#
# Sources:
#   https://data.statmt.org/wmt17/translation-task/training-parallel-nc-v12.tgz
#   https://object.pouta.csc.fi/OPUS-UNPC/v1.0/moses/en-zh.txt.zip  (UN Parallel
#     Corpus v1.0 as distributed by OPUS; --corpora nc-v12 leaves it out)
#   https://data.statmt.org/wmt17/translation-task/dev.tgz   newsdev2017 (valid)
#   https://data.statmt.org/wmt17/translation-task/test.tgz  newstest2017 (test)
# The CWMT corpora of WMT17 need registration (http://nlp.nju.edu.cn/cwmt-wmt/):
# concatenate them into PREFIX.zh / PREFIX.en and pass --extra-train PREFIX.
# Chinese segmentation: no segmenter is a dependency here (jieba is not
# installed; Moses cannot segment Chinese), so a sentencepiece BPE model
# (32000 pieces, character coverage 0.9995) is learned on the untokenized
# Chinese and segments it into subwords directly. English: sacremoses
# normalize + tokenize -a (escaping off) and subword-nmt BPE, 32000 merges.
# Separate dictionaries; train cleaned after subwords (ratio 1.5, 1..250).
# Output: DEST (default data/wmt17-zh-en)/bin. Re-running skips finished steps.
#
# Runs python3 -m fairseq_ctx_prep.wmt17_zh_en from this checkout (torch-free: only
# fairseq-preprocess, run as a subprocess, loads torch);
# --from DIR takes already-downloaded files (archives under their names or
# their unpacked contents), --mirror PREFIX downloads PREFIX/NAME instead of
# the official URLs. PYTHON picks the interpreter (default python3).
set -euo pipefail

PY=${PYTHON:-python3}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m fairseq_ctx_prep.wmt17_zh_en "$@"
