#!/usr/bin/env bash
# Prepare WMT17 Chinese-English (the ctxsan and GRET papers' Zh-En).
#
#   bash scripts/prepare-wmt17-zh-en.sh --from DIR [--corpus ctxsan|gret] [--dest DIR]
#        [--corpora nc-v12,un,cwmt] [--extra-train PREFIX]... [--merges 32000]
#        [--zh-vocab-size 32000] [--workers N] [--force] ...   (--help: all flags)
#
# Sources:
#   https://data.statmt.org/wmt17/translation-task/training-parallel-nc-v12.tgz
#   https://object.pouta.csc.fi/OPUS-UNPC/v1.0/moses/en-zh.txt.zip  (UN Parallel
#     Corpus v1.0 as distributed by OPUS)
#   CWMT (registration: http://nlp.nju.edu.cn/cwmt-wmt/): --from DIR holding
#     cwmt.tgz or its folders casia2015/ casict2011/ casict2015/ datum2015/
#     datum2017/ (Book1..20) neu2017/ (datum2017's segmented Chinese is joined back)
#   https://data.statmt.org/wmt17/translation-task/dev.tgz   newsdev2017 (valid, 2002)
#   https://data.statmt.org/wmt17/translation-task/test.tgz  newstest2017 (test, 2001)
# --corpus ctxsan (default): NC v12 + UN + CWMT, all of WMT17 (the paper: about
# 20.62M pairs); --corpus gret: NC v12 + CWMT (the paper: about 7.5M pairs,
# corpora not named; UN alone is larger). The count after cleaning is printed
# beside the paper's, with a warning when more than 10% away.
# Chinese segmentation: the papers say nothing; no segmenter is used (jieba's
# output depends on its dictionary version; Moses cannot segment Chinese): a sentencepiece BPE model
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
