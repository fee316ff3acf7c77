#!/usr/bin/env bash
# Prepare OpenSubtitles2018 English-Russian as released by Voita et al. for
# context-aware NMT (--task document_translation).
#
#   bash scripts/prepare-opensubtitles-en-ru.sh [--release 2018|2019] [--dest DIR]
#        [--from DIR | --mirror PREFIX] [--merges 32000] [--workers N] [--force] ...
#
# --release 2018 (default; the data of Voita et al. 2018, the Voita table):
#   https://data.statmt.org/acl18_contextnmt_data/{train,dev,test}.{en,ru,en.context}.gz
#   (already tokenized; .en.context: the previous English sentence of every
#   instance). The context becomes bin/{split}.en-ru.context.en, which the
#   document task reads in place of docids; subword-nmt BPE learned per language
#   (32000 merges each: "source and target vocabularies of about 32k"),
#   separate dictionaries; dev and test must have 10000 instances each
#   (--skip-size-check for a subset).
# --release 2019 (the next/random controls, the consistency test sets):
#   the training data of github.com/lena-voita/good-translation-wrong-in-context
#   https://www.dropbox.com/s/5drjpx07541eqst/acl19_good_translation_wrong_in_context.zip?dl=1
#   whose context_aware/{en,ru}_{train,dev,test} hold groups of 4 consecutive
#   subtitle sentences joined by " _eos " (already tokenized). Every group
#   becomes a 4-line document: {split}.en-ru.docids beside the binarized data,
#   so that --context-size 1 gives each sentence the previous sentence of its
#   group (the first of a group gets none). Joint subword-nmt BPE (32000
#   merges, one codes file that fairseq_ctx.evaluation.contrastive can apply with --bpe
#   subword_nmt --bpe-codes), separate dictionaries; training groups with an
#   empty or over-long (>250 tokens) sentence dropped whole.
# Both: no tokenizer, no ratio filter (subtitle lines are short).
# Output: DEST (default data/opensubtitles-en-ru, 2019: data/opensubtitles-en-ru-2019)/bin. Re-running skips finished steps.
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
