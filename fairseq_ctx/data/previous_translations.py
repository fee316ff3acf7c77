"""The target context of 2-to-2 decoding: a model trained with
``--concat-context --target-context`` decoded with its own previous
translations (Tiedemann and Scherrer 2017).

Sentence ``i`` of a document can be translated only once sentences
``i-N .. i-1`` are, so documents are decoded round by round (round ``r``:
the ``r``-th sentence of every document, see
:func:`fairseq_ctx.data.context_selection.document_positions`).  Before a
batch is decoded its rows' previous translations are glued into the forced
decoder prefix ``t_1 <sep> ... t_k <sep>``
(:func:`fairseq_ctx.data.token_layout.target_prefix`, the training target's
layout without the current sentence); after it the best hypotheses are
recorded for the next rounds.  :class:`PreviousTranslations` holds them;
who decodes with it is :mod:`fairseq_ctx.tasks.document_decoding`.
"""
from typing import List, Optional, Sequence, Set

import numpy as np
import torch

from fairseq_ctx.data.token_layout import target_prefix


class PreviousTranslations:
    """The target context of 2-to-2 decoding: the model's own translations.

    ``pool`` holds target sentences (token tensors, EOS optional; ``None``:
    not translated, e.g. skipped as too long, and then no context); row
    ``i`` of ``index`` the pool positions of item ``i``'s target context,
    oldest first, ``-1`` = none (the source context's index, so the same
    sentences' translations); ``slots[i]`` the pool position that item
    ``i``'s own translation fills (``-1``: kept nowhere; ``slots=None``:
    nothing is recorded, the pool is fixed).

    Length: the generator's output length limit (``max_len``: ``--max-len-a``
    and ``-b``, and the model's target positions) bounds the whole decoder
    output, forced prefix included, as in training; so that the current
    sentence keeps room, item ``i``'s prefix keeps at most ``min(max_tokens,
    max_len) - reserve[i]`` of its newest tokens (``max_tokens``: the model's
    target limit; ``reserve``: room for the current sentence, its source
    length).  This only cuts runaway translations: with fairseq's default
    ``--max-len-b 200`` a normal previous sentence is kept whole.  The items
    whose prefix was cut are kept in ``cut``, for the one warning line
    (:func:`cut_warning`) of whoever decodes.
    """

    def __init__(self, index: np.ndarray, pool: List[Optional[torch.Tensor]], sep: int, eos: int, pad: int,
                 slots: Optional[np.ndarray] = None, max_tokens: Optional[int] = None,
                 reserve: Optional[np.ndarray] = None):
        self.index = np.asarray(index, dtype=np.int64)
        self.pool = list(pool)
        self.slots = None if slots is None else np.asarray(slots, dtype=np.int64)
        self.sep, self.eos, self.pad = sep, eos, pad
        self.max_tokens = max_tokens
        self.reserve = None if reserve is None else np.asarray(reserve, dtype=np.int64)
        self.cut: Set[int] = set()

    def previous(self, i: int) -> List[torch.Tensor]:
        """Item ``i``'s previous translations, oldest first: the newest ones
        up to the first that is missing (a skipped sentence), never across
        the gap, where an older translation would sit in the slot of the one
        left out (the model learnt ``t_{i-k} <sep> ... t_{i-1} <sep>``)."""
        out: List[torch.Tensor] = []
        for j in self.index[i]:
            out = [] if j < 0 or self.pool[j] is None else out + [self.pool[j]]
        return out

    def prefix(self, i: int, max_len: Optional[int] = None) -> torch.Tensor:
        """Item ``i``'s forced prefix (:func:`target_prefix` of its previous
        translations), cut to the length limits (see the class docstring)."""
        limits = [n for n in (self.max_tokens, max_len) if n is not None]
        cap = min(limits) if limits else None
        if cap is not None and self.reserve is not None:
            cap = max(int(cap - self.reserve[i]), 0)
        previous = self.previous(i)
        whole = target_prefix(previous, self.eos, self.sep)
        if cap is None or len(whole) <= cap:
            return whole
        self.cut.add(i)
        return target_prefix(previous, self.eos, self.sep, cap)

    def prefix_tokens(self, ids: Sequence[int], device=None, max_len: Optional[int] = None) -> torch.Tensor:
        """``B x P`` forced prefixes of items ``ids`` (a batch's rows),
        right-padded (fairseq's generator forces a row's tokens up to its
        first pad); ``P`` is 0 when no row has a previous translation.
        ``max_len``: the generator's output length limit for the batch
        (:func:`generator_max_len`)."""
        rows = [self.prefix(int(i), max_len) for i in ids]
        width = max((len(r) for r in rows), default=0)
        out = torch.full((len(rows), width), self.pad, dtype=torch.long)
        for k, r in enumerate(rows):
            out[k, :len(r)] = r
        return out if device is None else out.to(device)

    def record(self, ids: Sequence[int], hypos) -> None:
        """Keep the best hypothesis of each item (its ``tokens``, already cut
        to the current sentence) as the translation later items see."""
        if self.slots is None:
            return
        for i, beam in zip(ids, hypos):
            slot = int(self.slots[int(i)])
            if slot >= 0 and len(beam):
                self.pool[slot] = beam[0]["tokens"].detach().cpu()


def cut_warning(cut: int, sentences: int) -> str:
    """The line that says ``cut`` of ``sentences`` lost the oldest tokens of
    their forced target context (:attr:`PreviousTranslations.cut`)."""
    return (f"{cut} of {sentences} sentences had their previous translations (the forced target context) cut "
            "to fit the output limit, the smallest of the models' --max-target-positions and --max-len-a/-b, "
            "less the sentence's source length: their oldest tokens are dropped")


def generator_max_len(generator, src_tokens: torch.Tensor) -> Optional[int]:
    """The output length limit fairseq's ``SequenceGenerator`` sets for a
    batch: ``min(max_len_a * T_src + max_len_b, model positions - 1)``
    (``None`` for a generator without these attributes or with
    ``--match-source-len``)."""
    a, b, limit = (getattr(generator, k, None) for k in ("max_len_a", "max_len_b", "max_len"))
    if a is None or b is None or getattr(generator, "match_source_len", False):
        return None
    max_len = int(a * src_tokens.size(1) + b)
    return min(max_len, int(limit) - 1) if limit is not None else max_len
