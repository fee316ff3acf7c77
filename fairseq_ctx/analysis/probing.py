"""Linguistic probing of frozen encoders: the ten SentEval probing tasks of
Conneau et al. (ACL 2018, "What you can cram into a single vector"), as in
Table 4 of the Dual Contextual module paper (Ampomah et al. 2021, Sect. 7.1).

For each task a classifier is trained on fixed sentence representations of a
trained translation model's encoder (any architecture here, or a plain
``transformer``) and its accuracy on the task's test split is reported.

Representation (DC Sect. 7.1: "the mean of the output representation from the
top-level (last) encoding layer"): ``encoder_out["encoder_out"]`` (the states
the decoder attends to, after the final LayerNorm of pre-norm encoders), mean
over the sentence's real positions, the final ``</s>`` included (every source
the model was trained on ends with it) and padding excluded. The encoder is
frozen: ``model.eval()`` (no dropout) under ``torch.no_grad()``. A
``transformer_ctxenc`` encoder gets an empty context (the sentences are
isolated).

Sentences are preprocessed like the model's training data, as
``fairseq-interactive`` does: ``--tokenizer moses`` then ``--bpe
sentencepiece --sentencepiece-model M`` or ``--bpe subword_nmt --bpe-codes
C`` (fairseq's own encoders), then the model's source dictionary (unknown
units become ``<unk>``; the JSON reports the ``<unk>`` rate per task).
SentEval's sentences are already Moses-tokenized, so ``--tokenizer moses``
changes little beyond fairseq's default HTML escaping; give it when the
training data went through it. They are encoded in batches of at most
``--max-tokens`` tokens, sorted by length.

Classifier. What DC Sect. 7.1 states is taken as stated: a two-layer
classifier (one hidden layer), an L2 penalty lambda = 1e-4 on the hidden
layer's weights (added to the loss as lambda * ||W_h||^2), RMSprop with
learning rate 2.5e-4 (PyTorch's defaults otherwise: alpha 0.99, eps 1e-8),
mini-batches of 64, at most 100 epochs, early stopping on validation
accuracy; only the classifier is trained. What it leaves open follows
SentEval's probing setup (its README: "an MLP with a Sigmoid nonlinearity ...
tuned the nhid (in [50, 100, 200]) and dropout (in [0.0, 0.1, 0.2]) on the
dev set"; ``senteval/tools/classifier.py``: Linear -> Dropout -> Sigmoid ->
Linear, cross-entropy, tenacity 5, seed 1111): by default the 3 x 3 grid of
hidden sizes and dropouts (``--hidden``, ``--dropout``: comma lists) is
searched, each configuration trained until the validation accuracy has not
improved for ``--patience`` (5) epochs, and the configuration and epoch with
the best accuracy on the ``va`` split give the reported ``te`` accuracy. One
epoch is one pass over the training split (SentEval's "epoch" is
``epoch_size`` = 4 passes). Labels are numbered in sorted order of the
training split's labels (as SentEval does).

Data: ``--probing-dir DIR`` holds SentEval's ``data/probing/*.txt`` files
(``split<TAB>label<TAB>sentence`` per line, split ``tr``/``va``/``te``;
as SentEval, the label is the second field and the sentence the last).
``--download`` first fetches the missing ones from SentEval's GitHub
repository into DIR (``--download-url`` for a mirror). ``--tasks`` selects
some of the ten; ``--max-train N`` keeps the first N training sentences of
each task (a quick look; the JSON records it). A missing file, a malformed
line, a label of va/te that training never shows, or a sentence longer than
the model's positions stops with one line naming the file (and line).

Several checkpoints are compared side by side: ``--path a.pt:b.pt`` and/or
``--path`` repeated. Each is loaded with its own task and dictionaries
(``DATA-BIN`` overrides the checkpoint's data directory, where the
dictionaries are read). Prints a table of test accuracies (%) per task, per
category (Surface, Syntactic, Semantic, as DC Table 4) and overall, and
writes ``OUT/probing.json``.

Usage::

    python3 -m fairseq_ctx.analysis.probing [DATA-BIN] --path base.pt:dc.pt \\
        --probing-dir probing [--download] [--tokenizer moses] \\
        [--bpe sentencepiece --sentencepiece-model spm.model] --out DIR \\
        [--tasks SentLen,BShift] [--hidden 50,100,200] [--dropout 0,0.1,0.2] \\
        [--epochs 100] [--patience 5] [--max-train N] [--max-tokens 4000] [--cpu]
"""
from __future__ import annotations  # torch is imported by the analysis, not for --help

import argparse
import copy
import functools
import json
import logging
import os
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple

from fairseq_ctx.cli import (add_checkpoint_args, add_text_encoder_args, build_encoders, check_data_dir,
                             check_encoder_files, checkpoint_paths, comma_list, load_checkpoint, parse_with_encoders,
                             set_tool_threads, setup_logging)
from fairseq_ctx.errors import FairseqCtxError, install_excepthook

if TYPE_CHECKING:
    import torch
    from torch import nn

logger = logging.getLogger("fairseq_ctx.analysis.probing")

# (name in Conneau et al. 2018 / DC Table 4, file in SentEval's data/probing, category)
TASKS: List[Tuple[str, str, str]] = [
    ("SentLen", "sentence_length", "Surface"),
    ("WC", "word_content", "Surface"),
    ("TreeDepth", "tree_depth", "Syntactic"),
    ("TopConst", "top_constituents", "Syntactic"),
    ("BShift", "bigram_shift", "Syntactic"),
    ("Tense", "past_present", "Semantic"),
    ("SubjNum", "subj_number", "Semantic"),
    ("ObjNum", "obj_number", "Semantic"),
    ("SOMO", "odd_man_out", "Semantic"),
    ("CoordInv", "coordination_inversion", "Semantic"),
]
TASK_FILE = {name: stem for name, stem, _ in TASKS}
TASK_CATEGORY = {name: cat for name, _, cat in TASKS}
CATEGORIES = ("Surface", "Syntactic", "Semantic")
SPLITS = ("tr", "va", "te")
SENTEVAL_PROBING_URL = "https://raw.githubusercontent.com/facebookresearch/SentEval/main/data/probing"


class ProbingDataError(FairseqCtxError):
    """A probing file that is missing or malformed (names the file and line)."""


class NoGlobalStateError(FairseqCtxError):
    """The GRET global state was asked of a checkpoint that has none."""


# ---------------------------------------------------------------------------
# probing data
# ---------------------------------------------------------------------------

def probing_file(probing_dir: str, task: str) -> str:
    return os.path.join(probing_dir, TASK_FILE[task] + ".txt")


def read_probing_file(path: str) -> Dict[str, Dict[str, list]]:
    """``{split: {"sentences": [...], "labels": [...], "lines": [...]}}`` for
    split in tr/va/te, from SentEval's ``split<TAB>label<TAB>...<TAB>sentence``
    format. Blank lines are skipped; anything else malformed is an error
    naming the file and line."""
    if not os.path.isfile(path):
        raise ProbingDataError(f"{path}: no such probing file (give --probing-dir DIR holding SentEval's "
                               "data/probing files, or add --download to fetch them)")
    data = {s: {"sentences": [], "labels": [], "lines": []} for s in SPLITS}
    try:
        with open(path, encoding="utf-8", newline="") as f:
            for lineno, line in enumerate(f, start=1):
                line = line.rstrip("\r\n")
                if not line.strip():
                    continue
                fields = line.split("\t")
                if len(fields) < 3:
                    raise ProbingDataError(
                        f"{path}:{lineno}: expected 'split<TAB>label<TAB>sentence', got {len(fields)} "
                        f"tab-separated field(s): {line[:60]!r}")
                split, label, sentence = fields[0].strip(), fields[1].strip(), fields[-1].strip()
                if split not in data:
                    raise ProbingDataError(f"{path}:{lineno}: unknown split {fields[0][:20]!r} "
                                           f"(expected one of {', '.join(SPLITS)})")
                if not label:
                    raise ProbingDataError(f"{path}:{lineno}: empty label")
                if not sentence:
                    raise ProbingDataError(f"{path}:{lineno}: empty sentence")
                data[split]["sentences"].append(sentence)
                data[split]["labels"].append(label)
                data[split]["lines"].append(lineno)
    except UnicodeDecodeError as e:
        raise ProbingDataError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    for split in SPLITS:
        if not data[split]["sentences"]:
            raise ProbingDataError(f"{path}: no lines of split '{split}' (need tr, va and te)")
    return data


def label_index(data: Dict[str, Dict[str, list]], path: str) -> Tuple[List[str], Dict[str, torch.Tensor]]:
    """Classes in sorted order of the training labels (as SentEval), and the
    label tensor of each split. A va/te label unseen in training is an error."""
    import torch

    classes = sorted(set(data["tr"]["labels"]))
    if len(classes) < 2:
        raise ProbingDataError(f"{path}: the training split has a single label {classes[0]!r}; "
                               "a classifier needs at least two")
    index = {c: i for i, c in enumerate(classes)}
    labels = {}
    for split in SPLITS:
        ids = []
        for label, lineno in zip(data[split]["labels"], data[split]["lines"]):
            if label not in index:
                raise ProbingDataError(f"{path}:{lineno}: label {label!r} of split '{split}' does not "
                                       "occur in the training split")
            ids.append(index[label])
        labels[split] = torch.tensor(ids, dtype=torch.long)
    return classes, labels


def download_probing(tasks: Sequence[str], probing_dir: str, base_url: str = SENTEVAL_PROBING_URL) -> List[str]:
    """Fetch the tasks' files that ``probing_dir`` lacks; returns the paths
    written. Each file is written to a temporary name and renamed when
    complete, so an interrupted download leaves no partial file."""
    os.makedirs(probing_dir, exist_ok=True)
    written = []
    for task in tasks:
        path = probing_file(probing_dir, task)
        if os.path.isfile(path):
            logger.info("%s: already there, not downloaded", path)
            continue
        url = f"{base_url.rstrip('/')}/{TASK_FILE[task]}.txt"
        logger.info("downloading %s", url)
        tmp = path + ".part"
        try:
            with urllib.request.urlopen(url, timeout=60) as response, open(tmp, "wb") as out:
                while True:
                    chunk = response.read(1 << 20)
                    if not chunk:
                        break
                    out.write(chunk)
        except (urllib.error.URLError, OSError, ValueError) as e:
            if os.path.exists(tmp):
                os.remove(tmp)
            reason = getattr(e, "reason", None) or e
            raise ProbingDataError(f"could not download {url}: {reason}") from None
        os.replace(tmp, path)
        written.append(path)
    return written


# ---------------------------------------------------------------------------
# frozen encoder features
# ---------------------------------------------------------------------------

def pool_encoder_out(encoder_out: Dict, src_tokens: torch.Tensor, pad_idx: int,
                     kinds: Sequence[str] = ("mean",)) -> Dict[str, torch.Tensor]:
    """Sentence vectors (B x C) from one encoder output.

    * ``mean``: mean of the top encoder states over the real (non-pad)
      positions, ``</s>`` included;
    * ``last``: the top encoder state at the last real position (the final
      ``</s>``), wherever the padding is (left or right);
    * ``gret``: GRET's global state s^M, ``encoder_out["gret_global"][0]``.
    """
    import torch

    x = encoder_out["encoder_out"][0].transpose(0, 1)  # B x T x C
    mask = src_tokens.ne(pad_idx)
    if mask.shape != x.shape[:2]:
        raise ValueError(f"encoder states {tuple(x.shape[:2])} do not match the tokens {tuple(mask.shape)}")
    out = {}
    for kind in kinds:
        if kind == "mean":
            m = mask.unsqueeze(-1).type_as(x)
            out[kind] = (x * m).sum(dim=1) / m.sum(dim=1).clamp_min(1.0)
        elif kind == "last":
            positions = torch.arange(x.size(1), device=x.device).expand_as(mask)
            last = positions.masked_fill(~mask, -1).max(dim=1).values.clamp_min(0)
            out[kind] = x[torch.arange(x.size(0), device=x.device), last]
        elif kind == "gret":
            states = encoder_out.get("gret_global") if isinstance(encoder_out, dict) else None
            if not states:
                raise NoGlobalStateError("the model's encoder returns no GRET global state "
                                         "(encoder_out['gret_global'])")
            out[kind] = states[0]
        else:
            raise ValueError(f"unknown pooling {kind!r}")
    return out


def run_encoder(model, net_input: Dict) -> Dict:
    """The frozen encoder on a batch's ``net_input`` (its context keys
    included when the model takes them)."""
    kwargs = {k: v for k, v in net_input.items() if k not in ("src_tokens", "prev_output_tokens")}
    return model.encoder(net_input["src_tokens"], **kwargs)


def length_batches(lengths: Sequence[int], max_tokens: int, max_sentences: int) -> List[List[int]]:
    """Indices grouped into batches of similar length: each batch's
    ``size x longest`` stays within ``max_tokens`` (a longer sentence gets a
    batch of its own) and its size within ``max_sentences``."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches, cur, longest = [], [], 0
    for i in order:
        n = max(longest, lengths[i])
        if cur and ((len(cur) + 1) * n > max_tokens or len(cur) >= max_sentences):
            batches.append(cur)
            cur, n = [], lengths[i]
        cur.append(i)
        longest = n
    if cur:
        batches.append(cur)
    return batches


def sentence_features(model, token_lists: Sequence[torch.Tensor], pad_idx: int, eos_idx: int,
                      left_pad: bool = True, kinds: Sequence[str] = ("mean",), max_tokens: int = 4000,
                      max_sentences: int = 256, device: str = "cpu") -> Dict[str, torch.Tensor]:
    """Pooled frozen-encoder features (N x C per kind, float32, on CPU, in
    the order of ``token_lists``; each list ends with ``</s>``)."""
    import torch
    from fairseq.data import data_utils

    from fairseq_ctx.progress import bar

    model.eval()
    lengths = [len(t) for t in token_lists]
    feats: Dict[str, Optional[torch.Tensor]] = {k: None for k in kinds}
    with torch.no_grad(), bar(len(token_lists), "encoding", unit="sent") as progress:
        for batch in length_batches(lengths, max_tokens, max_sentences):
            src = data_utils.collate_tokens([token_lists[i] for i in batch], pad_idx, eos_idx, left_pad=left_pad)
            src = src.to(device)
            src_lengths = torch.tensor([lengths[i] for i in batch], device=device)
            enc = run_encoder(model, {"src_tokens": src, "src_lengths": src_lengths})
            pooled = pool_encoder_out(enc, src, pad_idx, kinds)
            index = torch.tensor(batch)
            for k, v in pooled.items():
                if feats[k] is None:
                    feats[k] = torch.zeros(len(token_lists), v.size(-1), dtype=torch.float32)
                feats[k][index] = v.float().cpu()
            progress.update(len(batch))
    return feats


# ---------------------------------------------------------------------------
# the probing classifier
# ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _probe_mlp_class():
    """``ProbeMLP``, a ``torch.nn.Module``: defined on first use, so that
    importing this module (``--help``) does not import torch."""
    import torch
    from torch import nn

    class ProbeMLP(nn.Module):
        """SentEval's MLP: Linear -> Dropout -> Sigmoid -> Linear (hidden 0:
        logistic regression, one Linear)."""

        def __init__(self, input_dim: int, num_classes: int, hidden: int, dropout: float = 0.0):
            super().__init__()
            if hidden > 0:
                self.hidden = nn.Linear(input_dim, hidden)
                self.dropout = nn.Dropout(dropout)
                self.out = nn.Linear(hidden, num_classes)
            else:
                self.hidden = None
                self.out = nn.Linear(input_dim, num_classes)

        def forward(self, x):
            if self.hidden is not None:
                x = torch.sigmoid(self.dropout(self.hidden(x)))
            return self.out(x)

    ProbeMLP.__qualname__ = "ProbeMLP"  # pickles as fairseq_ctx.analysis.probing.ProbeMLP (module __getattr__)
    return ProbeMLP


def __getattr__(name):
    if name == "ProbeMLP":
        return _probe_mlp_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, chunk: int = 8192) -> float:
    import torch

    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), chunk):
            correct += int(model(x[i:i + chunk]).argmax(dim=-1).eq(y[i:i + chunk]).sum())
    return correct / max(len(x), 1)


def train_probe(x: Dict[str, torch.Tensor], y: Dict[str, torch.Tensor], num_classes: int, hidden: int = 200,
                dropout: float = 0.0, lr: float = 2.5e-4, l2: float = 1e-4, batch_size: int = 64,
                epochs: int = 100, patience: int = 5, seed: int = 1111) -> Dict:
    """Train one classifier on ``x["tr"]``, keep the epoch with the best
    ``va`` accuracy (the first of equals), stop after ``patience`` epochs
    without improvement (0: run all ``epochs``); report ``te`` accuracy."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = _probe_mlp_class()(x["tr"].size(1), num_classes, hidden, dropout)
    opt = torch.optim.RMSprop(model.parameters(), lr=lr)
    best_acc, best_state, best_epoch, stale, epoch = -1.0, None, 0, 0, 0
    n = len(x["tr"])
    for epoch in range(1, epochs + 1):
        model.train()
        perm = torch.randperm(n, generator=gen)
        for i in range(0, n, batch_size):
            idx = perm[i:i + batch_size]
            loss = F.cross_entropy(model(x["tr"][idx]), y["tr"][idx])
            if model.hidden is not None and l2 > 0:
                loss = loss + l2 * model.hidden.weight.pow(2).sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        acc = accuracy(model, x["va"], y["va"])
        if acc > best_acc:
            best_acc, best_state, best_epoch, stale = acc, copy.deepcopy(model.state_dict()), epoch, 0
        else:
            stale += 1
            if patience and stale >= patience:
                break
    model.load_state_dict(best_state)
    return {"hidden": hidden, "dropout": dropout, "valid_acc": best_acc, "test_acc": accuracy(model, x["te"], y["te"]),
            "best_epoch": best_epoch, "epochs_run": epoch}


def probe_task(x: Dict[str, torch.Tensor], y: Dict[str, torch.Tensor], num_classes: int,
               hiddens: Sequence[int], dropouts: Sequence[float], **kw) -> Dict:
    """Grid over hidden sizes and dropouts; the best validation accuracy
    (first of equals) decides. Returns its result plus every run's."""
    runs = [train_probe(x, y, num_classes, hidden=h, dropout=d, **kw)
            for h in hiddens for d in (dropouts if h > 0 else [0.0])]
    best = max(runs, key=lambda r: r["valid_acc"])  # max keeps the first of equals
    return dict(best, grid=[{k: r[k] for k in ("hidden", "dropout", "valid_acc", "test_acc", "best_epoch")}
                            for r in runs])


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------

_int_list = comma_list(int, lambda v: v >= 0, "integers >= 0")
_float_list = comma_list(float, lambda v: 0.0 <= v < 1.0, "dropouts in [0, 1)")


def get_parser():
    p = argparse.ArgumentParser(
        prog="fairseq-ctx-probing",
        description="SentEval probing tasks (Conneau et al. 2018; DC paper Table 4) on frozen, "
                    "mean-pooled encoder states. See the module docstring (python3 -m pydoc "
                    "fairseq_ctx.analysis.probing).",
        epilog="example (two checkpoints side by side; SentEval's files fetched into probing/):\n"
               "  fairseq-ctx-probing data/bin --path runs/base/ckpt.pt:runs/dc/ckpt.pt \\\n"
               "      --probing-dir probing --download --tokenizer moses \\\n"
               "      --bpe sentencepiece --sentencepiece-model spm.model --out probing_out/",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_checkpoint_args(p)
    p.add_argument("--probing-dir", default="probing", metavar="DIR",
                   help="directory of SentEval's probing files (default: ./probing)")
    p.add_argument("--download", action="store_true", help="first download the missing probing files into "
                   "--probing-dir from SentEval's GitHub repository")
    p.add_argument("--download-url", default=SENTEVAL_PROBING_URL, help=argparse.SUPPRESS)
    p.add_argument("--tasks", default=",".join(t for t, _, _ in TASKS),
                   help="comma-separated subset of: " + ", ".join(t for t, _, _ in TASKS))
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (probing.json)")
    p.add_argument("--max-train", type=int, default=0, metavar="N",
                   help="use only the first N training sentences of each task (0: all)")
    add_text_encoder_args(p, tokenizer_help="tokenize the sentences before --bpe (default: taken as they are)",
                          bpe_help="subword-split the sentences (default: none)")
    g = p.add_argument_group("classifier (DC Sect. 7.1; SentEval where the paper is silent)")
    g.add_argument("--hidden", type=_int_list, default=[50, 100, 200],
                   help="hidden sizes to try, comma-separated (0: logistic regression; default: SentEval's grid)")
    g.add_argument("--dropout", type=_float_list, default=[0.0, 0.1, 0.2],
                   help="dropouts to try, comma-separated (default: SentEval's grid)")
    g.add_argument("--lr", type=float, default=2.5e-4, help="RMSprop learning rate (DC: 2.5e-4)")
    g.add_argument("--l2", type=float, default=1e-4, help="L2 penalty on the hidden layer's weights (DC: 1e-4)")
    g.add_argument("--batch-size", type=int, default=64, help="classifier mini-batch (DC: 64)")
    g.add_argument("--epochs", type=int, default=100, help="maximum epochs (DC: 100)")
    g.add_argument("--patience", type=int, default=5,
                   help="stop after this many epochs without a better validation accuracy "
                        "(SentEval's tenacity 5; 0: never stop early)")
    g.add_argument("--seed", type=int, default=1111, help="classifier seed (SentEval's 1111)")
    return p


def parse_args(argv=None):
    parser = get_parser()
    args = parse_with_encoders(parser, argv)
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = [t for t in tasks if t not in TASK_FILE]
    if unknown or not tasks:
        parser.error(f"--tasks: unknown task(s) {', '.join(unknown) or '(none given)'}; "
                     f"choose from {', '.join(TASK_FILE)}")
    args.tasks = tasks
    for name in ("max_tokens", "batch_size", "epochs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    for name in ("max_train", "patience"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must be >= 0")
    return args


def encode_task(data, path: str, encode: Callable[[str], str], dictionary, max_positions) -> Tuple[Dict, float]:
    """Token tensors per split and the fraction of ``<unk>`` tokens."""
    tokens, n_tok, n_unk = {}, 0, 0
    unk = dictionary.unk()
    for split in SPLITS:
        out = []
        for sentence, lineno in zip(data[split]["sentences"], data[split]["lines"]):
            t = dictionary.encode_line(encode(sentence), add_if_not_exist=False, append_eos=True).long()
            if max_positions is not None and len(t) > max_positions:
                raise ProbingDataError(f"{path}:{lineno}: the sentence has {len(t)} tokens, more than the "
                                       f"model's {max_positions} source positions")
            n_tok += len(t) - 1
            n_unk += int(t.eq(unk).sum())
            out.append(t)
        tokens[split] = out
    return tokens, n_unk / max(n_tok, 1)


def _max_source_positions(model, task):
    from fairseq import utils

    mp = utils.resolve_max_positions(task.max_positions(), model.max_positions())
    return mp[0] if isinstance(mp, tuple) else mp


def category_averages(results: Dict[str, Dict]) -> Dict[str, float]:
    out = {}
    for cat in CATEGORIES:
        accs = [r["test_acc"] for t, r in results.items() if TASK_CATEGORY[t] == cat]
        if accs:
            out[cat] = sum(accs) / len(accs)
    if results:
        out["All"] = sum(r["test_acc"] for r in results.values()) / len(results)
    return out


def short_names(paths: Sequence[str]) -> List[str]:
    """Column labels: the file names, or more of the path where they collide."""
    for depth in (1, 2, 3):
        names = [os.path.join(*os.path.normpath(p).split(os.sep)[-depth:]) for p in paths]
        if len(set(names)) == len(names):
            return names
    return list(paths)


def format_table(summary: Dict) -> str:
    ckpts = summary["checkpoints"]
    names = short_names([c["path"] for c in ckpts])
    width = max([10] + [len(n) for n in names])
    lines = [f"{'task':<10} {'category':<10} " + " ".join(f"{n:>{width}}" for n in names)]
    for task in summary["tasks"]:
        accs = " ".join(f"{100 * c['results'][task]['test_acc']:>{width}.2f}" for c in ckpts)
        lines.append(f"{task:<10} {TASK_CATEGORY[task]:<10} {accs}")
    for key in list(CATEGORIES) + ["All"]:
        if all(key in c["averages"] for c in ckpts):
            accs = " ".join(f"{100 * c['averages'][key]:>{width}.2f}" for c in ckpts)
            lines.append(f"{'avg':<10} {key:<10} {accs}")
    return "\n".join(lines)


def main(argv=None):
    install_excepthook()
    setup_logging()
    args = parse_args(argv)
    paths = checkpoint_paths(args.path)
    check_data_dir(args.data)
    check_encoder_files(args)
    if args.download:
        download_probing(args.tasks, args.probing_dir, args.download_url)
    # read (and check) every task before any model work
    data = {}
    for task_name in args.tasks:
        path = probing_file(args.probing_dir, task_name)
        d = read_probing_file(path)
        if args.max_train:
            for key in d["tr"]:
                d["tr"][key] = d["tr"][key][:args.max_train]
        classes, labels = label_index(d, path)
        data[task_name] = (path, d, classes, labels)
    import torch

    set_tool_threads()
    device = "cuda" if torch.cuda.is_available() and not args.cpu else "cpu"
    encode = build_encoders(args)
    checkpoints = []
    for ckpt in paths:
        model, task, arch = load_checkpoint(ckpt, args.data, device)
        src_dict = task.source_dictionary
        left_pad = bool(getattr(task.cfg, "left_pad_source", True))
        max_pos = _max_source_positions(model, task)
        results = {}
        for task_name in args.tasks:
            path, d, classes, labels = data[task_name]
            tokens, unk_rate = encode_task(d, path, encode, src_dict, max_pos)
            x = {s: sentence_features(model, tokens[s], src_dict.pad(), src_dict.eos(), left_pad=left_pad,
                                      kinds=("mean",), max_tokens=args.max_tokens, device=device)["mean"]
                 for s in SPLITS}
            res = probe_task(x, labels, len(classes), args.hidden, args.dropout, lr=args.lr, l2=args.l2,
                             batch_size=args.batch_size, epochs=args.epochs, patience=args.patience,
                             seed=args.seed)
            res.update(num_classes=len(classes), unk_rate=unk_rate,
                       **{f"n_{s}": len(tokens[s]) for s in SPLITS})
            if unk_rate > 0.05:
                logger.warning("%s: %.1f%% of %s's tokens are <unk>: is the preprocessing (--tokenizer, --bpe) "
                               "the model's?", ckpt, 100 * unk_rate, task_name)
            logger.info("%s %s: test %.2f%% (valid %.2f%%, hidden %d, dropout %.1f, epoch %d)", ckpt, task_name,
                        100 * res["test_acc"], 100 * res["valid_acc"], res["hidden"], res["dropout"],
                        res["best_epoch"])
            results[task_name] = res
        checkpoints.append({"path": ckpt, "arch": arch, "feature_dim": int(x["tr"].size(1)),
                            "results": results, "averages": category_averages(results)})
        del model
    summary = {
        "tasks": args.tasks,
        "categories": {t: TASK_CATEGORY[t] for t in args.tasks},
        "representation": "mean of the top encoder layer's states over real positions (</s> included)",
        "reported": "accuracy on the te split; hidden size, dropout and epoch chosen on va",
        "classifier": {"type": "Linear-Dropout-Sigmoid-Linear (SentEval MLP)" if any(args.hidden)
                       else "logistic regression", "hidden": args.hidden, "dropout": args.dropout,
                       "optimizer": "RMSprop", "lr": args.lr, "l2_hidden": args.l2, "batch_size": args.batch_size,
                       "max_epochs": args.epochs, "patience": args.patience, "seed": args.seed},
        "preprocessing": {"tokenizer": args.tokenizer, "bpe": args.bpe},
        "max_train": args.max_train,
        "probing_dir": args.probing_dir,
        "checkpoints": checkpoints,
    }
    os.makedirs(args.out, exist_ok=True)
    json_path = os.path.join(args.out, "probing.json")
    with open(json_path, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
    print("test accuracy (%), model selected on va")
    print(format_table(summary))
    logger.info("wrote %s", json_path)
    return summary


if __name__ == "__main__":
    main()
