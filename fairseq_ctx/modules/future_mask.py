"""A boolean future mask for fairseq decoders.

fairseq's ``TransformerDecoderBase.buffered_future_mask`` builds the causal
mask as a *float* matrix (``-inf`` above the diagonal), while its
``MultiheadAttention`` hands ``F.multi_head_attention_forward`` the padding
mask as ``key_padding_mask.bool()``.  Two masks of different dtypes make torch
(2.x) warn ``Support for mismatched key_padding_mask and attn_mask is
deprecated`` on every training step and every ``--score-reference`` pass
whose targets are padded.  :class:`BoolFutureMask` gives the decoder a
boolean causal mask (True = may not attend), the type torch's attention,
fairseq's xFormers path and our own attention modules accept, so both masks
are boolean and nothing is raised.  torch turns both into the same additive
``-inf`` mask as before, so the outputs do not change.

Where a boolean mask would be read wrongly, fairseq's float mask is kept:

* ``--cross-self-attention``: the decoder layer concatenates a float zero
  block to the mask (``torch.cat`` would turn True into ``+1.0``);
* ONNX tracing, XLA devices, pruned attention (``skip_embed_dim_check``)
  and TorchScript: ``MultiheadAttention`` then *adds* the mask to the
  attention scores itself.

The mask is not a parameter or buffer, so checkpoints are unaffected.
"""
import torch
from torch import Tensor


class BoolFutureMask:
    """Mixin placed before a fairseq ``TransformerDecoderBase`` subclass:
    ``class MyDecoder(BoolFutureMask, TransformerDecoderBase)``."""

    def buffered_future_mask(self, tensor: Tensor) -> Tensor:
        if (getattr(self, "cross_self_attention", False) or getattr(self, "onnx_trace", False)
                or tensor.device.type == "xla" or self._adds_mask_itself()):
            cached = getattr(self, "_future_mask", None)
            if cached is not None and cached.dtype == torch.bool:
                self._future_mask = torch.empty(0)  # fairseq's version would cast it to 0/1 floats
            return super().buffered_future_mask(tensor)
        dim = tensor.size(0)
        cached = self._future_mask
        if (cached.dtype != torch.bool or cached.device != tensor.device or cached.size(0) < dim):
            cached = torch.ones(dim, dim, dtype=torch.bool, device=tensor.device).triu(1)
            self._future_mask = cached
        return cached[:dim, :dim]

    def _adds_mask_itself(self) -> bool:
        """Whether a self-attention of this decoder would take fairseq's slow
        path, which adds the mask to the scores (``attn_weights += attn_mask``:
        a boolean mask would add 1 to the future, silently): a pruned
        ``MultiheadAttention`` (``skip_embed_dim_check``) or TorchScript."""
        if torch.jit.is_scripting():
            return True
        return any(getattr(getattr(layer, "self_attn", None), "skip_embed_dim_check", False)
                   for layer in self.layers)


__all__ = ["BoolFutureMask"]
