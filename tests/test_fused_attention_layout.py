"""Every call of ``F.scaled_dot_product_attention`` in the plugin hands the
fused CUDA kernels (flash, memory-efficient, cuDNN) inputs they can read.

Those kernels load q, k, v and the mask in 16-byte vectors: the last
dimension must be contiguous and every other stride and the storage offset
a multiple of 16 bytes. A view whose rows are not (ctxsan's q/k/v were views
of its fused projection, rows of ``3C + n`` elements) passes every CPU test
and crashes a CUDA process with "misaligned address". The check runs on
CPU: ``F.scaled_dot_product_attention`` is wrapped, every call's inputs are
checked here (with the rule written out below, not the plugin's own
helper), for every variant at Base and Big widths, odd and even lengths,
padding, and incremental decoding with a beam reorder.
"""
import sys

import pytest
import torch
import torch.nn.functional as F

from fairseq_ctx.architectures import VARIANTS
from fairseq_ctx.modules import fused_attention
from tests.test_contract import ORDER, _batch
from tests.utils import tiny_model

ALIGN = 16  # bytes
SIZES = {
    # widths of fairseq's transformer_wmt_en_de (Base) and _big, two layers a side
    "base": ("--encoder-embed-dim", "512", "--decoder-embed-dim", "512", "--encoder-ffn-embed-dim", "2048",
             "--decoder-ffn-embed-dim", "2048", "--encoder-attention-heads", "8", "--decoder-attention-heads", "8"),
    "big": ("--encoder-embed-dim", "1024", "--decoder-embed-dim", "1024", "--encoder-ffn-embed-dim", "4096",
            "--decoder-ffn-embed-dim", "4096", "--encoder-attention-heads", "16", "--decoder-attention-heads", "16"),
}
# the architectures whose own modules call it (the others use fairseq's MultiheadAttention)
USES_SDPA = {"transformer_ctxsan", "transformer_dc", "transformer_dc_full"}
CASES = [("base", torch.float32), ("base", torch.bfloat16), ("big", torch.bfloat16)]


def layout_faults(name: str, t) -> list:
    """What in ``t``'s layout a fused kernel cannot read ([] when nothing)."""
    if t is None:
        return []
    size = t.element_size()
    faults = []
    if t.dim() and t.size(-1) > 1 and t.stride(-1) != 1:
        faults.append(f"{name}: last dimension not contiguous (stride {t.stride(-1)})")
    if (t.storage_offset() * size) % ALIGN:
        faults.append(f"{name}: storage offset {t.storage_offset()} x {size} B not a multiple of {ALIGN}")
    for dim in range(t.dim() - 1):
        # a dimension of size 1 is never stepped over; stride 0 (broadcast) reads the same row
        if t.size(dim) > 1 and (t.stride(dim) * size) % ALIGN:
            faults.append(f"{name}: stride {t.stride(dim)} of dim {dim} x {size} B not a multiple of {ALIGN}"
                          f" (shape {tuple(t.shape)})")
    return faults


class Recorder:
    """Wraps ``F.scaled_dot_product_attention`` (``faults``: what the kernels
    would be handed) and ``fused_attention.aligned`` (``copies``: inputs the
    modules laid out badly, which the guard had to copy on every call)."""

    def __init__(self):
        self.calls, self.faults, self.copies = 0, [], []
        self.sdpa = F.scaled_dot_product_attention
        self.aligned = fused_attention.aligned

    def guard(self, t):
        self.copies += layout_faults("input", t)
        return self.aligned(t)

    def __call__(self, q, k, v, attn_mask=None, *args, **kwargs):
        # calls of the plugin's modules only: torch's own multi_head_attention_forward
        # (fairseq's MultiheadAttention) lays out and pads its inputs itself
        if sys._getframe(1).f_globals.get("__name__", "").startswith("fairseq_ctx"):
            self.calls += 1
            for name, t in (("q", q), ("k", k), ("v", v), ("attn_mask", attn_mask)):
                self.faults += layout_faults(name, t)
        return self.sdpa(q, k, v, attn_mask, *args, **kwargs)


def _model(variant, size, dtype):
    dims = ["--encoder-layers", "2", "--decoder-layers", "2", *SIZES[size]]
    return tiny_model(variant, dims=dims, random_constants=False).to(dtype)


def _exercise(model):
    """A training-mode forward on a padded batch with odd and even lengths
    (backward reads the same tensors), then three incremental decoding steps
    with a beam reorder."""
    src, src_lengths, prev, _, kwargs = _batch(model)
    with torch.no_grad():
        model.train()
        model(src, src_lengths, prev, **kwargs)
        model.eval()
        enc = model.encoder(src, src_lengths, **kwargs)
        state = {}
        for t in range(3):
            model.decoder(prev[:, :t + 1], enc, incremental_state=state)
            if t == 1:
                model.decoder.reorder_incremental_state_scripting(state, ORDER)
                enc = model.encoder.reorder_encoder_out(enc, ORDER)
                prev = prev.index_select(0, ORDER)


@pytest.mark.slow
@pytest.mark.parametrize("size,dtype", CASES, ids=[f"{s}-{str(d)[6:]}" for s, d in CASES])
@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_fused_attention_inputs_are_16_byte_aligned(variant, size, dtype, monkeypatch):
    recorder = Recorder()
    monkeypatch.setattr(F, "scaled_dot_product_attention", recorder)
    monkeypatch.setattr(fused_attention, "aligned", recorder.guard)
    _exercise(_model(variant, size, dtype))
    assert recorder.calls or variant.arch not in USES_SDPA, "the plugin's fused attention was never called"
    assert recorder.faults == [], "\n".join(sorted(set(recorder.faults)))
    assert recorder.copies == [], "\n".join(sorted(set(recorder.copies)))


@pytest.mark.unit
def test_the_layout_rule_finds_a_fused_projection_view():
    """The rule itself: ctxsan's former q (a view of a T x B x (3C + n)
    projection) fails it, a contiguous B x H x T x hd tensor passes."""
    T, B, C, H = 5, 3, 512, 8
    fused = torch.zeros(T, B, 3 * C + 2)
    q = fused[..., :C].reshape(T, B, H, C // H).permute(1, 2, 0, 3)
    assert any("stride" in f for f in layout_faults("q", q))
    assert layout_faults("q", q.contiguous()) == []
    assert layout_faults("mask", torch.zeros(B, 1, 1, 7)) != []  # rows of 7 x 4 bytes
    assert layout_faults("mask", torch.zeros(B, 1, 1, 8)) == []
