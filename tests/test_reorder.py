"""Beam reordering, one contract for every architecture: reordering with a
permutation of the same size moves every cached value to its new row.

A reordering that changes the batch size (as beam search does when
sentences finish) makes a cache that was not reordered fail with a shape
error; a permutation keeps every shape, so only the values can tell. Two
checks per architecture:

* ``reorder_encoder_out`` of a batch equals encoding the permuted batch, for
  every entry of ``encoder_out`` (ctxenc's context states, mask and gate,
  GRET's global state, all hidden states);
* after three decoding steps, ``reorder_incremental_state`` leaves every
  cached tensor (ctxsan's running sums and contextualised keys, DC's
  convolution inputs and both feature-interaction caches, GRET's gate terms,
  fairseq's own self-attention caches) equal to the cache of decoding the
  permuted batch from the start, and decoding goes on to the same outputs.

fairseq's encoder-decoder attention keeps one key/value cache per sentence and
does not reorder it for an order of the same size (beams of one sentence
share it, ``MultiheadAttention.reorder_incremental_state``); the permutation
here mixes sentences, so those entries are dropped after the reorder and
rebuilt from the reordered ``encoder_out``. Everything else must follow.
"""
import pytest
import torch

import fairseq_ctx  # noqa: F401  (registers the architectures)
from fairseq.modules import MultiheadAttention
from tests.utils import build_model

torch.set_num_threads(1)

ARCHS = {
    "ctxsan_decoder": ("transformer_ctxsan_tiny", ["--ctxsan-side", "decoder"]),
    "ctxsan_both": ("transformer_ctxsan_tiny", ["--ctxsan-side", "both", "--ctxsan-context", "global"]),
    "dc_full": ("transformer_dc_tiny", ["--dc-encoder-layers", "all", "--dc-decoder-layers", "all",
                                        "--dc-kernel-size", "3"]),
    "gret": ("transformer_gret_tiny", ["--gret-capsules", "4"]),
    "ctxenc": ("transformer_ctxenc_tiny", []),
}
ORDER = torch.tensor([2, 0, 3, 1])  # no row keeps its place
STEPS = 3


def _model(name):
    arch, flags = ARCHS[name]
    torch.manual_seed(0)
    model = build_model(arch, ["--dropout", "0", *flags]).eval()
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith(("gate_h", "gate_c")):  # ctxsan's gates start at 1/2 everywhere
                p.normal_(std=0.5)
    return model


def _batch(model, seed=0):
    """Four different left-padded sources (and contexts for ctxenc), and
    decoder inputs with a different prefix in every row."""
    d = model.encoder.dictionary
    g = torch.Generator().manual_seed(seed)

    def sentences(lengths, width):
        out = torch.full((len(lengths), width), d.pad(), dtype=torch.long)
        for i, n in enumerate(lengths):
            out[i, width - n:] = torch.randint(d.nspecial, len(d), (n,), generator=g)
            out[i, -1] = d.eos()
        return out

    src = sentences([5, 7, 3, 6], 7)
    kwargs = {}
    if getattr(model, "accepts_context", False):
        kwargs = {"ctx_tokens": sentences([4, 2, 5, 3], 5)}
    prev = torch.randint(d.nspecial, len(d), (4, 6), generator=g)
    prev[:, 0] = d.eos()
    return src, src.ne(d.pad()).sum(1), prev, kwargs


def _encode(model, src, lengths, kwargs):
    extra = {"return_gate": True, "return_context": True} if "ctx_tokens" in kwargs else {}
    return model.encoder(src, lengths, return_all_hiddens=True, **kwargs, **extra)


def _permuted(src, lengths, prev, kwargs, order):
    return src[order], lengths[order], prev[order], {k: v[order] for k, v in kwargs.items()}


def _decode(model, enc, prev, state, start, stop):
    return torch.cat([model.decoder(prev[:, :t + 1], enc, incremental_state=state)[0]
                      for t in range(start, stop)], dim=1)


def _encoder_attention_keys(model):
    return {m._get_full_incremental_state_key("attn_state") for m in model.decoder.modules()
            if isinstance(m, MultiheadAttention) and m.encoder_decoder_attention}


@pytest.mark.parametrize("name", list(ARCHS))
def test_reorder_encoder_out_equals_encoding_the_permuted_batch(name):
    model = _model(name)
    src, lengths, prev, kwargs = _batch(model)
    p_src, p_lengths, _, p_kwargs = _permuted(src, lengths, prev, kwargs, ORDER)
    with torch.no_grad():
        reordered = model.encoder.reorder_encoder_out(_encode(model, src, lengths, kwargs), ORDER)
        direct = _encode(model, p_src, p_lengths, p_kwargs)
    # fairseq's TransformerEncoder.reorder_encoder_out drops fc_results (unused here)
    assert set(reordered) == set(direct) - {"fc_results"}
    for key, tensors in direct.items():
        if key == "fc_results":
            continue
        assert len(reordered[key]) == len(tensors), key
        for got, want in zip(reordered[key], tensors):
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5, msg=lambda m: f"{key}: {m}")
    assert len(direct["encoder_states"]) > 0
    if name == "ctxenc":
        assert all(len(direct[k]) == 1 for k in ("ctx_out", "ctx_padding_mask", "ctx_gate"))
    if name == "gret":
        assert len(direct["gret_global"]) == 1


@pytest.mark.parametrize("name", list(ARCHS))
def test_reorder_incremental_state_moves_every_cached_value(name):
    model = _model(name)
    src, lengths, prev, kwargs = _batch(model)
    p_src, p_lengths, p_prev, p_kwargs = _permuted(src, lengths, prev, kwargs, ORDER)
    skip = _encoder_attention_keys(model)
    with torch.no_grad():
        state = {}
        enc = _encode(model, src, lengths, kwargs)
        _decode(model, enc, prev, state, 0, STEPS)
        model.decoder.reorder_incremental_state_scripting(state, ORDER)
        enc = model.encoder.reorder_encoder_out(enc, ORDER)
        for key in skip:
            state.pop(key, None)

        reference = {}
        p_enc = _encode(model, p_src, p_lengths, p_kwargs)
        _decode(model, p_enc, p_prev, reference, 0, STEPS)
        ours = set(reference) - skip
        assert ours and ours == set(state)
        for key in ours:
            assert set(state[key]) == set(reference[key]), key
            for sub, want in reference[key].items():
                if want is not None:
                    torch.testing.assert_close(state[key][sub], want, atol=1e-5, rtol=1e-5,
                                               msg=lambda m: f"{key}[{sub}]: {m}")

        rest = _decode(model, enc, p_prev, state, STEPS, prev.size(1))
        full, _ = model(p_src, p_lengths, p_prev, **p_kwargs)
    torch.testing.assert_close(rest, full[:, STEPS:], atol=1e-5, rtol=1e-5)
