"""Shared fixtures: one tiny document-level corpus per test session and one
briefly trained checkpoint per architecture variant (the list in
:mod:`fairseq_ctx.architectures`), built on first use and shared by every
test file that asks (with ``pytest -n 2 --dist loadfile`` each worker builds
what its files use); the test tiers (markers); the order files run in; a
test-process fix of torch's DataLoader shutdown."""
from pathlib import Path

import pytest

from fairseq_ctx.architectures import BY_NAME, TINY_FLAGS
from tests.cuda_guard import cuda_context_guard  # noqa: F401  (an autouse fixture: registered by the import)

# a made-up fifth architecture's files, at the paths they take in the copy of
# the repository that tests/test_fifth_architecture.py builds: not tests here
collect_ignore = ["fixtures/fifth_architecture"]


# The tiers: every test is in exactly one, named by its module's
# ``pytestmark`` or its own mark (``-m unit`` runs one tier; the GPU tests,
# marked ``gpu``, are in none). A test that names no tier is integration.
TIERS = {
    "unit": "in-process checks of equations, the architecture contract and the code's logic at tiny size: no "
            "training, no fairseq command, no process of their own; together under 2 minutes of one CPU core",
    "slow": "in-process like unit, but seconds to minutes each: models at the papers' sizes (parameter counts, "
            "half precision at 250 tokens, fused-kernel layouts), every recipe and config, spaCy's tagger",
    "integration": "trains, runs fairseq's commands (in this process or their own), the plugin's scripts and "
                   "tools, or other processes",
}


def tier(marks):
    """The tier of a test whose markers are named ``marks``: the one it
    names, integration when it names none (None for a GPU test); naming
    two is an error."""
    named = sorted(set(marks) & set(TIERS))
    if len(named) > 1:
        raise ValueError(f"a test is in one tier, not {' and '.join(named)}")
    if named:
        return named[0]
    return None if "gpu" in marks else "integration"


# The files whose tests take longest (their commands' processes included),
# slowest first, as measured on the 2-core machine (2026-11-28, commit
# 5b043e2, the README's test command beside two training jobs, pytest's
# JUnit times; 45-353 s each there, the rest under 45 s). They run first: with the README's `-n 2
# --dist loadfile --no-loadscope-reorder` xdist hands whole files to its two
# workers in collection order, so the long ones start early and the short
# ones fill in at the end, instead of one worker finishing a long file
# (xdist's default order puts the files with the fewest tests last) while
# the other idles. Only the order of files changes, tests keep theirs; only
# speed depends on it. The tiers need no order (-m unit runs in seconds a
# file); no file of unit tests only belongs here (tests/test_tiers.py).
SLOWEST_FILES_FIRST = (
    "test_foreach_optim.py", "test_precision.py", "test_fifth_architecture.py", "test_shipped_model.py",
    "test_benchmark.py", "test_contract.py", "test_warnings.py", "test_registration.py", "test_study.py",
    "test_scale_out.py", "test_attribution.py", "test_quickstart.py", "test_gpu_runbook.py", "test_tables.py",
    "test_sdpa_policy.py", "test_translate.py", "test_prepare_scripts.py", "test_hydra.py", "test_bible.py",
    "test_hostile_input.py", "test_document_task.py", "test_prepare_corpus.py",
)


def pytest_configure(config):
    """The warnings the tests report are those a user's command shows:
    pytest resets the warning filters around every test (and collection)
    and shows every DeprecationWarning, so fairseq_ctx/quiet.py's filters,
    installed when the package is imported, would hold for no test, and
    third-party deprecation notices that Python hides in a command would be
    counted. So every test runs with quiet.py's filters (unless
    FAIRSEQ_CTX_UPSTREAM_WARNINGS is set, as for the commands) and Python's
    default of ignoring deprecation notices, except those raised in our own
    code (fairseq_ctx, fairseq_ctx_prep, scripts, tests), which stay visible
    as pytest shows them."""
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (skipped without one; run them with -m gpu)")
    for name, what in TIERS.items():
        config.addinivalue_line("markers", f"{name}: {what}")
    from fairseq_ctx import quiet

    lines = ["ignore::DeprecationWarning", "ignore::PendingDeprecationWarning"]
    lines += [f"default::{category}:{module}" for category in ("DeprecationWarning", "PendingDeprecationWarning")
              for module in ("fairseq_ctx", "fairseq_ctx_prep", "scripts", "tests")]
    if quiet.enabled():
        for message, category, module in quiet.UPSTREAM_FILTERS:
            assert ":" not in message + module, message  # pytest splits a filter on ":"
            lines.append(f"ignore:{message}:{category.__name__}:{module}")
    for line in lines:  # each goes in front of the ones before it, as warnings.filterwarnings does
        config.addinivalue_line("filterwarnings", line)


@pytest.hookimpl(tryfirst=True)  # before -m selects by marker
def pytest_collection_modifyitems(items):
    for item in items:
        try:
            name = tier([m.name for m in item.iter_markers()])
        except ValueError as e:
            raise pytest.UsageError(f"{item.nodeid}: {e}") from None
        if name and not item.get_closest_marker(name):
            item.add_marker(name)
    rank = {name: i for i, name in enumerate(SLOWEST_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest as collected


def _no_wait_for_unreachable_loader_workers():
    """fairseq's batch iterators keep torch's DataLoader iterator in a
    reference cycle, so after an in-process fairseq-generate / -interactive /
    -validate the cycle is freed by the garbage collector, which finalizes the
    DataLoader's index queues (their feeder threads stop) before the
    iterator's ``__del__`` sends each worker its stop signal through them:
    the signal never arrives and ``_shutdown_workers`` waits its 5 s join
    timeout per worker, then terminates them. Here, with the feeders already
    stopped (or told to stop), it terminates them at once (what it ends up
    doing anyway).
    The test process only: commands run in their own processes are untouched."""
    from torch.utils.data import _utils, dataloader

    cls = dataloader._MultiProcessingDataLoaderIter
    real_shutdown = cls._shutdown_workers

    def finalized(queue):
        """The queue's feeder thread got (or will get) its stop sentinel."""
        return queue._thread is not None and (
            not queue._thread.is_alive() or (queue._close is not None and not queue._close.still_active()))

    def shutdown_workers(self):
        if getattr(self, "_shutdown", True) or not any(finalized(q) for q in getattr(self, "_index_queues", [])):
            return real_shutdown(self)
        interval, _utils.MP_STATUS_CHECK_INTERVAL = _utils.MP_STATUS_CHECK_INTERVAL, 0
        try:
            return real_shutdown(self)
        finally:
            _utils.MP_STATUS_CHECK_INTERVAL = interval

    cls._shutdown_workers = shutdown_workers
    return cls, real_shutdown


@pytest.fixture(scope="session", autouse=True)
def no_wait_for_unreachable_loader_workers():
    """:func:`_no_wait_for_unreachable_loader_workers` in each process that
    runs tests (the xdist controller imports no torch)."""
    cls, real_shutdown = _no_wait_for_unreachable_loader_workers()
    yield
    cls._shutdown_workers = real_shutdown


@pytest.fixture(scope="session")
def doc_corpus(tmp_path_factory):
    """(raw text dir, binarized dir) of the toy task: 120 training pairs,
    12 valid, 14 test, documents of 4 sentences (``.docids`` beside both)."""
    from tests.utils import make_parallel_data, preprocess

    root = tmp_path_factory.mktemp("doc_corpus")
    raw = make_parallel_data(root / "raw", num_train=120, num_valid=12, num_test=14, docs_every=4)
    return raw, preprocess(raw, root / "bin")


@pytest.fixture(scope="session")
def trained_checkpoint(doc_corpus, tmp_path_factory):
    """``trained_checkpoint(name)``: checkpoint_last.pt of variant ``name``
    at tiny size after two updates on :func:`doc_corpus` (trained once)."""
    from tests.utils import train_in_process

    done = {}

    def get(name: str) -> Path:
        if name not in done:
            variant = BY_NAME[name]
            save = tmp_path_factory.mktemp(f"trained_{name}")
            done[name] = train_in_process(doc_corpus[1], save, variant.arch,
                                          [*TINY_FLAGS, *variant.flags, *variant.task])
        return done[name]

    return get
