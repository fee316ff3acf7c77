"""The readout convention (:mod:`fairseq_ctx.modules.readout`) over every
variant of :data:`fairseq_ctx.architectures.VARIANTS`: ``reading(model)``
switches on exactly the modules that have values to read out (ctxsan's
context-aware attentions, DC's modules, ctxenc's gated layer), reading
changes no output, each readout has its declared shape, and after the block
every flag is off and nothing is kept. Reading off costs nothing: no readout
is recorded and the DC module computes no attention probabilities."""
import pytest
import torch

from fairseq_ctx.architectures import TINY_DIMS, VARIANTS
from fairseq_ctx.modules.ctxsan_attention import ContextAwareSelfAttention
from fairseq_ctx.modules.ctxenc_gated_layer import CtxEncGatedEncoderLayer
from fairseq_ctx.modules.dual_contextual import DualContextualModule
from fairseq_ctx.modules.readout import Readout, reading, readout_modules
from tests.utils import padded_batch, tiny_model

pytestmark = pytest.mark.unit

torch.set_num_threads(1)

NAMES = [v.name for v in VARIANTS]
B, T_SRC, T_TGT, T_CTX = 3, 5, 4, 3


def _inputs(model, seed=0):
    """Left-padded sources (and contexts where the model reads them), decoder inputs."""
    d = model.encoder.dictionary
    g = torch.Generator().manual_seed(seed)
    src = padded_batch([T_SRC] * B, generator=g, dictionary=d)
    src[0, :2] = d.pad()
    prev = padded_batch([T_TGT] * B, generator=g, dictionary=d, eos=False, bos=d.eos())
    kwargs = {}
    if getattr(model, "accepts_context", False):
        kwargs["ctx_tokens"] = padded_batch([T_CTX] * B, generator=g, dictionary=d)
    return src, src.ne(d.pad()).sum(1), prev, kwargs


def _expected(model):
    """The readout modules of each architecture, found by their type and place."""
    ctxsan = [m for m in model.modules() if isinstance(m, ContextAwareSelfAttention)]
    dc = [m for m in model.modules() if isinstance(m, DualContextualModule)]
    gated = [m for m in model.modules() if isinstance(m, CtxEncGatedEncoderLayer)]
    if ctxsan:
        assert ctxsan == [a for mods in model.ctxsan_attentions().values() for a in mods]
    if gated:
        assert gated == [model.encoder.layers[-1]]
    return ctxsan + dc + gated


# number of readout modules per variant (tiny: 2 + 2 layers)
COUNTS = {"transformer": 0, "concat": 0, "ctxsan": 2, "ctxsan_both": 4, "dc": 2, "dc_full": 4, "gret": 0,
          "ctxenc": 1}


def test_counts_follow_from_each_variants_settings():
    """The table against the catalogue it stands for: a ctxsan attention in
    every layer of each side it is on, a DC module in every layer of each
    side DC is on ("all"), ctxenc's one gated layer; nothing else reads out."""
    layers = TINY_DIMS["layers"]

    def count(v):
        s = v.settings
        ctxsan_sides = {"encoder": 1, "decoder": 1, "both": 2}.get(s.get("ctxsan_side"), 0)
        dc_sides = (s.get("dc_encoder_layers") == "all") + (s.get("dc_decoder_layers") == "all")
        return layers * (ctxsan_sides + dc_sides) + (v.arch == "transformer_ctxenc")

    assert COUNTS == {v.name: count(v) for v in VARIANTS}


@pytest.mark.parametrize("name", NAMES)
def test_reading_switches_on_exactly_the_readout_modules_and_keeps_nothing_after(name):
    model = tiny_model(name)
    expected = _expected(model)
    assert len(expected) == COUNTS[name]
    src, lengths, prev, kwargs = _inputs(model)
    state_keys = set(model.state_dict())
    with torch.no_grad():
        plain = model(src, lengths, prev, **kwargs)[0]
        assert all(not m.keep_readout and not m.last_readout for m in expected)
        with reading(model) as modules:
            assert [id(m) for m in modules.values()] == [id(m) for m in expected]
            assert modules == readout_modules(model)
            on = [m for m in model.modules() if getattr(m, "keep_readout", False)]
            assert [id(m) for m in on] == [id(m) for m in expected]
            read = model(src, lengths, prev, **kwargs)[0]
            readouts = {n: dict(m.last_readout) for n, m in modules.items()}
        # outputs are unchanged by reading (DC's probabilities are computed
        # outside the fused kernel then, so equal to rounding)
        torch.testing.assert_close(read, plain, atol=1e-5, rtol=1e-5)
        # after the block: every flag off, nothing kept, and a forward records nothing
        for m in expected:
            assert not m.keep_readout and dict(m.last_readout) == {}
        model(src, lengths, prev, **kwargs)
        assert all(dict(m.last_readout) == {} for m in expected)
    assert set(model.state_dict()) == state_keys  # no parameter or buffer added: checkpoints unchanged

    # each readout has the shape its class declares; every module with a gate read one
    sizes = {"B": B, "2": 2, "H": 2, "C": 16}
    for n, m in modules.items():
        has_values = not isinstance(m, ContextAwareSelfAttention) or m.has_context
        assert bool(readouts[n]) == has_values, n
        assert set(readouts[n]) <= set(m.readout_shapes), n
        decoder = n.startswith("decoder.")
        for key, value in readouts[n].items():
            assert not value.requires_grad and value.grad_fn is None
            dims = m.readout_shapes[key].split(" x ")
            want = [sizes.get(d, T_TGT if decoder else T_SRC) for d in dims]  # T and S: the stack's length
            assert list(value.shape) == want, (n, key, m.readout_shapes[key])


@pytest.mark.parametrize("name", ["ctxsan_both", "dc_full"])
def test_decoder_readout_of_an_incremental_step_covers_that_step(name):
    """A later forward replaces the readout: during incremental decoding a
    decoder module's readout is the last step's (T = 1)."""
    model = tiny_model(name)
    src, lengths, prev, kwargs = _inputs(model)
    with torch.no_grad(), reading(model.decoder) as modules:
        assert modules and all(n.startswith("layers.") for n in modules)
        enc = model.encoder(src, lengths, **kwargs)
        state = {}
        for t in range(2):
            model.decoder(prev[:, :t + 1], enc, incremental_state=state)
        for n, m in modules.items():
            value = next(iter(m.last_readout.values()))
            dims = m.readout_shapes[next(iter(m.last_readout))].split(" x ")
            assert value.size(dims.index("T")) == 1, n


def test_nothing_is_recorded_or_computed_for_the_readout_when_it_is_off(monkeypatch):
    """Off (training, validation, decoding), no module records a readout and
    the DC module takes its fused attention path (no probabilities, no
    softmax of its own)."""
    calls = []
    monkeypatch.setattr(Readout, "record_readout", lambda self, **v: calls.append(type(self).__name__))
    for name in ("ctxsan_both", "dc_full", "ctxenc"):
        model = tiny_model(name)
        src, lengths, prev, kwargs = _inputs(model)
        with torch.no_grad():
            model(src, lengths, prev, **kwargs)
        assert calls == [], name

    model = tiny_model("dc_full")
    src, lengths, prev, kwargs = _inputs(model)
    softmax = torch.softmax
    counted = []
    monkeypatch.setattr(torch, "softmax", lambda *a, **k: counted.append(1) or softmax(*a, **k))
    with torch.no_grad():
        model(src, lengths, prev)
        assert counted == []
        with reading(model):
            model(src, lengths, prev)
    assert len(counted) == 4 and len(calls) == 4  # 2 encoder + 2 decoder DC layers


def test_reading_a_submodule_and_nested_reading():
    model = tiny_model("dc_full")
    enc_dc, dec_dc = model.encoder.dc_modules(), [m for m in model.decoder.modules()
                                                   if isinstance(m, DualContextualModule)]
    with reading(model.encoder) as modules:
        assert list(modules.values()) == enc_dc
        assert all(m.keep_readout for m in enc_dc) and not any(m.keep_readout for m in dec_dc)
        with reading(model):
            assert all(m.keep_readout for m in enc_dc + dec_dc)
        # the inner block switches off only what it switched on
        assert all(m.keep_readout for m in enc_dc) and not any(m.keep_readout for m in dec_dc)
    assert not any(m.keep_readout for m in enc_dc + dec_dc)
