#!/usr/bin/env bash
# Prepare the IWSLT tasks of the Dual Contextual paper: IWSLT14 Es-En and
# Ro-En, IWSLT15 Fr-En and En-Vi. One prepared pair serves both directions
# (fairseq finds {split}.es-en.* for --source-lang en --target-lang es too).
#
#   bash scripts/prepare-iwslt.sh --pair es-en|ro-en|fr-en|en-vi [--dest DIR]
#        [--from DIR | --mirror PREFIX] [--vocab-size N] [--workers N] [--force] ...
#
# es-en, ro-en, fr-en: WIT3 no longer serves the per-pair archives that
# fairseq's prepare-iwslt14.sh downloaded (https://wit3.fbk.eu/archive/2014-01/
# texts/de/en/de-en.tgz is 404): download the release tarballs by hand from
# https://wit3.fbk.eu/2014-01 and https://wit3.fbk.eu/2014-01-b (test), or
# https://wit3.fbk.eu/2015-01 and https://wit3.fbk.eu/2015-01-b, and pass
# --from DIR with DIR holding 2014-01.tgz / 2014-01-test.tgz (or their
# unpacked trees, 2014-01/texts/en/es/en-es.tgz ...).
#   es-en, ro-en (IWSLT14, en-X archives): valid = tst2010+tst2011+tst2012+dev2010,
#     test = tst2014 (2014-01-test).
#   fr-en (IWSLT15, fr-en archive): valid = tst2013, test = tst2014 + tst2015
#     (tst2015 from 2015-01-test: French from texts/fr/en, English from texts/en/fr).
#   en-vi: Luong & Manning's files, downloaded from
#     https://nlp.stanford.edu/projects/nmt/data/iwslt15.en-vi/ (train 133k,
#     tst2012 valid, tst2013 test; already Moses-tokenized, escaping undone).
# Processing: sacremoses normalize + tokenize (no -a, escaping off, cased as
# the paper's case-sensitive BLEU), a joint sentencepiece BPE model with the
# paper's shared vocabulary size (es-en 34k, ro-en 32k, fr-en 31k, en-vi 21k;
# --vocab-size), train cleaned after subwords (ratio 1.5, 1..250),
# fairseq-preprocess --joined-dictionary.
# Output: DEST (default data/iwslt-PAIR)/bin. Re-running skips finished steps.
#
# Runs python3 -m fairseq_ctx_prep.iwslt from this checkout (torch-free: only
# fairseq-preprocess, run as a subprocess, loads torch);
# --from DIR takes already-downloaded files (archives under their names or
# their unpacked contents), --mirror PREFIX downloads PREFIX/NAME instead of
# the official URLs. PYTHON picks the interpreter (default python3).
set -euo pipefail

PY=${PYTHON:-python3}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m fairseq_ctx_prep.iwslt "$@"
