#!/usr/bin/env bash
# Prepare WMT14 English-German (Vaswani et al. 2017's setup; the ctxsan, DC
# and GRET papers' En-De, and GRET's De-En with --direction de-en).
#
#   bash scripts/prepare-wmt14-en-de.sh [--direction en-de|de-en] [--dest DIR]
#        [--from DIR | --mirror PREFIX] [--news-commentary v9|v12] [--merges 32000]
#        [--workers N] [--force] ...          (--help lists every flag)
#
# Sources, as fairseq's examples/translation/prepare-wmt14en2de.sh:
#   https://statmt.org/wmt13/training-parallel-europarl-v7.tgz
#   https://statmt.org/wmt13/training-parallel-commoncrawl.tgz
#   https://statmt.org/wmt14/training-parallel-nc-v9.tgz (default; fairseq's
#     --icml17 choice and WMT14's own release) or, with --news-commentary v12,
#     https://data.statmt.org/wmt17/translation-task/training-parallel-nc-v12.tgz
#   https://data.statmt.org/wmt17/translation-task/dev.tgz   newstest2013 (valid)
#   https://statmt.org/wmt14/test-full.tgz                   newstest2014 (test)
# (md5 of the last two as published by sacreBLEU.) Unlike fairseq's recipe,
# valid is newstest2013 (as the papers), not 1% of train.
# Processing: Moses normalize-punctuation + remove-non-printing-char +
# tokenizer -a via sacremoses (escaping off), joint subword-nmt BPE with
# 32000 merges (the ctxsan paper's 32K), train pairs cleaned after BPE as
# clean-corpus-n.perl -ratio 1.5 1 250, fairseq-preprocess --joined-dictionary.
# Output: DEST (default data/wmt14-en-de or data/wmt14-de-en)/bin; see
# fairseq_ctx_prep/pipeline.py for the steps. Re-running skips finished steps.
#
# Runs python3 -m fairseq_ctx_prep.wmt14_en_de from this checkout (torch-free: only
# fairseq-preprocess, run as a subprocess, loads torch);
# --from DIR takes already-downloaded files (archives under their names or
# their unpacked contents), --mirror PREFIX downloads PREFIX/NAME instead of
# the official URLs. PYTHON picks the interpreter (default python3).
set -euo pipefail

PY=${PYTHON:-python3}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m fairseq_ctx_prep.wmt14_en_de "$@"
