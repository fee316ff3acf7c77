"""Incremental-state bookkeeping shared by the modules that cache per-step
values in fairseq's incremental state (ctxsan's attention and prefix sums,
the DC module's convolution window and keys/values, GRET's context gate).

fairseq keeps one dictionary of tensors per module under a module-unique key
(``FairseqIncrementalState.get_incremental_state``). Beam search reorders
every cache along its batch dimension, which for all our caches but one is
dim 0 (``B x ...``; keys and values ``B x H x S x hd``, as fairseq's
``MultiheadAttention`` stores them).

The DC module keeps its keys and values time-major instead (``S x B x H x
hd``, :func:`append_time_major`) and lets beam search's reorder wait for the
next step: fairseq's layout copies the whole cache twice per step (the
reorder's ``index_select``, then ``torch.cat`` with the new position), the
deferred reorder gathers it once straight into the grown buffer and writes
the new position in place. Its attention reads the buffer through a
``permute`` (no copy).
"""
from typing import Dict, List, Optional, Tuple

import torch
from torch import Tensor

IncrementalState = Dict[str, Dict[str, Optional[Tensor]]]
_TIME_MAJOR = ("key_tm", "value_tm")


def reorder_cache(module, incremental_state: IncrementalState, key: str, new_order: Tensor) -> IncrementalState:
    """Beam search: keep the rows ``new_order`` of every tensor that ``module``
    cached under ``key`` (nothing cached yet: nothing to do). The time-major
    keys and values of :func:`append_time_major` are not copied here: the
    order is composed into ``pending_order``, which their next append applies."""
    cache = module.get_incremental_state(incremental_state, key)
    if cache:
        for name, value in cache.items():
            # a pending order is reordered like any batch-major tensor: two
            # reorders before the next step compose to pending[new_order]
            if value is not None and name not in _TIME_MAJOR:
                cache[name] = value.index_select(0, new_order)
        if cache.get("key_tm") is not None and cache.get("pending_order") is None:
            # kept past this call: a copy, so that a caller reusing its order
            # tensor in place cannot change what the next append gathers
            cache["pending_order"] = new_order.clone()
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
    key_padding_mask = _extend_mask(cache, key_padding_mask, k.size(0), k.size(2) - T, T, k.device)
    cache["prev_key"] = k
    cache["prev_value"] = v
    return k, v, key_padding_mask


def settled(cache: Dict[str, Optional[Tensor]]) -> Dict[str, Optional[Tensor]]:
    """The cache as a reorder done at once would have left it: time-major
    tensors gathered in the pending order, which is dropped (for comparing
    caches; decoding never needs it)."""
    order = cache.get("pending_order")
    out = {name: value for name, value in cache.items() if name != "pending_order"}
    if order is not None:
        for name in _TIME_MAJOR:
            if out.get(name) is not None:
                out[name] = out[name].index_select(1, order)
    return out


def _extend_mask(cache: Dict[str, Optional[Tensor]], key_padding_mask: Optional[Tensor], B: int, S: int, T: int,
                 device: torch.device) -> Optional[Tensor]:
    """The cached ``B x S`` key padding mask followed by this step's ``B x T``
    (missing parts count as real tokens; None while neither exists)."""
    prev_mask = cache.get("prev_key_padding_mask")
    if key_padding_mask is None and prev_mask is None:
        return None
    if key_padding_mask is None:
        key_padding_mask = torch.zeros(B, T, dtype=torch.bool, device=device)
    if prev_mask is None:
        prev_mask = torch.zeros(B, S, dtype=torch.bool, device=device)
    key_padding_mask = torch.cat([prev_mask, key_padding_mask], dim=1)
    cache["prev_key_padding_mask"] = key_padding_mask
    return key_padding_mask


def append_time_major(cache: Dict[str, Optional[Tensor]], k_parts: List[Tensor], v_parts: List[Tensor],
                      key_padding_mask: Optional[Tensor]) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
    """Append this step's keys and values to the time-major cache and return
    all of them as ``B x H x S+T x hd`` views of it.

    ``k_parts``/``v_parts`` are ``T x B x h_i x hd`` blocks laid side by side
    along the heads (H = sum h_i), written straight into the grown buffer
    (no concatenated copy of the step). The cached ``S x B x H x hd`` keys and
    values are gathered into it in the order beam search left pending, in the
    same copy. The key padding mask is batch-major and handled as in
    :func:`append_keys_values`.
    """
    T, B, hd = k_parts[0].size(0), k_parts[0].size(1), k_parts[0].size(3)
    H = sum(p.size(2) for p in k_parts)
    prev_k, prev_v = cache.get("key_tm"), cache.get("value_tm")
    order = cache.pop("pending_order", None)
    S = 0 if prev_k is None else prev_k.size(0)
    out = []
    for prev, parts in ((prev_k, k_parts), (prev_v, v_parts)):
        buf = parts[0].new_empty(S + T, B, H, hd)  # S+T x B x H x hd
        if prev is not None:
            if order is not None and not (prev.requires_grad and torch.is_grad_enabled()):
                torch.index_select(prev, 1, order, out=buf[:S])
            else:  # out= cannot record autograd: gather, then copy
                buf[:S] = prev if order is None else prev.index_select(1, order)
        h = 0
        for part in parts:
            buf[S:, :, h:h + part.size(2)] = part
            h += part.size(2)
        out.append(buf)
    cache["key_tm"], cache["value_tm"] = out
    key_padding_mask = _extend_mask(cache, key_padding_mask, B, S, T, out[0].device)
    return out[0].permute(1, 2, 0, 3), out[1].permute(1, 2, 0, 3), key_padding_mask
