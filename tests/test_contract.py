"""The architecture contract: what every variant in
:data:`fairseq_ctx.architectures.VARIANTS` must do for fairseq to use it.

In-process, at tiny size with random weights (dropout off):

* a sentence's output is the same alone and in a padded batch (left-padded
  sources and contexts, right-padded targets, as fairseq batches them);
* step-by-step decoding with the incremental state equals the full forward;
* beam search's reordering: ``reorder_encoder_out`` of a batch equals
  encoding the permuted batch, and after three steps
  ``reorder_incremental_state`` leaves every cached tensor equal to the cache
  of decoding the permuted batch from the start;
* beam search translates a sentence the same alone and in a batch;
* float16 and bfloat16 forward and backward: finite, and the output
  probabilities within the half type's tolerance of float32; the same
  under autocast (float32 weights, bfloat16 products);
* ``--retain-dropout``: an evaluation forward draws a training forward's
  dropout masks (every dropout a ``FairseqDropout``);
* ``--checkpoint-activations`` (and ``--offload-activations``) reach every
  layer with the plain model's gradients, each parameter's accumulated once
  in a backward pass (what PyTorch's DistributedDataParallel requires).

Through fairseq's own command-line code (``fairseq_cli.*.main`` in this
process), with a checkpoint trained for two updates by ``fairseq-train``:
``fairseq-generate`` translates every test sentence and ``--score-reference``
scores every reference, each token's printed score being the checkpoint's
log-probability of it in a teacher-forced forward pass (with the test set's
context), as it is with ``--sampling`` and ``--prefix-size``, and with an
ensemble (``--path a.pt:b.pt``) the log of the models' mean probability,
``fairseq-interactive`` on the raw lines of the test set's documents gives
generate's hypotheses and alignments and keeps its ``--constraints``, and
``fairseq-validate``'s NLL equals minus the mean of ``--score-reference``'s
positional scores.

What only one architecture has (equations, parameter counts, its flags) is
in its own test file.
"""
import functools
import math
import re

import pytest
import torch
from fairseq.modules import MultiheadAttention
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase, TransformerEncoderLayerBase
from fairseq.sequence_generator import SequenceGenerator

from fairseq_ctx.architectures import TINY_FLAGS, VARIANTS, grid_archs, names, one_of_each, option_grid, variant
from fairseq_ctx.modules.incremental_cache import settled
from fairseq_ctx.modules.readout import reading
from tests.utils import (build_model, generate_in_process, interactive_in_process, interactive_output, padded_batch,
                         parse_generate, tiny_model, validate)

torch.set_num_threads(1)

NAMES = [v.name for v in VARIANTS]
BY_NAME = {v.name: v for v in VARIANTS}
# what fairseq's TransformerEncoder puts in encoder_out (with return_all_hiddens)
FAIRSEQ_ENCODER_OUT = {"encoder_out", "encoder_padding_mask", "encoder_embedding", "encoder_states",
                       "fc_results", "src_tokens", "src_lengths"}
ORDER = torch.tensor([2, 0, 3, 1])  # a permutation in which no row keeps its place
STEPS = 3
# Largest |p_half - p_fp32| over the output probabilities (tiny models at
# initialisation; unit roundoff 2^-11 for float16, 2^-8 for bfloat16).
HALF_TOLERANCE = {torch.float16: 2e-3, torch.bfloat16: 1e-2}


# ---------------------------------------------------------------- in-process

# each variant at tiny size, dropout off, its constant-init parameters random
# (ctxsan's gate vectors start at one value, which would hide part of the
# equations): built once per session
_model = functools.cache(tiny_model)


def _reads_context(model):
    return getattr(model, "accepts_context", False)


def _batch(model, seed=0):
    """Four left-padded sources (and contexts where the model reads them) of
    different lengths, and right-padded decoder inputs."""
    d = model.encoder.dictionary
    g = torch.Generator().manual_seed(seed)
    src_lengths = torch.tensor([5, 7, 3, 6])
    src = padded_batch(src_lengths.tolist(), width=7, generator=g, dictionary=d)
    kwargs = {}
    if _reads_context(model):  # drawn only then: the decoder inputs come next from the same stream
        kwargs["ctx_tokens"] = padded_batch([4, 2, 5, 3], width=5, generator=g, dictionary=d)
    tgt_lengths = [6, 4, 5, 2]
    prev = padded_batch(tgt_lengths, width=6, generator=g, dictionary=d, left_pad=False)
    prev = torch.cat([torch.full((4, 1), d.eos()), prev[:, :-1]], dim=1)  # shifted, as fairseq feeds it
    return src, src_lengths, prev, tgt_lengths, kwargs


def _row(i, src, src_lengths, prev, tgt_len, kwargs, pad):
    """Row ``i`` alone: sources and contexts without their left padding,
    decoder input cut to its length."""
    n = int(src_lengths[i])
    alone = {k: v[i:i + 1, int(v[i].eq(pad).sum()):] for k, v in kwargs.items()}
    return src[i:i + 1, -n:], src_lengths[i:i + 1], prev[i:i + 1, :tgt_len], alone


@pytest.mark.unit
@pytest.mark.parametrize("name", NAMES)
def test_sentence_alone_equals_sentence_in_padded_batch(name):
    model = _model(name)
    pad = model.encoder.dictionary.pad()
    src, src_lengths, prev, tgt_lengths, kwargs = _batch(model)
    with torch.no_grad():
        batched = model(src, src_lengths, prev, **kwargs)[0]
        for i, n in enumerate(tgt_lengths):
            one, lengths, one_prev, ctx = _row(i, src, src_lengths, prev, n, kwargs, pad)
            alone = model(one, lengths, one_prev, **ctx)[0]
            torch.testing.assert_close(batched[i, :n], alone[0], atol=1e-5, rtol=1e-5,
                                       msg=lambda m: f"sentence {i}: {m}")


def _encode(model, src, lengths, kwargs, context=False):
    extra = {"return_context": True} if context and "ctx_tokens" in kwargs else {}
    return model.encoder(src, lengths, return_all_hiddens=True, **kwargs, **extra)


def _decode(model, enc, prev, state, start, stop):
    return torch.cat([model.decoder(prev[:, :t + 1], enc, incremental_state=state)[0]
                      for t in range(start, stop)], dim=1)


@pytest.mark.unit
@pytest.mark.parametrize("name", NAMES)
def test_incremental_decoding_equals_full_forward(name):
    model = _model(name)
    src, src_lengths, prev, tgt_lengths, kwargs = _batch(model, seed=1)
    with torch.no_grad():
        full = model(src, src_lengths, prev, **kwargs)[0]
        steps = _decode(model, model.encoder(src, src_lengths, **kwargs), prev, {}, 0, prev.size(1))
    real = torch.arange(prev.size(1))[None, :] < torch.tensor(tgt_lengths)[:, None]  # B x T, not padding
    torch.testing.assert_close(steps[real], full[real], atol=1e-5, rtol=1e-5)


def _permuted(src, lengths, prev, kwargs, order):
    return src[order], lengths[order], prev[order], {k: v[order] for k, v in kwargs.items()}


@pytest.mark.unit
@pytest.mark.parametrize("name", NAMES)
def test_reorder_encoder_out_equals_encoding_the_permuted_batch(name):
    """Every entry of ``encoder_out`` follows the beams (ctxenc's context
    states and mask, GRET's global state, all hidden states). The readouts
    (ctxsan's gates, DC's attention probabilities, ctxenc's gate:
    :mod:`fairseq_ctx.modules.readout`) are not in ``encoder_out`` but on
    their modules, in the order of the batch they were computed on, so there
    is nothing of them to reorder: encoding the permuted batch permutes each
    readout along its batch dimension, and reading adds no entry to
    ``encoder_out``."""
    model = _model(name)
    src, lengths, prev, _, kwargs = _batch(model)
    p_src, p_lengths, _, p_kwargs = _permuted(src, lengths, prev, kwargs, ORDER)
    with torch.no_grad():
        unread = _encode(model, p_src, p_lengths, p_kwargs, True)
        with reading(model.encoder) as modules:
            reordered = model.encoder.reorder_encoder_out(_encode(model, src, lengths, kwargs, True), ORDER)
            readouts = {n: dict(m.last_readout) for n, m in modules.items()}
            direct = _encode(model, p_src, p_lengths, p_kwargs, True)
            p_readouts = {n: dict(m.last_readout) for n, m in modules.items()}
    assert set(direct) == set(unread)
    # fairseq's TransformerEncoder.reorder_encoder_out drops fc_results (unused here)
    assert set(reordered) == set(direct) - {"fc_results"}
    for key, tensors in direct.items():
        if key == "fc_results":
            continue
        assert len(reordered[key]) == len(tensors), key
        for got, want in zip(reordered[key], tensors):
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5, msg=lambda m: f"{key}: {m}")
    assert len(direct["encoder_states"]) > 0
    for n, m in modules.items():
        assert set(p_readouts[n]) == set(readouts[n]), n
        for key, want in p_readouts[n].items():
            dims = m.readout_shapes[key].split(" x ")  # e.g. "T x B"
            assert want.dim() == len(dims), (n, key)
            got = readouts[n][key].index_select(dims.index("B"), ORDER)
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5, msg=lambda msg: f"{n}/{key}: {msg}")
    # what the variant declares (fairseq_ctx.architectures): the readouts of
    # its encoder, and its own encoder_out entries, one tensor each
    read = {key for r in readouts.values() for key in r}
    assert read == set(BY_NAME[name].readouts)
    for key in BY_NAME[name].encoder_out:
        assert len(direct[key]) == 1, key
    # each readout's named dimensions are the encoder output's (T x B x C;
    # S, the attended positions, is T in the encoder)
    T, B, C = direct["encoder_out"][0].shape
    sizes = {"T": T, "S": T, "B": B, "C": C}
    for n, m in modules.items():
        for key, value in p_readouts[n].items():
            for i, dim in enumerate(m.readout_shapes[key].split(" x ")):
                want = int(dim) if dim.isdigit() else sizes.get(dim)
                assert want is None or value.shape[i] == want, (n, key, dim, tuple(value.shape))


def _encoder_attention_keys(model):
    return {m._get_full_incremental_state_key("attn_state") for m in model.decoder.modules()
            if isinstance(m, MultiheadAttention) and m.encoder_decoder_attention}


@pytest.mark.unit
@pytest.mark.parametrize("name", NAMES)
def test_reorder_incremental_state_moves_every_cached_value(name):
    """After three steps and a reorder, every cached tensor (ctxsan's running
    sums and contextualised keys, DC's convolution inputs and both
    feature-interaction caches, GRET's gate terms, fairseq's self-attention
    caches) equals the cache of decoding the permuted batch from the start,
    and decoding goes on to the same outputs.

    fairseq's encoder-decoder attention keeps one key/value cache per
    sentence and does not reorder it for an order of the same size (beams of
    one sentence share it); the permutation here mixes sentences, so those
    entries are dropped after the reorder and rebuilt from the reordered
    ``encoder_out``."""
    model = _model(name)
    src, lengths, prev, _, kwargs = _batch(model)
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
            # DC's time-major keys/values take a reorder at the next step: compare them settled
            got_cache = settled(state[key])
            assert set(got_cache) == set(reference[key]), key
            for field, want in reference[key].items():
                got = got_cache[field]
                if want is None:
                    assert got is None, (key, field)
                else:
                    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5,
                                               msg=lambda m: f"{key}/{field}: {m}")
        torch.testing.assert_close(_decode(model, enc, p_prev, state, STEPS, prev.size(1)),
                                   _decode(model, p_enc, p_prev, reference, STEPS, prev.size(1)),
                                   atol=1e-5, rtol=1e-5)


@pytest.mark.unit
@pytest.mark.parametrize("name", NAMES)
def test_beam_search_translates_a_sentence_the_same_alone_and_in_a_batch(name):
    model = _model(name)
    d = model.encoder.dictionary
    gen = SequenceGenerator([model], d, beam_size=2, max_len_b=8)
    src, src_lengths, _, _, kwargs = _batch(model, seed=2)

    def translate(net_input):
        with torch.no_grad():
            return gen.generate([model], {"net_input": net_input})

    batched = translate({"src_tokens": src, "src_lengths": src_lengths, **kwargs})
    assert len(batched) == 4 and all(len(h) == 2 for h in batched)
    for i in range(4):
        one, lengths, _, ctx = _row(i, src, src_lengths, src, 1, kwargs, d.pad())
        alone = translate({"src_tokens": one, "src_lengths": lengths, **ctx})[0][0]
        assert torch.equal(batched[i][0]["tokens"], alone["tokens"]), i
        assert math.isclose(batched[i][0]["score"].item(), alone["score"].item(), abs_tol=1e-5), i


@pytest.mark.unit
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("name", NAMES)
def test_half_precision_forward_and_backward(name, dtype):
    reference = _model(name)
    src, src_lengths, prev, _, kwargs = _batch(reference, seed=3)
    with torch.no_grad():
        want = torch.softmax(reference(src, src_lengths, prev, **kwargs)[0].float(), dim=-1)
    model = build_model(BY_NAME[name].arch, [*TINY_FLAGS, *BY_NAME[name].flags, "--dropout", "0"])
    model.load_state_dict(reference.state_dict())
    model = model.to(dtype).train()
    logits = model(src, src_lengths, prev, **kwargs)[0]
    assert logits.dtype == dtype
    got = torch.softmax(logits.detach().float(), dim=-1)
    assert bool(torch.isfinite(got).all())
    assert float((got - want).abs().max()) <= HALF_TOLERANCE[dtype]
    logits.float().logsumexp(-1).sum().backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and bool(torch.isfinite(g).all()) for g in grads)


@pytest.mark.unit
@pytest.mark.parametrize("name", NAMES)
def test_autocast_forward_and_backward(name):
    """Under autocast (fairseq's ``--amp`` enters CUDA's around each
    forward; CPU's, in bfloat16, is what runs here) float32 weights meet
    half-precision products: the output stays within bfloat16's tolerance
    of float32, and every parameter gets a finite float32 gradient."""
    model = _model(name)
    src, src_lengths, prev, _, kwargs = _batch(model, seed=3)
    with torch.no_grad():
        want = torch.softmax(model(src, src_lengths, prev, **kwargs)[0].float(), dim=-1)
    model.train()
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(src, src_lengths, prev, **kwargs)[0]
        assert logits.dtype == torch.bfloat16  # the output projection ran in half precision
        got = torch.softmax(logits.detach().float(), dim=-1)
        assert float((got - want).abs().max()) <= HALF_TOLERANCE[torch.bfloat16]
        logits.float().logsumexp(-1).sum().backward()
        grads = [p.grad for p in model.parameters() if p.requires_grad]
        assert all(g is not None and g.dtype == torch.float32 and bool(torch.isfinite(g).all()) for g in grads)
    finally:
        model.zero_grad(set_to_none=True)
        model.eval()


@pytest.mark.unit
@pytest.mark.parametrize("offload", [False, True], ids=["checkpoint", "offload"])
@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("dropout", [0.0, 0.3])
@pytest.mark.parametrize("name", NAMES)
def test_checkpoint_activations_wraps_every_layer_and_keeps_gradients(name, dropout, norm, offload, monkeypatch):
    """``--checkpoint-activations`` reaches every layer, ours included (a
    ``build_*_layer`` hook that returns its own layer must wrap it as fairseq
    does), and recomputing the activations in backward gives the gradients of
    the plain model, post-norm and pre-norm. ctxsan's layers read lower
    layers' states through a per-forward history, which fairseq's reentrant
    wrapper would cut from the gradient: they checkpoint themselves
    (non-reentrant), and their self-attention must run twice per training
    step (forward, then the recomputation); in pre-norm they push LN(x),
    computed outside that checkpoint, whose LayerNorm must keep its
    gradient. With dropout, the recomputation must replay the same masks
    (same seed: same gradients). ``--offload-activations`` reaches every
    layer's checkpoint too (fairseq's wrapper moves the inputs itself; ours,
    ctxsan's and the context encoder's, run under ``save_on_cpu``), with the
    same gradients. (Tried: ctxenc's gated layer returned
    unwrapped, as it was: fails; ctxsan's layers under fairseq's wrapper: the
    recomputation finds the history closed and stops; ctxsan's pre-norm push
    detached in the checkpointed model only: fails.)"""
    from fairseq_ctx.modules import activation_checkpoint
    from fairseq_ctx.modules.ctxsan_attention import ContextAwareSelfAttention

    offloads = []  # our checkpoints entered under save_on_cpu
    real_save_on_cpu = activation_checkpoint.save_on_cpu
    monkeypatch.setattr(activation_checkpoint, "save_on_cpu", lambda: offloads.append(1) or real_save_on_cpu())
    norm_flags = ["--encoder-normalize-before", "--decoder-normalize-before"] if norm == "pre" else []
    # the contract's weights (random gates); the final LayerNorms too in pre-norm
    reference = tiny_model(name, [*norm_flags, "--dropout", str(dropout)])
    model = build_model(BY_NAME[name].arch, [*TINY_FLAGS, *BY_NAME[name].flags, "--dropout", str(dropout),
                                             *norm_flags, "--checkpoint-activations",
                                             *(["--offload-activations"] if offload else [])])
    model.load_state_dict(reference.state_dict())
    # every layer in the model, the context encoder's own last one too (not in encoder.layers)
    layers = [m for m in model.modules() if isinstance(m, (TransformerEncoderLayerBase, TransformerDecoderLayerBase))]
    assert len(layers) >= len(model.encoder.layers) + len(model.decoder.layers)
    assert all(getattr(layer, "normalize_before", None) == (norm == "pre") for layer in layers)
    unwrapped = [type(layer).__name__ for layer in layers
                 if not (hasattr(layer, "precheckpoint_forward") or getattr(layer, "ctx_checkpoint", False))]
    assert not unwrapped, unwrapped
    # the offload flag each checkpoint got: fairseq's wrapper and ours hold it in one partial layout
    assert all((layer.forward.args[1] if hasattr(layer, "precheckpoint_forward") else layer.ctx_offload) == offload
               for layer in layers)
    ours = sum(getattr(layer, "ctx_checkpoint", False) or (hasattr(layer, "precheckpoint_forward") and
                                                          layer.forward.func is activation_checkpoint.checkpointed_call)
               for layer in layers)
    calls = []
    for module in model.modules():
        if isinstance(module, ContextAwareSelfAttention):
            module.register_forward_hook(lambda *_: calls.append(1))
    src, src_lengths, prev, _, kwargs = _batch(reference, seed=5)
    grads = []
    for m in (reference, model):
        m.train().zero_grad()
        torch.manual_seed(11)
        m(src, src_lengths, prev, **kwargs)[0].logsumexp(-1).sum().backward()
        grads.append({n: p.grad for n, p in m.named_parameters() if p.grad is not None})
    n_ctxsan = sum(isinstance(m, ContextAwareSelfAttention) for m in model.modules())
    assert len(calls) == 2 * n_ctxsan  # each recomputed once in backward (0 for other architectures)
    assert len(offloads) >= ours if offload else not offloads  # each of ours ran at least once
    assert ours > 0 or BY_NAME[name].arch not in ("transformer_ctxsan", "transformer_ctxenc")
    assert grads[0].keys() == grads[1].keys()
    for n in grads[0]:
        torch.testing.assert_close(grads[1][n], grads[0][n], atol=1e-5, rtol=1e-4, msg=lambda m: f"{n}: {m}")


@pytest.mark.unit
@pytest.mark.parametrize("name", NAMES)
def test_checkpointed_parameters_get_their_gradient_in_one_accumulation(name):
    """PyTorch's DistributedDataParallel (fairseq's default ``--ddp-backend
    pytorch_ddp``) reduces a parameter's gradient when autograd accumulates
    it, and stops where that happens twice in one backward pass ("Expected to
    mark a variable ready only once"): a layer under fairseq's reentrant
    checkpoint that runs twice a forward does that. With
    ``--checkpoint-activations``, every parameter's gradient is accumulated
    once, in a batch whose contexts are much shorter than its sources (the
    context encoder then runs its shared layers on each apart). (Tried: the
    context encoder's layers under fairseq's wrapper, as they were: its
    shared layers' parameters are accumulated twice.)"""
    model = build_model(BY_NAME[name].arch, [*TINY_FLAGS, *BY_NAME[name].flags, "--dropout", "0",
                                             "--checkpoint-activations"]).train()
    src, src_lengths, prev, _, kwargs = _batch(model, seed=7)
    kwargs = {k: v[:, -2:] for k, v in kwargs.items()}  # contexts of at most 2 tokens against sources of 7
    counts = {n: 0 for n, p in model.named_parameters()}
    for n, p in model.named_parameters():
        p.register_post_accumulate_grad_hook(lambda _, n=n: counts.__setitem__(n, counts[n] + 1))
    model(src, src_lengths, prev, **kwargs)[0].logsumexp(-1).sum().backward()
    assert {n: c for n, c in counts.items() if c != 1} == {}


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(set(NAMES) | set(names(one_of_each()))))
def test_retain_dropout_makes_evaluation_draw_trainings_dropout(name):
    """fairseq-generate's ``--retain-dropout`` (Monte Carlo dropout at
    inference) goes through ``make_generation_fast_``, which turns on every
    ``FairseqDropout`` it finds (``--retain-dropout-modules``: those whose
    module name is listed). Every dropout of every variant must be one: with
    the same seed, an evaluation-mode forward then draws the masks of a
    training-mode forward and gives its output to the bit. (Tried: ctxsan's
    attention and DC's FI attention dropped their probabilities under
    ``self.training`` only, as they did: fails for both.)"""
    flags = ["--dropout", "0.3", "--attention-dropout", "0.3", "--activation-dropout", "0.3"]
    model = tiny_model(name, flags)
    src, src_lengths, prev, _, kwargs = _batch(model, seed=6)
    with torch.no_grad():
        model.train()
        torch.manual_seed(12)
        trained = model(src, src_lengths, prev, **kwargs)[0]
        model.eval()
        plain = model(src, src_lengths, prev, **kwargs)[0]
        model.make_generation_fast_(retain_dropout=True, retain_dropout_modules=None)
        torch.manual_seed(12)
        retained = model(src, src_lengths, prev, **kwargs)[0]
    assert not torch.equal(trained, plain)
    assert torch.equal(retained, trained)


# ---------------------------------------------------------------- device syncs

# Reads of tensor values into Python by our code (a device sync each on a
# GPU) in one training forward of the encoder, per architecture; none
# elsewhere. The context encoder reads once what its shapes depend on
# (empty contexts, padding-only columns, whether there is padding and on
# which side, the context lengths for its chunking rule); only contexts
# padded on both sides make it read once more per chunk where it splits the
# batch by context length (tests/test_ctxenc.py).
ENCODER_READS = {"transformer_ctxenc": 1}


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(set(NAMES) | set(names(one_of_each()))))
def test_our_code_reads_no_tensor_value_in_decoding_steps_and_training_forwards(name):
    """No ``.item()``, ``bool()``, ``.tolist()``, ``nonzero`` or boolean
    indexing of our own in an incremental decoding step or the decoder's
    training forward, and at most :data:`ENCODER_READS` in the encoder's
    (fairseq's own reads are fairseq's: its positional embeddings and
    padding checks)."""
    from tests.utils import host_reads

    model = _model(name)
    src, src_lengths, prev, _, kwargs = _batch(model)
    model.train()
    try:
        with host_reads() as encoder_reads:
            enc = model.encoder(src, src_lengths, **kwargs)
        with host_reads() as decoder_reads:
            model.decoder(prev, enc)
    finally:
        model.eval()
    with torch.no_grad():
        enc = model.encoder(src, src_lengths, **kwargs)
        state = {}
        model.decoder(prev[:, :1], enc, incremental_state=state)
        with host_reads() as step_reads:
            for t in (1, 2):
                model.decoder(prev[:, :t + 1], enc, incremental_state=state)
    assert sum(encoder_reads.values()) <= ENCODER_READS.get(variant(name).arch, 0), dict(encoder_reads)
    assert not decoder_reads and not step_reads, (dict(decoder_reads), dict(step_reads))


# ---------------------------------------------------------------- the option grid


@pytest.mark.unit
@pytest.mark.parametrize("arch", grid_archs())
def test_option_grid_settings_are_what_fairseq_parses(arch):
    """Each setting of the architecture's option grid
    (:func:`fairseq_ctx.architectures.option_grid`) is what fairseq-train
    makes of its flags: every option of ``settings`` and ``task_settings``,
    defaults included (so the grid's defaults are the architecture
    function's)."""
    from fairseq import options

    grid = option_grid(arch)
    assert grid and {v.arch for v in grid} == {arch}
    for v in grid:
        args = options.parse_args_and_arch(options.get_training_parser(),
                                           ["/nonexistent", "--arch", v.arch, *v.flags, *v.task])
        want = {**v.settings, **v.task_settings}
        assert {k: getattr(args, k) for k in want} == want, v.name


@pytest.mark.unit
@pytest.mark.parametrize("name", names(one_of_each()))
def test_option_grid_models_have_what_they_declare(name):
    """A few settings of the grid that together take every value of every
    option (:func:`~fairseq_ctx.architectures.one_of_each`), built at tiny
    size: their encoder's readouts, their own ``encoder_out`` entries and
    whether their decoder caches state of its own beyond fairseq's attention
    caches are those their Variant declares."""
    v = variant(name)
    model = tiny_model(v, random_constants=False)
    src, src_lengths, prev, _, kwargs = _batch(model)
    with torch.no_grad():
        with reading(model.encoder) as modules:
            enc = _encode(model, src, src_lengths, kwargs, True)
            read = {key for m in modules.values() for key in m.last_readout}
        state = {}
        _decode(model, enc, prev, state, 0, 2)
    assert read == set(v.readouts)
    assert {k for k in enc if len(enc[k])} - FAIRSEQ_ENCODER_OUT == set(v.encoder_out)
    fairseq_caches = {m._get_full_incremental_state_key("attn_state") for m in model.decoder.modules()
                      if type(m) is MultiheadAttention}
    assert bool(set(state) - fairseq_caches) == v.decoder_state


# ---------------------------------------------------------------- fairseq's commands

_GENERATED = {}


def _generate(name, doc_corpus, trained_checkpoint, tmp_path_factory, extra=()):
    """fairseq-generate's output file on the test set for variant ``name``
    (``extra``: more flags), decoded once per session and shared by the
    tests below."""
    key = (name, tuple(extra))
    if key not in _GENERATED:
        results = tmp_path_factory.mktemp(f"generate_{name}")
        generate_in_process(doc_corpus[1], trained_checkpoint(name), results, task_flags=BY_NAME[name].task,
                            extra=extra)
        _GENERATED[key] = (results / "generate-test.txt").read_text()
    return _GENERATED[key]


def _forward_log2_probs(name, doc_corpus, trained_checkpoint, targets=None):
    """``{i: [log2-probability of each token]}`` that variant ``name``'s
    checkpoint gives ``targets[i]`` (tokens ending in </s>; default: test
    sentence i's reference) as the translation of test sentence i, with the
    source and context the task's test set gives it: one teacher-forced
    forward pass per sentence, neither beam search nor fairseq's scorer."""
    from fairseq import checkpoint_utils

    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(trained_checkpoint(name))], arg_overrides={"data": str(doc_corpus[1])})
    model = models[0].eval()
    task.load_dataset("test")
    dataset = task.dataset("test")
    targets = targets or {i: dataset[i]["target"] for i in range(len(dataset))}
    out = {}
    with torch.no_grad():
        for i, target in targets.items():
            net_input = dict(dataset.collater([dataset[i]])["net_input"])
            target = target.long().unsqueeze(0)
            net_input["prev_output_tokens"] = target.roll(1, dims=1)  # </s> first, as fairseq feeds it
            lprobs = model.get_normalized_probs(model(**net_input), log_probs=True)[0]
            out[i] = (lprobs.gather(-1, target[0].unsqueeze(-1)).squeeze(-1) / math.log(2)).tolist()
    return out


def _positional_scores(output):
    """fairseq-generate's ``P-`` lines: ``{id: [score of each token, base 2]}``."""
    return {int(i): [float(x) for x in p.split()] for i, p in re.findall(r"^P-(\d+)\t(.*)$", output, re.M)}


def _check_scores(output, want):
    """Each sentence's ``P-`` scores (4 decimals) are ``want``'s, and its
    ``H-`` score their mean (the length normalisation of fairseq's default
    --lenpen 1)."""
    hyps, _ = parse_generate(output)
    positions = _positional_scores(output)
    assert sorted(hyps) == sorted(positions) == sorted(want) == list(range(14))
    for i, (_, score) in hyps.items():
        assert len(positions[i]) == len(want[i]), i
        assert max(abs(a - b) for a, b in zip(positions[i], want[i])) < 1e-4, (i, positions[i], want[i])
        assert math.isclose(score, sum(want[i]) / len(want[i]), abs_tol=1e-5), (i, score)


@pytest.mark.parametrize("name", NAMES)
def test_generate_translates_every_sentence(name, doc_corpus, trained_checkpoint, tmp_path, monkeypatch):
    """Every test sentence gets a hypothesis, and the score of each of its
    tokens is what the model gives that token in a plain forward pass over
    the hypothesis (beam search's incremental decoding and the context
    checked against the full forward). The hypotheses' tokens are taken from
    beam search itself: the printed text drops any <s> the model chose."""
    output, produced = _generate_recording(name, doc_corpus, trained_checkpoint, tmp_path, monkeypatch)
    _GENERATED.setdefault((name, ()), output)  # the output the tests below read
    _check_scores(output, _forward_log2_probs(name, doc_corpus, trained_checkpoint, produced))


def _generate_recording(name, doc_corpus, trained_checkpoint, out_dir, monkeypatch, extra=()):
    """fairseq-generate's output on the test set and the tokens of each
    sentence's best hypothesis as the search produced them."""
    produced = {}
    search = SequenceGenerator.generate

    def recording(self, models, sample, **kwargs):
        hypos = search(self, models, sample, **kwargs)
        produced.update({int(i): h[0]["tokens"] for i, h in zip(sample["id"], hypos)})
        return hypos

    with monkeypatch.context() as patch:
        patch.setattr(SequenceGenerator, "generate", recording)
        generate_in_process(doc_corpus[1], trained_checkpoint(name), out_dir, task_flags=BY_NAME[name].task,
                            extra=extra)
    return (out_dir / "generate-test.txt").read_text(), produced


# ensembles for fairseq-generate: every sentence-level variant together (the
# translation task's inputs), each document-task variant with a second
# checkpoint of its own, trained from another seed
ENSEMBLES = {"sentence-level": [n for n in NAMES if not BY_NAME[n].task],
             **{n: [n] for n in NAMES if BY_NAME[n].task}}


@pytest.mark.parametrize("group", sorted(ENSEMBLES))
def test_an_ensemble_scores_each_token_as_fairseqs_ensemble_does(group, doc_corpus, trained_checkpoint, tmp_path,
                                                                 tmp_path_factory, monkeypatch):
    """fairseq-generate with ``--path a.pt:b.pt:...`` (fairseq's
    ``EnsembleModel``: one encoder output and incremental state per model,
    each reordered by beam search): every sentence-level architecture in one
    ensemble, each document-task variant with a second checkpoint of its own.
    A hypothesis token's printed score is the log of the models' mean
    probability of it, each model's from a plain forward pass over the
    hypothesis, so no model's state reaches another's; fairseq-interactive
    with the same ensemble gives the same hypotheses."""
    from tests.utils import train_in_process

    names_ = ENSEMBLES[group]
    paths = [str(trained_checkpoint(n)) for n in names_]
    if len(names_) == 1:
        v = BY_NAME[names_[0]]
        paths.append(str(train_in_process(doc_corpus[1], tmp_path_factory.mktemp(f"seed2_{v.name}"), v.arch,
                                          [*TINY_FLAGS, *v.flags, *v.task, "--seed", "2"])))
    output, produced = _generate_recording(names_[0], doc_corpus, lambda _: ":".join(paths), tmp_path, monkeypatch)
    per_model = [_forward_log2_probs(names_[0], doc_corpus, lambda _, p=p: p, produced) for p in paths]
    assert all(per_model[0][i] != other[i] for other in per_model[1:] for i in produced)  # the models differ
    want = {i: (torch.logsumexp(torch.tensor([m[i] for m in per_model]) * math.log(2), dim=0)
                - math.log(len(paths))).div(math.log(2)).tolist() for i in produced}
    _check_scores(output, want)
    hyps, _ = parse_generate(output)
    interactive = interactive_in_process(doc_corpus[1], ":".join(paths), _interactive_lines(names_[0], doc_corpus),
                                         tmp_path, task_flags=BY_NAME[names_[0]].task)
    assert interactive == [hyps[i][0] for i in range(14)]


@pytest.mark.parametrize("name", NAMES)
def test_score_reference_scores_every_reference(name, doc_corpus, trained_checkpoint, tmp_path_factory):
    """``--score-reference`` scores each test sentence's own reference (the
    raw target line), each token as the model does in a forward pass."""
    output = _generate(name, doc_corpus, trained_checkpoint, tmp_path_factory, extra=["--score-reference"])
    hyps, _ = parse_generate(output)
    references = (doc_corpus[0] / "test.tgt").read_text().splitlines()
    assert {i: hyp for i, (hyp, _) in hyps.items()} == dict(enumerate(references))
    _check_scores(output, _forward_log2_probs(name, doc_corpus, trained_checkpoint))


# fairseq-generate's search options that keep a hypothesis's scores the
# model's log-probabilities: sampling (top-k, seeded) and a forced prefix of
# the reference's first token
SEARCH_OPTIONS = {
    "sampling": ["--sampling", "--sampling-topk", "3", "--seed", "7", "--beam", "1"],
    "prefix": ["--prefix-size", "1"],
}


@pytest.mark.parametrize("option", sorted(SEARCH_OPTIONS))
@pytest.mark.parametrize("name", NAMES)
def test_search_options_score_as_the_model_does(name, option, doc_corpus, trained_checkpoint, tmp_path,
                                                tmp_path_factory, monkeypatch):
    """fairseq-generate with sampling or a forced prefix (other searches over
    the same encoder output and incremental state): every test sentence gets
    a hypothesis, each token scored as a plain forward pass over it scores it;
    with ``--prefix-size 1`` every hypothesis starts with its reference's
    first word, and sampling gives other hypotheses than beam search."""
    output, produced = _generate_recording(name, doc_corpus, trained_checkpoint, tmp_path, monkeypatch,
                                           SEARCH_OPTIONS[option])
    _check_scores(output, _forward_log2_probs(name, doc_corpus, trained_checkpoint, produced))
    hyps, _ = parse_generate(output)
    if option == "prefix":  # forced: beam search alone starts otherwise somewhere
        references = [r.split()[:1] for r in (doc_corpus[0] / "test.tgt").read_text().splitlines()]
        beam, _ = parse_generate(_generate(name, doc_corpus, trained_checkpoint, tmp_path_factory))
        assert [hyps[i][0].split()[:1] for i in range(14)] == references
        assert [beam[i][0].split()[:1] for i in range(14)] != references
    else:  # sampled: not the greedy search of the same beam size
        greedy, _ = parse_generate(_generate(name, doc_corpus, trained_checkpoint, tmp_path_factory,
                                             extra=["--beam", "1"]))
        assert any(hyps[i][0] != greedy[i][0] for i in range(14))


def _documents(raw_dir, subset="test"):
    """The lines of ``subset``'s source, one list per document (its ``.docids``)."""
    lines = (raw_dir / f"{subset}.src").read_text().splitlines()
    docids = (raw_dir / f"{subset}.docids").read_text().splitlines()
    docs = []
    for i, (line, doc) in enumerate(zip(lines, docids)):
        if i == 0 or doc != docids[i - 1]:
            docs.append([])
        docs[-1].append(line)
    return docs


@pytest.mark.parametrize("name", NAMES)
def test_interactive_equals_generate(name, doc_corpus, trained_checkpoint, tmp_path, tmp_path_factory):
    """fairseq-interactive on the raw test set, under the document task with
    documents separated by an empty line (which starts a new document: the same previous-sentence
    context as fairseq-generate's ``.docids``, across interactive's buffers
    of 4 lines), gives generate's hypotheses, sentence by sentence (same
    checkpoint, beam and length limits: tests/utils.py)."""
    expected, _ = parse_generate(_generate(name, doc_corpus, trained_checkpoint, tmp_path_factory))
    hyps = interactive_in_process(doc_corpus[1], trained_checkpoint(name), _interactive_lines(name, doc_corpus),
                                  tmp_path, task_flags=BY_NAME[name].task)
    assert hyps == [expected[i][0] for i in range(14)]


def _interactive_lines(name, doc_corpus):
    """The raw test set as fairseq-interactive's input for variant
    ``name``: under the document task, documents separated by an empty line
    (which starts a new document); sentence-level, the lines alone (an empty
    line would be a sentence of its own)."""
    docs = _documents(doc_corpus[0])
    assert [len(d) for d in docs] == [4, 4, 4, 2]
    if BY_NAME[name].task:
        return [line for doc in docs for line in [*doc, ""]][:-1]
    return [line for doc in docs for line in doc]


@pytest.mark.parametrize("name", NAMES)
def test_interactive_constraints_appear_in_every_translation(name, doc_corpus, trained_checkpoint, tmp_path,
                                                             tmp_path_factory):
    """fairseq-interactive with ``--constraints`` (lexically constrained beam
    search; the constraints follow a tab on each line): each line constrained
    to its reference's last word gets a translation with that word, where
    beam search alone left it out of some."""
    docs = _documents(doc_corpus[0])
    references = (doc_corpus[0] / "test.tgt").read_text().splitlines()
    words = [r.split()[-1] for r in references]
    constrained = iter(f"{line}\t{word}" for line, word in zip([s for d in docs for s in d], words))
    if BY_NAME[name].task:
        lines = [line for doc in docs for line in [*(next(constrained) for _ in doc), ""]][:-1]
    else:
        lines = list(constrained)
    hyps = interactive_in_process(doc_corpus[1], trained_checkpoint(name), lines, tmp_path,
                                  task_flags=BY_NAME[name].task, extra=["--constraints", "ordered"])
    assert len(hyps) == 14 and all(word in hyp.split() for hyp, word in zip(hyps, words))
    beam, _ = parse_generate(_generate(name, doc_corpus, trained_checkpoint, tmp_path_factory))
    assert not all(words[i] in beam[i][0].split() for i in range(14))


def _by_line(output, kind):
    """``{id: text}`` of the output's ``kind`` lines (``S``, ``A``, ...)."""
    return {int(i): text for i, text in re.findall(rf"^{kind}-(\d+)\t(.*)$", output, re.M)}


@pytest.mark.parametrize("name", NAMES)
def test_interactive_alignments_point_into_the_line_shown(name, doc_corpus, trained_checkpoint, tmp_path,
                                                         tmp_path_factory):
    """``--print-alignment hard`` (fairseq-interactive prints no soft
    alignment): fairseq-interactive's ``A-`` pairs are fairseq-generate's,
    their source side pointing into the ``S-`` line it prints. For a model
    that takes its context separately that line is the context glued before
    the source (how interactive carries it), so each source position moves
    right by the words before the source."""
    docs = _documents(doc_corpus[0])
    if BY_NAME[name].task:
        lines = [line for doc in docs for line in [*doc, ""]][:-1]
    else:
        lines = [line for doc in docs for line in doc]
    flags = ["--print-alignment", "hard"]
    generated = _by_line(_generate(name, doc_corpus, trained_checkpoint, tmp_path_factory, extra=flags), "A")
    output = interactive_output(doc_corpus[1], trained_checkpoint(name), lines, tmp_path,
                                task_flags=BY_NAME[name].task, extra=flags)
    shown, aligned = _by_line(output, "S"), _by_line(output, "A")
    ids = sorted(aligned)
    assert len(ids) == 14
    glued = BY_NAME[name].task and "--concat-context" not in BY_NAME[name].task
    shifted = 0  # lines whose pairs moved
    for i, line_id in enumerate(ids):
        words = shown[line_id].split()
        offset = len(words) - words[::-1].index("<sep>") if glued and "<sep>" in words else 0
        expected = [f"{int(s) + offset}-{t}" for s, t in (p.split("-") for p in generated[i].split())]
        assert all(int(p.split("-")[0]) < len(words) for p in expected)
        assert aligned[line_id].split() == expected, (name, i)
        shifted += bool(offset and expected)
    assert shifted if glued else not shifted


def _nll_loss(proc):
    """fairseq-validate's ``nll_loss`` (base 2, per target token, 3 decimals)."""
    m = re.search(r"\| nll_loss ([0-9.]+)", proc.stdout + proc.stderr)
    assert m, f"no nll_loss in fairseq-validate output:\n{proc.stdout}\n{proc.stderr}"
    return float(m.group(1))


@pytest.mark.parametrize("name", NAMES)
def test_validate_loss_equals_score_reference(name, doc_corpus, trained_checkpoint, tmp_path_factory):
    """fairseq-validate's ``nll_loss`` on the test set (the training
    criterion's NLL: base 2, per target token, </s> included) equals minus
    the mean of ``fairseq-generate --score-reference``'s positional scores
    over every target token of the test set (each ``H-`` score is its
    sentence's mean, base 2, over its ``P-`` positions). Validate runs in
    a process of its own: weights-only loading of each checkpoint for real."""
    # (fairseq's translation task drops the last batch unless its size is a
    # multiple of --required-batch-size-multiple, 8 by default; the document task does not)
    _, validate_proc = validate(doc_corpus[1], trained_checkpoint(name), subset="test",
                                task_flags=BY_NAME[name].task, extra=["--required-batch-size-multiple", "1"])
    out = _generate(name, doc_corpus, trained_checkpoint, tmp_path_factory, extra=["--score-reference"])
    scores = {int(i): float(s) for i, s in re.findall(r"^H-(\d+)\t(\S+)\t", out, re.M)}
    positions = {int(i): len(p.split()) for i, p in re.findall(r"^P-(\d+)\t(.*)$", out, re.M)}
    assert sorted(scores) == sorted(positions) == list(range(14))
    tokens = sum(positions.values())
    reference_nll = -sum(scores[i] * positions[i] for i in scores) / tokens
    # validate rounds to 3 decimals
    assert abs(_nll_loss(validate_proc) - reference_nll) <= 5e-4 + 1e-5, (_nll_loss(validate_proc), reference_nll)
