#!/usr/bin/env bash
# Prepare the Bible corpus if needed, train on CPU for a fixed number of
# updates, translate the test set as the README's fairseq-ctx-translate line
# does and print detokenized sacreBLEU. All flags go to scripts/quickstart.py
# (--archs, --updates, --data, --out, --calibration-updates, --threads).
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/quickstart.py "$@"
