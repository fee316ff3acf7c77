"""Half precision (fp16 and bf16) forward, backward and incremental decoding
of every architecture, on CPU.

fairseq's ``--fp16`` needs CUDA and its ``--bf16`` without CUDA goes to the
TPU path, so mixed-precision *training* can only be shown on a GPU (see the
README). What CPU can show is that nothing in our modules assumes float32:
padding masks, running sums, routing and gates stay finite and of the model's
dtype, and the half-precision outputs agree with float32 ones.
"""
import pytest
import torch

from tests.utils import build_model

VARIANTS = {
    "ctxsan_both": ("transformer_ctxsan_tiny", ["--ctxsan-side", "both"]),
    "dc_full": ("transformer_dc_tiny", ["--dc-decoder-layers", "all"]),
    "gret": ("transformer_gret_tiny", []),
    "ctxenc": ("transformer_ctxenc_tiny", []),
}
DTYPES = {"fp16": (torch.float16, 0.08), "bf16": (torch.bfloat16, 0.3)}


def _batch(model, bsz=3, src_len=7, tgt_len=6, seed=0):
    """Left-padded sources of different lengths (fairseq's default layout), a
    context batch for ctxenc, and right-padded decoder inputs."""
    g = torch.Generator().manual_seed(seed)
    d = model.encoder.dictionary
    pad, eos = d.pad(), d.eos()
    src = torch.randint(d.nspecial, len(d), (bsz, src_len), generator=g)
    lengths = torch.tensor([src_len, src_len - 3, src_len - 1][:bsz])
    for i, n in enumerate(lengths.tolist()):
        src[i, : src_len - n] = pad
    src[:, -1] = eos
    prev = torch.randint(d.nspecial, len(d), (bsz, tgt_len), generator=g)
    prev[:, 0] = eos
    kwargs = {}
    if "ctx_tokens" in model.forward.__code__.co_varnames:
        ctx = torch.randint(d.nspecial, len(d), (bsz, 5), generator=g)
        ctx[0, :3] = pad  # a short context beside longer ones
        ctx[:, -1] = eos
        kwargs = {"ctx_tokens": ctx, "ctx_lengths": ctx.ne(pad).sum(1)}
    return src, lengths, prev, kwargs


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_half_precision_forward_backward_and_incremental(variant, dtype_name):
    dtype, tol = DTYPES[dtype_name]
    arch, flags = VARIANTS[variant]
    torch.manual_seed(0)
    model = build_model(arch, flags).eval()
    src, lengths, prev, kwargs = _batch(model)
    with torch.no_grad():
        ref = model.get_normalized_probs(model(src, lengths, prev, **kwargs), log_probs=True)

    half = build_model(arch, flags)
    half.load_state_dict(model.state_dict())
    half = half.to(dtype).eval()

    # Full forward: finite, in the model's dtype, close to float32.
    out = half(src, lengths, prev, **kwargs)
    assert out[0].dtype == dtype
    lprobs = half.get_normalized_probs(out, log_probs=True).float()
    assert torch.isfinite(lprobs).all()
    assert (lprobs - ref).abs().max().item() < tol * ref.abs().max().item()

    # Backward in half precision: every gradient finite (gates, routing, convolutions).
    half.train()
    for m in half.modules():  # dropout off: compare like with like
        if hasattr(m, "p") and isinstance(getattr(m, "p"), float):
            m.p = 0.0
    loss = -half.get_normalized_probs(half(src, lengths, prev, **kwargs), log_probs=True).float().mean()
    loss.backward()
    grads = [p.grad for p in half.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads if g is not None)
    assert sum(g is not None for g in grads) > 0.9 * len(grads)

    # Incremental decoding: the cached state (running sums, convolution
    # buffers, cached keys) stays finite and the steps match the full pass.
    half.eval()
    with torch.no_grad():
        enc = half.encoder(src, lengths, **kwargs) if kwargs else half.encoder(src, src_lengths=lengths)
        full = half.decoder(prev, enc)[0].float()
        state = {}
        steps = [half.decoder(prev[:, : t + 1], enc, incremental_state=state)[0].float()
                 for t in range(prev.size(1))]
    step_out = torch.cat(steps, dim=1)
    assert torch.isfinite(step_out).all()
    assert (step_out - full).abs().max().item() < tol * full.abs().max().item()
