"""Which context words a translation relies on: PECoRe (Sarti et al., ICLR
2024) for the document task's models, with erasure as its faithfulness check.

An :class:`Item` is one sentence to analyse: its source, its source context
sentences (oldest first), the translation analysed (the model's own or a
reference) and, for a model that glues target context (``--concat-context
--target-context``), the previous target sentences.  The context reaches the
model exactly as the task gives it (``DocumentTranslationTask.build_context_dataset``:
separate input, glued to the source, or ignored by a sentence-level model).

1. **Context-sensitive tokens** (PECoRe's CTI, Sect. 3.1).  The translation
   is scored by teacher forcing with the item's context and with none (the
   ``none`` condition of :mod:`fairseq_ctx.evaluation.conditions`; a 2-to-2
   model loses its target prefix too).  Per target token ``t``, in bits:

   * P-CXMI ``log2 p_ctx(y_t) - log2 p_none(y_t)`` (Fernandes et al. 2023);
   * KL ``sum_v p_ctx(v) log2(p_ctx(v) / p_none(v))`` (PECoRe's default);
   * whether the argmax changes, and the no-context choice ``ỹ_t``
     (the argmax of ``p_none`` after the same prefix).

   A token is *sensitive* when ``|m_t|`` (``m`` the chosen metric) exceeds
   ``mean + k * sd`` of ``|m|`` over the set (PECoRe's standard-deviation
   threshold, ``k`` = ``std``; ``scope="item"`` takes each item's own tokens
   as inseq does) and the floor ``min_bits`` (1e-4 bits), so that a model
   that ignores its context, whose ``m`` is exactly 0, gets none.

2. **Attribution** (PECoRe's CCI, Sect. 3.2; contrastive explanations of
   Yin & Neubig 2022).  The target of a sensitive token is

       f_t = log p_ctx(ŷ_t) - log p_ctx(ỹ_t)

   with ``ŷ_t`` the analysed token: what makes the model prefer what it says
   over what it would say without the context, as log-odds (nats).  Where
   ``ỹ_t = ŷ_t`` it is ``log p_ctx(ŷ_t)`` (a non-contrastive target, as
   inseq's attribute-context).  Log-odds rather than PECoRe's difference of
   probabilities: the softmax's normaliser cancels, so the gradient does not
   vanish once the model is sure (``p(ŷ)`` near 1, as a tiny model trained
   on the synthetic task of :mod:`.synthetic_context_task` is).
   Each input token ``i`` (context, source and target-context tokens) gets
   gradient x input on its embedding ``x_i``, the vector ``x_id *
   df_t/dx_id``, aggregated over ``d`` by its L2 norm (``aggregate="norm"``,
   inseq's and PECoRe's default: how much the token matters, unsigned) or
   its sum (``"sum"``: the first-order change of ``f_t``, signed).  It is
   computed exactly, whatever the model does with its embeddings (a joint
   batch of sentences and contexts, concatenation): for the pass, each
   input position gets a token id of its own whose embedding is the
   original one scaled elementwise by ``alpha_i``; then ``df_t/dalpha_id``
   at ``alpha = 1`` is ``x_id * df_t/dx_id`` (the separators, ``</s>`` and
   padding keep their ids, so the models' masks are unchanged).  One
   row per (item, sensitive token), one backward pass per batch (the rows
   do not interact: dropout is off).

3. **Erasure**.  ``f_t`` scored again with one context token deleted, and
   with one context sentence deleted (on both sides for a 2-to-2 model):
   ``e = f_t(full) - f_t(without it)``; positive when the erased part
   supported the choice.  Batched, without gradient.

Tokens of a context sentence are reported without its ``</s>``; the
separators' own attributions are not reported.  Single models only (an
ensemble has no one embedding to attribute to).
"""
import contextlib
import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pad_sequence

LN2 = math.log(2.0)
METRICS = ("kl", "pcxmi")
# a token's attribution from its gradient x input vector: the L2 norm (inseq's and PECoRe's default), or the sum (signed)
AGGREGATES = ("norm", "sum")


@dataclass
class Item:
    """One sentence to analyse (token tensors, each ending with ``</s>``)."""

    source: Tensor
    target: Tensor
    context: List[Tensor] = field(default_factory=list)
    target_context: List[Tensor] = field(default_factory=list)

    def without_context(self) -> "Item":
        return Item(self.source, self.target)


# ----------------------------------------------------------------- thresholds

def sensitive_positions(scores: Sequence[np.ndarray], std: float = 1.0, scope: str = "set",
                        min_bits: float = 1e-4) -> Tuple[List[np.ndarray], List[float]]:
    """Positions of each item's sensitive tokens and the threshold used for
    each: ``|m| > mean + std * sd`` of ``|m|`` (over all items' tokens for
    ``scope="set"``, over the item's for ``"item"``) and ``|m| > min_bits``."""
    if scope not in ("set", "item"):
        raise ValueError(f"scope must be 'set' or 'item', got {scope!r}")
    mags = [np.abs(np.asarray(s, dtype=np.float64)) for s in scores]

    def cut(values: np.ndarray) -> float:
        if len(values) == 0:
            return math.inf
        sd = float(values.std(ddof=1)) if len(values) > 1 else 0.0
        return float(values.mean()) + std * sd

    if scope == "set":
        whole = cut(np.concatenate(mags)) if mags else math.inf
        cuts = [whole] * len(mags)
    else:
        cuts = [cut(m) for m in mags]
    return [np.flatnonzero((m > c) & (m > min_bits)) for m, c in zip(mags, cuts)], cuts


# ----------------------------------------------------------------- probes

class _ProbedEmbedding(nn.Module):
    """A token embedding in which ids from ``offset`` on are probes: probe
    ``k`` is token ``tokens[k]`` with its embedding scaled elementwise by
    ``alpha[k]`` (one scale per dimension)."""

    def __init__(self, inner: nn.Module, tokens: Tensor, alpha: Tensor, offset: int):
        super().__init__()
        self.inner, self.probe_tokens, self.alpha, self.offset = inner, tokens, alpha, offset
        # what the models read from their embedding besides calling it
        self.weight = inner.weight
        self.padding_idx = getattr(inner, "padding_idx", None)
        self.embedding_dim = inner.embedding_dim
        self.num_embeddings = inner.num_embeddings

    def forward(self, tokens: Tensor) -> Tensor:
        if len(self.probe_tokens) == 0:  # nothing probed in this chunk: the clamp below would index nothing
            return self.inner(tokens)
        probe = tokens >= self.offset
        k = (tokens - self.offset).clamp(min=0, max=len(self.probe_tokens) - 1)
        x = self.inner(torch.where(probe, self.probe_tokens[k], tokens))   # B x T x C
        scale = self.alpha[k][..., :x.size(-1)]   # B x T x C
        return x * torch.where(probe.unsqueeze(-1), scale, torch.ones_like(scale)).to(x.dtype)


@contextlib.contextmanager
def _checkpointing_off(model: nn.Module):
    """The model's layers as they are without ``--checkpoint-activations``
    for the block: a checkpoint trained with it is rebuilt with fairseq's
    reentrant checkpoint wrapper around its layers, which stops
    ``torch.autograd.grad`` ("Checkpointing is not compatible with
    .grad()") and saves nothing at inference. Each wrapped layer's own
    forward (``precheckpoint_forward``, fairseq's and ours) is put back,
    and the wrapper after the block (fairseq's ``unwrap_checkpoint`` would
    remove it for good)."""
    wrapped = [m for m in model.modules() if hasattr(m, "precheckpoint_forward")]
    forwards = [m.forward for m in wrapped]
    for m in wrapped:
        m.forward = m.precheckpoint_forward
    try:
        yield
    finally:
        for m, forward in zip(wrapped, forwards):
            m.forward = forward


class _Probes:
    """Context manager: the model's token embeddings (every module that holds
    the encoder's or decoder's ``embed_tokens``) answer probe ids."""

    def __init__(self, model: nn.Module, tokens: Tensor, offset: int):
        self.model = model
        # one scale per probe and embedding dimension (the widest of the model's embeddings)
        dim = max(model.encoder.embed_tokens.embedding_dim, model.decoder.embed_tokens.embedding_dim)
        self.alpha = torch.ones(len(tokens), dim, dtype=torch.float32, device=tokens.device, requires_grad=True)
        self.tokens, self.offset = tokens, offset
        self._swapped: List[Tuple[nn.Module, str, nn.Module]] = []

    def __enter__(self):
        originals = {id(e): e for e in (self.model.encoder.embed_tokens, self.model.decoder.embed_tokens)}
        wrappers = {k: _ProbedEmbedding(e, self.tokens, self.alpha, self.offset) for k, e in originals.items()}
        for parent in list(self.model.modules()):
            for name, child in list(parent._modules.items()):
                if child is not None and id(child) in wrappers and not isinstance(parent, _ProbedEmbedding):
                    parent._modules[name] = wrappers[id(child)]
                    self._swapped.append((parent, name, child))
        return self.alpha

    def __exit__(self, *exc):
        for parent, name, child in self._swapped:
            parent._modules[name] = child
        return False


# ----------------------------------------------------------------- the analysis

class ContextAttributor:
    """Sensitivity, attribution and erasure for one model of the document
    task (see the module docstring)."""

    def __init__(self, model, task, batch_size: int = 16, device: Optional[str] = None, aggregate: str = "norm"):
        if batch_size < 1:
            raise ValueError(f"--batch-size must be >= 1, got {batch_size}")
        if aggregate not in AGGREGATES:
            raise ValueError(f"--attribution-aggregate must be one of {AGGREGATES}, got {aggregate!r}")
        self.aggregate = aggregate
        # not ``model.eval()``'s value: after fairseq's make_generation_fast_ (every hub interface
        # calls it) ``train`` is a function that returns None, so ``eval()`` does too
        model.eval()
        self.model = model
        self.task = task
        self.batch_size = batch_size
        self.device = device or next(model.parameters()).device
        self.src_dict, self.tgt_dict = task.source_dictionary, task.target_dictionary
        self.target_context = bool(getattr(task, "glues_target_context", False))
        self.sep = getattr(task, "sep", None)
        self.tgt_sep = getattr(task, "tgt_sep", None)
        self.offset = max(len(self.src_dict), len(self.tgt_dict))

    # ------------------------------------------------------------ batches
    def _sample(self, items: Sequence[Item]) -> Tuple[dict, Tensor]:
        """A collated batch of ``items`` in the model's input, and per row
        the item's index in ``items``."""
        from fairseq import utils

        kwargs = {}
        if self.target_context:
            kwargs["target_contexts"] = [it.target_context for it in items]
        ds = self.task.build_context_dataset([it.source for it in items], [it.context for it in items],
                                             [it.target for it in items], model=self.model, **kwargs)
        sample = self.task.model_input([self.model], ds.collater([ds[i] for i in range(len(items))]))
        if str(self.device) != "cpu":
            sample = utils.move_to_cuda(sample, device=self.device)
        return sample, sample["id"]

    def _prefix_lengths(self, target: Tensor) -> Tensor:
        """Per row the forced target prefix's length (B): the tokens up to and
        including the last ``<sep>`` (each target-context sentence ends with
        one), 0 where there is none."""
        if not self.target_context:
            return target.new_zeros(target.size(0))
        cols = torch.arange(1, target.size(1) + 1, device=target.device)   # T
        return torch.where(target.eq(self.tgt_sep), cols, torch.zeros_like(cols)).max(dim=1).values

    def _current(self, sample) -> Tuple[Tensor, Tensor]:
        """``(lprobs, y)``: per row the log-probabilities at the analysed
        sentence's tokens (B x N x V, N the longest; a forced target prefix
        skipped) and those tokens (B x N; a shorter row's tail is filler)."""
        net_output = self.model(**sample["net_input"])
        lprobs = self.model.get_normalized_probs(net_output, log_probs=True).float()   # B x T x V
        target = sample["target"]   # B x T, right-padded: prefix, the sentence, </s>
        prefix = self._prefix_lengths(target)   # B
        n = target.ne(self.tgt_dict.pad()).sum(dim=1) - prefix   # B
        cols = torch.arange(int(n.max()), device=target.device)   # N
        index = (prefix.unsqueeze(1) + cols.unsqueeze(0)).clamp(max=target.size(1) - 1)   # B x N
        picked = lprobs.gather(1, index.unsqueeze(-1).expand(-1, -1, lprobs.size(-1)))   # B x N x V
        return picked, target.gather(1, index)

    def _chunks(self, n: int):
        for start in range(0, n, self.batch_size):
            yield range(start, min(start + self.batch_size, n))

    # ------------------------------------------------------------ 1. sensitivity
    def sensitivity(self, items: Sequence[Item]) -> List[Dict[str, np.ndarray]]:
        """Per item: ``pcxmi`` and ``kl`` (bits), ``changed`` (argmax with
        context differs from without), ``none_argmax`` and ``ctx_argmax``
        (token ids), one value per target token."""
        out: List[Optional[Dict[str, np.ndarray]]] = [None] * len(items)
        with torch.no_grad():
            for chunk in self._chunks(len(items)):
                part = [items[i] for i in chunk]
                s_ctx, r_ctx = self._sample(part)
                s_none, r_none = self._sample([it.without_context() for it in part])
                lp_ctx, y = self._current(s_ctx)   # B x N x V, B x N
                lp_none, _ = self._current(s_none)
                # the no-context batch's rows in the context batch's order
                where = torch.empty_like(r_none)
                where[r_none] = torch.arange(len(r_none), device=r_none.device)
                lp_none = lp_none[where[r_ctx]]
                gain = (lp_ctx.gather(-1, y.unsqueeze(-1)) - lp_none.gather(-1, y.unsqueeze(-1))).squeeze(-1)
                kl = (lp_ctx.exp() * (lp_ctx - lp_none)).sum(-1).clamp(min=0)
                a_ctx, a_none = lp_ctx.argmax(-1), lp_none.argmax(-1)
                res = {"pcxmi": gain / LN2, "kl": kl / LN2, "changed": a_ctx.ne(a_none),
                       "none_argmax": a_none, "ctx_argmax": a_ctx}
                res = {k: v.cpu().numpy() for k, v in res.items()}   # B x N each
                for b, i in enumerate(r_ctx.tolist()):
                    n = len(part[i].target)
                    out[chunk[i]] = {k: v[b, :n] for k, v in res.items()}
        return out

    # ------------------------------------------------------------ 2. attribution
    def _contrastive(self, lp: Tensor, y: Tensor, contrast: Tensor) -> Tensor:
        """``f = log p(ŷ) - log p(ỹ)``, or ``log p(ŷ)`` where they are the same (B)."""
        lp_y = lp.gather(-1, y.unsqueeze(-1)).squeeze(-1)
        lp_c = lp.gather(-1, contrast.unsqueeze(-1)).squeeze(-1)
        return torch.where(contrast.eq(y), lp_y, lp_y - lp_c)

    def _probe_inputs(self, net_input: dict, prefix_lengths: Tensor):
        """``net_input`` with every non-special source, context and
        target-prefix token replaced by a probe id; returns the new input, the
        original token of each probe, and per key the probe positions
        (``-1`` where none)."""
        specials_src = {self.src_dict.pad(), self.src_dict.eos(), self.src_dict.bos()}
        specials_tgt = {self.tgt_dict.pad(), self.tgt_dict.eos(), self.tgt_dict.bos()}
        if self.sep is not None:
            specials_src.add(self.sep)
            specials_tgt.add(self.tgt_sep)
        new, originals, where, count = dict(net_input), [], {}, 0
        keys = [k for k in ("src_tokens", "ctx_tokens") if k in net_input]
        if self.target_context:
            keys.append("prev_output_tokens")
        for key in keys:
            tokens = net_input[key]
            specials = specials_tgt if key == "prev_output_tokens" else specials_src
            probe = ~torch.isin(tokens, torch.tensor(sorted(specials), device=tokens.device))
            if key == "prev_output_tokens":
                # the forced prefix only: positions 1 .. prefix length (position 0 is </s>)
                cols = torch.arange(tokens.size(1), device=tokens.device).unsqueeze(0)
                probe &= (cols >= 1) & (cols <= prefix_lengths.unsqueeze(1))
            ids = torch.full_like(tokens, -1)
            ids[probe] = torch.arange(count, count + int(probe.sum()), device=tokens.device)
            originals.append(tokens[probe])
            count += int(probe.sum())
            new[key] = torch.where(probe, ids + self.offset, tokens)
            where[key] = ids
        return new, torch.cat(originals) if originals else torch.zeros(0, dtype=torch.long), where

    def attribute(self, items: Sequence[Item], positions: Sequence[np.ndarray],
                  contrasts: Sequence[np.ndarray]) -> List[List[Dict]]:
        """Per item, per sensitive position (``positions[i]``, with the
        no-context choices ``contrasts[i]`` at those positions): ``f`` and
        the gradient x input of every context, source and target-context
        token (see :meth:`_split`)."""
        rows = [(i, int(t), int(c)) for i, (ps, cs) in enumerate(zip(positions, contrasts)) for t, c in zip(ps, cs)]
        row_t = torch.tensor([t for _, t, _ in rows], dtype=torch.long)   # rows: position analysed
        row_c = torch.tensor([c for _, _, c in rows], dtype=torch.long)   # rows: its no-context choice
        out: List[List[Dict]] = [[] for _ in items]
        for chunk in self._chunks(len(rows)):
            part_rows = [rows[r] for r in chunk]
            part = [items[i] for i, _, _ in part_rows]
            sample, order = self._sample(part)
            prefix = self._prefix_lengths(sample["target"])   # B
            net_input, originals, where = self._probe_inputs(sample["net_input"], prefix)
            with torch.enable_grad(), _checkpointing_off(self.model), \
                    _Probes(self.model, originals.to(sample["target"].device), self.offset) as alpha:
                probed = dict(sample, net_input=net_input)
                lp, y = self._current(probed)   # B x N x V, B x N
                in_chunk = torch.as_tensor(list(chunk), dtype=torch.long)[order.cpu()]   # B: rows in batch order
                t, c = row_t[in_chunk].to(lp.device), row_c[in_chunk].to(lp.device)   # B, B
                rows_b = torch.arange(len(t), device=lp.device)
                f = self._contrastive(lp[rows_b, t], y[rows_b, t], c)   # B
                (grad,) = torch.autograd.grad(f.sum(), alpha) if len(originals) else (alpha.new_zeros(0),)
            # df/dalpha_kd = x_kd df/dx_kd: gradient x input per dimension, aggregated per token
            grad = grad.detach()
            grad = (grad.norm(dim=-1) if self.aggregate == "norm" else grad.sum(dim=-1)).cpu().numpy()
            f = f.detach().cpu().tolist()   # B: one transfer, not one per row
            for b, k in enumerate(order.tolist()):
                i, pos, contrast = part_rows[k]
                scores = {key: self._row_scores(sample["net_input"][key][b], where[key][b], grad)
                          for key in where}
                out[i].append(dict(position=pos, contrast=contrast, f=f[b],
                                   **self._split(items[i], sample["net_input"], scores, b)))
        for rows_of_item in out:
            rows_of_item.sort(key=lambda r: r["position"])
        return out

    def _row_scores(self, tokens: Tensor, ids: Tensor, grad: np.ndarray) -> Tuple[List[int], List[float]]:
        """One row's real tokens (padding dropped) and their attributions
        (NaN for the unprobed: separators, ``</s>``)."""
        keep = tokens.ne(self.src_dict.pad()).cpu().numpy()
        tok = tokens.cpu().numpy()[keep]
        idx = ids.cpu().numpy()[keep]
        return tok.tolist(), [float(grad[j]) if j >= 0 else math.nan for j in idx]

    def _split(self, item: Item, net_input: dict, scores: Dict, b: int) -> Dict:
        """The row's attributions by part: ``context`` (one list per context
        sentence, oldest first, aligned with the item's sentences without
        ``</s>``; ``None`` for tokens a length cap cut), ``source`` (its tokens
        with ``</s>``; 0 for ``</s>``) and ``target_context``."""
        src_tok, src_sc = scores["src_tokens"]
        if "ctx_tokens" in scores:
            ctx_tok, ctx_sc = scores["ctx_tokens"]
            ctx_segments = _segments(ctx_tok[:-1], ctx_sc[:-1], self.sep)   # the context ends with </s>
            source = src_sc
        elif item.context and self.sep in src_tok:   # glued to the source: the part after the last <sep>
            last = len(src_tok) - 1 - src_tok[::-1].index(self.sep)
            ctx_segments = _segments(src_tok[:last], src_sc[:last], self.sep)
            source = src_sc[last + 1:]
        else:
            ctx_segments, source = [], src_sc
        context = _align(ctx_segments, item.context)
        target_context = []
        if "prev_output_tokens" in scores and item.target_context:
            tok, sc = scores["prev_output_tokens"]
            n_prefix = sum(len(t) for t in item.target_context)   # each sentence's tokens + <sep>
            target_context = _align(_segments(tok[1:n_prefix], sc[1:n_prefix], self.tgt_sep), item.target_context)
        return dict(context=context, source=[0.0 if math.isnan(s) else s for s in source],
                    target_context=target_context)

    # ------------------------------------------------------------ 3. erasure
    def erasure(self, items: Sequence[Item], positions: Sequence[np.ndarray],
                contrasts: Sequence[np.ndarray]) -> List[Dict]:
        """Per item: ``f`` at each sensitive position with the full context,
        and its drop when each context token (``context``: one list per
        sentence, per token, per position) or each context sentence
        (``sentences``: per sentence, per position) is deleted."""
        variants: List[Tuple[int, str, int, int]] = []   # (item, kind, sentence, token)
        edited: List[Item] = []
        for i, item in enumerate(items):
            if len(positions[i]) == 0:
                continue
            variants.append((i, "full", -1, -1))
            edited.append(item)
            for s, sentence in enumerate(item.context):
                for j in range(len(sentence) - 1):   # every token but </s>
                    shorter = torch.cat([sentence[:j], sentence[j + 1:]])
                    variants.append((i, "token", s, j))
                    edited.append(Item(item.source, item.target, item.context[:s] + [shorter] + item.context[s + 1:],
                                       item.target_context))
                variants.append((i, "sentence", s, -1))
                # the target sentence at the same distance from the current one goes too
                back = len(item.context) - s
                tctx = [t for k, t in enumerate(item.target_context) if len(item.target_context) - k != back]
                edited.append(Item(item.source, item.target, item.context[:s] + item.context[s + 1:], tctx))
        out = [dict(full=None, context=[[None] * (len(s) - 1) for s in it.context], sentences=[None] * len(it.context))
               for it in items]
        if not edited:
            return out
        # per item its positions and contrasts as one padded table (items x M), indexed by row below
        pos_table = pad_sequence([torch.as_tensor(np.asarray(p), dtype=torch.long) for p in positions], batch_first=True)
        con_table = pad_sequence([torch.as_tensor(np.asarray(c), dtype=torch.long) for c in contrasts], batch_first=True)
        counts = torch.tensor([len(p) for p in positions], dtype=torch.long)
        f_all: List[Optional[np.ndarray]] = [None] * len(edited)
        with torch.no_grad():
            for chunk in self._chunks(len(edited)):
                part = [edited[v] for v in chunk]
                sample, order = self._sample(part)
                lp, y = self._current(sample)   # B x N x V, B x N
                # each row's analysed positions and their contrasts, padded to the most (M)
                rows = [variants[chunk[k]][0] for k in order.tolist()]
                t, c, m = pos_table[rows], con_table[rows], counts[rows]   # B x M, B x M, B
                t, c = t.to(lp.device), c.to(lp.device)
                b = torch.arange(len(rows), device=lp.device).unsqueeze(1)   # B x 1
                f = self._contrastive(lp[b, t], y[b, t], c).cpu().numpy()   # B x M
                for k, row, count in zip(order.tolist(), f, m.tolist()):
                    f_all[chunk[k]] = row[:count]
        full = {v[0]: f for v, f in zip(variants, f_all) if v[1] == "full"}
        for (i, kind, s, j), f in zip(variants, f_all):
            drop = (full[i] - f).tolist()
            if kind == "full":
                out[i]["full"] = f.tolist()
            elif kind == "token":
                out[i]["context"][s][j] = drop
            else:
                out[i]["sentences"][s] = drop
        return out


def _segments(tokens: List[int], scores: List[float], sep) -> List[Tuple[List[int], List[float]]]:
    """``tokens`` split at ``sep`` into sentences, with their scores; an
    empty sentence (two separators in a row, or one last) stays, so that
    counting from the newest keeps every sentence in its place."""
    if not tokens:
        return []
    out: List[Tuple[List[int], List[float]]] = [([], [])]
    for t, s in zip(tokens, scores):
        if t == sep:
            out.append(([], []))
        else:
            out[-1][0].append(t)
            out[-1][1].append(s)
    return out


def _align(segments, sentences: Sequence[Tensor]) -> List[List[Optional[float]]]:
    """Scores of each of ``sentences`` (oldest first, each ending with
    ``</s>``) from the segments the model saw: the newest sentences are the
    last segments; a segment shortened by a length cap lost its oldest
    tokens (``None``), a sentence cut entirely gets ``None`` everywhere."""
    out: List[List[Optional[float]]] = [[None] * (len(s) - 1) for s in sentences]
    for back in range(1, min(len(segments), len(sentences)) + 1):
        _, scores = segments[-back]
        row = out[-back]
        for j in range(1, min(len(scores), len(row)) + 1):
            row[-j] = scores[-j]
    return out
