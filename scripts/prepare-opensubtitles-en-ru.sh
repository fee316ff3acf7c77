#!/usr/bin/env bash
# Prepare OpenSubtitles2018 English-Russian as released by Voita et al. for
# context-aware NMT, with document ids for --task document_translation.
#
#   bash scripts/prepare-opensubtitles-en-ru.sh [--dest DIR]
#        [--from DIR | --mirror PREFIX] [--merges 32000] [--workers N] [--force] ...
#
# Source: the training data of github.com/lena-voita/good-translation-wrong-in-context
#   https://www.dropbox.com/s/5drjpx07541eqst/acl19_good_translation_wrong_in_context.zip?dl=1
# whose context_aware/{en,ru}_{train,dev,test} hold groups of 4 consecutive
# subtitle sentences joined by " _eos " (already tokenized). Every group
# becomes a 4-line document: {split}.en-ru.docids (one id per line) beside the
# binarized data, so that --task document_translation --context-size 1 gives
# each sentence the previous sentence of its group (the first of a group gets
# none). (The ACL 2018 release, data.statmt.org/acl18_contextnmt_data, gives
# the previous sentence in English only; a document needs both sides of every
# line, so it is not used.) Processing: no tokenizer; joint subword-nmt BPE
# (32000 merges, one codes file that fairseq_ctx.contrastive can apply with
# --bpe subword_nmt --bpe-codes), separate dictionaries; training groups
# with an empty or over-long (>250 tokens) sentence dropped whole; no ratio
# filter (subtitle lines are short).
# Output: DEST (default data/opensubtitles-en-ru)/bin. Re-running skips finished steps.
#
# Runs python3 -m fairseq_ctx_prep.opensubtitles_en_ru from this checkout (torch-free: only
# fairseq-preprocess, run as a subprocess, loads torch);
# --from DIR takes already-downloaded files (archives under their names or
# their unpacked contents), --mirror PREFIX downloads PREFIX/NAME instead of
# the official URLs. PYTHON picks the interpreter (default python3).
set -euo pipefail

PY=${PYTHON:-python3}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m fairseq_ctx_prep.opensubtitles_en_ru "$@"
