"""Tests for transformer_dc (Ampomah et al. 2021, Dual Contextual module)."""
import json
import math

import pytest
import torch

import fairseq_ctx  # noqa: F401  (registers transformer_dc)
from fairseq import options

from fairseq_ctx.analysis import dc_divergence
from fairseq_ctx.analysis.dc_divergence import head_max_distribution, js_divergence
from fairseq_ctx.models.transformer_dc import parse_layer_spec
from fairseq_ctx.modules.dual_contextual import DualContextualModule
from fairseq_ctx.modules.readout import reading
from tests.utils import REPO
from tests.utils import build_model as build
from tests.utils import n_params, padded_batch, tiny_model, toy_dictionary, train_in_process

torch.set_num_threads(1)

# the token ids the model-level tests draw (of the toy dictionary's 4..43), no </s>
WORDS = (4, 40)


# ---------------------------------------------------------------------------
# module
# ---------------------------------------------------------------------------
@pytest.mark.unit
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("f", [1, 2, 3, 4])
def test_conv_matches_eq6_window(f, causal):
    """The fused convolution equals Eq. 6 written out: GLU-input
    [r_{t-a}, ..., r_{t+b}] W_r + b_r with zeros outside the sentence."""
    torch.manual_seed(0)
    C, T, B = 8, 7, 2
    m = DualContextualModule(C, 2, kernel_size=f, causal=causal)
    torch.nn.init.normal_(m.conv_bias)
    r = torch.randn(T, B, C)
    a = f - 1 if causal else f // 2
    padded = torch.cat([r.new_zeros(a, B, C), r, r.new_zeros(f - 1 - a, B, C)])
    window = torch.cat([padded[k:k + T] for k in range(f)], dim=-1)  # T x B x f*C
    w_r = m.conv_weight.permute(1, 0, 2).reshape(2 * C, f * C)  # (2C) x (f*C)
    expected = window @ w_r.t() + m.conv_bias
    assert torch.allclose(m._conv_full(r), expected, atol=1e-5)


@pytest.mark.unit
def test_module_shapes_and_weights():
    torch.manual_seed(0)
    C, H, T, B = 16, 4, 5, 3
    m = DualContextualModule(C, H, kernel_size=2).eval()
    r = torch.randn(T, B, C)
    kpm = torch.zeros(B, T, dtype=torch.bool)
    kpm[1, :2] = True
    z, alpha = m(r, r, r, key_padding_mask=kpm, need_weights=True)
    assert z.shape == (T, B, C)
    assert alpha.shape == (B, 2, H, T, T)
    assert torch.allclose(alpha.sum(-1), torch.ones(B, 2, H, T), atol=1e-5)
    assert float(alpha[1, :, :, :, :2].detach().abs().max()) == 0.0  # padding gets no weight
    z2, none = m(r, r, r, key_padding_mask=kpm)  # SDPA path gives the same output
    assert none is None
    assert torch.allclose(z, z2, atol=1e-5)
    with reading(m):  # the readout is the tensor need_weights returns, and changes no output
        z3, none = m(r, r, r, key_padding_mask=kpm)
        assert none is None and torch.equal(z3, z)
        assert torch.equal(m.last_readout["alpha"], alpha.detach())
    # W_r f*C x 2C + b, LN, 2 FI x QKV, W_z 2C x C + b (Eq. 6-8), no FI output projection
    expected = 2 * C * 2 * C + 2 * C + 2 * C + 6 * (C * C + C) + 2 * C * C + C
    assert n_params(m) == expected


def _reference_dc(m, r, key_padding_mask, attn_mask, f=None, causal=None):
    """Eq. 6-8 written out with the module's parameters: the local unit
    l_c = LN(GLU([r_{t-a}..r_{t+b}] W_r + b_r) + r) over zero-padded inputs,
    h_l = FI(r, l_c), h_g = FI(r, r) with FI(A, B) = concat_i ATT(A W^q_i,
    B W^k_i, B W^v_i), and z_hat = [h_l; h_g] W_z + b_z. r: T x B x C.
    ``f``, ``causal``: the kernel size and the window (left of t only, or
    centred) to write it with (default: the module's)."""
    T, B, C = r.shape
    H, hd = m.num_heads, m.head_dim
    f = m.kernel_size if f is None else f
    causal = m.causal if causal is None else causal
    real = r if key_padding_mask is None else r * (~key_padding_mask).t().unsqueeze(-1)
    a = f - 1 if causal else f // 2
    padded = torch.cat([r.new_zeros(a, B, C), real, r.new_zeros(f - 1 - a, B, C)])
    window = torch.cat([padded[k:k + T] for k in range(f)], dim=-1)  # T x B x f*C
    w_r = m.conv_weight.permute(1, 0, 2).reshape(2 * C, f * C)
    ln = m.local_layer_norm
    l_c = torch.nn.functional.layer_norm(
        torch.nn.functional.glu(window @ w_r.t() + m.conv_bias, dim=-1) + r, (C,), ln.weight, ln.bias, ln.eps)
    wq_l, wq_g, wk_g, wv_g = m.r_proj.weight.split(C)
    bq_l, bq_g, bk_g, bv_g = m.r_proj.bias.split(C)
    wk_l, wv_l = m.lc_proj.weight.split(C)
    bk_l, bv_l = m.lc_proj.bias.split(C)
    mask = torch.zeros(B, 1, T, T)
    if key_padding_mask is not None:
        mask = mask.masked_fill(key_padding_mask.view(B, 1, 1, T), float("-inf"))
    if attn_mask is not None:
        mask = mask + attn_mask

    def fi(a_in, b_in, wq, bq, wk, bk, wv, bv):
        q = (a_in @ wq.t() + bq).view(T, B, H, hd)
        k = (b_in @ wk.t() + bk).view(T, B, H, hd)
        v = (b_in @ wv.t() + bv).view(T, B, H, hd)
        att = torch.softmax(torch.einsum("tbhe,sbhe->bhts", q, k) / hd ** 0.5 + mask, dim=-1)
        return torch.einsum("bhts,sbhe->tbhe", att, v).reshape(T, B, C)

    h_l = fi(r, l_c, wq_l, bq_l, wk_l, bk_l, wv_l, bv_l)
    h_g = fi(r, r, wq_g, bq_g, wk_g, bk_g, wv_g, bv_g)
    return torch.cat([h_l, h_g], dim=-1) @ m.out_proj.weight.t() + m.out_proj.bias


@pytest.mark.unit
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("f", [2, 3])
def test_module_matches_eq6_to_8_written_out(f, causal):
    """The fused module (one GEMM per input, both FI units in one attention
    call) equals Eq. 6-8 transcribed, for the encoder (centred, with padding)
    and the decoder (causal mask); every parameter is randomised, biases and
    the layer norm included, so no block can stand in for another."""
    torch.manual_seed(0)
    C, H, T, B = 8, 2, 6, 3
    m = DualContextualModule(C, H, kernel_size=f, causal=causal).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(std=0.5)
    r = torch.randn(T, B, C)
    kpm, attn_mask = None, None
    if causal:
        attn_mask = torch.triu(torch.full((T, T), float("-inf")), 1)
    else:
        kpm = torch.zeros(B, T, dtype=torch.bool)
        kpm[1, :2] = True
        kpm[2, :4] = True
    expected = _reference_dc(m, r, kpm, attn_mask)
    for need_weights in (False, True):
        z, _ = m(r, r, r, key_padding_mask=kpm, attn_mask=attn_mask, need_weights=need_weights)
        torch.testing.assert_close(z, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.unit
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("orders", [[[2, 0, 0, 1]], [[1, 2, 0, 0], [3, 3, 0, 1]], [[0, 1, 2, 3]] * 3],
                         ids=["once", "twice", "identity-thrice"])
def test_module_cache_reorders_compose(orders, grad):
    """The time-major keys/values take beam search's order at the next step,
    in one gather: one, two or three reorders between two steps equal
    decoding the rows in their composed order from the start (the
    convolution window and the key padding mask are reordered at once)."""
    torch.manual_seed(0)
    C, H, T, B, split = 8, 2, 7, 4, 3
    m = DualContextualModule(C, H, kernel_size=3, causal=True).eval()
    r = torch.randn(T, B, C)
    kpm = torch.zeros(B, T, dtype=torch.bool)
    kpm[0, 0] = kpm[2, :2] = True  # left padding of some rows
    composed = torch.arange(B)
    with torch.set_grad_enabled(grad):
        inc = {}
        for t in range(split):
            m(r[t:t + 1], key_padding_mask=kpm[:, t:t + 1], incremental_state=inc)
        for order in orders:
            order = torch.tensor(order)
            m.reorder_incremental_state(inc, order)
            composed = composed.index_select(0, order)
        r_c, kpm_c = r.index_select(1, composed), kpm.index_select(0, composed)
        steps = [m(r_c[t:t + 1], key_padding_mask=kpm_c[:, t:t + 1], incremental_state=inc)[0]
                 for t in range(split, T)]
        full, _ = m(r_c, key_padding_mask=kpm_c, attn_mask=torch.triu(torch.full((T, T), float("-inf")), 1))
    torch.testing.assert_close(torch.cat(steps), full[split:], atol=1e-5, rtol=1e-5)


@pytest.mark.unit
def test_layer_spec_parsing_and_bad_flags():
    assert parse_layer_spec("all", 6, "--x") == list(range(6))
    assert parse_layer_spec("none", 6, "--x") == []
    assert parse_layer_spec("1,2,3,4,5,6", 6, "--x") == list(range(6))
    assert parse_layer_spec("1-1", 6, "--x") == [0]
    assert parse_layer_spec("5-6", 6, "--x") == [4, 5]
    assert parse_layer_spec("1,3-4", 6, "--x") == [0, 2, 3]
    with pytest.raises(ValueError, match="--dc-encoder-layers"):
        build("transformer_dc_tiny", ["--dc-encoder-layers", "3"])
    with pytest.raises(ValueError, match="--dc-decoder-layers"):
        build("transformer_dc_tiny", ["--dc-decoder-layers", "0"])
    with pytest.raises(ValueError, match="--dc-encoder-layers"):
        build("transformer_dc_tiny", ["--dc-encoder-layers", "first"])
    with pytest.raises(ValueError, match="--dc-kernel-size"):
        build("transformer_dc_tiny", ["--dc-kernel-size", "0"])


@pytest.mark.unit
def test_presets_and_layer_selection():
    def dc_flags(model):
        return ([isinstance(l.self_attn, DualContextualModule) for l in model.encoder.layers],
                [isinstance(l.self_attn, DualContextualModule) for l in model.decoder.layers])

    assert dc_flags(build("transformer_dc_tiny")) == ([True, True], [False, False])
    enc, dec = dc_flags(build("transformer_dc_tiny", ["--encoder-layers", "6", "--dc-encoder-layers", "1-4",
                                                      "--dc-decoder-layers", "2"]))
    assert enc == [True] * 4 + [False] * 2 and dec == [False, True]
    for arch, enc_spec, dec_spec, layers, dim, heads in [
        ("transformer_dc_dec", "none", "all", 6, 512, 8),
        ("transformer_dc_full_big", "all", "all", 6, 1024, 16),
        ("transformer_dc_iwslt", "all", "none", 4, 256, 4),
        ("transformer_dc_full_iwslt", "all", "all", 4, 256, 4),
    ]:
        args = options.parse_args_and_arch(options.get_training_parser(), ["/nonexistent", "--arch", arch])
        assert (args.dc_encoder_layers, args.dc_decoder_layers, args.dc_kernel_size) == (enc_spec, dec_spec, 2)
        assert (args.encoder_layers, args.decoder_layers, args.encoder_embed_dim, args.encoder_attention_heads) == (
            layers, layers, dim, heads)


@pytest.mark.slow
def test_parameter_growth_matches_paper():
    """Table 1 text: +12.7M for Enc-DC or Dec-DC, about +25M for Full-DC
    (Transformer-Base, f = 2); within 5%."""
    d = toy_dictionary(1000)
    base = n_params(build("transformer", dictionary=d))
    growth = {arch: (n_params(build(arch, dictionary=d)) - base) / 1e6
              for arch in ("transformer_dc", "transformer_dc_dec", "transformer_dc_full")}
    assert abs(growth["transformer_dc"] - 12.7) / 12.7 < 0.05, growth
    assert abs(growth["transformer_dc_dec"] - 12.7) / 12.7 < 0.05, growth
    assert abs(growth["transformer_dc_full"] - 25.0) / 25.0 < 0.05, growth


# ---------------------------------------------------------------------------
# every grid setting, by value
# ---------------------------------------------------------------------------
from fairseq_ctx.architectures import option_grid  # noqa: E402

DC_GRID = option_grid("transformer_dc")


def _plain_attention(att, x, mask):
    """fairseq's self-attention written out: concat_h softmax(Q_h K_h^T /
    sqrt(d_h) + mask) V_h, then W_O. x: T x B x C; mask: B x T x T additive."""
    T, B, C = x.shape
    H = att.num_heads
    hd = C // H
    split = lambda t: t.reshape(T, B, H, hd).permute(1, 2, 0, 3)  # noqa: E731
    q, k, v = split(att.q_proj(x)), split(att.k_proj(x)), split(att.v_proj(x))
    w = torch.softmax(q @ k.transpose(-1, -2) / hd ** 0.5 + mask.unsqueeze(1), -1)
    return att.out_proj((w @ v).permute(2, 0, 1, 3).reshape(T, B, C))


@pytest.mark.unit
@pytest.mark.parametrize("variant", DC_GRID, ids=[v.name for v in DC_GRID])
def test_every_grid_setting_computes_its_equations(variant):
    """Each setting of the option grid (Enc-DC, Dec-DC, Full-DC x kernel
    size f), in the whole model with every parameter random, left-padded
    sources and a right-padded target: in every layer the setting puts DC
    in, the self-attention sublayer's output equals Eq. 6-8 written out
    (_reference_dc) with the setting's f, a centred window and the source's
    padding in the encoder, a causal window and mask in the decoder; every
    other layer's equals plain attention. (Tried, one at a time: the
    encoder's window started at t - (f-1)//2 instead of t - f//2 fails
    Enc/Full f = 2 and 8; the kernel size flag ignored (f = 2) fails every
    f = 3 and 8 setting; the decoder's future mask dropped from the FI
    attention fails every Dec/Full setting.)"""
    model = tiny_model(variant)
    f = variant.settings["dc_kernel_size"]
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".self_attn." in name:
                p.normal_(std=0.5)
    src = padded_batch([4, 9, 6], vocab=WORDS, eos=False)
    tgt = padded_batch([7, 5, 7], left_pad=False, seed=1, bos=2, vocab=WORDS, eos=False)
    records = {"encoder": [{} for _ in model.encoder.layers], "decoder": [{} for _ in model.decoder.layers]}
    handles = []
    for side, recs in records.items():
        for rec, layer in zip(recs, getattr(model, side).layers):
            def io(module, args, kwargs, out, rec=rec):
                rec["r"], rec["out"] = kwargs["query"] if "query" in kwargs else args[0], out[0]
            handles.append(layer.self_attn.register_forward_hook(io, with_kwargs=True))
    try:
        with torch.no_grad():
            model(src, src.ne(1).sum(1), tgt)
    finally:
        for h in handles:
            h.remove()
    pads = {"encoder": src.eq(1), "decoder": tgt.eq(1)}
    dc_layers = 0
    for side, spec in (("encoder", variant.settings["dc_encoder_layers"]),
                       ("decoder", variant.settings["dc_decoder_layers"])):
        assert spec in ("all", "none"), spec
        pad = pads[side]
        T = pad.size(1)
        future = torch.triu(torch.full((T, T), float("-inf")), 1)
        for layer, rec in zip(getattr(model, side).layers, records[side]):
            att = layer.self_attn
            assert isinstance(att, DualContextualModule) == (spec == "all"), (side, type(att))
            if spec == "all":
                dc_layers += 1
                if side == "encoder":
                    want = _reference_dc(att, rec["r"], pad, None, f=f, causal=False)
                else:  # the target is right-padded: the causal window never reaches its padding
                    want = _reference_dc(att, rec["r"], None, future, f=f, causal=True)
            else:
                mask = torch.zeros(pad.size(0), T, T).masked_fill(pad.unsqueeze(1), float("-inf"))
                want = _plain_attention(att, rec["r"], mask + future if side == "decoder" else mask)
            real = ~pad.t()
            torch.testing.assert_close(rec["out"][real], want[real], atol=1e-5, rtol=1e-5)
    assert dc_layers == 2 * (variant.settings["dc_encoder_layers"] == "all") \
        + 2 * (variant.settings["dc_decoder_layers"] == "all")


# ---------------------------------------------------------------------------
# model-level invariances
# ---------------------------------------------------------------------------
@pytest.mark.unit
@pytest.mark.parametrize("f", [2, 3])
@pytest.mark.parametrize("pad_left", [True, False])
def test_encoder_padding_invariance(f, pad_left):
    """A sentence's encoding is unchanged when batched with longer ones."""
    model = tiny_model("dc", ["--dc-kernel-size", str(f)])
    src = padded_batch([4, 9, 6], left_pad=pad_left, vocab=WORDS, eos=False)
    out = model.encoder(src, src.ne(1).sum(1))["encoder_out"][0]  # T x B x C
    for i in range(3):
        alone = src[i:i + 1][src[i:i + 1].ne(1)].view(1, -1)
        ref = model.encoder(alone, alone.ne(1).sum(1))["encoder_out"][0][:, 0]
        real = src[i].ne(1)
        assert torch.allclose(out[real, i], ref, atol=1e-5), (f, pad_left, i)


def _decode_incrementally(model, tgt, enc):
    inc = {}
    outs = []
    for t in range(tgt.size(1)):
        o, _ = model.decoder(tgt[:, :t + 1], enc, incremental_state=inc)
        outs.append(o[:, -1])
    return torch.stack(outs, 1), inc


@pytest.mark.unit
@pytest.mark.parametrize("f,extra", [(2, []), (3, []), (2, ["--decoder-normalize-before"]), (1, [])])
def test_incremental_equals_full(f, extra):
    model = tiny_model("dc", ["--dc-decoder-layers", "all", "--dc-kernel-size", str(f), *extra])
    src = padded_batch([5, 8, 3], vocab=WORDS, eos=False)
    tgt = padded_batch([7, 7, 7], left_pad=False, seed=1, bos=2, vocab=WORDS, eos=False)
    full, _ = model(src, src.ne(1).sum(1), tgt)
    enc = model.encoder(src, src.ne(1).sum(1))
    step, _ = _decode_incrementally(model, tgt, enc)
    assert torch.allclose(full, step, atol=1e-5)


@pytest.mark.unit
def test_beam_reordering_mid_sequence():
    """Reordering the caches mid-sequence equals decoding the reordered batch."""
    model = tiny_model("dc", ["--dc-decoder-layers", "all", "--dc-kernel-size", "3"])
    src = padded_batch([5, 8, 3], vocab=WORDS, eos=False)
    tgt = padded_batch([8, 8, 8], left_pad=False, seed=2, bos=2, vocab=WORDS, eos=False)
    enc = model.encoder(src, src.ne(1).sum(1))
    new_order = torch.tensor([2, 0, 0, 1])
    split = 4
    inc = {}
    for t in range(split):
        model.decoder(tgt[:, :t + 1], enc, incremental_state=inc)
    model.decoder.reorder_incremental_state_scripting(inc, new_order)
    enc_r = model.encoder.reorder_encoder_out(enc, new_order)
    tgt_r = tgt.index_select(0, new_order)
    outs = []
    for t in range(split, tgt.size(1)):
        o, _ = model.decoder(tgt_r[:, :t + 1], enc_r, incremental_state=inc)
        outs.append(o[:, -1])
    src_r = src.index_select(0, new_order)
    ref, _ = model(src_r, src_r.ne(1).sum(1), tgt_r)
    assert torch.allclose(torch.stack(outs, 1), ref[:, split:], atol=1e-5)


@pytest.mark.unit
def test_alpha_readout_and_js():
    model = tiny_model("dc", ["--dc-encoder-layers", "2"])
    src = padded_batch([4, 6], vocab=WORDS, eos=False)
    plain = model.encoder(src, src.ne(1).sum(1))
    (dc,) = model.encoder.dc_modules()  # DC in encoder layer 2 only
    with reading(model.encoder) as modules:
        assert list(modules.values()) == [dc]
        out = model.encoder(src, src.ne(1).sum(1))
        alpha = dc.last_readout["alpha"]
        assert alpha.shape == (2, 2, 2, 6, 6)
        assert torch.allclose(alpha.sum(-1), torch.ones(2, 2, 2, 6), atol=1e-5)
        # the readout lives on the module, in the order of the batch it was computed
        # on: encoder_out is unchanged and beam search has nothing to reorder
        assert set(out) == set(plain)
        assert torch.equal(out["encoder_padding_mask"][0], plain["encoder_padding_mask"][0])
        # (the probabilities are then computed outside the fused kernel: equal to rounding)
        torch.testing.assert_close(out["encoder_out"][0], plain["encoder_out"][0], atol=1e-5, rtol=1e-5)
        model.encoder(src.flip(0), src.flip(0).ne(1).sum(1))
        torch.testing.assert_close(dc.last_readout["alpha"], alpha.flip(0), atol=1e-6, rtol=0)
    p_l, p_g = head_max_distribution(alpha[:, 0]), head_max_distribution(alpha[:, 1])
    js = js_divergence(p_g, p_l)
    assert js.shape == (2, 6)
    assert float(js.min()) >= -1e-7 and float(js.max()) <= math.log(2) + 1e-6
    assert float(js_divergence(p_g, p_g).abs().max()) < 1e-6
    disjoint = js_divergence(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0]))
    assert abs(float(disjoint) - math.log(2)) < 1e-6
    # after the block the readout is off and nothing is kept or recorded
    assert not dc.keep_readout and dict(dc.last_readout) == {}
    model.encoder(src, src.ne(1).sum(1))
    assert dict(dc.last_readout) == {}


@pytest.mark.unit
def test_eq10_head_reductions_on_a_hand_made_example():
    """Two heads, one query, three keys: max = [.5, .3, .8] / 1.6; peak = the
    head whose top weight (.8) beats the other's (.5), whole. (Tried: max
    without renormalising, and peak taking argmax over keys' sums instead of
    peaks, i.e. ``.sum(-1)`` for ``.max(-1).values`` -- both fail here.)"""
    from fairseq_ctx.analysis.dc_divergence import head_peak_distribution, reduce_heads

    alpha = torch.tensor([[[[0.5, 0.3, 0.2]], [[0.1, 0.1, 0.8]]]], dtype=torch.float64)  # B1 x H2 x T1 x S3
    assert torch.allclose(reduce_heads(alpha, "max"), torch.tensor([[[0.3125, 0.1875, 0.5]]], dtype=torch.float64))
    assert torch.equal(head_peak_distribution(alpha), torch.tensor([[[0.1, 0.1, 0.8]]], dtype=torch.float64))
    # a head with a lower peak but a larger spread loses: peak reads the top weight, not the sum
    alpha2 = torch.tensor([[[[0.45, 0.45, 0.1]], [[0.6, 0.2, 0.2]]]], dtype=torch.float64)
    assert torch.equal(reduce_heads(alpha2, "peak"), torch.tensor([[[0.6, 0.2, 0.2]]], dtype=torch.float64))
    with pytest.raises(ValueError, match="head reduction"):
        reduce_heads(alpha, "mean")


def _literal_js_sum(alpha, mask, how):
    """Eq. 10-12 written out with loops and math.log over one batch:
    sum over real query tokens of JS(alpha_g || alpha_l)."""
    B, _, H, T, S = alpha.shape
    total = 0.0
    for b in range(B):
        for t in range(T):
            if not mask[b][t]:
                continue
            dists = []
            for side in (0, 1):  # alpha_l, alpha_g
                rows = [[float(alpha[b, side, h, t, k]) for k in range(S)] for h in range(H)]
                if how == "max":
                    m = [max(rows[h][k] for h in range(H)) for k in range(S)]
                    dists.append([v / sum(m) for v in m])
                else:
                    best = max(range(H), key=lambda h: (max(rows[h]), -h))
                    dists.append(rows[best])
            p_l, p_g = dists
            mid = [(x + y) / 2 for x, y in zip(p_g, p_l)]
            kl = lambda p, q: sum(x * math.log(x / y) for x, y in zip(p, q) if x > 0)  # noqa: E731
            total += 0.5 * kl(p_g, mid) + 0.5 * kl(p_l, mid)
    return total


@pytest.mark.unit
@pytest.mark.parametrize("how", ["max", "peak"])
def test_layer_divergences_equal_a_literal_computation_over_real_tokens(how):
    """Per-token masking and the head reduction against loops: two sentences,
    the second left-padded by two; padded queries carry distributions too (as
    in the model), so counting them would change the sum. (Tried: ``(dv *
    mask).sum()`` -> ``dv.sum()`` fails; ``int(src_mask.sum())`` ->
    ``src_mask.numel()`` fails.)"""
    from fairseq_ctx.analysis.dc_divergence import layer_divergences

    g = torch.Generator().manual_seed(3)
    T = 5
    mask = torch.tensor([[True] * T, [False, False] + [True] * (T - 2)])
    key_mask = mask[:, None, None, None, :]  # pads get no weight as keys
    alphas = []
    for _ in range(2):  # two DC layers
        logits = torch.randn(2, 2, 3, T, T, generator=g, dtype=torch.float64) * 2
        alphas.append(logits.masked_fill(~key_mask, float("-inf")).softmax(-1))
    sums, n = layer_divergences(alphas, mask, how)
    assert n == 2 * T - 2
    for got, alpha in zip(sums, alphas):
        assert got == pytest.approx(_literal_js_sum(alpha, mask.tolist(), how), rel=1e-9)
    assert sums[0] != pytest.approx(_literal_js_sum(alphas[0], [[True] * T] * 2, how), rel=1e-6)  # pads matter


# ---------------------------------------------------------------------------
# training-recipe configs
# ---------------------------------------------------------------------------
CONFIG_DIR = REPO / "configs" / "dc"


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(p.name for p in CONFIG_DIR.glob("*.args")))
def test_config_files_carry_the_papers_recipe(name):
    """The DC recipes' values (Sect. 6: Adam 0.9/0.98, cosine with warm-up,
    batch sizes, beam/length penalty). Every config's syntax and flags are
    checked for all tables in test_tables.py."""
    from fairseq_ctx.tables.config import read_args

    path = CONFIG_DIR / name
    assert f"scripts/ctx-args configs/dc/{name}" in path.read_text()  # launch line in the header
    tokens = read_args(path)
    if name.endswith(".generate.args"):
        parser = options.get_generation_parser()
        args = options.parse_args_and_arch(parser, ["/nonexistent", "--path", "x.pt", *tokens])
        expected = (4, 0.6) if name.startswith("wmt14") else (6, 1.1)
        assert (args.beam, args.lenpen) == expected
        return
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, ["/nonexistent", *tokens])
    variant = name[:-len(".args")].split("_")[-2] if name.endswith("_dc.args") else "transformer"
    iwslt = name.startswith("iwslt")
    assert args.arch == {"enc": "transformer_dc", "dec": "transformer_dc_dec", "full": "transformer_dc_full",
                         "transformer": "transformer"}[variant] + (
        "" if not iwslt else "_iwslt_de_en" if variant == "transformer" else "_iwslt")
    assert args.optimizer == "adam" and eval(args.adam_betas) == (0.9, 0.98)
    assert args.lr_scheduler == "cosine" and args.warmup_updates > 0
    assert args.max_tokens == (4960 if name.startswith("wmt14") else 2048)
    if variant != "transformer":
        assert args.dc_kernel_size == 2


# ---------------------------------------------------------------------------
# end to end (real fairseq CLIs)
# ---------------------------------------------------------------------------
# generate, interactive and --score-reference of Enc-DC (dc) and Full-DC
# (dc_full): tests/test_contract.py. Here: the divergence script over two
# checkpoints with different kernel sizes.

@pytest.fixture(scope="module")
def runs(doc_corpus, trained_checkpoint, tmp_path_factory):
    data_bin = doc_corpus[1]
    root = tmp_path_factory.mktemp("dc_divergence")
    full_k3 = train_in_process(data_bin, root / "full_k3", "transformer_dc_tiny", [
        "--dc-encoder-layers", "all", "--dc-decoder-layers", "all", "--dc-kernel-size", "3"])
    out_dir = root / "divergence"
    dc_divergence.main(["--path", f"{trained_checkpoint('dc')}:{full_k3}", str(data_bin), "--gen-subset", "valid",
                        "--out", str(out_dir), "--cpu", "--max-tokens", "200"])
    return {"divergence_dir": out_dir}


def test_divergence_script(runs):
    out_dir = runs["divergence_dir"]
    summary = json.loads((out_dir / "dc_divergence.json").read_text())
    assert [c["kernel_size"] for c in summary["checkpoints"]] == [2, 3]
    for c in summary["checkpoints"]:
        assert sorted(c["dv"]) == ["1", "2"] and c["num_sentences"] == 12
        assert all(0.0 <= v <= math.log(2) for v in c["dv"].values())
        assert abs(c["E_d"] - sum(c["dv"].values()) / 2) < 1e-9
    assert (out_dir / "dc_divergence.png").stat().st_size > 1000
