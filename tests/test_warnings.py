"""No warnings of our making (and none of fairseq's that we filter) in a
user's fairseq-train / -generate / -interactive run.

* in process, with every warning shown (``simplefilter("always")`` overrides
  fairseq_ctx/quiet.py's filters): our architectures raise no torch
  mask-type warning, since their decoders build a boolean future mask;
* the boolean mask gives the same outputs as fairseq's float one;
* out of process: a short train (with ``--tensorboard-logdir``), generate,
  ``--score-reference`` and interactive through ``--user-dir fairseq_ctx``
  print no ``Warning`` line on stderr.
"""
import os
import re
import warnings

import pytest
import torch

from fairseq.models.transformer import TransformerDecoderBase

from fairseq_ctx import quiet
from fairseq_ctx.architectures import TINY_FLAGS, one_of_each
from fairseq_ctx.modules.future_mask import BoolFutureMask
from tests.utils import build_model, generate, interactive, make_parallel_data, padded_batch, preprocess, train

TASK = ["--task", "document_translation"]
MASK_WARNING = "mismatched key_padding_mask and attn_mask"

# Every architecture with an option grid, with every value of each of its
# options in at least one model (fairseq_ctx.architectures.one_of_each: 12
# models for 4 architectures), at tiny size.
ARCHS = {v.name: (v.arch, [*TINY_FLAGS, *v.flags]) for v in one_of_each()}


def _batch(model):
    g = torch.Generator().manual_seed(0)
    src = padded_batch([7] * 3, generator=g, vocab=(4, 40), eos=False)
    src[0, :2] = 1  # left-padded source
    prev = padded_batch([6] * 3, generator=g, vocab=(4, 40), eos=False)
    prev[1, 3:] = 1  # a padded target: fairseq then passes a key_padding_mask to self-attention
    ctx = padded_batch([5] * 3, generator=g, vocab=(4, 40), eos=False)
    kwargs = {"ctx_tokens": ctx} if getattr(model, "accepts_context", False) else {}
    return (src, torch.tensor([7, 5, 7]), prev), kwargs


def _warnings_of(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})" for w in caught]


@pytest.mark.unit
@pytest.mark.parametrize("arch,flags", list(ARCHS.values()), ids=list(ARCHS))
def test_no_mask_type_warning_in_training_and_full_forward(arch, flags):
    model = build_model(arch, flags)
    args, kwargs = _batch(model)

    def run():
        model.train()
        model(*args, **kwargs)[0].sum().backward()
        model.eval()
        with torch.no_grad():  # --score-reference / validation
            model(*args, **kwargs)

    caught = _warnings_of(run)
    assert not [w for w in caught if MASK_WARNING in w], caught


@pytest.mark.unit
def test_bool_future_mask_same_outputs_as_fairseq_float_mask():
    model = build_model("transformer_gret_tiny", ["--dropout", "0"])
    model.eval()
    args, kwargs = _batch(model)
    decoder = model.decoder
    with torch.no_grad():
        ours = model(*args, **kwargs)[0]
        assert decoder._future_mask.dtype == torch.bool
        decoder._future_mask = torch.empty(0)
        decoder.buffered_future_mask = lambda t: TransformerDecoderBase.buffered_future_mask(decoder, t)
        theirs = model(*args, **kwargs)[0]
    assert decoder._future_mask.dtype == torch.float32
    assert torch.equal(ours, theirs)


@pytest.mark.unit
def test_bool_future_mask_keeps_fairseq_float_mask_for_cross_self_attention():
    model = build_model("transformer_ctxenc_tiny", ["--cross-self-attention"])
    assert isinstance(model.decoder, BoolFutureMask)
    x = torch.zeros(4, 2, 8)
    model.decoder._future_mask = torch.ones(9, 9, dtype=torch.bool)  # a bool cache must not be cast to 0/1
    mask = model.decoder.buffered_future_mask(x)
    assert mask.dtype == torch.float32 and torch.isinf(mask[0, 1]) and mask[1, 0] == 0
    model.decoder.cross_self_attention = False
    mask = model.decoder.buffered_future_mask(x)
    assert mask.dtype == torch.bool and mask[0, 1] and not mask[1, 0] and mask.shape == (4, 4)
    # a pruned attention adds the mask to its scores itself: a bool mask would add 1, so fairseq's float mask
    model.decoder.layers[0].self_attn._set_skip_embed_dim_check()
    mask = model.decoder.buffered_future_mask(x)
    assert mask.dtype == torch.float32 and torch.isinf(mask[0, 1]) and mask[1, 0] == 0


@pytest.mark.unit
def test_quiet_filters_are_narrow_and_can_be_turned_off(monkeypatch):
    with warnings.catch_warnings():
        warnings.resetwarnings()
        monkeypatch.setenv("FAIRSEQ_CTX_UPSTREAM_WARNINGS", "1")
        quiet.install()
        assert warnings.filters == []
        monkeypatch.delenv("FAIRSEQ_CTX_UPSTREAM_WARNINGS")
        quiet.install()
        assert len(warnings.filters) == len(quiet.UPSTREAM_FILTERS)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            quiet.install()  # filters inserted in front of "always"
            # the same message from our own code is not filtered (module does not match)
            warnings.warn("Support for mismatched key_padding_mask and attn_mask is deprecated.", UserWarning)
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found", UserWarning)
        assert len(caught) == 2


# ---------------------------------------------------------------------------
# the command line, as a user runs it
# ---------------------------------------------------------------------------

# "UserWarning: ...", "FutureWarning: ...", logging's "WARNING:..." / "| WARNING |",
# fairseq's "Please install ..." (the case matters: paths and config keys may hold "warn")
WARNING_LINE = re.compile(r"[A-Za-z]Warning\b|\bWARNING\b|Please install")


def _warning_lines(proc):
    return [line for line in proc.stderr.splitlines() if WARNING_LINE.search(line)]


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("stderr_check")
    raw = make_parallel_data(root / "raw", num_train=40, num_valid=6, num_test=5)
    data_bin = preprocess(raw, root / "bin")
    # new interpreters (fresh=True): their stderr holds everything a user's run prints, imports included
    runs = {"train": train(data_bin, root / "ckpt", arch="transformer_ctxenc_tiny", model_flags=(),
                           task_flags=TASK, max_update=2, extra=["--tensorboard-logdir", root / "tb"], fresh=True)}
    ckpt = root / "ckpt" / "checkpoint_last.pt"
    runs["generate"] = generate(data_bin, ckpt, task_flags=TASK, fresh=True)[2]
    runs["score_reference"] = generate(data_bin, ckpt, task_flags=TASK, extra=["--score-reference"], fresh=True)[2]
    runs["interactive"] = interactive(data_bin, ckpt, ["w1 w2 w3", "w4 w5"], task_flags=TASK, fresh=True)[1]
    return root, runs


@pytest.mark.parametrize("step", ["train", "generate", "score_reference", "interactive"])
def test_cli_stderr_has_no_warning_line(cli_runs, step):
    _, runs = cli_runs
    proc = runs[step]
    assert "H-" in proc.stdout or step == "train"
    assert _warning_lines(proc) == [], proc.stderr[-4000:]


def test_tensorboard_logdir_writes_events(cli_runs):
    root, _ = cli_runs
    events = sorted(p.parent.name for p in (root / "tb").rglob("events.out.tfevents.*"))
    assert "train" in events and "valid" in events, events


def test_amp_prints_no_upstream_deprecation(tmp_path):
    """fairseq's ``--amp`` builds ``torch.cuda.amp.GradScaler``, deprecated
    since torch 2.4: filtered like its autocast's notice. On CPU torch's own
    lines that CUDA is missing and that it disables the scaler and autocast
    stay: they say what ``--amp`` does there (and that the run reached it)."""
    data_bin = preprocess(make_parallel_data(tmp_path / "raw", num_train=40, num_valid=6, num_test=5),
                          tmp_path / "bin")
    proc = train(data_bin, tmp_path / "ckpt", arch="transformer_ctxenc_tiny", model_flags=(), task_flags=TASK,
                 max_update=1, extra=["--amp", "--no-save"], fresh=True)
    lines = _warning_lines(proc)
    if not torch.cuda.is_available():  # (with CUDA, --cpu --amp still builds an enabled scaler, silently)
        assert any("GradScaler is enabled, but CUDA is not available" in line for line in lines), proc.stderr[-3000:]
    assert proc.returncode == 0 and not any("is deprecated" in line for line in lines), lines


DEBUG_LINE = re.compile(r"^DEBUG:|\| DEBUG \||\]\[DEBUG\]", re.M)


@pytest.mark.parametrize("step", ["train", "generate", "score_reference", "interactive"])
def test_cli_stderr_has_no_debug_line(cli_runs, step):
    """``import fairseq`` sets the root logger to DEBUG (wav2vec2_classification's
    basicConfig); hydra's ``DEBUG:hydra.core.utils:Setting JobRuntime`` lines
    were the visible result."""
    _, runs = cli_runs
    assert not DEBUG_LINE.search(runs[step].stderr), runs[step].stderr[-4000:]


def test_readme_hydra_example_prints_no_warning(tmp_path):
    """The README's fairseq-hydra-train line (a table recipe, here at tiny size
    for one update) with the start-up file scripts/install.sh writes
    (``fairseq_ctx.quiet.main(['--install'])``, here into a directory of its
    own): hydra's version_base notice (fairseq_cli.hydra_train's
    @hydra.main), the two ConfigStore-schema notices and the DEBUG lines, all
    printed before the plugin is loaded, are gone; without the file they show."""
    import subprocess
    import sys

    from tests.utils import REPO

    data_bin = preprocess(make_parallel_data(tmp_path / "raw", num_train=40, num_valid=6, num_test=5),
                          tmp_path / "bin")
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    assert quiet.main(["--install", "--site-packages", str(site_dir)]) == 0
    tiny = [f"++model.{k}={v}" for k, v in (("encoder_layers", 1), ("decoder_layers", 1), ("encoder_embed_dim", 16),
                                            ("decoder_embed_dim", 16), ("encoder_ffn_embed_dim", 16),
                                            ("decoder_ffn_embed_dim", 16), ("encoder_attention_heads", 2),
                                            ("decoder_attention_heads", 2))]

    def hydra_train(prelude, save):
        code = f"{prelude}; import sys; sys.argv[0] = 'fairseq-hydra-train'; " \
               "from fairseq_cli.hydra_train import cli_main; cli_main()"
        return subprocess.run(
            [sys.executable, "-c", code, "--config-dir", "configs/hydra", "--config-name", "dc_wmt14_en_de_enc_dc",
             "++task.source_lang=src", "++task.target_lang=tgt", f"task.data={data_bin}",
             "optimization.max_update=1", f"checkpoint.save_dir={save}", "common.cpu=true",
             "dataset.num_workers=0", *tiny],
            cwd=REPO, capture_output=True, text=True, timeout=900, env={**os.environ, "OMP_NUM_THREADS": "1"})

    quiet_run = hydra_train(f"import site; site.addsitedir({str(site_dir)!r})", tmp_path / "quiet")
    assert quiet_run.returncode == 0, quiet_run.stderr[-4000:]
    assert "num_updates 1" in quiet_run.stdout + quiet_run.stderr
    assert _warning_lines(quiet_run) == [] and not DEBUG_LINE.search(quiet_run.stderr), quiet_run.stderr[-4000:]

    # no start-up file: what fairseq prints before the plugin loads (the hook of a
    # fairseq_ctx_quiet.pth that scripts/install.sh wrote into this Python is taken out)
    loud = hydra_train("import sys; sys.meta_path[:] = [f for f in sys.meta_path "
                       "if type(f).__name__ != '_InstallWhenFairseqIsImported']", tmp_path / "loud")
    assert loud.returncode == 0, loud.stderr[-4000:]
    assert "version_base parameter is not specified" in loud.stderr
    assert loud.stderr.count("'dc_wmt14_en_de_enc_dc' is validated against ConfigStore schema") == 2
    assert "DEBUG:hydra.core.utils:Setting JobRuntime" in loud.stderr
