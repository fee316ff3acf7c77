"""Shared-layer states of sentences already encoded, so that
``transformer_ctxenc`` (Voita et al., 2018) runs each sentence through its
shared encoder layers once per decoding run (``--reuse-sentence-states``).

The context encoder runs the previous sentence through the same embeddings
and lower layers 1..N-1 as the source encoder (only its last layer is its
own), and those layers see nothing but the sentence itself. So in a
document, every sentence but the last is encoded twice by the shared layers:
as a source and as the next sentence's context. Keeping the states of each
sentence the first time (whichever role comes first: batches are sorted by
length, not by document) and reusing them the second time halves that work,
whatever the batching.

States are keyed by the sentence's tokens as the encoder receives them (a
sentence as source ``s_1 .. s_m </s>`` and as ``--context-size 1`` context
``c_1 </s>`` are the same ids). Reuse is exact whichever document the
sentence came from, since the shared layers see no context; a context that
is not a plain sentence (several joined with ``<sep>``, a cut one) is just
another key. The cache is only consulted in eval mode without autograd,
keeps at most ``max_sentences`` sentences (least recently used dropped
first), and is cleared by ``train()``, ``to()`` and loading a state dict
(see the encoder): the ways fairseq changes a model's parameters. Code that
writes the parameters in place in eval mode (``p.copy_()``, swapping in EMA
weights) must call ``clear()``, or ``eval()`` again (it is ``train(False)``).
"""
from collections import OrderedDict
from typing import List, Optional

import torch
from torch import Tensor


class SharedStateCache(object):
    """Sentence tokens -> the shared layers' output for that sentence (``L x C``)."""

    def __init__(self, max_sentences: int = 8192):
        if max_sentences < 1:
            raise ValueError(f"max_sentences must be at least 1, got {max_sentences}")
        self.max_sentences = max_sentences
        self._states: "OrderedDict[bytes, Tensor]" = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._states)

    def clear(self):
        self._states.clear()

    @staticmethod
    def keys(tokens: Tensor, real: Tensor) -> List[bytes]:
        """One key per row of ``tokens`` (``B x T``): the ids at the ``real``
        (``B x T``, True at non-padding) positions, in order."""
        lengths = real.sum(dim=1).tolist()
        flat = tokens[real].cpu().numpy()  # one transfer for the whole batch
        out, start = [], 0
        for n in lengths:
            out.append(flat[start:start + n].tobytes())
            start += n
        return out

    def get(self, key: bytes) -> Optional[Tensor]:
        states = self._states.get(key)
        if states is None:
            self.misses += 1
            return None
        self._states.move_to_end(key)
        self.hits += 1
        return states

    def put(self, key: bytes, states: Tensor):
        # a copy: ``states`` is a view of its whole batch's output, which
        # would stay alive (and uncounted) as long as any of its rows is kept
        self._states[key] = states.clone()
        self._states.move_to_end(key)
        while len(self._states) > self.max_sentences:
            self._states.popitem(last=False)

    def assemble(self, states: List[Tensor], real: Tensor) -> Tensor:
        """The padded ``T x B x C`` batch of per-row states (``L_i x C``)
        placed at the ``real`` (``B x T``) positions, zeros elsewhere."""
        first = states[0]
        out = first.new_zeros(real.size(0), real.size(1), first.size(-1))  # B x T x C
        out[real] = torch.cat(states)
        return out.transpose(0, 1)
