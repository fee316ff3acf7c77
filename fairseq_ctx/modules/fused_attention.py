"""Scaled dot-product attention with inputs the fused CUDA kernels can read.

``F.scaled_dot_product_attention`` dispatches on CUDA to flash,
memory-efficient or cuDNN kernels that load q, k, v and the mask in 16-byte
vectors. They assume the last dimension contiguous and every other stride
and the storage offset a multiple of 16 bytes; a view that breaks this (a
slice of a fused projection whose rows are ``3C + n`` elements long) is not
always caught by the dispatcher, and the kernel then fails with "CUDA
error: misaligned address", killing the process. On CPU nothing fails, so
the rule is enforced here and checked by ``tests/test_fused_attention_layout.py``
on CPU.

The modules lay their tensors out to meet the rule in the first place
(ctxsan pads its fused projection's rows to a multiple of 8 elements; DC's
additive mask is built in a padded buffer): :func:`aligned` then returns
its input unchanged, and only a layout nobody planned for costs a copy.
"""
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

ALIGN_BYTES = 16


def is_aligned(t: Tensor) -> bool:
    """Whether the fused kernels can read ``t`` in 16-byte vectors."""
    size = t.element_size()
    if t.dim() and t.size(-1) > 1 and t.stride(-1) != 1:
        return False
    if (t.storage_offset() * size) % ALIGN_BYTES:
        return False
    # dimensions of size 1 are never stepped over, stride 0 re-reads one row
    return all(t.size(d) == 1 or (t.stride(d) * size) % ALIGN_BYTES == 0 for d in range(t.dim() - 1))


def padded_empty(*shape: int, dtype: torch.dtype, device) -> Tensor:
    """An uninitialised tensor of ``shape`` whose rows start on 16-byte
    boundaries: a view into a buffer with the last dimension rounded up."""
    per = ALIGN_BYTES // torch.empty((), dtype=dtype).element_size()
    last = shape[-1]
    width = -(-last // per) * per
    return torch.empty(*shape[:-1], width, dtype=dtype, device=device)[..., :last]


def aligned(t: Tensor) -> Tensor:
    """``t`` itself when :func:`is_aligned`, else a copy that is."""
    if is_aligned(t):
        return t
    out = padded_empty(*t.shape, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


def attend_mask(key_padding_mask: Optional[Tensor], T: int, S: int, causal: bool, device) -> Optional[Tensor]:
    """The boolean SDPA mask, True where a query may attend a key, in a
    16-byte aligned buffer: ``B x 1 x (T|1) x S``.

    ``key_padding_mask`` (``B x S``, True at padding) hides padded keys;
    ``causal`` hides the future: the T queries are the last T of the S key
    positions, so query t sees key s when ``s <= S - T + t``. None when
    neither applies.
    """
    if key_padding_mask is None and not causal:
        return None
    B = 1 if key_padding_mask is None else key_padding_mask.size(0)
    rows = T if causal else 1
    out = padded_empty(B, 1, rows, S, dtype=torch.bool, device=device)
    if causal:
        out.copy_(torch.ones(rows, S, dtype=torch.bool, device=device).tril(S - T))
    else:
        out.fill_(True)
    if key_padding_mask is not None:
        out &= ~key_padding_mask[:, None, None, :]
    return out


def attention(q: Tensor, k: Tensor, v: Tensor, attn_mask: Optional[Tensor] = None, dropout_p: float = 0.0,
              is_causal: bool = False) -> Tensor:
    """``F.scaled_dot_product_attention`` (``B x H x T x hd`` inputs) with
    every input :func:`aligned`."""
    return F.scaled_dot_product_attention(
        aligned(q), aligned(k), aligned(v), attn_mask=None if attn_mask is None else aligned(attn_mask),
        dropout_p=dropout_p, is_causal=is_causal)
