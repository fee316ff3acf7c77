"""Incremental-state bookkeeping shared by the modules that cache per-step
values in fairseq's incremental state (ctxsan's attention and prefix sums,
the DC module's convolution window and keys/values, GRET's context gate).

fairseq keeps one dictionary of tensors per module under a module-unique key
(``FairseqIncrementalState.get_incremental_state``). Beam search reorders
every cache along its batch dimension, which for all our caches is dim 0
(``B x ...``; keys and values ``B x H x S x hd``, as fairseq's
``MultiheadAttention`` stores them).
"""
from typing import Dict, Optional, Tuple

import torch
from torch import Tensor

IncrementalState = Dict[str, Dict[str, Optional[Tensor]]]


def reorder_cache(module, incremental_state: IncrementalState, key: str, new_order: Tensor) -> IncrementalState:
    """Beam search: keep the rows ``new_order`` of every tensor that ``module``
    cached under ``key`` (nothing cached yet: nothing to do)."""
    cache = module.get_incremental_state(incremental_state, key)
    if cache:
        for name, value in cache.items():
            if value is not None:
                cache[name] = value.index_select(0, new_order)
        incremental_state = module.set_incremental_state(incremental_state, key, cache)
    return incremental_state


def append_keys_values(cache: Dict[str, Optional[Tensor]], k: Tensor, v: Tensor,
                       key_padding_mask: Optional[Tensor]) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
    """Append this step's keys and values (``B x H x T x hd``) to those cached
    in ``cache`` and the key padding mask (``B x T``, True at padding, or None)
    to the cached one (``B x S``; missing parts count as real tokens); store
    and return the whole ``k``, ``v`` (``B x H x S+T x hd``) and mask."""
    T = k.size(2)
    prev_key = cache.get("prev_key")
    if prev_key is not None:
        prev_value = cache["prev_value"]
        assert prev_value is not None
        k = torch.cat([prev_key, k], dim=2)
        v = torch.cat([prev_value, v], dim=2)
    prev_mask = cache.get("prev_key_padding_mask")
    if key_padding_mask is not None or prev_mask is not None:
        B, S = k.size(0), k.size(2)
        if key_padding_mask is None:
            key_padding_mask = torch.zeros(B, T, dtype=torch.bool, device=k.device)
        if prev_mask is None:
            prev_mask = torch.zeros(B, S - T, dtype=torch.bool, device=k.device)
        key_padding_mask = torch.cat([prev_mask, key_padding_mask], dim=1)
        cache["prev_key_padding_mask"] = key_padding_mask
    cache["prev_key"] = k
    cache["prev_value"] = v
    return k, v, key_padding_mask
