"""Context attribution (fairseq_ctx/evaluation/attribution.py): gradient x
input against a hand computation on a toy model, the probes leave the model's
output unchanged, the erasure of a lone context sentence is the no-context
score, and on a synthetic task whose answer is known (a target word decided
only by a marked word of the previous sentence) a trained context model's
sensitive tokens are attributed to the marked word, by both methods, while a
sentence-level model has no sensitive token."""
import json
import math

import numpy as np
import pytest
import torch

from fairseq_ctx.evaluation.attribution import ContextAttributor, Item, _Probes, sensitive_positions
from fairseq_ctx.evaluation.synthetic_context_task import MARKED, QUESTION
from tests.utils import write_voita_set


# ----------------------------------------------------------- thresholds
@pytest.mark.unit
def test_the_threshold_is_mean_plus_k_deviations_with_a_floor():
    scores = [np.array([0.0, 0.1, 2.0]), np.array([0.1, 0.0])]
    pos, cuts = sensitive_positions(scores, std=1.0)
    flat = np.abs(np.concatenate(scores))
    assert cuts[0] == pytest.approx(flat.mean() + flat.std(ddof=1))
    assert [p.tolist() for p in pos] == [[2], []]
    # per item: the second item's own mean and deviation
    pos, cuts = sensitive_positions(scores, std=0.5, scope="item")
    assert cuts[1] == pytest.approx(0.05 + 0.5 * np.std([0.1, 0.0], ddof=1)) and pos[1].tolist() == [0]
    # a model that ignores its context: every score 0, nothing is sensitive
    assert [p.tolist() for p in sensitive_positions([np.zeros(4), np.zeros(2)], std=0.0)[0]] == [[], []]
    # negative P-CXMI counts by its size
    assert sensitive_positions([np.array([0.0, -3.0, 0.1, 0.0])], std=1.0)[0][0].tolist() == [1]


@pytest.mark.unit
def test_an_empty_context_sentence_keeps_every_sentence_in_its_place():
    """Context split at the separators and aligned from the newest sentence:
    an empty sentence (two separators in a row, or the newest one empty)
    is a segment of its own, so the older sentences' scores stay theirs."""
    from fairseq_ctx.evaluation.attribution import _align, _segments

    SEP = 9
    sentences = [torch.tensor([5, 6, 2]), torch.tensor([2]), torch.tensor([7, 2])]   # the middle one empty
    segs = _segments([5, 6, SEP, SEP, 7], [0.5, 0.6, math.nan, math.nan, 0.7], SEP)
    assert [t for t, _ in segs] == [[5, 6], [], [7]]
    assert _align(segs, sentences) == [[0.5, 0.6], [], [0.7]]
    # the newest sentence empty (glued to a source: the part before the last <sep> ends with one)
    segs = _segments([5, 6, SEP], [0.5, 0.6, math.nan], SEP)
    assert _align(segs, [torch.tensor([5, 6, 2]), torch.tensor([2])]) == [[0.5, 0.6], []]
    assert _segments([], [], SEP) == []


# ----------------------------------------------------------- a toy with a hand computation
class _ToyModel(torch.nn.Module):
    """Logits = W (sum of the context and source embeddings + the previous
    target token's embedding): gradient x input has a closed form."""

    accepts_context = True

    def __init__(self, vocab: int, dim: int = 3, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.embed = torch.nn.Embedding(vocab, dim, padding_idx=1)
        with torch.no_grad():
            self.embed.weight.copy_(torch.randn(vocab, dim, generator=g))
        self.out = torch.nn.Linear(dim, vocab, bias=False)
        with torch.no_grad():
            self.out.weight.copy_(torch.randn(vocab, dim, generator=g))
        self.encoder = torch.nn.Module()
        self.decoder = torch.nn.Module()
        self.encoder.embed_tokens = self.embed
        self.decoder.embed_tokens = self.embed

    def forward(self, src_tokens, src_lengths, prev_output_tokens, ctx_tokens=None, ctx_lengths=None):
        pad = 1
        h = (self.encoder.embed_tokens(src_tokens) * src_tokens.ne(pad).unsqueeze(-1)).sum(1)   # B x C
        if ctx_tokens is not None:
            h = h + (self.encoder.embed_tokens(ctx_tokens) * ctx_tokens.ne(pad).unsqueeze(-1)).sum(1)
        y = self.decoder.embed_tokens(prev_output_tokens)   # B x T x C
        return self.out(h.unsqueeze(1) + y), None

    def get_normalized_probs(self, net_output, log_probs=True):
        return torch.log_softmax(net_output[0], dim=-1)


@pytest.mark.unit
def test_gradient_x_input_matches_a_hand_computation(doc_task):
    """One context token, one source token: a_i = x_i . W^T (df/dlogits)
    with f = log p(y) - log p(c) at the position (df/dlogits = e_y - e_c,
    the normaliser cancels), computed by hand in numpy."""
    task, d = doc_task
    model = _ToyModel(len(d)).eval()
    ctx_w, src_w, tgt_w = d.index("A"), d.index("B"), d.index("C")
    item = Item(torch.tensor([src_w, d.eos()]), torch.tensor([tgt_w, d.eos()]), [torch.tensor([ctx_w, d.eos()])])
    a = ContextAttributor(model, task, aggregate="sum")
    contrast = d.index("D")
    got = a.attribute([item], [np.array([0])], [np.array([contrast])])[0][0]
    E, W = model.embed.weight.detach().numpy().astype(np.float64), model.out.weight.detach().numpy().astype(np.float64)
    # the model sees the source and the context each with </s>; position 0's previous token is </s>
    h = E[src_w] + E[d.eos()] + E[ctx_w] + E[d.eos()] + E[d.eos()]
    logits = W @ h
    p = np.exp(logits - logits.max())
    p /= p.sum()
    grad_h = W.T @ (np.eye(len(p))[tgt_w] - np.eye(len(p))[contrast])
    assert got["f"] == pytest.approx(math.log(p[tgt_w]) - math.log(p[contrast]), abs=1e-5)
    assert got["context"] == [[pytest.approx(float(E[ctx_w] @ grad_h), abs=1e-6)]]
    assert got["source"][0] == pytest.approx(float(E[src_w] @ grad_h), abs=1e-6)
    assert got["source"][1] == 0.0   # </s> keeps its id: not attributed
    # the L2 norm of the elementwise product (the default aggregate)
    normed = ContextAttributor(model, task).attribute([item], [np.array([0])], [np.array([contrast])])[0][0]
    assert normed["context"][0][0] == pytest.approx(float(np.linalg.norm(E[ctx_w] * grad_h)), abs=1e-6)
    assert normed["source"][0] == pytest.approx(float(np.linalg.norm(E[src_w] * grad_h)), abs=1e-6)
    # the same choice with and without context: f = log p(y) alone
    same = a.attribute([item], [np.array([0])], [np.array([tgt_w])])[0][0]
    grad_same = W.T @ (np.eye(len(p))[tgt_w] - p)
    assert same["f"] == pytest.approx(math.log(p[tgt_w]), abs=1e-5)
    assert same["context"][0][0] == pytest.approx(float(E[ctx_w] @ grad_same), abs=1e-6)


@pytest.mark.unit
def test_the_forced_target_prefix_is_skipped_for_2_to_2(tmp_path):
    """With the previous target sentences glued to the target (2-to-2), the
    analysed tokens are each item's own sentence: the prefix length read off
    the collated target is the prefix sentences' tokens with their
    separators."""
    from fairseq.data import Dictionary

    import fairseq_ctx
    from fairseq_ctx.tasks.document_translation import DocumentTranslationConfig, DocumentTranslationTask

    fairseq_ctx.register()
    d = Dictionary()
    for w in "A B C D E F".split():
        d.add_symbol(w)
    cfg = DocumentTranslationConfig(data=str(tmp_path), source_lang="src", target_lang="tgt", context_size=2,
                                    concat_context=True, target_context=True)
    task = DocumentTranslationTask(cfg, d, d)
    w = [d.index(x) for x in "A B C D E F".split()]
    eos = d.eos()
    t = lambda *ids: torch.tensor([*ids, eos])   # noqa: E731
    items = [Item(t(w[0]), t(w[1], w[2], w[3]), [t(w[4])], [t(w[5], w[5])]),
             Item(t(w[1], w[2]), t(w[4]), [t(w[0]), t(w[1], w[1])], [t(w[2]), t(w[3], w[3], w[3])]),
             Item(t(w[3]), t(w[0], w[5]))]
    a = ContextAttributor(_ToyModel(len(d)).eval(), task)
    sample, order = a._sample(items)
    prefix = a._prefix_lengths(sample["target"])
    assert prefix.tolist() == [sum(len(x) for x in items[i].target_context) for i in order.tolist()]
    with torch.no_grad():
        _, y = a._current(sample)
    for b, i in enumerate(order.tolist()):
        n = len(items[i].target)
        assert y[b, :n].tolist() == items[i].target.tolist()


@pytest.fixture(scope="module")
def doc_task(tmp_path_factory):
    """A document task (separate context) over a small dictionary."""
    from fairseq.data import Dictionary

    import fairseq_ctx
    from fairseq_ctx.tasks.document_translation import DocumentTranslationConfig, DocumentTranslationTask

    fairseq_ctx.register()
    d = Dictionary()
    for w in "A B C D E F".split():
        d.add_symbol(w)
    cfg = DocumentTranslationConfig(data=str(tmp_path_factory.mktemp("toy")), source_lang="src", target_lang="tgt")
    task = DocumentTranslationTask(cfg, d, d)
    return task, d


# ----------------------------------------------------------- trained tiny models
@pytest.mark.parametrize("name", ["ctxenc", "concat"])
def test_probes_change_nothing_and_erasing_the_lone_sentence_is_no_context(name, doc_corpus, trained_checkpoint):
    """With every probe's scale at 1 the model's log-probabilities are the
    plain ones; the finite difference of f along one probe's scale is its
    gradient x input; erasing an item's only context sentence gives the
    no-context f."""
    from fairseq import checkpoint_utils

    import fairseq_ctx

    fairseq_ctx.register()
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(trained_checkpoint(name))], arg_overrides={"data": str(doc_corpus[1])})
    # in float64, so that the central difference below carries only the
    # rounding of fairseq's float32 log-softmax, divided by 2 eps (in float32
    # and at eps 1e-3 that was 1.4% on one CPU, more than the test allowed)
    model = models[0].double().eval()
    task.load_dataset("test")
    ds = task.dataset("test")
    items = [Item(ds.pair[i]["source"], ds.pair[i]["target"], ds.context_sentences(i)) for i in (1, 2, 5)]
    a = ContextAttributor(model, task, batch_size=2, aggregate="sum")   # the derivative along alpha: the sum
    sample, order = a._sample(items)
    prefix = torch.zeros(len(items), dtype=torch.long)
    net_input, originals, where = a._probe_inputs(sample["net_input"], prefix)
    with torch.no_grad():
        plain, _ = a._current(sample)
        with _Probes(model, originals, a.offset) as alpha:
            probed, _ = a._current(dict(sample, net_input=net_input))
            assert torch.allclose(plain, probed, atol=1e-6)
            # finite difference along the first context token's scale of row 0
            ctx_key = "ctx_tokens" if "ctx_tokens" in where else "src_tokens"
            probe = int(where[ctx_key][0][where[ctx_key][0] >= 0][0])
            row, pos = int(order[0]), 0
            y, c = items[row].target[pos].view(1), torch.tensor([5])
            eps = 1e-2
            values = []
            for scale in (1 + eps, 1 - eps):
                alpha[probe] = scale
                lp, _ = a._current(dict(sample, net_input=net_input))
                values.append(float(a._contrastive(lp[0, pos].unsqueeze(0), y, c)))
            alpha[probe] = 1.0
    numeric = (values[0] - values[1]) / (2 * eps)
    got = a.attribute([items[row]], [np.array([pos])], [np.array([5])])[0][0]
    first = got["context"][0][0] if got["context"] and got["context"][0] else None
    assert first == pytest.approx(numeric, rel=2e-3, abs=1e-6)   # measured: 2e-4 and 9e-5 apart
    # erasure of the lone context sentence = f without context
    er = a.erasure([items[row]], [np.array([pos])], [np.array([5])])[0]
    none = a.attribute([items[row].without_context()], [np.array([pos])], [np.array([5])])[0][0]["f"]
    assert er["full"][0] - er["sentences"][0][0] == pytest.approx(none, abs=1e-5)
    assert er["full"][0] == pytest.approx(got["f"], abs=1e-6)


# ----------------------------------------------------------- a task whose answer is known
@pytest.fixture(scope="module")
def synthetic_corpus(tmp_path_factory):
    from fairseq_ctx.evaluation.synthetic_context_task import write
    from tests.utils import preprocess

    root = tmp_path_factory.mktemp("synthetic")
    raw = write(root / "raw")
    return raw, preprocess(raw, root / "bin")


def _train(data_bin, save_dir, arch, flags, updates):
    from tests.utils import train_in_process

    return train_in_process(data_bin, save_dir, arch, [*flags, "--max-update", str(updates), "--max-tokens", "600",
                                                       "--lr", "0.01", "--warmup-updates", "20",
                                                       "--disable-validation", "--label-smoothing", "0"])


@pytest.fixture(scope="module")
def synthetic_ctxenc(synthetic_corpus, tmp_path_factory):
    """ctxenc trained on the synthetic task for 400 updates (it gets every
    colour right with the context)."""
    from fairseq_ctx.architectures import DOC_TASK, TINY_FLAGS

    return _train(synthetic_corpus[1], tmp_path_factory.mktemp("synthetic_ctxenc"), "transformer_ctxenc",
                  [*TINY_FLAGS, *DOC_TASK], 400)


def _second_sentences(task):
    from fairseq_ctx.evaluation.attribution_report import items_from_split
    from fairseq_ctx.evaluation.conditions import TRUE

    items = items_from_split(task, "test", TRUE.rule(task.context_rule, 1), None)
    q = task.source_dictionary.index(QUESTION)
    return [it for it in items if int(it.source[0]) == q and it.context]


def test_a_context_model_relies_on_the_marked_word(synthetic_corpus, synthetic_ctxenc):
    """ctxenc trained on the synthetic task (400 updates: it gets every
    colour right with the context): the colours are its sensitive tokens,
    the top-attributed context token is the marked word for >= 90% of them
    (37 of 41 when written), and erasure agrees (41 of 41)."""
    from fairseq import checkpoint_utils

    import fairseq_ctx
    from fairseq_ctx.architectures import DOC_TASK, TINY_FLAGS
    from fairseq_ctx.evaluation.attribution_report import analyse

    fairseq_ctx.register()
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(synthetic_ctxenc)],
                                                                    arg_overrides={"data": str(synthetic_corpus[1])})
    items = _second_sentences(task)
    report = analyse(ContextAttributor(models[0], task), items)
    rows = [(it, r) for it in report["items"] for r in it["attributions"]]
    # the sensitive tokens are the colours (those over mean + 1 sd of the set), and only they
    assert len(rows) >= 0.3 * len(items) and all(r["token"] in MARKED.values() for _, r in rows)
    kl = np.array([it["sensitivity"]["kl_bits"] for it in report["items"]]).mean(axis=0)   # IT IS colour </s>
    assert kl[2] > 0.5 and kl[2] > 10 * max(kl[0], kl[1], kl[3]), kl   # a sure colour against even odds: 1 bit
    marked = [it["context"][r["top"]["sentence"]]["tokens"][r["top"]["token"]] in MARKED for it, r in rows]
    assert np.mean(marked) >= 0.9, np.mean(marked)
    erased = [it["context"][r["erasure"]["top"]["sentence"]]["tokens"][r["erasure"]["top"]["token"]] in MARKED
              for it, r in rows]
    assert np.mean(erased) >= 0.9, np.mean(erased)
    print(f"synthetic task: {len(rows)} sensitive tokens of {len(items)} questions, KL by position {kl}, "
          f"top attribution on the marked word {sum(marked)}, top erasure {sum(erased)}")


def test_a_sentence_level_model_has_no_sensitive_token(synthetic_corpus, tmp_path):
    from fairseq import checkpoint_utils

    import fairseq_ctx
    from fairseq_ctx.architectures import DOC_TASK, TINY_FLAGS
    from fairseq_ctx.evaluation.attribution_report import analyse

    fairseq_ctx.register()
    ckpt = _train(synthetic_corpus[1], tmp_path / "plain", "transformer", [*TINY_FLAGS, *DOC_TASK], 20)
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(ckpt)],
                                                                    arg_overrides={"data": str(synthetic_corpus[1])})
    report = analyse(ContextAttributor(models[0], task), _second_sentences(task))
    assert report["summary"]["sensitive_tokens"] == 0 and report["summary"]["target_tokens"] > 0
    assert all(v == 0.0 for it in report["items"] for v in it["sensitivity"]["kl_bits"])


def test_the_usage_report_writes_the_attribution_json_and_page(doc_corpus, trained_checkpoint, tmp_path):
    """``fairseq-ctx-context-usage --attribution J --attribution-html H`` as
    a user runs it: the JSON is the library's analysis of the same items
    (the split's first sentences with their true context), the page holds
    every item, and the printed summary is the JSON's."""
    import json

    from fairseq import checkpoint_utils

    import fairseq_ctx
    from fairseq_ctx.evaluation.attribution_report import analyse, items_from_split
    from fairseq_ctx.evaluation.conditions import TRUE
    from fairseq_ctx.evaluation.context_usage import main

    fairseq_ctx.register()
    ckpt = trained_checkpoint("ctxenc")
    res = main([str(doc_corpus[1]), "--path", str(ckpt), "--task", "document_translation", "--context-size", "1",
                "--cpu", "--bootstrap", "10", "--attribution", str(tmp_path / "a.json"),
                "--attribution-html", str(tmp_path / "a.html"), "--attribution-max-items", "6",
                "--attribution-std", "0.5"])
    got = json.loads((tmp_path / "a.json").read_text())
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(ckpt)],
                                                                    arg_overrides={"data": str(doc_corpus[1])})
    items = items_from_split(task, "test", TRUE.rule(task.context_rule, 1), 6)
    want = analyse(ContextAttributor(models[0], task, batch_size=32), items, std=0.5)   # the command's batches
    assert got["items"] == json.loads(json.dumps(want["items"])) and got["summary"] == want["summary"]
    assert got["summary"]["sensitive_tokens"] > 0 and res["attribution"]["sensitive_tokens"] == \
        got["summary"]["sensitive_tokens"]
    page = (tmp_path / "a.html").read_text()
    assert page.count('class="sensitive"') >= got["summary"]["sensitive_tokens"] and "http" not in page


def test_context_decided_items_of_the_known_task_rely_on_the_marked_word(synthetic_corpus, synthetic_ctxenc,
                                                                         tmp_path):
    """The usage report on a contrastive set of the synthetic task (each
    question's colour against the other colour): every item names its group
    and the model's verdict under each condition (summing to the contrastive
    report's counts); ``--attribution-groups context-decided`` analyses
    exactly the groups right with the true context and wrong with none (the
    model is right on every question with its context, and even odds
    without), each as the whole-set run analysed it; on them the share of
    attribution on the marked word is well above a uniform share."""
    import json

    from fairseq_ctx.evaluation.attribution_report import cue_share
    from fairseq_ctx.evaluation.context_usage import main

    raw = synthetic_corpus[0]
    src, tgt, ids = ((raw / f"test.{ext}").read_text().splitlines() for ext in ("src", "tgt", "docids"))
    other = {f"IT IS {c}": f"IT IS {d}" for c, d in zip(MARKED.values(), reversed(list(MARKED.values())))}
    rows = [(src[i - 1], src[i], tgt[i - 1], [tgt[i], other[tgt[i]]] if g % 2 == 0 else [other[tgt[i]], tgt[i]],
             g % 2)
            for g, i in enumerate(i for i in range(1, len(src)) if src[i].startswith(QUESTION) and ids[i - 1] == ids[i])]
    flags = write_voita_set(tmp_path, "colours", rows)
    base = [str(synthetic_corpus[1]), "--path", str(synthetic_ctxenc), "--task", "document_translation",
            "--context-size", "1", "--cpu", "--bootstrap", "10", "--no-generated", *flags]
    res = main([*base, "--attribution", str(tmp_path / "all.json")])
    every = json.loads((tmp_path / "all.json").read_text())["items"]
    assert [it["group"] for it in every] == list(range(len(rows)))
    for cond, r in res["contrastive"].items():
        assert sum(it["scored_right"][cond] for it in every) == r["correct"], cond
    assert all(it["scored_right"]["true"] for it in every)
    decided = [it for it in every if it["scored_right"]["true"] and not it["scored_right"]["none"]]
    assert 0.25 * len(rows) < len(decided) < 0.75 * len(rows), len(decided)   # no context: even odds
    main([*base, "--attribution", str(tmp_path / "decided.json"), "--attribution-groups", "context-decided"])
    got = json.loads((tmp_path / "decided.json").read_text())
    assert [it["group"] for it in got["items"]] == [it["group"] for it in decided]
    assert [(it["source"], it["context"], it["target"]) for it in got["items"]] == \
        [(it["source"], it["context"], it["target"]) for it in decided]
    assert "scored right with the true context and wrong with none" in got["items_from"]
    assert got["translation"] == "each group's true candidate"
    share = cue_share(got, lambda it: [t in MARKED for c in it["context"] for t in c["tokens"]])
    assert share["sensitive_tokens"] >= len(decided) // 2
    # measured when written: 0.45 of the mass on the marked word against a uniform 0.22 (the L2 norm
    # of gradient x input gives every token some)
    assert share["cue_share"] > 1.5 * share["uniform_share"], share


def test_attribution_groups_other_than_all_need_a_contrastive_set(doc_corpus, tmp_path, capsys):
    from fairseq_ctx.evaluation.context_usage import parse_args

    with pytest.raises(SystemExit):
        parse_args([str(doc_corpus[1]), "--path", "x.pt", "--attribution", str(tmp_path / "a.json"),
                    "--attribution-groups", "context-decided"])
    assert "--attribution-groups context-decided: needs a contrastive set (--format ...)" in capsys.readouterr().err


def test_a_model_a_hub_has_prepared_for_inference_is_attributed_the_same(doc_corpus, trained_checkpoint):
    """After fairseq's make_generation_fast_ (every hub interface calls it:
    the usage report's generated accuracy builds one before the attribution)
    ``model.eval()`` returns None; the attributor and the contrastive scorer
    take such a model and give the fresh model's numbers."""
    import copy

    from fairseq import checkpoint_utils

    import fairseq_ctx
    from fairseq_ctx.evaluation.attribution_report import items_from_split
    from fairseq_ctx.evaluation.conditions import TRUE
    from fairseq_ctx.evaluation.contrastive.groups import Candidate
    from fairseq_ctx.evaluation.contrastive.scorer import ModelScorer

    fairseq_ctx.register()
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(trained_checkpoint("ctxenc"))], arg_overrides={"data": str(doc_corpus[1])})
    fresh, prepared = models[0], copy.deepcopy(models[0])
    prepared.make_generation_fast_()
    assert prepared.eval() is None   # what broke the attributor
    items = items_from_split(task, "test", TRUE.rule(task.context_rule, 1), 4)
    want, got = (ContextAttributor(m, task).sensitivity(items) for m in (fresh, prepared))
    for w, g in zip(want, got):
        np.testing.assert_allclose(w["kl"], g["kl"], atol=1e-6)
    raw = doc_corpus[0]
    src, tgt = ((raw / f"test.{ext}").read_text().splitlines() for ext in ("src", "tgt"))
    cands = [Candidate(src[1], tgt[1], [src[0]])]
    assert ModelScorer([prepared], task, context_size=1).score(cands).tolist() == \
        pytest.approx(ModelScorer([fresh], task, context_size=1).score(cands).tolist(), abs=1e-5)


@pytest.mark.parametrize("name", ["ctxenc", "concat"])
def test_a_model_trained_with_checkpoint_activations_is_attributed_the_same(name, doc_corpus, trained_checkpoint):
    """A checkpoint trained with ``--checkpoint-activations`` is rebuilt
    with its layers checkpointed (fairseq's reentrant wrapper: the
    concatenation baseline, the context encoder's decoder), which stops
    ``torch.autograd.grad``; the attributor gives the plain model's
    gradient x input, and leaves the wrappers in place after."""
    from fairseq import checkpoint_utils

    import fairseq_ctx

    fairseq_ctx.register()
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(trained_checkpoint(name))], arg_overrides={"data": str(doc_corpus[1])})
    checkpointed, _, _ = checkpoint_utils.load_model_ensemble_and_task(
        [str(trained_checkpoint(name))], arg_overrides={"data": str(doc_corpus[1]), "checkpoint_activations": True})
    wrapped = [m for m in checkpointed[0].modules() if hasattr(m, "precheckpoint_forward")]
    assert wrapped
    task.load_dataset("test")
    ds = task.dataset("test")
    items = [Item(ds.pair[i]["source"], ds.pair[i]["target"], ds.context_sentences(i)) for i in (1, 2, 5)]
    positions, contrasts = [np.array([0, 1])] * 3, [np.array([5, 6])] * 3
    want, got = (ContextAttributor(m, task, aggregate="sum").attribute(items, positions, contrasts)
                 for m in (models[0], checkpointed[0]))
    assert json.dumps(got) == json.dumps(want)
    assert all(m.forward is not m.precheckpoint_forward for m in wrapped)


def test_attribution_refuses_an_ensemble_in_one_line(doc_corpus, trained_checkpoint, tmp_path):
    from fairseq_ctx.errors import FairseqCtxError
    from fairseq_ctx.evaluation.context_usage import main

    ckpt = str(trained_checkpoint("ctxenc"))
    with pytest.raises(FairseqCtxError, match="--attribution: --path .* is an ensemble"):
        main([str(doc_corpus[1]), "--path", f"{ckpt}:{ckpt}", "--task", "document_translation", "--cpu",
              "--bootstrap", "10", "--attribution", str(tmp_path / "a.json")])


@pytest.mark.unit
def test_the_share_of_attribution_on_cue_words_against_uniform():
    """cue_share: per sensitive token, the positive context attribution on
    cue tokens over all of it, averaged; beside it the cues' share of the
    context tokens (what a uniform attribution gives)."""
    from fairseq_ctx.evaluation.attribution_report import cue_share

    report = {"items": [
        {"context": [{"tokens": ["she", "went", "home"]}],
         "attributions": [{"context": [[3.0, 1.0, None]]}, {"context": [[0.0, 2.0, 2.0]]}]},
        {"context": [{"tokens": ["he", "ran"]}, {"tokens": ["far"]}],
         "attributions": [{"context": [[1.0, -5.0], [1.0]]}]},
        {"context": [{"tokens": ["no", "cue"]}], "attributions": [{"context": [[1.0, 1.0]]}]},   # no cue: skipped
    ]}
    res = cue_share(report, lambda it: [t in {"she", "he"} for c in it["context"] for t in c["tokens"]])
    assert res["sensitive_tokens"] == 3
    assert res["cue_share"] == pytest.approx((3 / 4 + 0 / 4 + 1 / 2) / 3)
    assert res["uniform_share"] == pytest.approx((1 / 3 + 1 / 3 + 1 / 3) / 3)
    assert res["excess"] == pytest.approx(res["cue_share"] - res["uniform_share"]) and res["above_uniform"] == 2
    assert res["excess_ci95"][0] <= res["excess"] <= res["excess_ci95"][1]
    assert res["excess_ci95"][0] >= 0 - 1 / 3 - 1e-9 and res["excess_ci95"][1] <= 3 / 4 - 1 / 3 + 1e-9


@pytest.mark.unit
def test_a_chunk_without_probes_embeds_as_the_model_does():
    """A chunk whose items hold no token to probe (``originals`` empty, which
    ``attribute`` allows for) embeds its tokens as the model does; the
    probe lookup would otherwise index an empty tensor (an IndexError on
    CPU, a device-side assert that ends the CUDA context on a GPU)."""
    from fairseq_ctx.evaluation.attribution import _ProbedEmbedding

    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 4, padding_idx=1)
    probed = _ProbedEmbedding(emb, torch.zeros(0, dtype=torch.long), torch.ones(0, 4), offset=10)
    tokens = torch.tensor([[2, 3, 1], [4, 5, 6]])
    assert torch.equal(probed(tokens), emb(tokens))
