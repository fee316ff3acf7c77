#!/usr/bin/env bash
# Install fairseq_ctx and everything it needs into the active Python (3.11).
# Use a virtual environment first if you want isolation:
#   python3 -m venv .venv && . .venv/bin/activate && bash scripts/install.sh
#
# Why this is not a plain `pip install -e .`:
# - torch is pinned to 2.13.0: on this kind of machine pip finds the CPU wheel
#   on disk; any looser requirement pulls a multi-GB CUDA build.
# - fairseq 0.12.2 does not import on Python 3.11; `fairseq-fixed` (fairseq
#   main) does, but its build requirement `torch>=1.10` pulls CUDA torch under
#   build isolation, and its `torchaudio` requirement installs a wheel that
#   cannot import. So it is built against the installed torch with
#   --no-build-isolation --no-deps and its real needs are listed here.
# - system packages (jemalloc, the SWORD Bible modules, a headless Chromium
#   for the attribution page's browser test) come from apt-get where this
#   runs as root (scripts/install-system-packages.sh).
# On a GPU machine, install the CUDA torch you want first and set
# FAIRSEQ_CTX_TORCH=skip to keep it.
set -euo pipefail
PY=${PYTHON:-python3}
cd "$(dirname "$0")/.."

pip_install() { "$PY" -m pip install --disable-pip-version-check "$@"; }

if [ "${FAIRSEQ_CTX_TORCH:-}" != "skip" ]; then
  pip_install "torch==2.13.0"
fi
pip_install numpy "cython>=0.29" "setuptools>=68" wheel
# tensorboardX: fairseq's --tensorboard-logdir writer (it also silences
# fairseq's "Please install tensorboardX" at every start); spacy: the optional
# tagger of fairseq-ctx-ctxsan-pos (its path is tested with a pipeline built in
# the test, since no trained spaCy model can be downloaded here)
pip_install "hydra-core==1.3.2" "omegaconf==2.3.0" regex tqdm bitarray cffi \
  scikit-learn packaging "sacrebleu>=2.3" sentencepiece subword-nmt sacremoses \
  tensorboardX matplotlib spacy pytest pytest-xdist
if ! "$PY" -c "import fairseq" 2>/dev/null; then
  # -g0: no debug information, which for torch's headers in fairseq's three
  # torch extensions is a large part of the build. Given in CPPFLAGS, which
  # distutils appends to Python's own compile flags (-O3 -DNDEBUG stay);
  # CFLAGS would replace them and build at -O0 with asserts. Not in parallel:
  # torch's extension builder writes one build.ninja for all of them, and a
  # parallel build_ext links objects another thread's ninja file has replaced
  CPPFLAGS="${CPPFLAGS:-} -g0" pip_install --no-build-isolation --no-deps "fairseq-fixed==0.12.3.1"
fi
pip_install --no-build-isolation --no-deps -e .
# fairseq_ctx_quiet.pth: fairseq's own commands get fairseq_ctx/quiet.py's warning
# filters when they import fairseq, before they load the plugin (fairseq-hydra-train
# composes its config, and hydra warns, before it does); a process that does not
# import fairseq is untouched (FAIRSEQ_CTX_UPSTREAM_WARNINGS=1 turns it off)
# (called as a function: `python3 -m fairseq_ctx.quiet` makes runpy warn that the
# package had imported the module already)
"$PY" -c "from fairseq_ctx.quiet import main; main(['--install'])"
# jemalloc for every training process of ours, the SWORD modules for the Bible
# corpus and its test, chromium-headless-shell for the attribution page's
# browser test: installed with root and apt-get, else one line each on how and
# what going without costs (scripts/install-system-packages.sh)
PYTHON="$PY" bash scripts/install-system-packages.sh
"$PY" -c "import fairseq, fairseq_ctx, torch; print('fairseq', fairseq.__version__, '| torch', torch.__version__, '| fairseq_ctx', fairseq_ctx.__version__)"
