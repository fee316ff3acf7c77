"""Tests of transformer_gret (Weng et al., AAAI 2020): capsule routing, global
state, context gate, parameter counts against the paper, decoding invariances,
warm start, and end-to-end fairseq-train / generate / interactive runs."""
import math
import re

import pytest
import torch
import torch.nn.functional as F

import fairseq_ctx  # noqa: F401  (registers the architectures)
from fairseq import checkpoint_utils
from fairseq.data import Dictionary
from fairseq_ctx.models.transformer_gret import checkpoint_will_be_restored, warm_start_from_checkpoint
from fairseq_ctx.modules.gret_attentive_pooling import AttentivePooling
from fairseq_ctx.modules.gret_capsule_routing import CapsuleRouting, squash
from fairseq_ctx.modules.gret_context_gate import ContextGate
from fairseq_ctx.modules.gret_global import GlobalRepresentation
from tests.utils import build_model as build_arch
from tests.utils import generate_in_process, n_params, padded_batch, tiny_model, toy_dictionary, train

# ----------------------------------------------------------------- helpers


def build_model(arch, extra=(), dictionary=None, dict_size=40):
    """``arch`` built as fairseq-train would; returns (model, dictionary)."""
    d = dictionary if dictionary is not None else toy_dictionary(dict_size)
    return build_arch(arch, extra, d), d


def _sources(d, lengths, seed=0):
    """Left-padded sources of ``lengths`` tokens: n - 1 random words, then </s>."""
    words = padded_batch([n - 1 for n in lengths], seed=seed, dictionary=d, eos=False)
    return torch.cat([words, words.new_full((len(lengths), 1), d.eos())], dim=1)


def _decoder_inputs(d, bsz=3, tgt_len=6):
    """Random decoder inputs, </s> first."""
    return padded_batch([tgt_len] * bsz, seed=3, dictionary=d, eos=False, bos=d.eos())


def reference_routing(routing, states, padding_mask):
    """Algorithm 1 written literally, one sentence and one capsule at a time,
    with the per-capsule transforms W_k = diag(v_k) W materialised."""
    out = []
    for b in range(states.size(0)):
        h = states[b][~padding_mask[b]]  # I x d, real positions only
        num_caps = routing.num_capsules
        preds = [h @ (routing.proj.weight.t() * routing.capsule_scale[k]) for k in range(num_caps)]  # Eq. 3
        logits = torch.zeros(num_caps, h.size(0))
        for _ in range(routing.iterations):
            dim = 0 if routing.softmax_over == "capsules" else 1
            c = F.softmax(logits, dim=dim)
            caps = [squash(c[k] @ preds[k]) for k in range(num_caps)]  # Eq. 2
            logits = logits + torch.stack([preds[k] @ caps[k] for k in range(num_caps)])  # Eq. 6
        out.append(torch.stack(caps))
    return torch.stack(out)


# ----------------------------------------------------------------- module units


@pytest.mark.unit
@pytest.mark.parametrize("softmax_over", ["capsules", "positions"])
def test_routing_shapes_coupling_and_reference(softmax_over):
    torch.manual_seed(0)
    routing = CapsuleRouting(8, num_capsules=4, iterations=3, softmax_over=softmax_over)
    states = torch.randn(3, 6, 8)
    mask = torch.tensor([[False] * 6, [True, True] + [False] * 4, [True] * 5 + [False]])
    caps, coupling = routing(states, mask, return_coupling=True)
    assert caps.shape == (3, 4, 8) and coupling.shape == (3, 4, 6)
    assert (caps.norm(dim=-1) < 1).all()  # squash
    if softmax_over == "capsules":
        torch.testing.assert_close(coupling.sum(dim=1), torch.ones(3, 6))
    else:
        torch.testing.assert_close(coupling.sum(dim=2), torch.ones(3, 4))
        assert coupling.masked_select(mask.unsqueeze(1)).abs().max() == 0
    torch.testing.assert_close(caps, reference_routing(routing, states, mask), atol=1e-5, rtol=1e-5)
    # the per-capsule scales make the capsules differ from each other
    assert (caps[:, 0] - caps[:, 1]).abs().max() > 1e-3


@pytest.mark.unit
@pytest.mark.parametrize("softmax_over", ["capsules", "positions"])
def test_routing_padding_contributes_nothing(softmax_over):
    torch.manual_seed(0)
    routing = CapsuleRouting(8, num_capsules=5, iterations=3, softmax_over=softmax_over)
    real = torch.randn(1, 4, 8)
    alone = routing(real, torch.zeros(1, 4, dtype=torch.bool))
    for pad_values in (torch.zeros(1, 3, 8), 100 * torch.randn(1, 3, 8)):
        padded = torch.cat([pad_values, real], dim=1)
        mask = torch.tensor([[True] * 3 + [False] * 4])
        torch.testing.assert_close(routing(padded, mask), alone, atol=1e-6, rtol=1e-5)


def _squash_eq4(t):
    """Eq. 4 as printed: |t|^2 / (1 + |t|^2) * t / |t| (t is never zero here)."""
    sq = (t * t).sum(-1, keepdim=True)
    return sq / (1 + sq) * t / sq.sqrt()


def _gru_step_by_hand(gru, x, s):
    """One step of torch's GRU cell written out (Eq. 10: s^m = GRU(x^m, s^{m-1}))."""
    d = gru.hidden_size
    gi = gru.weight_ih @ x + gru.bias_ih
    gh = gru.weight_hh @ s + gru.bias_hh
    r = torch.sigmoid(gi[:d] + gh[:d])
    z = torch.sigmoid(gi[d:2 * d] + gh[d:2 * d])
    cand = torch.tanh(gi[2 * d:] + r * gh[2 * d:])
    return (1 - z) * cand + z * s


def _atp_of_capsules_by_hand(routing, pool, h, num_capsules, iterations, softmax_dim):
    """ATP(U^m) of one sentence's real states h (I x d): Algorithm 1 with
    W_k = diag(v_k) W materialised (Eq. 2-6), then attentive pooling
    (Eq. 7-9, FFN = tanh(linear))."""
    w_k = routing.capsule_scale.unsqueeze(-1) * routing.proj.weight  # K x d x d
    assert w_k.size(0) == num_capsules
    h_hat = torch.einsum("kde,ie->kid", w_k, h)  # Eq. 3: K x I x d
    logits = torch.zeros(h_hat.shape[:2])  # K x I
    for _ in range(iterations):
        c = F.softmax(logits, dim=softmax_dim)  # Eq. 5
        u = _squash_eq4((c.unsqueeze(-1) * h_hat).sum(1))  # Eq. 2: K x d
        logits = logits + (h_hat * u.unsqueeze(1)).sum(-1)  # Eq. 6
    s_hat = torch.tanh(pool.query_ffn(u.mean(0)))  # Eq. 9
    a = F.softmax(u @ s_hat, dim=0)  # Eq. 8
    return torch.tanh(pool.out_ffn((a.unsqueeze(-1) * u).sum(0)))  # Eq. 7


def reference_global_state(glob, layer_states, lengths, iterations, softmax_dim):
    """s^M of every sentence from the encoder layers' outputs (each T x B x d,
    left-padded), by the paper's equations, one sentence at a time over its
    real positions only: Algorithm 1 with ``iterations`` rounds and the
    per-capsule W_k = diag(v_k) W materialised (Eq. 2-6), attentive pooling
    (Eq. 7-9, FFN = tanh(linear), the module's documented choice) and the GRU
    of Eq. 10 written out gate by gate from s^0 = 0."""
    gru = glob.gru
    d = gru.hidden_size
    out = []
    for b, n in enumerate(lengths):
        s = torch.zeros(d)
        for m, states in enumerate(layer_states):
            routing, pool = glob.routing[m], glob.pooling[m]
            h = states[states.size(0) - n:, b]  # I x d
            x = _atp_of_capsules_by_hand(routing, pool, h, routing.capsule_scale.size(0), iterations,
                                         softmax_dim)  # Eq. 2-9: ATP(U^m)
            s = _gru_step_by_hand(gru, x, s)  # Eq. 10, GRU(x, s^{m-1})
        out.append(s)
    return torch.stack(out)


@pytest.mark.unit
@pytest.mark.parametrize("iters,softmax_over", [(1, "capsules"), (3, "capsules"), (5, "capsules"),
                                                (3, "positions")])
def test_global_state_rebuilt_from_encoder_states(iters, softmax_over):
    """encoder_out["gret_global"] equals s^M rebuilt by Eq. 2-10 from the
    outputs of encoder layers 1..M (``encoder_states[1:]``; [0] is the
    embedding), with the routing count taken from --gret-routing-iters."""
    model = tiny_model("gret", ["--encoder-layers", "3", "--gret-capsules", "5", "--gret-routing-iters", str(iters),
                                "--gret-routing-softmax", softmax_over], seed=1)
    d = model.encoder.dictionary
    lengths = [6, 9, 4]
    src = _sources(d, lengths, seed=7)
    with torch.no_grad():
        out = model.encoder(src, torch.tensor(lengths), return_all_hiddens=True)
        states = out["encoder_states"]
        assert len(states) == 4 and torch.equal(states[-1], out["encoder_out"][0])  # post-norm
        dim = 0 if softmax_over == "capsules" else 1
        glob = model.encoder.gret_global
        expected = reference_global_state(glob, states[1:], lengths, iters, dim)
        torch.testing.assert_close(out["gret_global"][0], expected, atol=1e-5, rtol=1e-4)
        # the comparison can tell the routing counts and the layers apart
        other = reference_global_state(glob, states[1:], lengths, iters + 2, dim)
        shifted = reference_global_state(glob, states[:-1], lengths, iters, dim)
        assert (other - expected).abs().max() > 1e-3 and (shifted - expected).abs().max() > 1e-3


@pytest.mark.unit
def test_squash_zero_vector_and_gradient():
    t = torch.zeros(2, 4, requires_grad=True)
    out = squash(t)
    out.sum().backward()
    assert torch.equal(out, torch.zeros(2, 4)) and torch.isfinite(t.grad).all()
    v = torch.tensor([[3.0, 4.0]])
    torch.testing.assert_close(squash(v).norm(), torch.tensor(25.0 / 26.0))


@pytest.mark.unit
def test_attentive_pooling_and_global_state_shapes():
    torch.manual_seed(0)
    pool = AttentivePooling(8)
    out, weights = pool(torch.randn(3, 5, 8), return_weights=True)
    assert out.shape == (3, 8) and weights.shape == (3, 5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3))
    states = [torch.randn(6, 3, 8) for _ in range(3)]
    mask = torch.zeros(3, 6, dtype=torch.bool)
    for caps, agg in ((True, True), (False, True), (True, False), (False, False)):
        glob = GlobalRepresentation(8, 3, num_capsules=4, iterations=2, use_capsules=caps, aggregate=agg)
        assert glob(states, mask).shape == (3, 8)
    # without capsules and aggregation the global state is the masked mean of the top layer
    glob = GlobalRepresentation(8, 3, use_capsules=False, aggregate=False)
    mask[0, :2] = True
    torch.testing.assert_close(glob(states, mask)[0], states[-1][2:, 0].mean(0))


def _gate_by_hand(gate, r, s):
    """Eq. 12-13 written out (s first projected where the sizes differ)."""
    if gate.global_proj is not None:
        s = s @ gate.global_proj.weight.t()
    if not gate.gated:
        return r + s.unsqueeze(1)
    g = torch.sigmoid(gate.state_gate(r) + (s @ gate.global_gate.weight.t()).unsqueeze(1))
    return r + g * s.unsqueeze(1)


@pytest.mark.unit
@pytest.mark.parametrize("global_dim,gated,cached", [(8, True, {"ws"}), (6, True, {"s", "ws"}),
                                                     (8, False, set()), (6, False, {"s"})])
def test_context_gate_caches_global_terms_and_reorders(global_dim, gated, cached):
    """Step by step as in one pass, before and after beam search moves the
    beams; only the per-sentence terms that cost a product are cached (W_s s,
    and the projected s where the sizes differ): s itself comes in the beams'
    order from encoder_out at every step, as reorder_encoder_out leaves it.
    (Caching s as well, or not reordering the cache, fails.)"""
    torch.manual_seed(0)
    gate = ContextGate(8, global_dim, gated=gated).eval()
    r, s = torch.randn(3, 4, 8), torch.randn(3, global_dim)
    full = gate(r, s)
    torch.testing.assert_close(full, _gate_by_hand(gate, r, s))
    inc = {}
    steps = [gate(r[:, t:t + 1], s, inc) for t in range(2)]
    assert set((gate.get_incremental_state(inc, "global") or {}).keys()) == cached
    order = torch.tensor([2, 0, 0])
    gate.reorder_incremental_state(inc, order)
    steps += [gate(r[order, t:t + 1], s[order], inc) for t in range(2, 4)]
    torch.testing.assert_close(torch.cat(steps[:2], 1), full[:, :2])
    torch.testing.assert_close(torch.cat(steps[2:], 1), full[order, 2:])
    if not gated and global_dim == 8:
        assert n_params(gate) == 0


# ----------------------------------------------------------------- every grid setting, by value

from fairseq_ctx.architectures import option_grid  # noqa: E402

GRET_GRID = option_grid("transformer_gret")


def _global_state_by_hand(glob, layer_states, lengths, settings, iterations):
    """s of every sentence under a grid setting, from the encoder layers'
    outputs (each T x B x d, left-padded), one sentence at a time over its
    real positions: per layer ATP(U^m) (or, --gret-no-capsule, the mean of
    the states), then the GRU of Eq. 10 written out from s^0 = 0 over every
    layer (or, --gret-no-aggregation, the last layer's alone, no GRU)."""
    softmax_dim = {"capsules": 0, "positions": 1}[settings["gret_routing_softmax"]]
    pooled_layers = layer_states if not settings["gret_no_aggregation"] else layer_states[-1:]
    out = []
    for b, n in enumerate(lengths):
        pooled = []
        for m, states in enumerate(pooled_layers):
            h = states[states.size(0) - n:, b]  # I x d
            if settings["gret_no_capsule"]:
                pooled.append(h.mean(0))
            else:
                pooled.append(_atp_of_capsules_by_hand(glob.routing[m], glob.pooling[m], h,
                                                       settings["gret_capsules"], iterations, softmax_dim))
        if settings["gret_no_aggregation"]:
            assert glob.gru is None
            out.append(pooled[-1])
            continue
        s = torch.zeros(glob.gru.hidden_size)
        for x in pooled:  # Eq. 10: s^m = GRU(x^m, s^{m-1})
            s = _gru_step_by_hand(glob.gru, x, s)
        out.append(s)
    return torch.stack(out)


@pytest.mark.unit
@pytest.mark.parametrize("variant", GRET_GRID, ids=[v.name for v in GRET_GRID])
def test_every_grid_setting_computes_its_equations(variant):
    """Each setting of the option grid (the full model, every row of Table 3
    -- each subset of no capsule / no aggregation / no gate -- with either
    routing softmax, and few capsules) in the whole model (3 encoder
    layers, left-padded sources): ``encoder_out["gret_global"]`` equals s
    built by hand from the encoder layers' outputs with that setting's
    components (_global_state_by_hand), and the decoder's output equals
    fairseq's own decoder features (``TransformerDecoderBase.extract_features``
    on the same module: Eq. 11) fused by Eq. 12-13, r + sigmoid(W_r r + b +
    W_s s) * s, or by plain addition r + s under --gret-no-gate, then the
    output projection (Eq. 14). (Tried, one at a time: no aggregation
    pooling the first layer instead of the last fails its 6 settings; the
    no-capsule mean counting padding fails its 4; the positions softmax
    taken over capsules fails its 4; the no-gate sum adding s / 2 fails its
    6; the gate dropped (r + s) fails the 7 gated settings.)"""
    from fairseq.models.transformer import TransformerDecoderBase

    model = tiny_model(variant, ["--encoder-layers", "3"], seed=1)
    d = model.encoder.dictionary
    settings = variant.settings
    lengths = [6, 9, 4]
    src = _sources(d, lengths, seed=7)
    prev = _decoder_inputs(d)
    with torch.no_grad():
        enc = model.encoder(src, torch.tensor(lengths), return_all_hiddens=True)
        s = enc["gret_global"][0]
        want = _global_state_by_hand(model.encoder.gret_global, enc["encoder_states"][1:], lengths, settings,
                                     model.args.gret_routing_iters)
        torch.testing.assert_close(s, want, atol=1e-5, rtol=1e-4)

        gate = model.decoder.gret_gate
        r, _ = TransformerDecoderBase.extract_features(model.decoder, prev, enc)  # B x T x C, no global state
        if settings["gret_no_gate"]:
            assert gate.state_gate is None and gate.global_gate is None
            fused = r + s.unsqueeze(1)
        else:
            g = torch.sigmoid(r @ gate.state_gate.weight.t() + gate.state_gate.bias
                              + (s @ gate.global_gate.weight.t()).unsqueeze(1))  # Eq. 12
            fused = r + g * s.unsqueeze(1)  # Eq. 13
        logits, _ = model.decoder(prev, enc)
        torch.testing.assert_close(logits, model.decoder.output_layer(fused), atol=1e-5, rtol=1e-5)
        assert (s.abs().max(-1).values > 1e-3).all()  # s is not zero: the fusion is visible


# ----------------------------------------------------------------- model build


@pytest.mark.unit
@pytest.mark.parametrize("flag,value", [("--gret-capsules", "0"), ("--gret-routing-iters", "0"),
                                        ("--encoder-layerdrop", "0.1")])
def test_bad_flag_values_raise(flag, value):
    with pytest.raises(ValueError, match=re.escape(flag)):
        build_model("transformer_gret_tiny", [flag, value])


@pytest.mark.slow
def test_parameter_growth_base_matches_paper():
    """Table 3: +6.4M over Transformer-Base (within 15%); the split is in the
    model's docstring: 6 x 0.804M per-layer capsules and pooling + 1.576M GRU
    + 0.525M gate."""
    d = toy_dictionary(1000)
    base = n_params(build_model("transformer", dictionary=d)[0])
    growth = {}
    for name, extra in (("full", []), ("no_capsule", ["--gret-no-capsule"]),
                        ("no_aggregation", ["--gret-no-aggregation"]), ("no_gate", ["--gret-no-gate"])):
        growth[name] = n_params(build_model("transformer_gret", extra, dictionary=d)[0]) - base
    assert growth["full"] == 6 * (512 * 512 + 32 * 512 + 2 * (512 * 512 + 512)) + 3 * (2 * 512 * 512 + 2 * 512) \
        + (2 * 512 * 512 + 512) == 6_923_776
    assert abs(growth["full"] - 6.4e6) / 6.4e6 < 0.15
    assert growth["no_capsule"] == 2_100_736 and growth["no_aggregation"] == 1_328_640
    assert growth["no_gate"] == 6_398_976


@pytest.mark.unit
def test_presets_build():
    d = toy_dictionary(50)
    big, _ = build_model("transformer_gret_big", ["--encoder-layers", "1", "--decoder-layers", "1"], dictionary=d)
    assert big.encoder.embed_tokens.embedding_dim == 1024 and big.decoder.gret_gate.embed_dim == 1024
    iwslt, _ = build_model("transformer_gret_iwslt_de_en", ["--encoder-layers", "1", "--decoder-layers", "1"],
                           dictionary=d)
    assert iwslt.encoder.layers[0].fc1.out_features == 1024
    tiny, _ = build_model("transformer_gret_tiny", dictionary=d)
    assert tiny.encoder.embed_tokens.embedding_dim == 16 and len(tiny.encoder.layers) == 2
    assert len(tiny.encoder.gret_global.routing) == 2 and tiny.encoder.gret_global.routing[0].num_capsules == 32


# ----------------------------------------------------------------- invariances


@pytest.mark.unit
@pytest.mark.parametrize("extra", [[], ["--gret-routing-softmax", "positions"], ["--gret-no-capsule"]])
def test_global_state_padding_invariance(extra):
    model = tiny_model("gret", extra, seed=1)
    src = _sources(model.encoder.dictionary, [4, 9, 7])
    with torch.no_grad():
        alone = model.encoder(src[:1, -4:], torch.tensor([4]))
        batch = model.encoder(src, torch.tensor([4, 9, 7]))
    torch.testing.assert_close(batch["gret_global"][0][0], alone["gret_global"][0][0], atol=1e-5, rtol=1e-5)


@pytest.mark.unit
@pytest.mark.parametrize("extra", [["--gret-no-capsule"], ["--gret-no-aggregation"], ["--gret-no-gate"],
                                   ["--gret-no-capsule", "--gret-no-aggregation", "--gret-no-gate"],
                                   ["--gret-routing-softmax", "positions", "--gret-capsules", "3"]])
def test_ablations_build_and_train(extra):
    torch.manual_seed(0)
    model, d = build_model("transformer_gret_tiny", extra)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    src = _sources(d, [5, 8, 3])
    prev = _decoder_inputs(d)
    target = torch.roll(prev, -1, dims=1)
    losses = []
    for _ in range(3):
        logits, _ = model(src, torch.tensor([5, 8, 3]), prev)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), target.view(-1))
        opt.zero_grad()
        loss.backward()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    grads = [n for n, p in model.named_parameters() if ("gret" in n) and p.grad is None]
    assert not grads, f"GRET parameters without gradient: {grads}"


# ----------------------------------------------------------------- end to end


# generate, interactive and --score-reference of GRET: tests/test_contract.py.
# Here: the warm start from a baseline checkpoint (Sect. 4.1).

@pytest.fixture(scope="module")
def data_bin(doc_corpus):
    return doc_corpus[1]


@pytest.fixture(scope="module")
def baseline_ckpt(trained_checkpoint):
    return trained_checkpoint("transformer")


@pytest.fixture(scope="module")
def gret_run(data_bin, baseline_ckpt, tmp_path_factory):
    save = tmp_path_factory.mktemp("gret_model")
    proc = train(data_bin, save, arch="transformer_gret_tiny", max_update=3,
                 extra=["--gret-warm-start", baseline_ckpt])
    return save / "checkpoint_last.pt", proc


def test_warm_start_copies_shared_weights(data_bin, baseline_ckpt, tmp_path):
    dictionary = Dictionary.load(str(data_bin / "dict.src.txt"))
    flags = ["--gret-warm-start", str(baseline_ckpt), "--save-dir", str(tmp_path)]
    model, _ = build_model("transformer_gret_tiny", flags, dictionary=dictionary)
    base = checkpoint_utils.load_checkpoint_to_cpu(str(baseline_ckpt))["model"]
    state = model.state_dict()
    shared = [n for n in state if n in base]
    assert len(shared) == len(base)  # every baseline tensor exists in GRET
    for name in shared:
        assert torch.equal(state[name], base[name]), name
    assert all("gret" in n for n in state if n not in base)


@pytest.mark.unit
def test_warm_start_skipped_when_a_checkpoint_will_be_restored(tmp_path):
    from argparse import Namespace

    args = Namespace(save_dir=str(tmp_path), restore_file="checkpoint_last.pt", checkpoint_suffix="",
                     finetune_from_model=None)
    assert not checkpoint_will_be_restored(args)
    (tmp_path / "checkpoint_last.pt").write_bytes(b"")
    assert checkpoint_will_be_restored(args)
    args.restore_file = str(tmp_path / "other.pt")
    assert not checkpoint_will_be_restored(args)
    with pytest.raises(FileNotFoundError, match="--gret-warm-start"):
        build_model("transformer_gret_tiny", ["--gret-warm-start", str(tmp_path / "missing.pt"),
                                              "--save-dir", str(tmp_path / "fresh")])


def test_warm_start_wrong_dimensions_is_a_clear_error(data_bin, baseline_ckpt):
    dictionary = Dictionary.load(str(data_bin / "dict.src.txt"))
    model, _ = build_model("transformer_gret_tiny", ["--encoder-ffn-embed-dim", "24"], dictionary=dictionary)
    with pytest.raises(ValueError, match=r"encoder\.layers\.0\.fc1\.weight.*\(32, 16\).*\(24, 16\)"):
        warm_start_from_checkpoint(model, str(baseline_ckpt))


def test_e2e_warm_start_train_and_generate(data_bin, baseline_ckpt, gret_run, tmp_path):
    ckpt, proc = gret_run
    log = proc.stdout + proc.stderr
    m = re.search(r"warm start from .* loaded (\d+) tensors .* (\d+) new parameter tensors", log)
    assert m and int(m.group(1)) > 0 and int(m.group(2)) > 0, log[-3000:]
    # the warm start is done once: the checkpoint does not point at the baseline any more
    state = checkpoint_utils.load_checkpoint_to_cpu(str(ckpt))
    assert state["cfg"]["model"].gret_warm_start is None
    hyps, srcs = generate_in_process(data_bin, ckpt, tmp_path)
    assert len(srcs) == 14 and set(hyps) == set(srcs)
    assert all(math.isfinite(score) for _, score in hyps.values())


def test_global_state_analysis_against_fairseq(data_bin, gret_run, tmp_path):
    """fairseq-ctx-gret-global-state: the loss as trained equals
    fairseq-validate's, and the loss with the global state removed equals
    that of fairseq's own TransformerModel holding GRET's Transformer weights
    (GRET without Eq. 13's g * s is exactly that model). (Tried: the ablation
    hook returning the gate's output instead of its input: fails.)"""
    import json

    from fairseq.models.transformer import TransformerModel

    from fairseq_ctx.analysis import gret_global_state
    from tests.utils import validate

    ckpt, _ = gret_run
    summary = gret_global_state.main([str(data_bin), "--path", str(ckpt), "--gen-subset", "valid",
                                      "--out", str(tmp_path / "out"), "--cpu", "--max-tokens", "500"])
    res = summary["checkpoints"][0]
    assert json.loads((tmp_path / "out" / "gret_global_state.json").read_text()) == summary
    # fairseq prints 3 decimals; its default batch multiple would drop valid sentences
    reference = validate(data_bin, ckpt, extra=["--required-batch-size-multiple", "1"])[0]
    assert res["loss"] == pytest.approx(reference, abs=1e-3)

    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([str(ckpt)])
    gret = models[0].eval()
    plain = TransformerModel.build_model(cfg.model, task).eval()
    plain.load_state_dict({k: v for k, v in gret.state_dict().items() if "gret" not in k}, strict=True)
    task.load_dataset("valid")
    batches = list(task.get_batch_iterator(dataset=task.dataset("valid"), max_tokens=500,
                                           required_batch_size_multiple=1).next_epoch_itr(shuffle=False))
    criterion = task.build_criterion(cfg.criterion)
    loss = size = 0.0
    with torch.no_grad():
        for sample in batches:
            _, _, log = criterion(plain, sample)
            loss, size = loss + float(log["loss"]), size + float(log["sample_size"])
    assert res["loss_without_global"] == pytest.approx(loss / size / math.log(2), rel=1e-5)
    assert res["loss_without_global"] != pytest.approx(res["loss"], rel=1e-6)  # s does reach the output
    assert res["fused_share"] > 0 and res["num_sentences"] == 12
    assert -1 <= res["global_state_mean_cosine_to_mean"] <= 1
