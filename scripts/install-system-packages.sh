#!/usr/bin/env bash
# The system libraries fairseq_ctx uses beside its Python packages; run by
# scripts/install.sh, or alone: bash scripts/install-system-packages.sh
#
# - jemalloc (Debian: libjemalloc2): every training process our entry points
#   start (quickstart, study, table runner) preloads it where it is installed
#   (fairseq_ctx/allocator.py says why and where it looks); without it
#   training runs with glibc's allocator and an epoch takes 1.4x the CPU time
#   (10 CPU minutes against 7.2, docs/study.md).
# - the SWORD Bible modules and mod2imp (sword-text-sparv, sword-text-web,
#   libsword-utils, the list of scripts/prepare-bible.sh): the Bible corpus
#   of the quickstart and its end-to-end test (tests/test_bible.py), so that
#   the README's test step, run before prepare-bible.sh, needs nothing that
#   only prepare-bible.sh would install.
# - a headless Chromium (chromium-headless-shell, 306 MB installed, about a
#   minute of apt-get): tests/test_attribution_page.py opens the context
#   attribution page in it and checks its DOM and a screenshot; a Chromium
#   already on PATH (chromium, google-chrome) does as well.
#
# With root and apt-get, the missing ones are installed (apt-get update only
# if a first install fails: the package lists may be stale). Otherwise, or if
# apt-get fails, one line per missing library says how to install it and what
# going without costs; the Python install goes on either way (exit 0).
set -euo pipefail
PY=${PYTHON:-python3}
cd "$(dirname "$0")/.."

JEMALLOC_PACKAGE=libjemalloc2
SWORD_PACKAGES=(sword-text-sparv sword-text-web libsword-utils)
JEMALLOC_COST="without it training runs with glibc's allocator, about 1.4x the CPU time per epoch (docs/study.md)"
SWORD_COST="without them scripts/prepare-bible.sh cannot build the quickstart's corpus and tests/test_bible.py skips its end-to-end test"
CHROMIUM_PACKAGE=chromium-headless-shell
CHROMIUM_BINARIES=(chromium-headless-shell chromium chromium-browser google-chrome google-chrome-stable)
CHROMIUM_COST="without it tests/test_attribution_page.py skips its browser test (the attribution page's DOM and screenshot)"

# the library the training children would preload (fairseq_ctx/allocator.py), if any
jemalloc() { "$PY" -m fairseq_ctx.allocator; }

sword_missing() {
  local pkg
  if command -v dpkg-query >/dev/null 2>&1; then
    for pkg in "${SWORD_PACKAGES[@]}"; do
      [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" = "install ok installed" ] || echo "$pkg"
    done
  elif ! command -v mod2imp >/dev/null 2>&1; then
    echo "${SWORD_PACKAGES[@]}"
  fi
}

# the package, where no Chromium is installed (the test finds any of CHROMIUM_BINARIES)
chromium_missing() {
  local pkg name
  if command -v dpkg-query >/dev/null 2>&1; then
    for pkg in "$CHROMIUM_PACKAGE" chromium; do
      [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" = "install ok installed" ] && return 0
    done
  else
    for name in "${CHROMIUM_BINARIES[@]}"; do
      command -v "$name" >/dev/null 2>&1 && return 0
    done
  fi
  echo "$CHROMIUM_PACKAGE"
}

if [ "${FAIRSEQ_CTX_JEMALLOC:-}" = none ]; then
  need_jemalloc=""
  echo "[install] jemalloc: off (FAIRSEQ_CTX_JEMALLOC=none)"
elif lib=$(jemalloc); then
  need_jemalloc=""
  echo "[install] jemalloc: $lib"
else
  need_jemalloc=$JEMALLOC_PACKAGE
fi
need_sword=$(sword_missing | tr '\n' ' ' | sed 's/ *$//')
[ -z "$need_sword" ] && echo "[install] SWORD modules: installed"
need_chromium=$(chromium_missing)
[ -z "$need_chromium" ] && echo "[install] headless Chromium: installed"
missing=$(echo $need_jemalloc $need_sword $need_chromium)
[ -z "$missing" ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing; }
  echo "[install] apt-get install $missing"
  if { apt_install || { apt-get update -qq && apt_install; }; } >&2; then
    if [ -n "$need_jemalloc" ] && lib=$(jemalloc); then
      echo "[install] jemalloc: $lib"
      need_jemalloc=""
    fi
    need_sword=$(sword_missing | tr '\n' ' ' | sed 's/ *$//')
    need_chromium=$(chromium_missing)
  fi
  how="apt-get failed; install by hand:"
else
  how="not root with apt-get; install by hand:"
fi
if [ -n "$need_jemalloc" ]; then
  echo "fairseq_ctx: note: jemalloc not found ($how sudo apt-get install $JEMALLOC_PACKAGE, or your system's jemalloc package, or set FAIRSEQ_CTX_JEMALLOC=/path/to/libjemalloc.so.2); $JEMALLOC_COST"
fi
if [ -n "$need_sword" ]; then
  echo "fairseq_ctx: note: SWORD packages missing: $need_sword ($how sudo apt-get install ${SWORD_PACKAGES[*]}); $SWORD_COST"
fi
if [ -n "$need_chromium" ]; then
  echo "fairseq_ctx: note: headless Chromium missing ($how sudo apt-get install $CHROMIUM_PACKAGE); $CHROMIUM_COST"
fi
exit 0
