"""Bag-of-words prediction from a fixed sentence representation (Weng et al.,
AAAI 2020, GRET, Sect. 3.6 and Table 5).

A predictor is trained to maximise P(y_bow | s), y_bow the set of words of
the target sentence, from a frozen representation s of the source sentence,
and is scored by the share of the reference words found among its K most
probable words. Three representations are compared (Table 5):

* ``gret``: GRET's global state s^M, ``encoder_out["gret_global"][0]``
  (only ``transformer_gret`` checkpoints have it; asking it of another
  checkpoint stops with one line: use ``--representations last,average``);
* ``last`` ("last encoder state"): the top encoder layer's state at the last
  real source position, which is the final ``</s>`` (fairseq appends it to
  every source), wherever the padding is;
* ``average`` ("averaging all local states"): the mean of the top encoder
  layer's states over the real source positions, ``</s>`` included.

"Top encoder layer" means ``encoder_out["encoder_out"]``, the states the
decoder attends to. The model is frozen (eval mode, ``torch.no_grad()``);
features are extracted once per split in batches of ``--max-tokens``, with
the source context when a ``transformer_ctxenc`` model is run with its
``document_translation`` task.

What the paper states: a feed-forward predictor "which maps the global state
to the target word embedding matrix", trained by maximising P(y_bow|s), and
precision of the target words in the top-K words of the predicted
distribution, K = 200, 500, 1000; the rest is deferred to Weng et al.
(EMNLP 2017), which is not among the specifications here. Our choices:

* predictor: h = W_2 tanh(W_1 s + b_1) + b_2 (hidden and output size: the
  target embedding size), logits = h E^T with E the model's target
  (decoder input) embedding matrix, frozen; softmax over the target
  vocabulary. fairseq's special symbols (``<s>``, ``<pad>``, ``</s>``,
  ``<unk>``) are neither targets nor predictions;
* words = entries of the target dictionary (subword units when the data is
  BPE / sentencepiece), y_bow = the distinct ones of the reference;
* loss: -sum over w in y_bow of log p(w|s) (the log of P(y_bow|s) as a
  product over the bag), averaged over sentences; Adam (``--lr`` 1e-3),
  mini-batches of ``--batch-size`` 64 sentences, ``--epochs`` 10, keeping
  the epoch with the lowest loss on ``--valid-subset`` (the last epoch when
  it is empty or ``none``);
* precision@K of a sentence = |top-K(p) intersect y_bow| / |y_bow|, averaged
  over the sentences of ``--gen-subset`` with a non-empty bag. (Dividing by
  K instead could not exceed |y_bow|/K, about 3% at K = 1000 for
  30-word sentences, against the paper's 64-81%, so the paper's
  "precision" must be this ratio.) A K at least as large as the vocabulary
  (less the special symbols) gives 1 and is flagged in the JSON.

``--train-limit N`` trains on a random N sentences of ``--train-subset``
(seeded; 0: all of it). Prints a table of precisions (%) per representation
and K, and writes ``OUT/bow_prediction.json``. Several checkpoints:
``--path a.pt:b.pt`` and/or ``--path`` repeated (each on its own).

Usage::

    python3 -m fairseq_ctx.analysis.bow_prediction DATA-BIN --path gret.pt \\
        --out DIR [--representations gret,last,average] [--topk 200,500,1000] \\
        [--train-subset train] [--valid-subset valid] [--gen-subset test] \\
        [--epochs 10] [--lr 1e-3] [--batch-size 64] [--train-limit N] [--cpu]
"""
from __future__ import annotations  # torch is imported by the analysis, not for --help

import argparse
import copy
import functools
import json
import logging
import os
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

import numpy as np

from fairseq_ctx.analysis.probing import NoGlobalStateError, pool_encoder_out, run_encoder
from fairseq_ctx.cli import (add_checkpoint_args, check_data_dir, checkpoint_paths, comma_list, load_checkpoint,
                             set_tool_threads, setup_logging)
from fairseq_ctx.errors import FairseqCtxError, install_excepthook

if TYPE_CHECKING:
    import torch

logger = logging.getLogger("fairseq_ctx.analysis.bow_prediction")

# representation name (Table 5) -> pooling of probing.pool_encoder_out
REPRESENTATIONS = {"gret": "gret", "last": "last", "average": "mean"}


# ---------------------------------------------------------------------------
# bags of words and precision
# ---------------------------------------------------------------------------

def bag_matrix(bags: Sequence[torch.Tensor], vocab_size: int, num_special: int) -> torch.Tensor:
    """Multi-hot B x V float matrix of the bags (token id tensors, duplicates
    and special symbols allowed: ids below ``num_special`` are dropped)."""
    import torch

    m = torch.zeros(len(bags), vocab_size)
    if bags:
        lengths = torch.tensor([len(b) for b in bags])
        rows = torch.repeat_interleave(torch.arange(len(bags)), lengths)
        cols = torch.cat([b.long() for b in bags]) if len(rows) else torch.zeros(0, dtype=torch.long)
        m[rows, cols] = 1.0
    m[:, :num_special] = 0.0
    return m


def topk_hits(logits: torch.Tensor, bag: torch.Tensor, ks: Sequence[int], num_special: int) -> Dict[int, torch.Tensor]:
    """Per sentence, how many of its bag's words are among the K best
    predictions (special symbols never predicted). logits, bag: B x V."""
    logits = logits.clone()
    logits[:, :num_special] = float("-inf")
    kmax = min(max(ks), logits.size(1) - num_special)
    top = logits.topk(kmax, dim=1).indices  # B x kmax, best first
    found = bag.gather(1, top)  # 1 where the predicted word is in the bag
    cum = found.cumsum(dim=1)
    return {k: cum[:, min(k, kmax) - 1] for k in ks}


def topk_precision(logits: torch.Tensor, bag: torch.Tensor, ks: Sequence[int], num_special: int = 0) -> Dict[int, float]:
    """Mean over sentences with a non-empty bag of |top-K intersect bag| / |bag|."""
    sizes = bag.sum(dim=1)
    keep = sizes > 0
    hits = topk_hits(logits, bag, ks, num_special)
    return {k: float((h[keep] / sizes[keep]).mean()) if bool(keep.any()) else float("nan") for k, h in hits.items()}


@functools.lru_cache(maxsize=None)
def _bow_predictor_class():
    """``BowPredictor``, a ``torch.nn.Module``: defined on first use, so that
    importing this module (``--help``) does not import torch."""
    from torch import nn

    class BowPredictor(nn.Module):
        """h = W_2 tanh(W_1 s + b_1) + b_2; logits = h E^T (E frozen)."""

        def __init__(self, input_dim: int, embeddings: torch.Tensor):
            super().__init__()
            dim = embeddings.size(1)
            self.ffn = nn.Sequential(nn.Linear(input_dim, dim), nn.Tanh(), nn.Linear(dim, dim))
            self.register_buffer("embeddings", embeddings.detach().clone().float())

        def forward(self, s: torch.Tensor) -> torch.Tensor:
            return self.ffn(s) @ self.embeddings.t()

    BowPredictor.__qualname__ = "BowPredictor"  # pickles as ...bow_prediction.BowPredictor (module __getattr__)
    return BowPredictor


def __getattr__(name):
    if name == "BowPredictor":
        return _bow_predictor_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def bow_loss(logits: torch.Tensor, bag: torch.Tensor, num_special: int) -> torch.Tensor:
    """-log P(y_bow|s) = -sum over the bag of log softmax, mean over sentences."""
    import torch.nn.functional as F

    logits = logits.clone()
    logits[:, :num_special] = float("-inf")
    logp = F.log_softmax(logits, dim=-1)
    return -(logp[:, num_special:] * bag[:, num_special:]).sum(dim=1).mean()


# ---------------------------------------------------------------------------
# features of a split
# ---------------------------------------------------------------------------

class SplitFeatures:
    """Frozen features (N x C per representation) and target bags of a split."""

    def __init__(self, feats: Dict[str, torch.Tensor], bags: List[torch.Tensor]):
        self.feats = feats
        self.bags = bags

    def __len__(self):
        return len(self.bags)


def extract_split(model, task, split: str, reps: Sequence[str], max_tokens: int, limit: int = 0, seed: int = 1,
                  device: str = "cpu", path: str = "") -> SplitFeatures:
    """Run the frozen encoder over ``split`` (all of it, or a random
    ``limit`` sentences) and keep the representations and target bags."""
    import torch
    from fairseq.data import data_utils

    dataset = task.dataset(split)
    n = len(dataset)
    indices = np.arange(n)
    if limit and limit < n:
        indices = np.sort(np.random.RandomState(seed).choice(n, limit, replace=False))
    indices = indices[np.argsort(dataset.num_tokens_vec(indices) if hasattr(dataset, "num_tokens_vec")
                                 else np.array([dataset.num_tokens(i) for i in indices]), kind="stable")]
    batches = data_utils.batch_by_size(indices, dataset.num_tokens, max_tokens=max_tokens, max_sentences=256)
    kinds = [REPRESENTATIONS[r] for r in reps]
    chunks: Dict[str, List[torch.Tensor]] = {r: [] for r in reps}
    bags: List[torch.Tensor] = []
    pad = task.source_dictionary.pad()
    tgt_special = task.target_dictionary.nspecial
    model.eval()
    with torch.no_grad():
        for batch in batches:
            sample = dataset.collater([dataset[int(i)] for i in batch])
            if hasattr(task, "model_input"):
                sample = task.model_input([model], sample)
            net_input = {k: (v.to(device) if torch.is_tensor(v) else v) for k, v in sample["net_input"].items()}
            enc = run_encoder(model, net_input)
            try:
                pooled = pool_encoder_out(enc, net_input["src_tokens"], pad, kinds)
            except NoGlobalStateError:
                raise NoGlobalStateError(
                    f"{path}: the checkpoint has no GRET global state (encoder_out['gret_global']; not a "
                    "transformer_gret model), so it has no 'gret' representation: use --representations "
                    "last,average") from None
            for r, kind in zip(reps, kinds):
                chunks[r].append(pooled[kind].float().cpu())
            target = sample["target"]
            for row in target:
                row = row[row >= tgt_special]
                bags.append(torch.unique(row).to(torch.int32).cpu())
    feats = {r: torch.cat(c) if c else torch.zeros(0, 0) for r, c in chunks.items()}
    return SplitFeatures(feats, bags)


# ---------------------------------------------------------------------------
# training and evaluation
# ---------------------------------------------------------------------------

def _batches(n: int, batch_size: int, gen: Optional[torch.Generator] = None):
    import torch

    order = torch.randperm(n, generator=gen) if gen is not None else torch.arange(n)
    for i in range(0, n, batch_size):
        yield order[i:i + batch_size]


def mean_loss(predictor: torch.nn.Module, x: torch.Tensor, bags: List[torch.Tensor], vocab: int, num_special: int,
              batch_size: int = 256) -> float:
    import torch

    predictor.eval()
    total, n = 0.0, 0
    with torch.no_grad():
        for idx in _batches(len(bags), batch_size):
            bag = bag_matrix([bags[i] for i in idx.tolist()], vocab, num_special).to(x.device)
            total += float(bow_loss(predictor(x[idx]), bag, num_special)) * len(idx)
            n += len(idx)
    return total / max(n, 1)


def evaluate(predictor: torch.nn.Module, x: torch.Tensor, bags: List[torch.Tensor], ks: Sequence[int], vocab: int,
             num_special: int, batch_size: int = 256) -> Dict[int, float]:
    import torch

    predictor.eval()
    sums = {k: 0.0 for k in ks}
    n = 0
    with torch.no_grad():
        for idx in _batches(len(bags), batch_size):
            bag = bag_matrix([bags[i] for i in idx.tolist()], vocab, num_special).to(x.device)
            sizes = bag.sum(dim=1)
            keep = sizes > 0
            hits = topk_hits(predictor(x[idx]), bag, ks, num_special)
            for k in ks:
                sums[k] += float((hits[k][keep] / sizes[keep]).sum())
            n += int(keep.sum())
    return {k: (sums[k] / n if n else float("nan")) for k in ks}


def train_predictor(train: SplitFeatures, valid: Optional[SplitFeatures], rep: str, embeddings: torch.Tensor,
                    num_special: int, epochs: int = 10, lr: float = 1e-3, batch_size: int = 64, seed: int = 1,
                    device: str = "cpu"):
    import torch

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x = train.feats[rep].to(device)
    vocab = embeddings.size(0)
    predictor = _bow_predictor_class()(x.size(1), embeddings).to(device)
    opt = torch.optim.Adam(predictor.ffn.parameters(), lr=lr)
    history, best = [], (float("inf"), None, 0)
    for epoch in range(1, epochs + 1):
        predictor.train()
        total = 0.0
        for idx in _batches(len(train), batch_size, gen):
            bag = bag_matrix([train.bags[i] for i in idx.tolist()], vocab, num_special).to(device)
            loss = bow_loss(predictor(x[idx]), bag, num_special)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        entry = {"epoch": epoch, "train_loss": total / max(len(train), 1)}
        if valid is not None and len(valid):
            entry["valid_loss"] = mean_loss(predictor, valid.feats[rep].to(device), valid.bags, vocab, num_special)
            if entry["valid_loss"] < best[0]:
                best = (entry["valid_loss"], copy.deepcopy(predictor.state_dict()), epoch)
        history.append(entry)
        logger.info("%s epoch %d: %s", rep, epoch, ", ".join(f"{k} {v:.4f}" for k, v in entry.items() if k != "epoch"))
    if best[1] is not None:
        predictor.load_state_dict(best[1])
        chosen = best[2]
    else:
        chosen = epochs
    return predictor, chosen, history


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------

_topk_list = comma_list(int, lambda v: v >= 1, "integers >= 1")


def _rep_list(text: str) -> List[str]:
    values = [v.strip() for v in text.split(",") if v.strip()]
    bad = [v for v in values if v not in REPRESENTATIONS]
    if bad or not values:
        raise argparse.ArgumentTypeError(f"unknown representation(s) {', '.join(bad) or '(none)'}; "
                                         f"choose from {', '.join(REPRESENTATIONS)}")
    return values


def get_parser():
    p = argparse.ArgumentParser(
        prog="fairseq-ctx-bow-prediction",
        description="Bag-of-words prediction from frozen sentence representations (GRET Table 5). "
                    "See the module docstring (python3 -m pydoc fairseq_ctx.analysis.bow_prediction).",
        epilog="example:\n"
               "  fairseq-ctx-bow-prediction data/bin --path runs/gret/checkpoint_best.pt --out bow/ \\\n"
               "      --representations gret,last,average --topk 200,500,1000 --train-limit 100000",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_checkpoint_args(p)
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (bow_prediction.json)")
    p.add_argument("--representations", type=_rep_list, default=list(REPRESENTATIONS),
                   help="comma-separated subset of gret, last, average (default: all three)")
    p.add_argument("--topk", type=_topk_list, default=[200, 500, 1000], help="K values (default 200,500,1000)")
    p.add_argument("--train-subset", default="train")
    p.add_argument("--valid-subset", default="valid", help="epoch selection by loss ('none': last epoch)")
    p.add_argument("--gen-subset", default="test", help="the split scored")
    p.add_argument("--train-limit", type=int, default=0, metavar="N",
                   help="train on a random N sentences of --train-subset (0: all)")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate")
    p.add_argument("--batch-size", type=int, default=64, help="predictor mini-batch (sentences)")
    p.add_argument("--seed", type=int, default=1)
    return p


def parse_args(argv=None):
    parser = get_parser()
    args = parser.parse_args(argv)
    for name in ("max_tokens", "batch_size", "epochs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.train_limit < 0:
        parser.error("--train-limit must be >= 0")
    return args


def _load_split(task, split: str, path: str):
    try:
        task.load_dataset(split)
    except FileNotFoundError as e:
        raise FairseqCtxError(f"{path}: cannot load split '{split}' from {task.cfg.data}: {e}") from None


def analyse_checkpoint(path: str, args, device: str) -> Dict:
    model, task, arch = load_checkpoint(path, args.data, device)
    reps = args.representations
    if "gret" in reps and not hasattr(model.encoder, "gret_global"):
        raise NoGlobalStateError(
            f"{path}: the checkpoint ({arch}) has no GRET global state (encoder_out['gret_global']), so it has "
            "no 'gret' representation: use --representations last,average")
    splits = {"train": args.train_subset, "test": args.gen_subset}
    if args.valid_subset and args.valid_subset != "none":
        splits["valid"] = args.valid_subset
    feats = {}
    for role, split in splits.items():
        _load_split(task, split, path)
        feats[role] = extract_split(model, task, split, reps, args.max_tokens,
                                    limit=args.train_limit if role == "train" else 0, seed=args.seed,
                                    device=device, path=path)
        logger.info("%s: %s features of %d sentences", path, split, len(feats[role]))
    if not len(feats["train"]) or not len(feats["test"]):
        raise FairseqCtxError(f"{path}: the train or test split is empty")
    tgt = task.target_dictionary
    embeddings = model.decoder.embed_tokens.weight.detach().float()
    num_special = tgt.nspecial
    vocab = len(tgt)
    if embeddings.size(0) != vocab:
        raise FairseqCtxError(f"{path}: target embeddings have {embeddings.size(0)} rows, the target dictionary "
                              f"{vocab} entries")
    results = {}
    for rep in reps:
        predictor, epoch, history = train_predictor(
            feats["train"], feats.get("valid"), rep, embeddings, num_special, epochs=args.epochs, lr=args.lr,
            batch_size=args.batch_size, seed=args.seed, device=device)
        precision = evaluate(predictor, feats["test"].feats[rep].to(device), feats["test"].bags, args.topk, vocab,
                             num_special)
        results[rep] = {"precision": {str(k): v for k, v in precision.items()}, "chosen_epoch": epoch,
                        "feature_dim": int(feats["train"].feats[rep].size(1)), "history": history}
        logger.info("%s %s: %s", path, rep, ", ".join(f"top-{k} {100 * v:.2f}%" for k, v in precision.items()))
    bag_sizes = [len(b) for b in feats["test"].bags]
    return {
        "path": path, "arch": arch, "results": results,
        "vocab_size": vocab, "predictable_words": vocab - num_special,
        "k_at_least_vocab": [k for k in args.topk if k >= vocab - num_special],
        "num_train": len(feats["train"]), "num_valid": len(feats["valid"]) if "valid" in feats else 0,
        "num_test": len(feats["test"]),
        "mean_test_bag_size": float(np.mean(bag_sizes)) if bag_sizes else 0.0,
    }


def format_table(summary: Dict) -> str:
    ks = summary["topk"]
    lines = []
    for c in summary["checkpoints"]:
        lines.append(f"{c['path']} ({c['arch']}): precision (%) of the reference words in the top-K")
        lines.append(f"{'':<10}" + "".join(f"{'Top-' + str(k):>10}" for k in ks))
        for rep, r in c["results"].items():
            lines.append(f"{rep:<10}" + "".join(f"{100 * r['precision'][str(k)]:>10.2f}" for k in ks))
    return "\n".join(lines)


def main(argv=None):
    install_excepthook()
    setup_logging()
    args = parse_args(argv)
    paths = checkpoint_paths(args.path)
    subsets = [args.train_subset, args.gen_subset] + ([args.valid_subset] if args.valid_subset not in (None, "none") else [])
    for subset, flag in zip(subsets, ("--train-subset", "--gen-subset", "--valid-subset")):
        check_data_dir(args.data, subsets=[subset], subset_flag=flag)
    import torch

    set_tool_threads()
    device = "cuda" if torch.cuda.is_available() and not args.cpu else "cpu"
    checkpoints = [analyse_checkpoint(p, args, device) for p in paths]
    summary = {
        "topk": args.topk,
        "precision": "mean over test sentences with a non-empty bag of |top-K predictions intersect reference "
                     "bag| / |reference bag| (special symbols excluded)",
        "representations": {"gret": "GRET global state s^M", "last": "top encoder state at the last real "
                            "position (</s>)", "average": "mean of the top encoder states over real positions"},
        "predictor": "W2 tanh(W1 s + b1) + b2, dot the frozen target embeddings, softmax; loss -sum_bag log p",
        "settings": {"train_subset": args.train_subset, "valid_subset": args.valid_subset,
                     "gen_subset": args.gen_subset, "train_limit": args.train_limit, "epochs": args.epochs,
                     "lr": args.lr, "optimizer": "Adam", "batch_size": args.batch_size, "seed": args.seed},
        "checkpoints": checkpoints,
    }
    os.makedirs(args.out, exist_ok=True)
    json_path = os.path.join(args.out, "bow_prediction.json")
    with open(json_path, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
    print(format_table(summary))
    logger.info("wrote %s", json_path)
    return summary


if __name__ == "__main__":
    main()
