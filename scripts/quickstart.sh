#!/usr/bin/env bash
# Prepare the Bible corpus if needed, train on CPU for a bounded time, translate
# the test set with beam search and print detokenized sacreBLEU.
# All flags go to scripts/quickstart.py (--archs, --minutes, --data, --out, --beam).
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/quickstart.py "$@"
