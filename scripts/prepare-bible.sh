#!/usr/bin/env bash
# Prepare the Spanish-English Bible corpus (Reina-Valera 1909 / World English
# Bible, one document per chapter) for fairseq_ctx.
#
#   bash scripts/prepare-bible.sh [--dest data/bible] [--vocab-size 8000]
#                                 [--max-verses N] [--force] ...
#
# Installs the Debian packages with the SWORD modules and mod2imp when they
# are missing (needs root and apt-get), then runs `python3 -m
# fairseq_ctx_prep.bible` from this checkout with all arguments; see --help.
# fairseq_ctx_prep imports neither torch nor fairseq (only fairseq-preprocess,
# run as a subprocess, needs them).
# Re-running skips finished steps. Outputs, relative to the current directory
# by default: data/bible/{source,raw,spm,bin}, data/bible/stats.json.
set -euo pipefail

PY=${PYTHON:-python3}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PACKAGES=(sword-text-sparv sword-text-web libsword-utils)

die() { echo "fairseq_ctx: error: $*" >&2; exit 1; }

missing_packages() {
  local pkg
  for pkg in "${PACKAGES[@]}"; do
    if [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" != "install ok installed" ]; then
      echo "$pkg"
    fi
  done
}

install_packages() {
  command -v dpkg-query >/dev/null 2>&1 || return 0   # not Debian: Python checks mod2imp
  local missing
  missing=$(missing_packages | tr '\n' ' ')
  [ -z "$missing" ] && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    die "missing Debian packages: ${missing}- install them by hand: sudo apt-get install ${PACKAGES[*]}"
  fi
  echo "[prepare-bible] installing ${missing}" >&2
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
           apt-get install -y -qq --no-install-recommends ${missing}; } >&2; then
    die "could not install ${missing}- install them by hand: apt-get install ${PACKAGES[*]}"
  fi
}

case " $* " in
  *" -h "*|*" --help "*) ;;     # just show the help, install nothing
  *) install_packages ;;
esac

export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m fairseq_ctx_prep.bible "$@"
