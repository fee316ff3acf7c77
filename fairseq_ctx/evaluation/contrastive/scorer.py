"""Scoring candidates with a fairseq model or ensemble by teacher forcing
(never beam search): the score of a candidate is the log-probability of its
current sentence given its source and context, the context reaching the
model the way its task says (:mod:`fairseq_ctx.data.context_input`).
torch and fairseq are imported when scoring, so that ``--help`` and
``--scores-in`` stay fast.
"""
from __future__ import annotations  # torch.Tensor in annotations: torch is imported by the scorer only

import logging
import math
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from fairseq_ctx.evaluation.contrastive.groups import Candidate, ContrastiveDataError, Group

if TYPE_CHECKING:
    import torch

logger = logging.getLogger("fairseq_ctx.evaluation.contrastive")


class ModelScorer:
    """Scores (source, context, target) triples with a fairseq model or
    ensemble by teacher forcing: summed log-probabilities of the target
    tokens (``</s>`` included), optionally divided by their number.

    ``context_size``: how many of a candidate's source context sentences
    the model gets (the newest ones); ``target_context_size``: how many of
    its target context sentences are forced as the decoder's prefix (a model
    trained with ``--concat-context --target-context``); only the current
    sentence's tokens are scored.  ``max_tokens``: cap of a batch's padded
    size, context tokens included (``batch_size`` caps the candidates)."""

    # a warning when more of the scored tokens than this are <unk>
    UNK_WARNING = 0.05

    def __init__(self, models, task, encode_source: Callable[[str], str] = None,
                 encode_target: Callable[[str], str] = None, context_size: int = 0,
                 batch_size: int = 32, length_normalize: bool = False, device: str = "cpu",
                 share_encoder: bool = True, target_context_size: int = 0,
                 max_tokens: Optional[int] = None):
        from fairseq import utils

        if batch_size < 1:
            raise ValueError(f"--batch-size must be >= 1, got {batch_size}")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"--max-tokens must be >= 1, got {max_tokens}")
        if target_context_size and not getattr(getattr(task, "cfg", None), "target_context", False):
            raise ValueError("target context needs a model trained with --task document_translation "
                             "--concat-context --target-context")
        for m in models:
            m.eval()   # its value is None after fairseq's make_generation_fast_ (see ContextAttributor)
        self.models = [m.to(device) for m in models]
        self.task = task
        self.encode_source = encode_source or (lambda s: s)
        self.encode_target = encode_target or (lambda s: s)
        self.context_size = context_size
        self.target_context_size = target_context_size
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.length_normalize = length_normalize
        self.device = device
        self.share_encoder = share_encoder
        self.max_positions = utils.resolve_max_positions(
            task.max_positions(), *[m.max_positions() for m in self.models])
        # per side: share of the last encode()'s tokens (EOS excluded) that are <unk>
        self.unk_rates: Dict[str, float] = {}

    def _check_length(self, tokens: torch.Tensor, limit, where: str, what: str):
        if limit is not None and len(tokens) > limit:
            raise ContrastiveDataError(f"{where}: {what} has {len(tokens)} tokens, more than the "
                                       f"model's {limit} positions")

    @staticmethod
    def item_size(item) -> int:
        """Tokens an item puts in a batch row, as fairseq's ``num_tokens``
        (the longer side) with each side's context counted: source + source
        context, target + target context."""
        src, ctx, tgt, tctx = item
        return max(len(src) + sum(len(c) for c in ctx), len(tgt) + sum(len(c) for c in tctx))

    def _warn_unk(self, items):
        """Share of <unk> per side; a model trained on subword units scored
        on words without --bpe sees mostly <unk>."""
        import torch

        for side, d, parts in (
                ("source", self.task.source_dictionary, [t for s, ctx, _, _ in items for t in [s, *ctx]]),
                ("target", self.task.target_dictionary, [t for _, _, t, tctx in items for t in [t, *tctx]])):
            tokens = torch.cat([t[:-1] for t in parts]) if parts else torch.zeros(0, dtype=torch.long)
            rate = float(tokens.eq(d.unk()).float().mean()) if len(tokens) else 0.0
            self.unk_rates[side] = rate
            if rate > self.UNK_WARNING:
                logger.warning(
                    f"{rate:.1%} of the {len(tokens)} {side} tokens scored are <unk>: give the subword "
                    "model the checkpoint was trained with (--bpe/--tokenizer as for fairseq-generate, "
                    "e.g. --bpe sentencepiece --sentencepiece-model M, or --source-bpe-model/"
                    "--target-bpe-model for one model per language)")

    def encode(self, candidates: Sequence[Candidate]):
        """Token tensors of the candidates, deduplicated: returns the unique
        ``(source, source context, target, target context)`` items and, per
        candidate, its item index."""
        import torch

        src_dict, tgt_dict = self.task.source_dictionary, self.task.target_dictionary
        max_src, max_tgt = self.max_positions if isinstance(self.max_positions, tuple) else (None, None)
        items, index, seen = [], [], {}
        for c in candidates:
            src, ctx, tgt, tctx = c.tokens(src_dict, tgt_dict, self.encode_source, self.encode_target,
                                           self.context_size, self.target_context_size)
            self._check_length(src, max_src, c.where, "the source")
            self._check_length(tgt, max_tgt, c.where, "the target")
            item = (src, ctx, tgt, tctx)
            if self.max_tokens is not None and self.item_size(item) > self.max_tokens:
                raise ContrastiveDataError(
                    f"{c.where}: {self.item_size(item)} tokens with its context, more than --max-tokens "
                    f"{self.max_tokens}")
            key = tuple(tuple(t.tolist()) for t in [src, *ctx, torch.tensor([-1]), tgt, torch.tensor([-2]), *tctx])
            if key not in seen:
                seen[key] = len(items)
                items.append(item)
            index.append(seen[key])
        self._warn_unk(items)
        return items, index

    def _dataset(self, items):
        from fairseq.data import LanguagePairDataset

        srcs, ctxs, tgts, tctxs = zip(*items)
        if hasattr(self.task, "build_context_dataset"):
            if self.target_context_size:
                return self.task.build_context_dataset(srcs, ctxs, tgts, model=self.models[0],
                                                       target_contexts=tctxs)
            return self.task.build_context_dataset(srcs, ctxs, tgts, model=self.models[0])
        cfg = self.task.cfg
        return LanguagePairDataset(
            list(srcs), np.array([len(s) for s in srcs]), self.task.source_dictionary,
            list(tgts), np.array([len(t) for t in tgts]), self.task.target_dictionary,
            left_pad_source=cfg.left_pad_source, left_pad_target=cfg.left_pad_target, shuffle=False)

    def _can_share_encoder(self, model) -> bool:
        from fairseq.models import FairseqEncoderDecoderModel

        return self.share_encoder and isinstance(model, FairseqEncoderDecoderModel)

    def _forward(self, model, net_input, enc_rows: Optional[torch.Tensor], enc_index: Optional[torch.Tensor]):
        """Decoder output for the batch.  With ``enc_rows`` the encoder runs
        only on those rows (one per distinct source + context) and
        ``reorder_encoder_out`` hands every candidate its source's encoding,
        as beam search does for hypotheses."""
        if enc_rows is None or not self._can_share_encoder(model):
            return model(**net_input)
        enc_input = {k: v.index_select(0, enc_rows) for k, v in net_input.items() if k != "prev_output_tokens"}
        encoder_out = model.encoder(**enc_input)
        encoder_out = model.encoder.reorder_encoder_out(encoder_out, enc_index)
        return model.decoder(net_input["prev_output_tokens"], encoder_out=encoder_out,
                             src_lengths=net_input["src_lengths"])

    def _score_batch(self, sample, enc_keys: Optional[np.ndarray] = None,
                     scored: Optional[np.ndarray] = None) -> torch.Tensor:
        """B scores of one collated batch (in the batch's order); ``enc_keys``:
        per row, an id of its encoder input (source + context); ``scored``: per
        row, how many of its last target tokens count (the current sentence
        after a forced target-context prefix; default all)."""
        import torch
        from fairseq import utils

        with torch.no_grad():
            if hasattr(self.task, "model_input"):
                sample = self.task.model_input(self.models, sample)
            sample = utils.move_to_cuda(sample) if self.device != "cpu" else sample
            target = sample["target"]  # B x T
            enc_rows = enc_index = None
            if enc_keys is not None:
                _, first, inverse = np.unique(enc_keys, return_index=True, return_inverse=True)
                if len(first) < len(enc_keys):
                    enc_rows = torch.from_numpy(first).to(target.device)
                    enc_index = torch.from_numpy(inverse.reshape(-1)).to(target.device)
            token_lprobs = []
            for model in self.models:
                net_output = self._forward(model, sample["net_input"], enc_rows, enc_index)
                lprobs = model.get_normalized_probs(net_output, log_probs=True)  # B x T x V
                token_lprobs.append(lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1).float())
            # an ensemble's probability is the mean of the models' (log of the mean, not mean of the logs)
            lp = token_lprobs[0] if len(token_lprobs) == 1 else (
                torch.logsumexp(torch.stack(token_lprobs), dim=0) - math.log(len(token_lprobs)))
            mask = target.ne(self.task.target_dictionary.pad())  # B x T
            if scored is not None:
                # right-padded targets: row b's last scored[b] real tokens are its current sentence
                lengths = mask.sum(dim=1, keepdim=True)
                positions = torch.arange(target.size(1), device=target.device).unsqueeze(0)
                mask &= positions >= lengths - torch.as_tensor(scored, device=target.device).unsqueeze(1)
            scores = (lp * mask).sum(dim=1, dtype=torch.float64)
            if self.length_normalize:
                scores = scores / mask.sum(dim=1)
            return scores.cpu()

    def score_items(self, items) -> np.ndarray:
        """Scores of unique (source, context tokens, target, target context
        tokens) items.  Items with the same source and context are batched
        together so the encoder runs once for all their candidates."""
        from fairseq.data import data_utils

        from fairseq_ctx.progress import bar

        if not items:
            return np.zeros(0)
        items = [tuple(it) + ([],) * (4 - len(it)) for it in items]  # (src, ctx, tgt) items of older callers
        if self.target_context_size and self.task.cfg.left_pad_target:
            raise ValueError("target-context scoring expects right-padded targets (--left-pad-target False)")
        dataset = self._dataset(items)
        enc_ids: Dict[Any, int] = {}
        enc_keys = np.array([enc_ids.setdefault((tuple(s.tolist()), tuple(tuple(c.tolist()) for c in ctx)),
                                                len(enc_ids)) for s, ctx, _, _ in items], dtype=np.int64)
        sizes = np.array([self.item_size(it) for it in items], dtype=np.int64)
        n_scored = np.array([len(t) for _, _, t, _ in items], dtype=np.int64)
        # similar lengths together (little padding), a source's candidates adjacent
        order = np.lexsort((np.array([len(t) for _, _, t, _ in items]), enc_keys,
                            np.array([len(s) + sum(len(c) for c in ctx) for s, ctx, _, _ in items])))
        batches = data_utils.batch_by_size(order, None, num_tokens_vec=sizes[order], max_tokens=self.max_tokens,
                                           max_sentences=self.batch_size)
        out = np.zeros(len(items))
        with bar(len(items), "contrastive scoring", unit="cand") as progress:
            for ids in batches:
                batch = dataset.collater([dataset[int(i)] for i in ids])
                rows = batch["id"].cpu().numpy()
                out[rows] = self._score_batch(batch, enc_keys[rows],
                                              n_scored[rows] if self.target_context_size else None).cpu().numpy()
                progress.update(len(ids))
        return out

    def score(self, candidates: Sequence[Candidate]) -> np.ndarray:
        """One score per candidate, in order."""
        items, index = self.encode(candidates)
        return self.score_items(items)[np.asarray(index, dtype=np.int64)]


def score_groups(scorer, groups: Sequence[Group]) -> List[np.ndarray]:
    flat = [c for g in groups for c in g.candidates]
    scores = scorer.score(flat) if flat else np.zeros(0)
    out, i = [], 0
    for g in groups:
        out.append(scores[i:i + len(g.candidates)])
        i += len(g.candidates)
    return out
