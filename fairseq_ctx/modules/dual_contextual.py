"""The Dual Contextual (DC) module of Ampomah et al., "Dual contextual module
for neural machine translation", Machine Translation 2021 (Sect. 4, Eq. 6-9,
Fig. 1-2). It replaces the self-attention sublayer of a Transformer layer.

Given the layer input r (T x B x C, C = d_model):

* Local Contextual Unit (Eq. 6)::

      r_hat_t = GLU([r_{t-a}, ..., r_{t+b}] W_r + b_r)     W_r: f*C x 2C
      l_c     = LayerNorm(r_hat + r)

  Encoder (centred): a = f // 2 positions to the left, b = f - 1 - a to the
  right, i.e. the paper's window starting at r_{t-f/2} (for the default f = 2:
  [r_{t-1}, r_t]). Padded positions are zeroed before the convolution, so a
  real token next to padding sees exactly what it sees at a sentence boundary
  (zero padding): batching a sentence with longer ones does not change it.
  Decoder (causal): a = f - 1, b = 0 (left-padded with zeros); during
  incremental decoding the last f - 1 inputs are cached.

* Context Interaction Unit (Eq. 7)::

      h_l = FI(r, l_c)     queries from r, keys/values from l_c
      h_g = FI(r, r)       ordinary self-attention over r
      FI(A, B) = concat_i ATT(A W^q_i, B W^k_i, B W^v_i)

  Eq. 7 names A the query and B the key/value input and writes
  h_l = FI(r, l_c): the local branch lets every token of r look up the
  locally-contextualised representations l_c (Sect. 7.2 describes it as "the
  FI unit generating h_l based on l_c and H^{l-1}"). The FI units have no
  output projection of their own (Eq. 7 is a bare concatenation); the
  aggregation W_z plays that role, which is what reproduces the paper's
  parameter growth (+12.7M for Enc-DC with Transformer-Base and f = 2).
  In the decoder both FI units are causal and cache their keys and values.

* Aggregation (Eq. 8)::

      z_hat = [h_l; h_g] W_z + b_z      W_z: 2C x C

  This module returns z_hat; the residual and LayerNorm of Eq. 9,
  z_f = LayerNorm(z_hat + r), are applied by the surrounding fairseq layer
  (dropout -> residual -> ``self_attn_layer_norm``), exactly as for the
  self-attention it replaces (with ``--*-normalize-before`` the layer norm
  moves to the sublayer input, as in fairseq).

Parameters per module (C = 512, f = 2): W_r 2*512*1024 + 1024, l_c LayerNorm
1024, FI Q/K/V 2 * 3 * (512^2 + 512), W_z 1024*512 + 512: 3,151,360 against
the 1,050,624 of the self-attention it replaces (+2.10M per layer, +12.6M for
six layers).

Speed: the four projections of r (q_l, q_g, k_g, v_g) are one GEMM, the two
of l_c (k_l, v_l) another, and both FI units run as a single
``F.scaled_dot_product_attention`` call over 2 * H heads, whose output is
already laid out as [h_l; h_g] for W_z. The convolution is one GEMM over the
unshifted input followed by f shifted additions (no unfolded f*C-wide copy of
the input). In incremental decoding the FI keys and values (twice
self-attention's, 2H heads) are cached time-major, S x B x 2H x hd, and
beam search's reorder is applied at the next step while the cache grows
(:func:`~fairseq_ctx.modules.incremental_cache.append_time_major`): one copy
of the cache per step instead of fairseq's two (``index_select``, then
``torch.cat``), which on CPU made the cache copies alone cost more than
the attention itself. With these, the module costs what its FLOPs say (12 C^2
per token against 4 C^2 for self-attention; measured: ``docs/benchmarks.md``).

Readout for analysis (Eq. 10-13): with ``need_weights=True`` the forward
returns the FI attention probabilities as a B x 2 x H x T x S tensor
([alpha_l, alpha_g]); the fairseq layer calls its self-attention with
``need_weights=False``, so the analyses read the same tensor as
``last_readout["alpha"]`` inside ``with reading(model):``
(:mod:`fairseq_ctx.modules.readout`). Otherwise the probabilities are never
materialised (one fused ``scaled_dot_product_attention``).
"""
import math
from typing import Dict, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq.incremental_decoding_utils import with_incremental_state
from fairseq.modules import LayerNorm
from fairseq.modules.fairseq_dropout import FairseqDropout

from .fused_attention import attention, dropout_p, padded_empty
from .incremental_cache import append_time_major, reorder_cache
from .readout import Readout


@with_incremental_state
class DualContextualModule(Readout, nn.Module):
    """Dual Contextual module (Ampomah et al. 2021, Eq. 6-9).

    Args:
        embed_dim (int): d_model (C).
        num_heads (int): heads n_h of each FI unit.
        kernel_size (int): f, width of the local convolution (paper: 2).
        causal (bool): decoder mode (causal convolution, incremental state).
        dropout (float): dropout on the GLU output r_hat before its residual.
        attention_dropout (float): dropout on the FI attention probabilities.

    Readout (:mod:`fairseq_ctx.modules.readout`): the FI attention
    probabilities [alpha_l, alpha_g] before dropout.
    """

    readout_shapes = {"alpha": "B x 2 x H x T x S"}

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        kernel_size: int = 2,
        causal: bool = False,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        export: bool = False,
    ):
        super().__init__()
        if kernel_size < 1:
            raise ValueError(f"--dc-kernel-size must be >= 1, got {kernel_size}")
        if embed_dim % num_heads != 0:
            raise ValueError(
                f"embed_dim ({embed_dim}) must be divisible by the number of attention heads ({num_heads})"
            )
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.kernel_size = kernel_size
        self.causal = causal
        # window [r_{t-pad_left}, ..., r_{t+pad_right}], see module docstring
        self.pad_left = kernel_size - 1 if causal else kernel_size // 2
        self.pad_right = kernel_size - 1 - self.pad_left

        # W_r of Eq. 6 (f*C x 2C), stored as f blocks of (2C x C): block k
        # multiplies r_{t - pad_left + k}. Viewed as (f*2C) x C it is one GEMM.
        self.conv_weight = nn.Parameter(torch.empty(kernel_size, 2 * embed_dim, embed_dim))
        self.conv_bias = nn.Parameter(torch.empty(2 * embed_dim))
        self.local_layer_norm = LayerNorm(embed_dim, export=export)
        self.dropout_module = FairseqDropout(dropout, module_name=self.__class__.__name__)
        # a fairseq module (not a float) so that --retain-dropout reaches it
        self.attention_dropout_module = FairseqDropout(attention_dropout, module_name=self.__class__.__name__)

        # FI projections (Eq. 7) fused by input: r -> [q_l, q_g, k_g, v_g],
        # l_c -> [k_l, v_l]. No per-FI output projection.
        self.r_proj = nn.Linear(embed_dim, 4 * embed_dim)
        self.lc_proj = nn.Linear(embed_dim, 2 * embed_dim)
        # W_z, b_z of Eq. 8
        self.out_proj = nn.Linear(2 * embed_dim, embed_dim)

        self.reset_parameters()

    def reset_parameters(self):
        # Conv: Xavier over the (2C) x (f*C) matrix W_r^T of Eq. 6.
        fan_in, fan_out = self.kernel_size * self.embed_dim, 2 * self.embed_dim
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        nn.init.uniform_(self.conv_weight, -bound, bound)
        nn.init.zeros_(self.conv_bias)
        # Each C x C projection block gets fairseq's fused-QKV init
        # (xavier_uniform with gain 1/sqrt(2)), as MultiheadAttention does.
        for proj in (self.r_proj, self.lc_proj):
            for block in proj.weight.split(self.embed_dim, dim=0):
                nn.init.xavier_uniform_(block, gain=1 / math.sqrt(2))
            nn.init.zeros_(proj.bias)
        nn.init.xavier_uniform_(self.out_proj.weight)
        nn.init.zeros_(self.out_proj.bias)

    # ------------------------------------------------------------------
    # Local Contextual Unit (Eq. 6)
    # ------------------------------------------------------------------
    def _conv_full(self, r: Tensor) -> Tensor:
        """Convolution over a whole sequence. r: T x B x C -> T x B x 2C.

        y = r W_stack computes every block's contribution at every position
        in one GEMM; output t then sums block k taken at input t - pad_left + k
        (zero outside the sequence)."""
        T = r.size(0)
        f, C2 = self.kernel_size, 2 * self.embed_dim
        y = F.linear(r, self.conv_weight.view(f * C2, self.embed_dim))  # T x B x f*2C
        if f == 1:
            return y + self.conv_bias
        y = F.pad(y, (0, 0, 0, 0, self.pad_left, self.pad_right))  # (T+f-1) x B x f*2C
        # the blocks by one split, not slices of y: its backward is one
        # concatenation, where each slice's would build a zero-filled gradient of all of y
        blocks = y.split(C2, dim=2)  # f x [(T+f-1) x B x 2C]
        out = self.conv_bias + blocks[0][0:T]
        for k in range(1, f):
            out = out + blocks[k][k:k + T]
        return out

    def _conv_window(self, window: Tensor) -> Tensor:
        """Causal convolution of the last len(window) - f + 1 positions of an
        explicit window (incremental decoding). window: (f-1+T) x B x C."""
        T = window.size(0) - self.kernel_size + 1
        out = self.conv_bias
        for k in range(self.kernel_size):
            out = out + F.linear(window[k:k + T], self.conv_weight[k])
        return out

    def local_context(self, r: Tensor, conv_out: Tensor) -> Tensor:
        """l_c = LayerNorm(GLU(conv) + r) (Eq. 6). T x B x C."""
        r_hat = self.dropout_module(F.glu(conv_out, dim=-1))
        return self.local_layer_norm(r_hat + r)

    # ------------------------------------------------------------------
    # incremental state
    # ------------------------------------------------------------------
    def _get_input_buffer(
        self, incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]]
    ) -> Dict[str, Optional[Tensor]]:
        result = self.get_incremental_state(incremental_state, "dc_state")
        if result is not None:
            return result
        empty: Dict[str, Optional[Tensor]] = {}
        return empty

    def _set_input_buffer(
        self,
        incremental_state: Dict[str, Dict[str, Optional[Tensor]]],
        buffer: Dict[str, Optional[Tensor]],
    ):
        return self.set_incremental_state(incremental_state, "dc_state", buffer)

    def reorder_incremental_state(
        self, incremental_state: Dict[str, Dict[str, Optional[Tensor]]], new_order: Tensor
    ):
        """Reorder the cached conv inputs (B x (f-1) x C) and key padding mask
        (B x S) for beam search; the time-major keys and values
        (S x B x 2H x hd) take the order at the next step's append."""
        return reorder_cache(self, incremental_state, "dc_state", new_order)

    # ------------------------------------------------------------------
    def forward(
        self,
        query: Tensor,
        key: Optional[Tensor] = None,
        value: Optional[Tensor] = None,
        key_padding_mask: Optional[Tensor] = None,
        incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None,
        need_weights: bool = False,
        attn_mask: Optional[Tensor] = None,
        **unused,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        """Same call signature as fairseq's ``MultiheadAttention`` used as
        self-attention (``key``/``value`` must be the query itself).

        Args:
            query: r, T x B x C.
            key_padding_mask: B x T, True at padding.
            incremental_state: decoder cache (causal mode only); query then
                holds only the new positions.
            need_weights: also return [alpha_l, alpha_g] as B x 2 x H x T x S.
            attn_mask: T x S additive float (or boolean, True = masked) mask,
                the causal mask in the decoder.

        Returns:
            z_hat (Eq. 8), T x B x C, and the attention probabilities or None.
        """
        r = query
        T, B, C = r.shape
        if key is not None and key is not query:
            raise ValueError("DualContextualModule replaces self-attention: key must be the query")
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.to(torch.bool)
            # keep padding out of the convolution window of real tokens
            r_conv = r.masked_fill(key_padding_mask.transpose(0, 1).unsqueeze(-1), 0.0)
        else:
            r_conv = r

        saved: Optional[Dict[str, Optional[Tensor]]] = None
        if incremental_state is not None:
            if not self.causal:
                raise ValueError("incremental decoding needs a causal (decoder) DC module")
            saved = self._get_input_buffer(incremental_state)
            prev_input = saved.get("prev_input")
            if prev_input is None:
                prev_input = r.new_zeros(B, self.kernel_size - 1, C)
            window = torch.cat([prev_input.transpose(0, 1), r_conv], dim=0)
            conv_out = self._conv_window(window)
            saved["prev_input"] = window[window.size(0) - (self.kernel_size - 1):].transpose(0, 1)
        else:
            conv_out = self._conv_full(r_conv)
        l_c = self.local_context(r, conv_out)

        H, hd = self.num_heads, self.head_dim
        # T x B x 4H x hd: heads [q_l | q_g | k_g | v_g]; T x B x 2H x hd: [k_l | v_l]
        pr = self.r_proj(r).view(T, B, 4 * H, hd)
        pl = self.lc_proj(l_c).view(T, B, 2 * H, hd)
        # split, not sliced (see _conv_full): one concatenation in the backward
        q, k_g, v_g = pr.split([2 * H, H, H], dim=2)
        k_l, v_l = pl.split([H, H], dim=2)
        q = q.permute(1, 2, 0, 3)  # B x 2H x T x hd: [q_l | q_g]
        k_parts = [k_l, k_g]
        v_parts = [v_l, v_g]

        if saved is not None:
            # written straight into the time-major cache, read back as B x 2H x S x hd views
            k, v, key_padding_mask = append_time_major(saved, k_parts, v_parts, key_padding_mask)
            assert incremental_state is not None
            self._set_input_buffer(incremental_state, saved)
            if attn_mask is None and T > 1:
                # new positions attend to the cache and causally among themselves
                S_prev = k.size(2) - T
                attn_mask = torch.ones(T, S_prev + T, dtype=torch.bool, device=r.device).triu(S_prev + 1)
        else:
            k = torch.cat(k_parts, dim=2).permute(1, 2, 0, 3)  # B x 2H x T x hd
            v = torch.cat(v_parts, dim=2).permute(1, 2, 0, 3)
        S = k.size(2)

        mask = self._combine_masks(attn_mask, key_padding_mask, T, S, B, r.dtype)
        want_probs = need_weights or self.keep_readout
        if want_probs:
            scores = torch.matmul(q, k.transpose(-1, -2)) * (hd ** -0.5)
            if mask is not None:
                scores = scores + mask
            probs = torch.softmax(scores, dim=-1)
            out = torch.matmul(self.attention_dropout_module(probs), v)
            alpha = probs.view(B, 2, H, T, S)  # [alpha_l, alpha_g]
            if self.keep_readout:
                self.record_readout(alpha=alpha)  # B x 2 x H x T x S
        else:
            out = attention(q, k, v, mask, dropout_p=dropout_p(self.attention_dropout_module))
            alpha = None
        # B x 2H x T x hd -> T x B x 2C laid out as [h_l; h_g] (Eq. 8)
        out = out.permute(2, 0, 1, 3).reshape(T, B, 2 * C)
        z_hat = self.out_proj(out)
        return z_hat, (alpha if need_weights else None)

    @staticmethod
    def _combine_masks(
        attn_mask: Optional[Tensor], key_padding_mask: Optional[Tensor], T: int, S: int, B: int, dtype: torch.dtype
    ) -> Optional[Tensor]:
        """Merge a T x S mask (fairseq convention: additive float, or boolean
        True = masked) and a B x S padding mask (True = pad) into one additive
        SDPA mask broadcastable to B x 2H x T x S."""
        if attn_mask is None and key_padding_mask is None:
            return None
        device = (attn_mask if attn_mask is not None else key_padding_mask).device
        # a 16-byte aligned buffer, as the fused CUDA kernels read it (fused_attention)
        mask = padded_empty(B if key_padding_mask is not None else 1, 1, T if attn_mask is not None else 1, S,
                            dtype=dtype, device=device).zero_()
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                mask.masked_fill_(attn_mask.view(1, 1, T, S), float("-inf"))
            else:
                mask += attn_mask.to(dtype).view(1, 1, T, S)
        if key_padding_mask is not None:
            mask.masked_fill_(key_padding_mask.view(B, 1, 1, S), float("-inf"))
        return mask
