#!/usr/bin/env bash
# Prepare the Bible corpus if needed, train on CPU within one time budget,
# translate the test set as the README's fairseq-ctx-translate line does and
# print detokenized sacreBLEU. All flags go to scripts/quickstart.py (--archs,
# --minutes, --decode-minutes, --data, --out, --threads).
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/quickstart.py "$@"
