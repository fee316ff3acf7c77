"""Context gate fusing a sentence's global state into the top decoder states.

GRET (Weng et al., AAAI 2020), Eq. 12-13 (applied to the output of Eq. 11,
before the output projection of Eq. 14):

    g_j     = sigmoid(W_r r_j + W_s s + b)        (Eq. 12, element-wise gate)
    r_bar_j = r_j + g_j * s                       (Eq. 13)

Eq. 12 writes ``sigmoid(r_j, s^M)``; we read it as a linear map of the
concatenation [r_j; s] (2d x d + d = 0.525M parameters with d = 512), split
into W_r and W_s. ``W_s s`` does not depend on the step, so it is computed
once per sentence: once per forward in training, and once per sentence in
incremental decoding, where it is cached in the incremental state (and
reordered with the beams). s itself is read from ``encoder_out`` at every
step, which beam search reorders anyway, so it is not cached a second time.
Each decoding step then costs one d x d product, a sigmoid and a multiply-add.

With ``gated=False`` (the "no gate" ablation of Table 3) this is the plain
addition ``r_bar_j = r_j + s``.

When the global state's dimension differs from the decoder's output
dimension a linear map (no bias) first brings s to the decoder's size; with
equal sizes (all presets) there is none. The projected s is per sentence too,
and cached beside ``W_s s``.
"""
from typing import Dict, Optional

import torch
import torch.nn as nn
from fairseq.incremental_decoding_utils import with_incremental_state
from torch import Tensor

from .incremental_cache import reorder_cache


@with_incremental_state
class ContextGate(nn.Module):
    """Fuse s (B x C_s) into decoder states r (B x T x C), Eq. 12-13."""

    def __init__(self, embed_dim: int, global_dim: int, gated: bool = True):
        super().__init__()
        self.embed_dim = embed_dim
        self.gated = gated
        self.global_proj = nn.Linear(global_dim, embed_dim, bias=False) if global_dim != embed_dim else None
        if gated:
            self.state_gate = nn.Linear(embed_dim, embed_dim)  # W_r and b
            self.global_gate = nn.Linear(embed_dim, embed_dim, bias=False)  # W_s
        else:
            self.state_gate = self.global_gate = None
        for lin in (self.global_proj, self.state_gate, self.global_gate):
            if lin is not None:
                nn.init.xavier_uniform_(lin.weight)
                if lin.bias is not None:
                    nn.init.zeros_(lin.bias)

    def _global_terms(self, global_state: Tensor):
        """Per-sentence terms: s in the decoder's size and W_s s (B x C each)."""
        if self.global_proj is not None:
            global_state = self.global_proj(global_state)
        if not self.gated:
            return global_state, None
        return global_state, self.global_gate(global_state)

    def forward(self, states: Tensor, global_state: Tensor,
                incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None):
        """
        Args:
            states: B x T x C top decoder states r (T = 1 when decoding step by step).
            global_state: B x C_s global representation s^M of the source
                (``encoder_out["gret_global"][0]``, in the beams' order).
            incremental_state: fairseq's incremental state; the per-sentence
                terms that cost a product (W_s s, and s projected to the
                decoder's size where the sizes differ) are cached there on the
                first step.

        Returns:
            B x T x C fused states r_bar.
        """
        cached = self.get_incremental_state(incremental_state, "global") if incremental_state is not None else None
        if cached:
            glob, glob_gate = cached.get("s", global_state), cached.get("ws")
        else:
            glob, glob_gate = self._global_terms(global_state)
            if incremental_state is not None:
                saved: Dict[str, Optional[Tensor]] = {}
                if self.global_proj is not None:
                    saved["s"] = glob
                if glob_gate is not None:
                    saved["ws"] = glob_gate
                if saved:
                    self.set_incremental_state(incremental_state, "global", saved)
        glob = glob.unsqueeze(1)  # B x 1 x C, broadcast over target positions
        if not self.gated:
            return states + glob
        gate = torch.sigmoid(self.state_gate(states) + glob_gate.unsqueeze(1))  # Eq. 12
        return states + gate * glob  # Eq. 13

    def reorder_incremental_state(self, incremental_state: Dict[str, Dict[str, Optional[Tensor]]],
                                  new_order: Tensor):
        """Follow the beams: select the cached per-sentence terms in ``new_order``."""
        return reorder_cache(self, incremental_state, "global", new_order)
