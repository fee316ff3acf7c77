"""transformer_ctxenc decoding with ``--reuse-sentence-states``: each
sentence goes through the shared encoder layers once per run, as a source or
as a context, whichever comes first (fairseq_ctx/modules/ctxenc_state_cache.py).
Same outputs as the ordinary path, less encoder work."""
import math

import pytest
import torch
from fairseq.data.data_utils import collate_tokens

from fairseq_ctx.architectures import BY_NAME
from fairseq_ctx.modules.ctxenc_state_cache import SharedStateCache
from tests.utils import generate_in_process, interactive_in_process, padded_batch, tiny_model

torch.set_num_threads(1)


def _sentence(d, n, g):
    """n random words ending in </s> (the next row of ``g``'s stream)."""
    return padded_batch([n], generator=g, dictionary=d)[0]


def _pad(rows, pad):
    """Left-padded batch, as fairseq collates sources and contexts."""
    return collate_tokens(rows, pad, left_pad=True)


def _documents(d, seed=0):
    """Two documents of three sentences and one of one; document B repeats
    document A's second sentence as its first."""
    g = torch.Generator().manual_seed(seed)
    a = [_sentence(d, n, g) for n in (5, 7, 4)]
    b = [a[1].clone(), _sentence(d, 6, g), _sentence(d, 3, g)]
    c = [_sentence(d, 8, g)]
    return [a, b, c]


def _encode_in_rounds(model, docs, cache):
    """Round i: the i-th sentence of every document, with the previous
    sentence (or the empty context, a lone </s>) as context."""
    d = model.encoder.dictionary
    model.encoder.state_cache = cache
    outs = {}
    with torch.no_grad():
        for i in range(max(len(doc) for doc in docs)):
            rows = [k for k, doc in enumerate(docs) if i < len(doc)]
            src = _pad([docs[k][i] for k in rows], d.pad())
            ctx = _pad([docs[k][i - 1] if i else torch.tensor([d.eos()]) for k in rows], d.pad())
            out = model.encoder(src, src.ne(d.pad()).sum(1), ctx_tokens=ctx)["encoder_out"][0]
            for j, k in enumerate(rows):
                n = len(docs[k][i])
                outs[k, i] = out[-n:, j]  # the real positions (left padding)
    model.encoder.state_cache = None
    return outs


@pytest.mark.unit
def test_reused_states_give_the_same_encoder_output():
    model = tiny_model("ctxenc")
    docs = _documents(model.encoder.dictionary)
    plain = _encode_in_rounds(model, docs, None)
    cache = SharedStateCache()
    reused = _encode_in_rounds(model, docs, cache)
    assert set(plain) == set(reused)
    for key in plain:
        torch.testing.assert_close(reused[key], plain[key], atol=1e-5, rtol=1e-5, msg=lambda m: f"{key}: {m}")
    # computed (misses): round 0's 3 sources and 3 empty contexts (one key,
    # but looked up before any is kept), then B1, A2, B2; found (hits): A1
    # (which is B0), and every context of rounds 1 and 2
    assert cache.hits == 5 and cache.misses == 9 and len(cache) == 7


@pytest.mark.unit
def test_a_context_never_seen_is_encoded_as_usual():
    model = tiny_model("ctxenc")
    d = model.encoder.dictionary
    docs = _documents(d, seed=1)
    cache = SharedStateCache()
    model.encoder.state_cache = cache
    src, ctx = _pad([docs[0][2]], d.pad()), _pad([docs[0][1]], d.pad())  # docs[0][1] was never a source
    with torch.no_grad():
        got = model.encoder(src, None, ctx_tokens=ctx)["encoder_out"][0]
        model.encoder.state_cache = None
        want = model.encoder(src, None, ctx_tokens=ctx)["encoder_out"][0]
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert cache.hits == 0 and cache.misses == 2 and len(cache) == 2  # the source and the context, both new


@pytest.mark.unit
def test_the_cache_is_not_used_with_autograd_and_is_cleared_when_weights_may_change():
    model = tiny_model("ctxenc")
    d = model.encoder.dictionary
    cache = SharedStateCache()
    model.encoder.state_cache = cache
    src = _pad([_sentence(d, 5, torch.Generator().manual_seed(3))], d.pad())
    model.encoder(src, None, ctx_tokens=src)  # autograd on: the ordinary path
    assert len(cache) == 0 and cache.hits == cache.misses == 0
    with torch.no_grad():
        model.encoder(src, None, ctx_tokens=src)
    assert len(cache) == 1 and cache.hits == 1
    model.train()
    assert len(cache) == 0
    model.eval()
    with torch.no_grad():
        model.encoder(src, None, ctx_tokens=src)
    model.load_state_dict(model.state_dict())
    assert len(cache) == 0


@pytest.mark.unit
def test_cache_keeps_the_most_recently_used_sentences():
    cache = SharedStateCache(max_sentences=2)
    for i, key in enumerate([b"a", b"b", b"c"]):
        cache.put(key, torch.full((1, 2), float(i)))
    assert cache.get(b"a") is None and cache.get(b"b") is not None and len(cache) == 2
    cache.put(b"d", torch.zeros(1, 2))
    assert cache.get(b"c") is None and cache.get(b"b") is not None


def test_generate_with_reused_states_translates_the_same(doc_corpus, trained_checkpoint, tmp_path):
    task = BY_NAME["ctxenc"].task
    ckpt = trained_checkpoint("ctxenc")
    plain, _ = generate_in_process(doc_corpus[1], ckpt, tmp_path / "plain", task_flags=task, beam=3)
    reused, _ = generate_in_process(doc_corpus[1], ckpt, tmp_path / "reused", beam=3,
                                     task_flags=[*task, "--reuse-sentence-states"])
    assert sorted(reused) == sorted(plain) == list(range(14))
    for i, (hyp, score) in plain.items():
        assert reused[i][0] == hyp, i
        assert math.isclose(reused[i][1], score, abs_tol=1e-4), i  # printed with 4 decimals


def test_interactive_with_reused_states_translates_the_same(doc_corpus, trained_checkpoint, tmp_path):
    task = BY_NAME["ctxenc"].task
    ckpt = trained_checkpoint("ctxenc")
    lines = (doc_corpus[0] / "test.src").read_text().splitlines()[:4]
    lines = lines[:2] + [""] + lines[2:]  # two documents
    plain = interactive_in_process(doc_corpus[1], ckpt, lines, tmp_path, task_flags=task)
    reused = interactive_in_process(doc_corpus[1], ckpt, lines, tmp_path, task_flags=[*task, "--reuse-sentence-states"])
    assert reused == plain and len(plain) == 4


def test_reused_states_are_refused_with_retained_dropout(doc_corpus, trained_checkpoint, tmp_path):
    """``--retain-dropout`` draws new masks in every forward; a cached state
    would carry those of its first forward into every later one. One line
    names both flags (fairseq-generate as a user runs it)."""
    from tests.utils import generate

    task = BY_NAME["ctxenc"].task
    _, _, result = generate(doc_corpus[1], trained_checkpoint("ctxenc"), extra=["--retain-dropout"],
                            task_flags=[*task, "--reuse-sentence-states"], check=False)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "fairseq_ctx: error: --reuse-sentence-states reuses each sentence's encoder states for the whole run, and "
        "--retain-dropout needs new dropout masks in every forward: use one of the two")
