"""Test helpers in the style of fairseq's ``tests/utils.py`` (not shipped in
fairseq's wheel, so written here): make tiny parallel data, binarize it, train
a tiny model a few updates on CPU, then generate, interactive and validate.

Every step runs the real command-line entry point (``python -m MODULE``) in a
process of its own, as a user would, so the tests also cover ``--user-dir``
loading and the weights-only checkpoint loading of a new process. By default
that process is forked from a server that has imported torch, fairseq and
the other heavy libraries once (tests/cli_process.py: fairseq_cli's module,
fairseq_ctx and the user dir are still imported by the command itself);
``fresh=True`` starts a new interpreter instead, for tests of everything a
command prints, imports included.
"""
import importlib.util
import os
import random
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
USER_DIR = str(REPO / "fairseq_ctx")

# Small enough that two updates take about a second on one CPU core.
TINY_MODEL_FLAGS = [
    "--encoder-layers", "2", "--decoder-layers", "2",
    "--encoder-embed-dim", "16", "--decoder-embed-dim", "16",
    "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32",
    "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
]

_VOCAB = [f"w{i}" for i in range(24)]


def load_script(name):
    """``scripts/NAME.py`` as a fresh module (the scripts are not a package:
    tests call their functions directly). Not put in ``sys.modules``, so each
    call gives its own copy and monkeypatching one leaves the others alone."""
    spec = importlib.util.spec_from_file_location(f"scripts_{name}", REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_parallel_data(data_dir, num_train=200, num_valid=24, num_test=24, seed=1,
                       min_len=3, max_len=12, docs_every=6):
    """Write ``{train,valid,test}.{src,tgt}`` and ``.docids`` of a toy
    translation task: the target is the source with every word mapped to an
    uppercase twin (learnable in a few hundred updates). Documents are runs of
    ``docs_every`` consecutive lines. Returns the directory."""
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    for split, n in (("train", num_train), ("valid", num_valid), ("test", num_test)):
        with open(data_dir / f"{split}.src", "w") as fs, open(data_dir / f"{split}.tgt", "w") as ft, \
                open(data_dir / f"{split}.docids", "w") as fd:
            for i in range(n):
                words = [rng.choice(_VOCAB) for _ in range(rng.randint(min_len, max_len))]
                fs.write(" ".join(words) + "\n")
                ft.write(" ".join(w.upper() for w in words) + "\n")
                fd.write(f"{split}-doc{i // docs_every}\n")
    return data_dir


def run_cli(module, args, cwd=None, check=True, env=None, timeout=600, input=None, fresh=False):
    """Run ``python -m <module> <args>`` and return the CompletedProcess:
    in a child of the preloaded fork server (:mod:`tests.cli_process`), or
    with ``fresh=True`` in a new interpreter (whose stderr also holds what
    importing torch and the like prints). On failure, raise with the
    command's output so a test shows why."""
    cmd = [sys.executable, "-m", module] + [str(a) for a in args]
    full_env = dict(os.environ)
    full_env.setdefault("OMP_NUM_THREADS", "1")
    full_env.update(env or {})
    if fresh:
        proc = subprocess.run(cmd, cwd=cwd or REPO, env=full_env, capture_output=True, text=True,
                              timeout=timeout, input=input)
    else:
        from tests import cli_process

        proc = cli_process.run(module, args, cwd=cwd or REPO, env=full_env, input=input, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"command failed ({proc.returncode}): {' '.join(cmd)}\n"
            f"--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-6000:]}"
        )
    return proc


def preprocess(data_dir, dest_dir, src="src", tgt="tgt", extra=()):
    """Binarize ``data_dir/{split}.{src,tgt}`` with a joined dictionary and copy
    the ``.docids`` files beside the binarized data as ``{split}.{src}-{tgt}.docids``."""
    data_dir, dest_dir = Path(data_dir), Path(dest_dir)
    run_cli("fairseq_cli.preprocess", [
        "--source-lang", src, "--target-lang", tgt,
        "--trainpref", data_dir / "train", "--validpref", data_dir / "valid",
        "--testpref", data_dir / "test", "--destdir", dest_dir,
        "--joined-dictionary", "--workers", "1", *extra,
    ])
    for split in ("train", "valid", "test"):
        docids = data_dir / f"{split}.docids"
        if docids.exists():
            (dest_dir / f"{split}.{src}-{tgt}.docids").write_text(docids.read_text())
    return dest_dir


def train(data_bin, save_dir, arch="transformer", extra=(), max_update=4, model_flags=TINY_MODEL_FLAGS,
          task_flags=(), check=True, user_dir=USER_DIR, cwd=None, fresh=False):
    """Train ``arch`` for ``max_update`` updates on CPU with fairseq-train."""
    args = [
        data_bin, "--user-dir", user_dir, "--arch", arch, *model_flags, *task_flags,
        "--optimizer", "adam", "--lr", "0.005", "--lr-scheduler", "inverse_sqrt",
        "--warmup-updates", "10", "--criterion", "label_smoothed_cross_entropy",
        "--label-smoothing", "0.1", "--max-tokens", "500", "--max-update", max_update,
        "--save-dir", save_dir, "--no-progress-bar", "--log-interval", "1",
        "--num-workers", "0", "--seed", "1", "--cpu", "--no-epoch-checkpoints",
        "--required-batch-size-multiple", "1", *extra,
    ]
    return run_cli("fairseq_cli.train", args, check=check, cwd=cwd, fresh=fresh)


def train_in_process(data_bin, save_dir, arch, flags=()):
    """Two updates of ``arch`` (unless ``flags`` say otherwise) with fairseq-train's own ``main`` in this
    process (no interpreter start-up); returns the last checkpoint."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq_cli import train as fairseq_train

    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(data_bin), "--user-dir", USER_DIR, "--arch", arch,
        "--optimizer", "adam", "--lr", "0.005", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "10",
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--max-tokens", "500",
        "--max-update", "2", "--save-dir", str(save_dir), "--no-progress-bar", "--num-workers", "0",
        "--seed", "1", "--cpu", "--no-epoch-checkpoints", "--required-batch-size-multiple", "1",
        "--no-save-optimizer-state",
        *flags,   # last, so that a caller's --max-update, --lr, ... win
    ])
    fairseq_train.main(convert_namespace_to_omegaconf(args))
    return Path(save_dir) / "checkpoint_last.pt"


def parse_generate(stdout):
    """Parse fairseq-generate output into ``{id: (hypothesis, score)}`` and the
    ``{id: source}`` map, so tests can check that no sentence was dropped."""
    hyps, srcs = {}, {}
    for line in stdout.splitlines():
        m = re.match(r"^H-(\d+)\t(\S+)\t(.*)$", line)
        if m:
            hyps[int(m.group(1))] = (m.group(3), float(m.group(2)))
        m = re.match(r"^S-(\d+)\t(.*)$", line)
        if m:
            srcs[int(m.group(1))] = m.group(2)
    return hyps, srcs


def generate(data_bin, checkpoint, extra=(), subset="test", beam=2, task_flags=(), user_dir=USER_DIR,
             check=True, fresh=False):
    """Decode ``subset`` with beam search; returns (hyps, srcs, CompletedProcess)."""
    proc = run_cli("fairseq_cli.generate", [
        data_bin, "--user-dir", user_dir, "--path", checkpoint, "--gen-subset", subset,
        "--beam", beam, "--max-len-b", "20", "--batch-size", "8", "--cpu",
        "--required-batch-size-multiple", "1", *task_flags, *extra,
    ], check=check, fresh=fresh)
    hyps, srcs = parse_generate(proc.stdout)
    return hyps, srcs, proc


def interactive(data_bin, checkpoint, lines, extra=(), beam=2, task_flags=(), user_dir=USER_DIR, fresh=False):
    """Translate ``lines`` through fairseq-interactive; returns the list of
    hypotheses in input order."""
    proc = run_cli("fairseq_cli.interactive", [
        data_bin, "--user-dir", user_dir, "--path", checkpoint, "--beam", beam,
        "--max-len-b", "20", "--cpu", "--buffer-size", "4", "--batch-size", "4",
        *task_flags, *extra,
    ], input="\n".join(lines) + "\n", fresh=fresh)
    hyps = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"^H-(\d+)\t(\S+)\t(.*)$", line)
        if m:
            hyps[int(m.group(1))] = m.group(3)
    return [hyps[i] for i in sorted(hyps)], proc


def validate(data_bin, checkpoint, subset="valid", extra=(), task_flags=(), user_dir=USER_DIR):
    """Run fairseq-validate; returns the reported loss. (fairseq-validate has
    no default task, unlike train/generate: pass ``--task translation`` unless
    ``task_flags`` names one.)"""
    if "--task" not in task_flags:
        task_flags = ["--task", "translation", *task_flags]
    proc = run_cli("fairseq_cli.validate", [
        data_bin, "--user-dir", user_dir, "--path", checkpoint, "--valid-subset", subset,
        "--max-tokens", "500", "--cpu", *task_flags, *extra,
    ])
    m = re.search(r"\| loss ([0-9.naif-]+)", proc.stdout + proc.stderr)
    assert m, f"no loss in fairseq-validate output:\n{proc.stdout}\n{proc.stderr}"
    return float(m.group(1)), proc


def toy_dictionary(n=40):
    """A fairseq Dictionary with symbols w0..w{n-1}, for in-process model builds."""
    from fairseq.data import Dictionary

    d = Dictionary()
    for i in range(n):
        d.add_symbol(f"w{i}")
    return d


def build_model(arch, extra=(), dictionary=None, meta=False):
    """Build ``arch`` in-process from command-line flags, as fairseq-train
    would, with a toy dictionary shared by source and target. ``meta=True``
    builds on torch's meta device (parameter counting without memory or init)."""
    import torch
    from fairseq import options
    from fairseq.models import ARCH_MODEL_REGISTRY
    from fairseq.tasks.translation import TranslationTask

    import fairseq_ctx  # noqa: F401  (registers the architectures)

    d = dictionary if dictionary is not None else toy_dictionary()
    args = options.parse_args_and_arch(options.get_training_parser(), ["/nonexistent", "--arch", arch, *extra])
    task = TranslationTask(args, d, d)
    if meta:
        with torch.device("meta"):
            return ARCH_MODEL_REGISTRY[args.arch].build_model(args, task)
    return ARCH_MODEL_REGISTRY[args.arch].build_model(args, task)


def tiny_model(variant, extra=(), *, seed=0, dims=None, dictionary=None, random_constants=True):
    """A model of ``variant`` (a :class:`~fairseq_ctx.architectures.Variant`
    or the name of one in the catalogue: :data:`VARIANTS` or the option grid)
    built as :func:`build_model` does, at ``dims`` (model flags; default
    :data:`~fairseq_ctx.architectures.TINY_FLAGS`), dropout off, in eval
    mode, its weights drawn after ``torch.manual_seed(seed)``. Then (with
    ``random_constants``) the parameters the variant starts at one value
    everywhere (its ``constant_init``: ctxsan's gate vectors, every lambda
    0.5) are redrawn from N(0, 0.5^2), in parameter order, so a test sees
    position-dependent values. ``extra`` flags come last and win."""
    import torch

    from fairseq_ctx.architectures import TINY_FLAGS, Variant
    from fairseq_ctx.architectures import variant as variant_named

    v = variant if isinstance(variant, Variant) else variant_named(variant)
    torch.manual_seed(seed)
    flags = [*(TINY_FLAGS if dims is None else dims), *v.flags, "--dropout", "0", *extra]
    model = build_model(v.arch, flags, dictionary=dictionary).eval()
    if random_constants and v.constant_init:
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith(v.constant_init):
                    p.normal_(std=0.5)
    return model


def padded_batch(lengths, *, seed=0, generator=None, left_pad=True, width=None, dictionary=None, vocab=None,
                 eos=True, bos=None):
    """A B x ``width`` LongTensor of random sentences, row i ``lengths[i]``
    tokens long, padded on the left (fairseq's sources and contexts) or, with
    ``left_pad=False``, on the right (targets, decoder inputs) to ``width``
    (default: the longest).

    Row by row, each row's words are one ``torch.randint`` of its length
    over ``vocab`` (``(low, high)``; default: the dictionary's words, every
    non-special symbol), drawn from ``generator`` (several batches from one
    stream) or from a new one seeded with ``seed``; then the last word
    becomes </s> (``eos``) and the first ``bos`` (when given). Pad, </s> and
    the words are ``dictionary``'s, by default :func:`toy_dictionary`'s
    (pad 1, </s> 2, words 4..43)."""
    import torch

    pad, end, words = ((1, 2, (4, 44)) if dictionary is None else
                       (dictionary.pad(), dictionary.eos(), (dictionary.nspecial, len(dictionary))))
    low, high = vocab or words
    g = generator if generator is not None else torch.Generator().manual_seed(seed)
    width = max(lengths) if width is None else width
    out = torch.full((len(lengths), width), pad, dtype=torch.long)
    for i, n in enumerate(lengths):
        row = torch.randint(low, high, (n,), generator=g)
        if eos and n:
            row[-1] = end
        if bos is not None and n:
            row[0] = bos
        if left_pad:
            out[i, width - n:] = row
        else:
            out[i, :n] = row
    return out


# the aten operations that read a tensor's values into Python or size their
# output by them: on a GPU each waits for every queued kernel (a device sync)
_READING_OPS = {"_local_scalar_dense", "nonzero", "masked_select", "unique", "_unique2", "unique_consecutive",
                "equal", "is_nonzero"}


class host_reads:
    """Counts the reads of tensor values into Python that code under
    ``package`` makes while the block runs (``with host_reads() as reads``:
    ``reads`` maps "file:line" to a count): ``bool()``, ``int()``,
    ``.item()`` (aten's ``_local_scalar_dense``), ``nonzero``, boolean-mask
    indexing and the other data-dependent shapes, and ``.tolist()``,
    ``.cpu()``, ``.numpy()``. On a GPU each is a device sync; on CPU they
    cost nothing, which is why a test must count them. A read is charged to
    the innermost frame outside torch, so a read inside fairseq called from
    our code is fairseq's."""

    def __init__(self, package=REPO / "fairseq_ctx"):
        import collections

        self.package = os.path.realpath(package) + os.sep
        self.reads = collections.Counter()

    def _charge(self, what):
        import traceback

        for frame in reversed(traceback.extract_stack()[:-2]):
            if os.sep + "torch" + os.sep not in frame.filename:
                path = os.path.realpath(frame.filename)  # as the package's (a symlinked checkout)
                if path.startswith(self.package):
                    self.reads[f"{os.path.relpath(path, REPO)}:{frame.lineno} {what}"] += 1
                return

    def __enter__(self):
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        outer = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                name = func.overloadpacket.__name__
                if name in _READING_OPS or (name in ("index", "index_put", "index_put_") and any(
                        t is not None and t.dtype == torch.bool for t in args[1])):
                    outer._charge(name)
                return func(*args, **(kwargs or {}))

        self._saved = {m: getattr(torch.Tensor, m) for m in ("tolist", "cpu", "numpy")}

        def patched(method, original):
            def read(tensor, *args, **kwargs):
                outer._charge(method)
                return original(tensor, *args, **kwargs)
            return read

        for m, original in self._saved.items():
            setattr(torch.Tensor, m, patched(m, original))
        self._mode = Mode()
        try:
            self._mode.__enter__()
        except BaseException:
            self._restore()
            raise
        return self.reads

    def _restore(self):
        import torch

        for m, original in self._saved.items():
            setattr(torch.Tensor, m, original)

    def __exit__(self, *exc):
        try:
            self._mode.__exit__(*exc)
        finally:
            self._restore()
        return False


def n_params(model):
    return sum(p.numel() for p in model.parameters())


def _cli_args(parser, argv):
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    return convert_namespace_to_omegaconf(options.parse_args_and_arch(parser, [str(a) for a in argv]))


def generate_in_process(data_bin, checkpoint, results_dir, extra=(), subset="test", beam=2, task_flags=()):
    """fairseq-generate's own ``main`` in this process (the same code path as
    the command, without an interpreter start-up); returns (hyps, srcs) as
    :func:`parse_generate` does."""
    from fairseq import options
    from fairseq_cli import generate as fairseq_generate

    cfg = _cli_args(options.get_generation_parser(), [
        data_bin, "--user-dir", USER_DIR, "--path", checkpoint, "--gen-subset", subset,
        "--beam", beam, "--max-len-b", "20", "--batch-size", "8", "--cpu",
        "--required-batch-size-multiple", "1", "--results-path", results_dir,
        # no data-loader processes forked from the test's own (the commands' default, 1, is run by generate())
        "--num-workers", "0", *task_flags, *extra,
    ])
    fairseq_generate.main(cfg)
    return parse_generate((Path(results_dir) / f"generate-{subset}.txt").read_text())


def interactive_in_process(data_bin, checkpoint, lines, tmp_dir, beam=2, task_flags=(), extra=()):
    """fairseq-interactive's own ``main`` in this process on ``lines``;
    returns the hypotheses in input order."""
    hyps = {}
    for line in interactive_output(data_bin, checkpoint, lines, tmp_dir, beam, task_flags, extra).splitlines():
        m = re.match(r"^H-(\d+)\t(\S+)\t(.*)$", line)
        if m:
            hyps[int(m.group(1))] = m.group(3)
    return [hyps[i] for i in sorted(hyps)]


def interactive_output(data_bin, checkpoint, lines, tmp_dir, beam=2, task_flags=(), extra=()) -> str:
    """What fairseq-interactive's own ``main`` prints in this process on ``lines``."""
    import contextlib
    import io

    from fairseq import options
    from fairseq_cli import interactive as fairseq_interactive

    source = Path(tmp_dir) / "interactive.in"
    source.write_text("\n".join(lines) + "\n")
    cfg = _cli_args(options.get_interactive_generation_parser(), [
        data_bin, "--user-dir", USER_DIR, "--path", checkpoint, "--beam", beam, "--max-len-b", "20",
        "--cpu", "--buffer-size", "4", "--batch-size", "4", "--input", source, "--num-workers", "0",
        *task_flags, *extra,
    ])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        fairseq_interactive.main(cfg)
    return out.getvalue()


def write_voita_set(tmp_path, name, rows):
    """A Voita-format set: rows of (source context, source, target context,
    candidates, true index)."""
    import json

    s_lines, d_lines, entries = [], [], []
    for s_ctx, s, t_ctx, cands, true_ind in rows:
        for c in cands:
            s_lines.append(f"{s_ctx} _eos {s}")
            d_lines.append(f"{t_ctx} _eos {c}")
        entries.append({"dst": cands, "true_ind": true_ind})
    (tmp_path / f"{name}.src").write_text("\n".join(s_lines) + "\n")
    (tmp_path / f"{name}.dst").write_text("\n".join(d_lines) + "\n")
    (tmp_path / f"{name}.json").write_text(json.dumps(entries))
    return ["--format", "voita", "--src", str(tmp_path / f"{name}.src"), "--dst", str(tmp_path / f"{name}.dst"),
            "--json", str(tmp_path / f"{name}.json")]


def fairseq_valid_line(epoch, loss, updates):
    """fairseq-train's validation log line, as the study's epoch logs hold it."""
    return (f"x | INFO | valid | epoch {epoch:03d} | valid on 'valid' subset | loss {loss} | nll_loss 5.1 | "
            f"ppl 34.3 | num_updates {updates} | best_loss {loss}\n")


def fairseq_epoch_end_line(epoch):
    """fairseq-train's end-of-epoch log line."""
    return f"x | INFO | fairseq_cli.train | end of epoch {epoch} (average epoch stats below)\n"


def fairseq_train_line(epoch, updates, train_wall, wall):
    """fairseq-train's summary of an epoch's training, after its end-of-epoch line."""
    return (f"x | INFO | train | epoch {epoch:03d} | loss 3.958 | nll_loss 2.471 | ppl 5.54 | wps 5135.3 | ups 1.46 | "
            f"wpb 3526 | bsz 108.6 | num_updates {updates} | lr 0.0012 | gnorm 0.711 | clip 2.7 | "
            f"train_wall {train_wall} | wall {wall}\n")
