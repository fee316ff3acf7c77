"""GRET's global representation of the source sentence, built from every
encoder layer.

GRET (Weng et al., AAAI 2020), Section 2.1:

* intra-layer: capsules by dynamic routing over the layer's states (Eq. 2-6,
  :class:`~fairseq_ctx.modules.gret_capsule_routing.CapsuleRouting`), pooled into
  one vector by attentive pooling (Eq. 7-9,
  :class:`~fairseq_ctx.modules.gret_attentive_pooling.AttentivePooling`);
* inter-layer: a GRU run over the layers, ``s^m = GRU(ATP(U^m), s^{m-1})``
  (Eq. 10), starting from ``s^0 = 0``; its last state ``s^M`` is the global
  representation handed to the decoder.

Ablations of Table 3:

* ``use_capsules=False``: the masked mean of the layer's states over real
  (non-padding) positions replaces capsules + attentive pooling (no parameters);
* ``aggregate=False``: no GRU, only the last layer is pooled (so only one
  layer gets a capsule network) and ``s = ATP(U^M)``.

Parameters with Base dimensions (d = 512, 6 layers, K = 32): per layer
routing 0.278M (W: d^2, v: K d) + attentive pooling 0.525M (two d x d linears
with bias), 0.804M in all, x 6 = 4.82M; GRU cell 1.58M (3 gates x (2 d^2 + 2 d)).
"""
from typing import List, Optional

import torch
import torch.nn as nn

from .gret_attentive_pooling import AttentivePooling
from .gret_capsule_routing import CapsuleRouting


def masked_mean(states, padding_mask: Optional[torch.Tensor]):
    """Mean over the real positions. states: B x T x d; padding_mask: B x T."""
    if padding_mask is None:
        return states.mean(dim=1)
    keep = (~padding_mask).unsqueeze(-1).type_as(states)  # B x T x 1
    return (states * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1.0)


class GlobalRepresentation(nn.Module):
    """Global state of a sentence from its encoder layer states, Eq. 2-10.

    Args:
        embed_dim: d (encoder dimension).
        num_layers: M, the number of encoder layers whose states are passed in.
        num_capsules, iterations, softmax_over: see :class:`CapsuleRouting`.
        use_capsules: capsules + attentive pooling (True) or masked mean (False).
        aggregate: GRU over all layers (True) or the last layer only (False).
    """

    def __init__(self, embed_dim: int, num_layers: int, num_capsules: int = 32, iterations: int = 3,
                 softmax_over: str = "capsules", use_capsules: bool = True, aggregate: bool = True):
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"GRET needs at least one encoder layer, got --encoder-layers {num_layers}")
        self.embed_dim = embed_dim
        self.num_layers = num_layers
        self.use_capsules = use_capsules
        self.aggregate = aggregate
        num_pooled = num_layers if aggregate else 1
        if use_capsules:
            self.routing = nn.ModuleList(
                [CapsuleRouting(embed_dim, num_capsules, iterations, softmax_over) for _ in range(num_pooled)]
            )
            self.pooling = nn.ModuleList([AttentivePooling(embed_dim) for _ in range(num_pooled)])
        else:
            # validate the flags even when they are unused, so a bad value is never silently accepted
            CapsuleRouting(1, num_capsules, iterations, softmax_over)
            self.routing = self.pooling = None
        self.gru = nn.GRUCell(embed_dim, embed_dim) if aggregate else None

    def pool_layer(self, idx: int, states, padding_mask):
        """ATP(U^m) of one layer (or its masked mean). states: B x T x d -> B x d."""
        if self.routing is None:
            return masked_mean(states, padding_mask)
        return self.pooling[idx](self.routing[idx](states, padding_mask))

    def forward(self, layer_states: List[torch.Tensor], padding_mask: Optional[torch.Tensor]):
        """
        Args:
            layer_states: the M encoder layers' outputs, each T x B x d, bottom first.
            padding_mask: B x T, True at padded positions (or None).

        Returns:
            the global representation s^M: B x d.
        """
        if len(layer_states) != self.num_layers:
            raise ValueError(
                f"GRET global representation expects {self.num_layers} encoder layer states, "
                f"got {len(layer_states)}"
            )
        if not self.aggregate:
            return self.pool_layer(0, layer_states[-1].transpose(0, 1), padding_mask)
        state = None
        for m, states in enumerate(layer_states):
            pooled = self.pool_layer(m, states.transpose(0, 1), padding_mask)  # B x d
            state = self.gru(pooled, state)  # Eq. 10, state None means s^0 = 0
        return state
