"""Tests of transformer_ctxsan (Yang et al., AAAI 2019, Context-Aware SANs):
the modules in-process (shapes, parameter counts against Tables 1-3, padding
invariance, incremental decoding, beam reordering) and the real fairseq CLIs
end to end (train, generate, interactive, --score-reference, gate analysis)."""
import json

import pytest
import torch

import fairseq_ctx  # noqa: F401  (registers the architectures)
from fairseq_ctx.architectures import ctxsan
from fairseq_ctx.modules.ctxsan_attention import ContextAwareSelfAttention, ContextHistory
from fairseq_ctx.modules.readout import reading
from tests.utils import build_model, n_params, padded_batch, run_cli, tiny_model, toy_dictionary

SIDES = ("encoder", "decoder", "both")
CONTEXTS = ("global", "deep", "deep-global", "deep-global+deep")


def build(arch, extra=(), dict_size=64, meta=False):
    """``arch`` built as fairseq-train would, with a dictionary of ``dict_size`` entries."""
    d = toy_dictionary(dict_size - 4)  # + fairseq's 4 special symbols
    return build_model(arch, extra, d, meta=meta), d


# ---------------------------------------------------------------- parameter counts

# Table 1 (# Para. minus the 88.0M baseline), Transformer-Base. The global row
# is 6 x 2d^2 = 3.15M by the reading in docs/ambiguities.md (printed: 3.0M).
TABLE1 = [
    ("encoder", "global", 3.15),
    ("encoder", "deep-global", 11.0),
    ("encoder", "deep", 7.9),
    ("encoder", "deep-global+deep", 18.9),
    ("decoder", "deep-global", 11.0),
    ("decoder", "deep-global+deep", 18.9),
    ("both", "deep-global+deep", 37.8),
]


@pytest.fixture(scope="module")
def base_count():
    model, _ = build("transformer", dict_size=1000, meta=True)
    return n_params(model)


@pytest.mark.unit
@pytest.mark.parametrize("side,context,growth", TABLE1)
def test_table1_parameter_growth(base_count, side, context, growth):
    model, _ = build("transformer_ctxsan", ["--ctxsan-side", side, "--ctxsan-context", context],
                     dict_size=1000, meta=True)
    assert abs((n_params(model) - base_count) / 1e6 - growth) < 0.06


@pytest.mark.unit
def test_table1_global_row_matches_printed_within_5_percent(base_count):
    model, _ = build("transformer_ctxsan", ["--ctxsan-context", "global"], dict_size=1000, meta=True)
    assert abs((n_params(model) - base_count) / 1e6 - 3.0) / 3.0 < 0.055


@pytest.mark.unit
def test_table1_exact_formula(base_count):
    """Per layer l: U_Q, U_K (d_c x d each) + gates V^H, V^C (d each, Q and K)."""
    d, L = 512, 6
    u = sum(2 * (l * d + (l - 1) * d) * d for l in range(1, L + 1))
    gates = L * 4 * d
    model, _ = build("transformer_ctxsan", dict_size=1000, meta=True)
    assert n_params(model) - base_count == u + gates


@pytest.mark.unit
@pytest.mark.parametrize("side", SIDES)
def test_no_gate_ablation_drops_exactly_the_gate_vectors(base_count, side):
    """--ctxsan-no-gate (footnote 1) builds the same U_Q, U_K and no V^H,
    V^C: 4d fewer parameters per context-aware layer than the gated model."""
    d, L = 512, 6
    flags = ["--ctxsan-side", side]
    gated, _ = build("transformer_ctxsan", flags, dict_size=1000, meta=True)
    ungated, _ = build("transformer_ctxsan", [*flags, "--ctxsan-no-gate"], dict_size=1000, meta=True)
    n_sides = 2 if side == "both" else 1
    assert n_params(gated) - n_params(ungated) == n_sides * L * 4 * d
    assert not any("gate_" in name for name, _ in ungated.named_parameters())
    shapes = lambda m: {n: tuple(p.shape) for n, p in m.named_parameters() if "gate_" not in n}  # noqa: E731
    assert shapes(ungated) == shapes(gated)


@pytest.mark.unit
@pytest.mark.parametrize("what,share", [("query", 0.5), ("key", 0.5), ("both", 1.0)])
def test_table3_query_key_rows(base_count, what, share):
    model, _ = build("transformer_ctxsan", ["--ctxsan-contextualize", what], dict_size=1000, meta=True)
    assert abs((n_params(model) - base_count) / 1e6 - 18.9 * share) < 0.06


@pytest.mark.unit
def test_table2_big_growth():
    """Table 2, En-De: Transformer-Big 264.1M -> 339.6M (+75.5M)."""
    base, _ = build("transformer_wmt_en_de_big", dict_size=1000, meta=True)
    ours, _ = build("transformer_ctxsan_big", dict_size=1000, meta=True)
    assert abs((n_params(ours) - n_params(base)) / 1e6 - 75.5) < 0.1


@pytest.mark.unit
def test_presets():
    tiny, _ = build("transformer_ctxsan_tiny", meta=True)
    assert tiny.args.encoder_layers == 2 and tiny.args.encoder_embed_dim == 16
    assert tiny.args.encoder_ffn_embed_dim == 32 and tiny.args.encoder_attention_heads == 2
    iwslt, _ = build("transformer_ctxsan_iwslt_de_en", meta=True)
    assert iwslt.args.encoder_ffn_embed_dim == 1024 and iwslt.args.encoder_attention_heads == 4
    assert (tiny.args.ctxsan_context, tiny.args.ctxsan_side, tiny.args.ctxsan_contextualize) == \
        ("deep-global+deep", "encoder", "both")
    spaced, _ = build("transformer_ctxsan_tiny", ["--ctxsan-context", "deep-global + deep"], meta=True)
    assert spaced.args.ctxsan_context == "deep-global+deep"


@pytest.mark.unit
@pytest.mark.parametrize("flag,value", [
    ("--ctxsan-context", "deepglobal"),
    ("--ctxsan-side", "middle"),
    ("--ctxsan-contextualize", "value"),
])
def test_bad_flag_values_raise(flag, value):
    with pytest.raises(ValueError, match=flag):
        build("transformer_ctxsan_tiny", [flag, value])


@pytest.mark.unit
def test_layerdrop_on_context_side_raises():
    with pytest.raises(ValueError, match="--encoder-layerdrop"):
        build("transformer_ctxsan_tiny", ["--encoder-layerdrop", "0.1"])


# ---------------------------------------------------------------- module units

@pytest.mark.unit
def test_attention_shapes_and_context_sizes():
    d = 16
    for layer in (1, 2, 3):
        att = ContextAwareSelfAttention(d, 2, layer, context="deep-global+deep")
        dg = att.ctx_proj["deep_global"].weight
        assert tuple(dg.shape) == (2 * d, layer * d)  # [U_Q U_K]^T, d_c = l*d
        if layer == 1:
            assert "deep" not in att.ctx_proj  # no layers below layer 1
        else:
            assert tuple(att.ctx_proj["deep"].weight.shape) == (2 * d, (layer - 1) * d)
    att = ContextAwareSelfAttention(d, 2, 1, context="deep")
    assert not att.has_context and att.gate_h is None

    torch.manual_seed(0)
    T, B = 5, 3
    att = ContextAwareSelfAttention(d, 2, 3, context="deep-global+deep").eval()
    hist = ContextHistory(need_states=True, need_means=True)
    xs = [torch.randn(T, B, d) for _ in range(3)]
    for x in xs:
        hist.push(x)
    with reading(att):
        att(xs[-1], history=hist)[0]
        assert torch.equal(att.last_readout["q"], torch.full((T, B), 0.5))  # V^H = V^C = 0 at init
        with torch.no_grad():
            att.gate_h.normal_()
            att.gate_c.normal_()
        out = att(xs[-1], history=hist)[0]
        assert out.shape == (T, B, d)
        assert set(att.last_readout) == {"q", "k"} and att.last_readout["q"].shape == (T, B)
        assert bool(((att.last_readout["k"] > 0) & (att.last_readout["k"] < 1)).all())


@pytest.mark.unit
@pytest.mark.parametrize("context", ["global", "deep-global+deep"])
def test_attention_matches_equations_5_to_7(context):
    """The fused implementation equals a literal transcription of Eq. 5-7."""
    torch.manual_seed(0)
    d, heads, T, B, layer = 8, 2, 5, 2, 3
    att = ContextAwareSelfAttention(d, heads, layer, context=context).eval()
    with torch.no_grad():
        for p in att.parameters():
            p.normal_(std=0.3)
    xs = [torch.randn(T, B, d) for _ in range(layer)]
    hist = ContextHistory(need_states=True, need_means=True)
    for x in xs:
        hist.push(x)
    x = xs[-1]
    W, b = att.in_proj.weight, att.in_proj.bias
    Q, K, V = (x @ W[i * d:(i + 1) * d].t() + b[i * d:(i + 1) * d] for i in range(3))
    means = [h.mean(0, keepdim=True) for h in xs]
    if context == "global":  # Eq. 8
        CU = means[-1] @ att.ctx_proj["global"].weight.t()
    else:  # Eq. 10 + Eq. 9, summed after projection
        CU = torch.cat(means, -1) @ att.ctx_proj["deep_global"].weight.t() \
            + torch.cat(xs[:layer - 1], -1) @ att.ctx_proj["deep"].weight.t()
    CUq, CUk = CU[..., :d], CU[..., d:]
    lam_q = torch.sigmoid(Q @ att.gate_h[0] + CUq @ att.gate_c[0]).unsqueeze(-1)  # Eq. 6
    lam_k = torch.sigmoid(K @ att.gate_h[1] + CUk @ att.gate_c[1]).unsqueeze(-1)
    Qh, Kh = (1 - lam_q) * Q + lam_q * CUq, (1 - lam_k) * K + lam_k * CUk  # Eq. 5
    hd = d // heads
    split = lambda t: t.reshape(T, B, heads, hd).permute(1, 2, 0, 3)  # noqa: E731
    w = torch.softmax(split(Qh) @ split(Kh).transpose(-1, -2) / hd ** 0.5, -1)  # Eq. 3, 7
    ref = (w @ split(V)).permute(2, 0, 1, 3).reshape(T, B, d) @ att.out_proj.weight.t() + att.out_proj.bias
    assert torch.allclose(att(x, history=hist)[0], ref, atol=1e-5)


@pytest.mark.unit
@pytest.mark.parametrize("context", ["deep-global+deep", "global"])
def test_eval_time_folding_equals_training_time_and_follows_parameter_changes(context):
    """Without autograd in eval mode the folded gate weights are kept between
    calls (decoding steps); outputs equal the training-time computation (fold
    on every call, autograd on) to 4e-6 (without autograd a multi-block
    context is one GEMM on the concatenated blocks, with it one per block:
    another summation order), and an optimizer step, an in-place
    write or load_state_dict, made while the module stays in eval mode, is
    seen at the next call."""
    torch.manual_seed(0)
    d, T, B, layer = 16, 5, 3, 3
    att = ContextAwareSelfAttention(d, 2, layer, context=context, causal=True)
    with torch.no_grad():
        for p in att.parameters():
            p.normal_(std=0.3)
    xs = [torch.randn(T, B, d) for _ in range(layer)]
    hist = ContextHistory(need_states=True, need_means=True, causal=True)
    for x in xs:
        hist.push(x)
    x = xs[-1]
    initial = {k: v.clone() for k, v in att.state_dict().items()}

    def training_time():  # autograd on: folds afresh, as in training (dropout is 0)
        return att(x, history=hist)[0].detach()

    att.train()
    reference = training_time()
    assert att._fold_cache is None
    att.eval()
    with torch.no_grad():
        first = att(x, history=hist)[0]
        cached = att._fold_cache
        second = att(x, history=hist)[0]
    assert cached is not None and att._fold_cache is cached  # reused, not refolded
    torch.testing.assert_close(first, reference, atol=4e-6, rtol=0)
    torch.testing.assert_close(second, reference, atol=4e-6, rtol=0)

    # an optimizer step in eval mode (no train()/eval() call to drop the cache)
    opt = torch.optim.Adam(att.parameters(), lr=0.05)
    att(x, history=hist)[0].square().sum().backward()
    opt.step()
    with torch.no_grad():
        after_step = att(x, history=hist)[0]
    assert att._fold_cache is not cached
    assert (after_step - first).abs().max() > 1e-3
    torch.testing.assert_close(after_step, training_time(), atol=4e-6, rtol=0)

    with torch.no_grad():
        att.gate_c.zero_()  # an in-place write to one gate vector only
        zeroed = att(x, history=hist)[0]
    torch.testing.assert_close(zeroed, training_time(), atol=4e-6, rtol=0)

    att.load_state_dict(initial)
    with torch.no_grad():
        reloaded = att(x, history=hist)[0]
    torch.testing.assert_close(reloaded, first, atol=1e-6, rtol=0)
    assert "_fold_cache" not in " ".join(att.state_dict())  # checkpoint format unchanged


@pytest.mark.unit
def test_key_only_leaves_queries_alone():
    torch.manual_seed(0)
    d, T, B = 16, 4, 2
    att = ContextAwareSelfAttention(d, 2, 1, context="global", contextualize="key").eval()
    assert tuple(att.gate_h.shape) == (1, d)
    hist = ContextHistory(need_states=False, need_means=True)
    x = torch.randn(T, B, d)
    hist.push(x)
    with reading(att):
        att(x, history=hist)[0]
        assert set(att.last_readout) == {"k"}


def _fairseq_layer_with_our_weights(ours, fairseq_cls, cfg, **kwargs):
    """fairseq's own layer holding ``ours``'s weights (the fused Q/K/V
    projection split into fairseq's q/k/v_proj)."""
    ref = fairseq_cls(cfg, **kwargs)
    state = {k: v for k, v in ours.state_dict().items() if not k.startswith("self_attn.in_proj")}
    for name, w, b in zip(("q", "k", "v"), ours.self_attn.in_proj.weight.chunk(3), ours.self_attn.in_proj.bias.chunk(3)):
        state[f"self_attn.{name}_proj.weight"], state[f"self_attn.{name}_proj.bias"] = w, b
    ref.load_state_dict(state, strict=True)
    return ref.eval()


@pytest.mark.unit
@pytest.mark.parametrize("normalize_before", [False, True])
def test_layers_without_context_equal_fairseqs_own(normalize_before):
    """Layer 1 of a deep context has no context (d_c = 0): the layers must then
    compute exactly fairseq's Transformer layers (same weights), encoder with
    padding, decoder in full forward with its future mask and step by step."""
    from fairseq.models.transformer import TransformerConfig
    from fairseq.modules.transformer_layer import TransformerDecoderLayerBase, TransformerEncoderLayerBase

    from fairseq_ctx.modules.ctxsan_attention import HistorySlot
    from fairseq_ctx.modules.ctxsan_layer import CtxSanDecoderLayer, CtxSanEncoderLayer

    torch.manual_seed(0)
    d, T, B = 16, 5, 3
    cfg = TransformerConfig()
    for side in (cfg.encoder, cfg.decoder):
        side.embed_dim, side.ffn_embed_dim, side.attention_heads = d, 32, 2
        side.normalize_before = normalize_before
    cfg.dropout = cfg.attention_dropout = 0.0
    x = torch.randn(T, B, d)
    pad = torch.zeros(B, T, dtype=torch.bool)
    pad[1, 3:] = True

    slot = HistorySlot()
    enc = CtxSanEncoderLayer(cfg, 1, "deep", "both", slot).eval()
    assert not enc.self_attn.has_context
    ref = _fairseq_layer_with_our_weights(enc, TransformerEncoderLayerBase, cfg)
    with torch.no_grad(), slot.open(ContextHistory(need_states=True, need_means=False)):
        ours = enc(x, pad)
    torch.testing.assert_close(ours[~pad.t()], ref(x, pad)[~pad.t()], atol=1e-5, rtol=1e-5)

    dec = CtxSanDecoderLayer(cfg, 1, "deep", "both", slot, no_encoder_attn=True).eval()
    ref = _fairseq_layer_with_our_weights(dec, TransformerDecoderLayerBase, cfg, no_encoder_attn=True)
    future = torch.triu(torch.full((T, T), float("-inf")), 1)
    with torch.no_grad():
        want = ref(x, self_attn_mask=future)[0]
        with slot.open(ContextHistory(need_states=True, need_means=False, causal=True)):
            torch.testing.assert_close(dec(x, self_attn_mask=future)[0], want, atol=1e-5, rtol=1e-5)
        state = {}
        steps = []
        for t in range(T):
            with slot.open(ContextHistory(need_states=True, need_means=False, causal=True, incremental=True)):
                steps.append(dec(x[t:t + 1], incremental_state=state)[0])
    torch.testing.assert_close(torch.cat(steps), want, atol=1e-5, rtol=1e-5)


@pytest.mark.unit
def test_history_means_ignore_padding_and_are_causal_in_decoder():
    torch.manual_seed(0)
    T, B, C = 6, 2, 4
    x = torch.randn(T, B, C)
    pad = torch.zeros(B, T, dtype=torch.bool)
    pad[1, 4:] = True
    enc = ContextHistory(need_states=False, need_means=True)
    enc.push(x, pad)
    assert torch.allclose(enc.means[0][0, 1], x[:4, 1].mean(0), atol=1e-6)
    assert torch.allclose(enc.means[0][0, 0], x[:, 0].mean(0), atol=1e-6)

    dec = ContextHistory(need_states=False, need_means=True, causal=True)
    dec.push(x)
    for t in range(T):
        assert torch.allclose(dec.means[0][t], x[:t + 1].mean(0), atol=1e-6)
    # step by step with running sums gives the same prefix means
    sums = None
    for t in range(T):
        step = ContextHistory(need_states=False, need_means=True, causal=True, prev_sums=sums,
                              incremental=True)
        step.push(x[t:t + 1])
        sums = step.new_sums
        assert torch.allclose(step.means[0][0], dec.means[0][t], atol=1e-6)


# ---------------------------------------------------------------- model behaviour

def _model(side, context="deep-global+deep", seed=0, layers=3, pre_norm=False, no_gate=False):
    """ctxsan on ``side`` with ``context``, ``layers`` a side (pre-norm ones
    with ``pre_norm``), its gates (every lambda 0.5 at init) randomised so
    the tests exercise position-dependent gates (none with ``no_gate``:
    footnote 1's ablation); returns (model, dictionary)."""
    d = toy_dictionary(60)
    layer_flags = ["--encoder-layers", str(layers), "--decoder-layers", str(layers),
                   *(["--encoder-normalize-before", "--decoder-normalize-before"] if pre_norm else [])]
    variant = ctxsan(ctxsan_side=side, ctxsan_context=context, ctxsan_no_gate=no_gate)
    return tiny_model(variant, layer_flags, seed=seed, dictionary=d), d


def _batch(d, B=3, S=7, T=6, seed=1):
    """Sources left-padded (rows 1 and 2 by 2 and 4; no </s>), decoder inputs
    </s> first and right-padded (row 2 after 4 tokens)."""
    g = torch.Generator().manual_seed(seed)
    src = padded_batch([S] * B, generator=g, dictionary=d, eos=False)
    src[1, :2] = d.pad()  # sources are left-padded in fairseq
    src[2, :4] = d.pad()
    tgt = padded_batch([T] * B, generator=g, dictionary=d, eos=False, bos=d.eos())
    tgt[2, 4:] = d.pad()  # targets are right-padded
    return src, src.ne(d.pad()).sum(1), tgt


@pytest.mark.unit
@pytest.mark.parametrize("side,no_gate", [*((s, False) for s in SIDES), ("both", True)])
@pytest.mark.parametrize("pre_norm", [False, True], ids=["post-norm", "pre-norm"])
def test_padding_invariance(side, no_gate, pre_norm):
    """A sentence's outputs do not change when it is batched with longer ones."""
    model, d = _model(side, pre_norm=pre_norm, no_gate=no_gate)
    src, lens, tgt = _batch(d)
    with torch.no_grad():
        batched, _ = model(src, lens, tgt)
        alone, _ = model(src[2:3, 4:], lens[2:3], tgt[2:3, :4])
        enc_b = model.encoder(src, lens)["encoder_out"][0][4:, 2]
        enc_a = model.encoder(src[2:3, 4:], lens[2:3])["encoder_out"][0][:, 0]
    assert torch.allclose(enc_b, enc_a, atol=1e-5)
    assert torch.allclose(batched[2, :4], alone[0], atol=1e-5)


@pytest.mark.unit
@pytest.mark.parametrize("side,context,no_gate", [*((s, c, False) for s in ("decoder", "both") for c in CONTEXTS),
                                                  ("both", "deep-global+deep", True)])
@pytest.mark.parametrize("pre_norm", [False, True], ids=["post-norm", "pre-norm"])
def test_incremental_equals_full_forward(side, context, no_gate, pre_norm):
    model, d = _model(side, context, pre_norm=pre_norm, no_gate=no_gate)
    src, lens, tgt = _batch(d)
    tgt[2, 4:] = d.nspecial  # step-by-step decoding never feeds padding
    with torch.no_grad():
        full, _ = model(src, lens, tgt)
        enc = model.encoder(src, lens)
        state = {}
        steps = [model.decoder(tgt[:, :t + 1], enc, incremental_state=state)[0] for t in range(tgt.size(1))]
    assert torch.allclose(full, torch.cat(steps, 1), atol=1e-5)


@pytest.mark.unit
def test_incremental_state_is_constant_size_running_sums():
    """One decoding step reads the running sums, not the whole prefix."""
    model, d = _model("decoder", "deep-global")
    src, lens, tgt = _batch(d)
    with torch.no_grad():
        enc = model.encoder(src, lens)
        state = {}
        for t in range(4):
            model.decoder(tgt[:, :t + 1], enc, incremental_state=state)
        sums = model.decoder.get_incremental_state(state, "ctx_sums")
    assert sums is not None and torch.equal(sums["count"], torch.full((3, 1), 4.0))
    assert all(v.shape == (3, 16) for k, v in sums.items() if k.startswith("sum"))


@pytest.mark.unit
@pytest.mark.parametrize("side,no_gate", [*((s, False) for s in SIDES), ("both", True)])
def test_beam_reorder_mid_sequence(side, no_gate):
    """Decode 3 steps, reorder (as beam search does), decode on; equals
    decoding the reordered batch from the start."""
    model, d = _model(side, no_gate=no_gate)
    src, lens, tgt = _batch(d, B=3)
    tgt[2, 4:] = d.nspecial
    new_order = torch.tensor([2, 0, 0, 1])
    with torch.no_grad():
        enc = model.encoder(src, lens)
        state = {}
        for t in range(3):
            model.decoder(tgt[:, :t + 1], enc, incremental_state=state)
        model.decoder.reorder_incremental_state_scripting(state, new_order)
        enc = model.encoder.reorder_encoder_out(enc, new_order)
        re_tgt = tgt.index_select(0, new_order)
        outs = [model.decoder(re_tgt[:, :t + 1], enc, incremental_state=state)[0] for t in range(3, tgt.size(1))]
        ref, _ = model(src.index_select(0, new_order), lens.index_select(0, new_order), re_tgt)
    assert torch.allclose(torch.cat(outs, 1), ref[:, 3:], atol=1e-5)


@pytest.mark.unit
def test_context_reaches_the_output():
    """The context path is live: zeroing U_Q, U_K changes the encoder output."""
    model, d = _model("encoder", "global")
    src, lens, tgt = _batch(d)
    with torch.no_grad():
        out1 = model.encoder(src, lens)["encoder_out"][0]
        for layer in model.encoder.layers:
            layer.self_attn.ctx_proj["global"].weight.zero_()
        out2 = model.encoder(src, lens)["encoder_out"][0]
    assert not torch.allclose(out1, out2, atol=1e-4)


@pytest.mark.unit
def test_training_step_backpropagates_into_context_parameters():
    model, d = _model("both")
    model.train()
    src, lens, tgt = _batch(d)
    out, _ = model(src, lens, tgt)
    out.float().logsumexp(-1).mean().backward()
    for side in ("encoder", "decoder"):
        att = getattr(model, side).layers[-1].self_attn
        assert att.gate_h.grad is not None and att.gate_h.grad.abs().sum() > 0
        assert att.ctx_proj["deep"].weight.grad.abs().sum() > 0


# ---------------------------------------------------------------- end to end

# generate, interactive and --score-reference of ctxsan (encoder side) and
# ctxsan_both: tests/test_contract.py

@pytest.fixture(scope="module")
def data_bin(doc_corpus):
    return doc_corpus[1]


@pytest.fixture(scope="module")
def trained(trained_checkpoint):
    return {"both": trained_checkpoint("ctxsan_both")}


def test_gate_analysis_script(data_bin, trained, tmp_path):
    out = tmp_path / "gates"
    run_cli("fairseq_ctx.analysis.ctxsan_gates", [
        "--path", trained["both"], data_bin, "--gen-subset", "valid", "--out", out, "--max-tokens", "500",
    ])
    summary = json.loads((out / "gates.json").read_text())
    model = summary["models"][0]
    assert model["context"] == "deep-global+deep"
    for side in ("encoder", "decoder"):
        layers = model["sides"][side]
        assert [row["layer"] for row in layers] == [1, 2]
        assert all(0 < row["lambda_q"] < 1 and 0 < row["lambda_k"] < 1 for row in layers)
    assert (out / "gates.png").stat().st_size > 0
    tokens = [json.loads(line) for line in (out / "tokens.jsonl").read_text().splitlines()]
    assert len(tokens) == 12
    first = tokens[0]
    n = len(first["tokens"])
    assert len(first["encoder"]["lambda_q"]) == 2 and len(first["encoder"]["lambda_q"][0]) == n


def test_gate_analysis_refuses_other_checkpoints_in_one_line(data_bin, trained, trained_checkpoint, tmp_path):
    """A model without gates (--ctxsan-no-gate, footnote 1) or of another
    architecture has no lambda to read: one ``fairseq_ctx: error:`` line
    naming the checkpoint, no traceback, nothing written in ``--out`` (also
    when it comes after a checkpoint that was read)."""
    from fairseq_ctx.architectures import TINY_FLAGS
    from tests.utils import train_in_process

    ungated = ctxsan(ctxsan_no_gate=True)
    no_gate = train_in_process(data_bin, tmp_path / "no_gate", ungated.arch, [*TINY_FLAGS, *ungated.flags])
    plain = trained_checkpoint("transformer")
    no_gates = "trained with --ctxsan-no-gate, so it has no gates to read"
    cases = [(no_gate, no_gate, no_gates),
             (plain, plain, "not a transformer_ctxsan checkpoint (TransformerModel)"),
             (f"{trained['both']}:{no_gate}", no_gate, no_gates)]
    for i, (paths, refused, why) in enumerate(cases):
        out = tmp_path / f"gates_{i}"
        proc = run_cli("fairseq_ctx.analysis.ctxsan_gates", ["--path", paths, data_bin, "--gen-subset", "valid",
                                                             "--out", out], check=False)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        lines = [line for line in proc.stderr.splitlines() if not line.startswith("INFO:")]  # loading's log
        assert lines == [f"fairseq_ctx: error: --path {refused}: {why}"]
        assert list(out.iterdir()) == []


def test_a_checkpoint_saved_before_the_no_gate_flag_loads_gated(data_bin, trained_checkpoint, tmp_path):
    """Checkpoints written before --ctxsan-no-gate existed have no
    ``ctxsan_no_gate`` in their model config (a dict, or the older argparse
    namespace): they load through fairseq's loader (strict:
    the gate vectors are expected and found) as the gated model they are,
    with the same weights and outputs."""
    import argparse

    from fairseq import checkpoint_utils

    path = trained_checkpoint("ctxsan")
    state = torch.load(path, weights_only=False)
    assert state["cfg"]["model"].pop("ctxsan_no_gate") is False  # saved as a plain dict
    torch.save(state, tmp_path / "dict.pt")
    namespace = argparse.Namespace(**{k: v for k, v in state["cfg"]["model"].items()})
    state["cfg"]["model"] = namespace
    torch.save(state, tmp_path / "namespace.pt")
    d = toy_dictionary(60)
    src, lens, tgt = _batch(d)
    outs = []
    for p in (path, tmp_path / "dict.pt", tmp_path / "namespace.pt"):
        model = checkpoint_utils.load_model_ensemble([str(p)], arg_overrides={"data": str(data_bin)})[0][0].eval()
        assert model.args.ctxsan_no_gate is False
        assert all(layer.self_attn.gated and layer.self_attn.gate_h is not None for layer in model.encoder.layers)
        vocab = len(model.encoder.dictionary)
        with torch.no_grad():
            outs.append(model(src % vocab, lens, tgt % vocab)[0])
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])


def test_gate_means_equal_a_hand_computation_without_padding(data_bin, trained, tmp_path):
    """gates.json's per-layer means are taken over padded batches (several
    sentences a batch, sources left-padded, targets right-padded); here the
    same checkpoint runs one sentence at a time (no padding at all) and the
    mean is summed by hand over every position. Guards the padding mask and
    the counts (tried: the encoder's ``keep`` mask made all-True fails on the
    count, 144 vs 84; summing ``lam`` instead of ``lam[keep]`` fails on the
    mean, 0.858 vs 0.500; 0 < lambda < 1 above passes both)."""
    from fairseq_ctx.analysis import ctxsan_gates
    from fairseq_ctx.cli import load_checkpoint

    out = tmp_path / "gates"
    ctxsan_gates.main([str(data_bin), "--path", str(trained["both"]), "--gen-subset", "valid", "--out", str(out),
                       "--max-tokens", "500", "--cpu"])
    summary = json.loads((out / "gates.json").read_text())["models"][0]

    model, task, _ = load_checkpoint(str(trained["both"]), str(data_bin), "cpu")
    attentions = model.ctxsan_attentions()
    task.load_dataset("valid")
    dataset = task.dataset("valid")
    sums = {side: [[0.0, 0.0] for _ in mods] for side, mods in attentions.items()}
    positions = {side: 0 for side in attentions}
    with reading(model):
        for i in range(len(dataset)):
            sample = dataset.collater([dataset[i]])
            with torch.no_grad():
                model(**sample["net_input"])
            positions["encoder"] += sample["net_input"]["src_tokens"].numel()  # one sentence: no padding
            positions["decoder"] += sample["net_input"]["prev_output_tokens"].numel()
            for side, mods in attentions.items():
                for li, att in enumerate(mods):
                    for si, s in enumerate(("q", "k")):
                        sums[side][li][si] += float(att.last_readout[s].double().sum())
    lengths = [len(dataset[i]["source"]) for i in range(len(dataset))]
    assert len(set(lengths)) > 1  # sentences of several lengths: the script's batches hold pads
    for side in ("encoder", "decoder"):
        for li, row in enumerate(summary["sides"][side]):
            assert row["positions"] == positions[side]
            for si, s in enumerate(("q", "k")):
                assert row[f"lambda_{s}"] == pytest.approx(sums[side][li][si] / positions[side], rel=1e-5, abs=0)

    # Figure 4 on the same tokens.jsonl: one tag for every word, so its mean is the all-word mean of the
    # real tokens without </s> (the toy data has no subwords)
    from fairseq_ctx.analysis import ctxsan_pos

    raw = (data_bin.parent / "raw" / "valid.src").read_text().splitlines()
    (tmp_path / "valid.tags").write_text("".join(" ".join(f"{w}_W" for w in line.split()) + "\n" for line in raw))
    pos = ctxsan_pos.main([str(out / "tokens.jsonl"), "--tags", str(tmp_path / "valid.tags"), "--out",
                           str(tmp_path / "pos")])["by_tag"]
    assert pos["W"]["count"] == sum(len(line.split()) for line in raw) == positions["encoder"] - len(raw)
    assert pos["W"]["lambda_q"] == pytest.approx(pos["all"]["lambda_q"])


# ---------------------------------------------------------------- Figure 4: gates by part of speech

POS_RECORDS = [  # two sentences of tokens.jsonl: layer 1 has no lambda_K (None), as a deep-only key layer
    {"id": 0, "model": "m.pt", "tokens": ["the", "hou@@", "se", "is", "</s>"], "decoder_tokens": ["</s>"],
     "encoder": {"lambda_q": [[0.2, 0.4, 0.6, 0.8, 0.9], [0.1, 0.3, 0.5, 0.7, 0.9]],
                 "lambda_k": [None, [0.5, 0.5, 0.5, 0.5, 0.5]]}},
    {"id": 1, "model": "m.pt", "tokens": ["a", "dog", "</s>"], "decoder_tokens": ["</s>"],
     "encoder": {"lambda_q": [[0.3, 0.5, 0.9], [0.2, 0.4, 0.9]], "lambda_k": [None, [0.1, 0.2, 0.9]]}},
]


@pytest.mark.unit
def test_subwords_merge_into_words():
    from fairseq_ctx.analysis.ctxsan_pos import merge_subwords

    assert merge_subwords(["the", "hou@@", "se", "is", "</s>"]) == [("the", [0]), ("house", [1, 2]), ("is", [3])]
    assert merge_subwords(["\u2581the", "\u2581hou", "se", "\u2581is", "</s>"]) == \
        [("the", [0]), ("house", [1, 2]), ("is", [3])]
    assert merge_subwords(["a@@", "b@@", "c", "d"]) == [("abc", [0, 1, 2]), ("d", [3])]


@pytest.mark.unit
def test_gates_by_pos_by_hand(tmp_path, capsys):
    """Per tag, the mean over words of each word's mean over its subwords
    ("house" = (0.4 + 0.6) / 2 at layer 1), then over the layers with context.
    (Tried: a word's lambda taken from its first subword only, and the tag
    mean weighted by subwords instead of words: both fail.)"""
    from fairseq_ctx.analysis import ctxsan_pos

    conllu = ("# sent_id = 1\n1\tthe\tthe\tDET\t_\t_\t2\tdet\t_\t_\n2\thouse\thouse\tNOUN\t_\t_\t3\tnsubj\t_\t_\n"
              "3\tis\tbe\tAUX\t_\t_\t0\troot\t_\t_\n\n1\ta\ta\tDET\t_\t_\t2\tdet\t_\t_\n"
              "1.1\tx\tx\tX\t_\t_\t_\t_\t_\t_\n2\tdog\tdog\tNOUN\t_\t_\t0\troot\t_\t_\n\n")
    (tmp_path / "v.conllu").write_text(conllu)
    (tmp_path / "v.tags").write_text("the_DET house_NOUN is_AUX\na_DET dog_NOUN\n")
    tags = ctxsan_pos.read_tags(str(tmp_path / "v.conllu"))
    assert tags == ctxsan_pos.read_tags(str(tmp_path / "v.tags")) == \
        [[("the", "DET"), ("house", "NOUN"), ("is", "AUX")], [("a", "DET"), ("dog", "NOUN")]]
    res = ctxsan_pos.pos_means(POS_RECORDS, tags)
    assert res["DET"]["count"] == 2 and res["NOUN"]["count"] == 2 and res["all"]["count"] == 5
    assert res["DET"]["lambda_q_per_layer"] == pytest.approx([0.25, 0.15])
    assert res["DET"]["lambda_q"] == pytest.approx(0.2)
    assert res["NOUN"]["lambda_q_per_layer"] == pytest.approx([0.5, 0.4])   # house (0.5, 0.4), dog (0.5, 0.4)
    assert res["NOUN"]["lambda_k_per_layer"][0] is None
    assert res["NOUN"]["lambda_k"] == pytest.approx((0.5 + 0.2) / 2)
    assert res["all"]["lambda_q_per_layer"] == pytest.approx([2.3 / 5, 1.8 / 5])
    assert res["all"]["lambda_q"] == pytest.approx(0.41)
    assert "VERB" in ctxsan_pos.pos_means(POS_RECORDS, tags, universal12=True)
    # the command end to end
    tokens = tmp_path / "tokens.jsonl"
    tokens.write_text("".join(json.dumps(r) + "\n" for r in POS_RECORDS))
    summary = ctxsan_pos.main([str(tokens), "--tags", str(tmp_path / "v.tags"), "--out", str(tmp_path / "pos")])
    assert summary["by_tag"]["NOUN"]["lambda_q"] == pytest.approx(0.45)
    assert (tmp_path / "pos" / "pos_gates.png").stat().st_size > 0 and "NOUN" in capsys.readouterr().out
    # a tagging of another tokenization stops with the sentence id
    (tmp_path / "bad.tags").write_text("the_DET house_NOUN is_AUX\na_DET do_NOUN g_X\n")
    with pytest.raises(Exception, match="sentence id 1: 2 words"):
        ctxsan_pos.pos_means(POS_RECORDS, ctxsan_pos.read_tags(str(tmp_path / "bad.tags")))


@pytest.mark.slow
def test_gates_by_pos_tagged_by_spacy(tmp_path):
    """Without --tags the merged words go to an installed spaCy model, split as
    we split them (not re-tokenized by spaCy). No trained model can be
    downloaded here, so the model is a real spaCy pipeline whose
    attribute_ruler tags by word, saved to disk and loaded by path, as
    spacy.load loads an installed package; the result must equal the same
    tags given as a file. (Tried: reading t.tag_ instead of t.pos_: fails.)"""
    import spacy  # a test dependency (scripts/install.sh)
    from fairseq_ctx.analysis import ctxsan_pos

    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("attribute_ruler")
    for word, tag in (("the", "DET"), ("a", "DET"), ("house", "NOUN"), ("dog", "NOUN"), ("is", "AUX")):
        ruler.add(patterns=[[{"ORTH": word}]], attrs={"POS": tag, "TAG": "XX"})
    nlp.to_disk(tmp_path / "tagger")

    words = [[w for w, _ in ctxsan_pos.merge_subwords(r["tokens"])] for r in POS_RECORDS]
    expected = [[("the", "DET"), ("house", "NOUN"), ("is", "AUX")], [("a", "DET"), ("dog", "NOUN")]]
    assert ctxsan_pos.spacy_tags(words, str(tmp_path / "tagger")) == expected
    tokens = tmp_path / "tokens.jsonl"
    tokens.write_text("".join(json.dumps(r) + "\n" for r in POS_RECORDS))
    summary = ctxsan_pos.main([str(tokens), "--spacy-model", str(tmp_path / "tagger"), "--out", str(tmp_path / "pos")])
    assert summary["tags"] == f"spaCy {tmp_path / 'tagger'}"
    assert summary["by_tag"] == ctxsan_pos.pos_means(POS_RECORDS, expected)
    with pytest.raises(Exception, match="spaCy model 'no_such_model' is not installed"):
        ctxsan_pos.spacy_tags(words, "no_such_model")


# ---------------------------------------------------------------- every grid setting, by value

def test_the_layers_of_a_forward_share_one_attention_mask(monkeypatch):
    """Every layer of a stack gets the same key padding mask and shapes, so a
    training forward builds the attention mask once per stack and each layer
    attends with that one tensor (it was built in every layer); in an
    incremental step each layer holds its own cache's key padding mask, so
    where there is padding each builds its own (equal) attention mask."""
    import fairseq_ctx.modules.ctxsan_attention as ctxsan_attention

    built, used = [], []
    build, attend = ctxsan_attention.attend_mask, ctxsan_attention.attention
    monkeypatch.setattr(ctxsan_attention, "attend_mask", lambda *a: built.append(build(*a)) or built[-1])
    monkeypatch.setattr(ctxsan_attention, "attention", lambda q, k, v, m, **kw: used.append(m) or attend(q, k, v, m, **kw))
    model = tiny_model("ctxsan_both", ["--encoder-layers", "3", "--decoder-layers", "3"]).train()
    src = padded_batch([5, 3, 4])
    prev = padded_batch([4, 2, 3], left_pad=False, eos=False, bos=2)
    model(src, src.ne(1).sum(1), prev)
    assert len(used) == 6 and len(built) == 2  # encoder (padding) and decoder (causal, padding)
    assert all(m is built[0] for m in used[:3]) and all(m is built[1] for m in used[3:])
    assert built[0].shape == (3, 1, 1, 5) and built[1].shape == (3, 1, 4, 4)
    model.eval()
    with torch.no_grad():
        enc = model.encoder(src, src.ne(1).sum(1))
        state = {}
        for t in range(1, 5):  # the second row's padding starts at step 3
            used.clear()
            model.decoder(prev[:, :t], encoder_out=enc, incremental_state=state)
            assert len(used) == 3
            if t >= 3:
                assert len({id(m) for m in used}) == 3 and all(torch.equal(m, used[0]) for m in used)


from fairseq_ctx.architectures import option_grid  # noqa: E402

CTXSAN_GRID = option_grid("transformer_ctxsan")


def _record_self_attention(stack):
    """Per layer of ``stack``: its self-attention's query input (H^l, Eq. 1:
    after the pre-norm if any) and output, as the model runs (forward hooks;
    fairseq's layers call the attention by keyword)."""
    records, handles = [{} for _ in stack.layers], []
    for rec, layer in zip(records, stack.layers):
        def attention_io(module, args, kwargs, out, rec=rec):
            rec["query"], rec["out"] = kwargs["query"] if "query" in kwargs else args[0], out[0]

        handles.append(layer.self_attn.register_forward_hook(attention_io, with_kwargs=True))
    return records, handles


def _attend(q, k, v, heads, mask):
    """concat_h softmax(Q_h K_h^T / sqrt(d_h) + mask) V_h (Eq. 3 and 7);
    q, k, v: T x B x C; mask: B x T x T additive."""
    T, B, C = q.shape
    hd = C // heads
    split = lambda t: t.reshape(T, B, heads, hd).permute(1, 2, 0, 3)  # noqa: E731
    w = torch.softmax(split(q) @ split(k).transpose(-1, -2) / hd ** 0.5 + mask.unsqueeze(1), -1)
    return (w @ split(v)).permute(2, 0, 1, 3).reshape(T, B, C)


def _means(h, real, causal):
    """Eq. 8: the mean of H over the real positions of each sentence
    (encoder), or over the real positions up to each one (decoder, footnote
    2); one row per position. h: T x B x C; real: T x B."""
    out = torch.empty_like(h)
    for t in range(h.size(0)):
        seen = slice(0, t + 1) if causal else slice(0, h.size(0))
        w = real[seen].unsqueeze(-1).float()
        out[t] = (h[seen] * w).sum(0) / w.sum(0)
    return out


def _ctxsan_reference(att, settings, hs, x, real, causal):
    """The self-attention of layer l = len(hs) written from Eq. 3-10 with
    the module's weights, the context type and the contextualised Q / K
    taken from the grid ``settings`` (not from the module). ``hs``: H^1..H^l,
    what the self-attentions of this stack's layers were given (Eq. 1);
    ``x``: this one's, H^l. Without context (the plain side,
    or layer 1 of a deep context) this is the plain attention of Eq. 3."""
    T, B, d = x.shape
    layer = len(hs)
    mask = torch.zeros(B, T, T).masked_fill(~real.t().unsqueeze(1), float("-inf"))
    if causal:
        mask = mask.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    if not isinstance(att, ContextAwareSelfAttention):  # fairseq's MultiheadAttention
        return att.out_proj(_attend(att.q_proj(x), att.k_proj(x), att.v_proj(x), att.num_heads, mask))
    W, b = att.in_proj.weight, att.in_proj.bias
    Q, K, V = (x @ W[i * d:(i + 1) * d].t() + b[i * d:(i + 1) * d] for i in range(3))
    contexts = {  # Eq. 8, 10 and 9: the context C of each type, T x B x d_c
        "global": _means(hs[-1], real, causal),
        "deep-global": torch.cat([_means(h, real, causal) for h in hs], -1),
        "deep": torch.cat(hs[:-1], -1) if layer > 1 else None,
    }
    parts = [p for p in settings["ctxsan_context"].split("+") if contexts[p] is not None]  # summed, one gate
    assert sorted(att.ctx_proj) == sorted(p.replace("-", "_") for p in parts)
    if not parts:  # no deep context below layer 1
        return att.out_proj(_attend(Q, K, V, att.num_heads, mask))
    CU = sum(contexts[p] @ att.ctx_proj[p.replace("-", "_")].weight.t() for p in parts)  # C [U_Q U_K]
    mixed = {"query": ["Q"], "key": ["K"], "both": ["Q", "K"]}[settings["ctxsan_contextualize"]]
    qk = {"Q": Q, "K": K}
    for j, which in enumerate(mixed):
        cu = CU[..., j * d:(j + 1) * d]
        if settings["ctxsan_no_gate"]:  # footnote 1: "without {lambda_Q, lambda_K}", the plain sum
            assert att.gate_h is None and att.gate_c is None
            qk[which] = qk[which] + cu
            continue
        lam = torch.sigmoid(qk[which] @ att.gate_h[j] + cu @ att.gate_c[j]).unsqueeze(-1)  # Eq. 6
        qk[which] = (1 - lam) * qk[which] + lam * cu  # Eq. 5
    return att.out_proj(_attend(qk["Q"], qk["K"], V, att.num_heads, mask))


@pytest.mark.unit
@pytest.mark.parametrize("variant", CTXSAN_GRID, ids=[v.name for v in CTXSAN_GRID])
def test_every_grid_setting_computes_its_equations(variant):
    """Each setting of the option grid (context type x side x contextualised
    Q / K: Tables 1 and 3), in the whole model (3 + 3 layers, random gates,
    left-padded sources, a right-padded target): every self-attention layer
    of the context-aware side(s) equals Eq. 5-7 with that setting's context
    (Eq. 8-10) built by hand from the inputs of the layers of its own stack
    (sentence means ignoring padding in the encoder, prefix means in the
    decoder), mixed into the queries, the keys or both; every layer of the
    other side is plain attention (Eq. 3); with --ctxsan-no-gate (footnote
    1) the plain sum Q + C U. (Tried, one at a time in ctxsan_attention.py,
    when the grid held the 36 gated settings: the global context read from H^1 instead of H^l
    fails the 9 global settings; U_Q / U_K rows swapped for query- and
    key-only fails those 24 settings; the deep context read from
    H^2..H^l instead of H^1..H^{l-1} fails the 18 deep and deep-global+deep
    settings; the decoder's prefix means replaced by whole-target means
    fails the 18 decoder / both settings with a mean-based context.) The
    gradients that reach every parameter are the reference's too (tried:
    the layers' pushed H^l detached from the graph fails all 48 settings,
    pre-norm included, on the gradients alone; a 0.5 mix planted in place
    of the ungated sum fails the 3 no-gate settings and their 3 pre-norm
    ones)."""
    _check_grid_setting(variant, [])


def _check_grid_setting(variant, extra):
    """Every self-attention layer's output equals the reference of Eq. 3-10
    (see the callers), and so do the gradients it sends to every parameter
    below it: the contexts are read from H^1..H^l inside the graph, as the
    equations differentiate them, not as constants."""
    d = toy_dictionary(60)
    model = tiny_model(variant, ["--encoder-layers", "3", "--decoder-layers", "3", *extra], dictionary=d)
    assert model.args.ctxsan_context == variant.settings["ctxsan_context"]
    assert model.args.ctxsan_no_gate == variant.settings["ctxsan_no_gate"]
    src, lens, tgt = _batch(d)
    aware = {"encoder": ("encoder", "both"), "decoder": ("decoder", "both")}
    records = {}
    handles = []
    for side in ("encoder", "decoder"):
        records[side], h = _record_self_attention(getattr(model, side))
        handles += h
    try:
        model(src, lens, tgt)  # autograd on (eval mode, dropout 0): the gradients are compared below
    finally:
        for h in handles:
            h.remove()
    real = {"encoder": src.ne(d.pad()).t(), "decoder": tgt.ne(d.pad()).t()}
    with_context = 0
    g = torch.Generator().manual_seed(3)
    loss_model, loss_reference = 0, 0
    for side in ("encoder", "decoder"):
        context_side = variant.settings["ctxsan_side"] in aware[side]
        for i, (layer, rec) in enumerate(zip(getattr(model, side).layers, records[side])):
            att = layer.self_attn
            assert isinstance(att, ContextAwareSelfAttention) == context_side, (side, type(att))
            # H^1..H^l: what each self-attention was given (Eq. 1), after the pre-norm if any
            hs = [r["query"] for r in records[side][:i + 1]]
            want = _ctxsan_reference(att, variant.settings, hs, rec["query"], real[side], side == "decoder")
            keep = real[side]
            torch.testing.assert_close(rec["out"][keep], want[keep], atol=2e-5, rtol=1e-5)
            with_context += context_side and att.has_context
            w = torch.randn(want[keep].shape, generator=g)  # a random direction: no cancellation by symmetry
            loss_model = loss_model + (rec["out"][keep] * w).sum()
            loss_reference = loss_reference + (want[keep] * w).sum()
    assert with_context, "no context-aware layer ran"
    names, params = zip(*[(n, p) for n, p in model.named_parameters() if p.requires_grad])
    grads = [torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
             for loss in (loss_model, loss_reference)]
    for name, got, want in zip(names, *grads):
        assert (got is None) == (want is None), name
        if got is not None:
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4, msg=lambda m: f"{name}: {m}")


PRE_NORM_GRID = [v for v in CTXSAN_GRID if v.settings["ctxsan_contextualize"] == "both"]


@pytest.mark.unit
@pytest.mark.parametrize("variant", PRE_NORM_GRID, ids=[v.name for v in PRE_NORM_GRID])
def test_pre_norm_contexts_are_built_from_what_the_attention_is_given(variant):
    """With --encoder-normalize-before / --decoder-normalize-before, fairseq's
    layer gives its self-attention LN(x): the contexts (Eq. 8-10) are built
    from those same normalized inputs H^l that make the queries and keys
    (Eq. 1), as the authors' pre-norm code does, not from the raw residual
    stream (tried: pushing the layer input x instead fails all 12
    settings)."""
    _check_grid_setting(variant, ["--encoder-normalize-before", "--decoder-normalize-before"])
