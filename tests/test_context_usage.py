"""fairseq-ctx-context-usage: CXMI against a hand computation, zero where
the context cannot matter, and the contrastive accuracies with true,
shuffled and no context."""
import math

import numpy as np
import pytest
import torch

from fairseq_ctx.evaluation.cxmi import LN2, bootstrap_interval, cxmi, top_pcxmi
from tests.utils import write_voita_set


@pytest.mark.unit
def test_cxmi_is_the_token_mean_of_the_log_probability_gain():
    with_ctx = [np.log([0.5, 0.25]), np.log([0.5])]
    without = [np.log([0.25, 0.25]), np.log([0.125])]
    r = cxmi(with_ctx, without, samples=200, seed=3)
    # gains: ln 2, 0, ln 4 over 3 tokens = ln 8 / 3 nats = 1 bit
    assert r["cxmi_nats"] == pytest.approx(math.log(8) / 3)
    assert r["cxmi_bits"] == pytest.approx(1.0)
    # docmt_cxmi.py: the mean over sentences of each one's token mean, (ln 2 / 2 + ln 4) / 2 nats
    assert r["cxmi_sentence_mean_nats"] == pytest.approx((math.log(2) / 2 + math.log(4)) / 2)
    assert r["tokens"] == 3 and r["sentences"] == 2
    assert [s["sum"] for s in r["per_sentence_bits"]] == pytest.approx([1.0, 2.0])
    assert [s["mean"] for s in r["per_sentence_bits"]] == pytest.approx([0.5, 2.0])
    lo, hi = r["ci95_bits"]
    assert 0.5 - 1e-9 <= lo <= 1.0 <= hi <= 2.0 + 1e-9  # resamples of {0.5/token x2, 2/token x1}
    same = cxmi(with_ctx, with_ctx)
    assert same["cxmi_bits"] == 0.0 and same["ci95_bits"] == [0.0, 0.0]
    top = top_pcxmi(with_ctx, without, k=2)
    assert [(t["sentence"], t["position"]) for t in top] == [(1, 0), (0, 0)]
    assert [t["pcxmi_bits"] for t in top] == pytest.approx([2.0, 1.0])
    with pytest.raises(ValueError, match="sentence 0: 2 token scores with context, 1 without"):
        cxmi([np.zeros(2)], [np.zeros(1)])


@pytest.mark.unit
def test_bootstrap_interval_of_a_constant_is_the_constant():
    assert bootstrap_interval(np.array([2.0, 4.0]), np.array([1.0, 2.0]), samples=50) == (2.0, 2.0)


def _usage(doc_corpus, checkpoint, tmp_path, *extra):
    from fairseq_ctx.evaluation.context_usage import main

    return main([str(doc_corpus[1]), "--path", str(checkpoint), "--task", "document_translation",
                 "--context-size", "1", "--cpu", "--bootstrap", "100", "--results", str(tmp_path / "u.json"),
                 *extra])


@pytest.fixture(scope="module")
def sentence_level_checkpoint(doc_corpus, tmp_path_factory):
    """Plain transformer trained two updates under the document task (so it
    loads with it; it ignores the context)."""
    from fairseq_ctx.architectures import DOC_TASK, TINY_FLAGS
    from tests.utils import train_in_process

    return train_in_process(doc_corpus[1], tmp_path_factory.mktemp("doc_transformer"), "transformer",
                            [*TINY_FLAGS, *DOC_TASK])


def test_a_sentence_level_model_has_zero_cxmi(doc_corpus, sentence_level_checkpoint, tmp_path):
    res = _usage(doc_corpus, sentence_level_checkpoint, tmp_path)
    assert res["context"].startswith("ignored")
    for c in ("none", "shuffled", "random"):
        assert res["cxmi"][c]["cxmi_bits"] == 0.0 and res["cxmi"][c]["ci95_bits"] == [0.0, 0.0]
    assert res["sentences"] == 14


def _hand_logprob(model, d, src, ctx, tgt):
    """log p(tgt | src, ctx) summed over tgt's tokens and </s>, by one forward pass."""
    src_t = torch.tensor([d.encode_line(src, add_if_not_exist=False).tolist()])
    tgt_t = d.encode_line(tgt, add_if_not_exist=False).long()
    prev = torch.cat([torch.tensor([d.eos()]), tgt_t[:-1]]).unsqueeze(0)
    kwargs = {}
    if ctx is not None:
        kwargs["ctx_tokens"] = torch.tensor([d.encode_line(ctx, add_if_not_exist=False).tolist()])
        kwargs["ctx_lengths"] = torch.tensor([kwargs["ctx_tokens"].size(1)])
    with torch.no_grad():
        out = model(src_t, torch.tensor([src_t.size(1)]), prev, **kwargs)
        lp = model.get_normalized_probs(out, log_probs=True)[0]
    return float(lp.gather(-1, tgt_t.unsqueeze(-1)).sum())


def test_context_models_cxmi_matches_a_hand_computation(doc_corpus, trained_checkpoint, tmp_path):
    """ctxenc (two updates): per sentence, the tool's summed gain against no
    context equals log p(y | x, previous sentence) - log p(y | x) computed by
    hand; at a document's first sentence (no previous sentence) it is 0."""
    from fairseq import checkpoint_utils

    import fairseq_ctx

    fairseq_ctx.register()
    res = _usage(doc_corpus, trained_checkpoint("ctxenc"), tmp_path)
    assert res["context"] == "separate input"
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(trained_checkpoint("ctxenc"))], arg_overrides={"data": str(doc_corpus[1])})
    model, d = models[0].eval(), task.source_dictionary
    raw = doc_corpus[0]
    src = (raw / "test.src").read_text().splitlines()
    tgt = (raw / "test.tgt").read_text().splitlines()
    docs = (raw / "test.docids").read_text().splitlines()
    per = res["cxmi"]["none"]["per_sentence_bits"]
    gains = []
    for i in range(len(src)):
        first = i == 0 or docs[i] != docs[i - 1]
        if first:
            assert per[i]["sum"] == 0.0, i
            continue
        gain = _hand_logprob(model, d, src[i], src[i - 1], tgt[i]) - _hand_logprob(model, d, src[i], None, tgt[i])
        assert per[i]["sum"] * LN2 == pytest.approx(gain, abs=1e-4), i
        gains.append(gain)
    assert any(abs(g) > 1e-4 for g in gains)  # the context does change this model's scores
    n_tokens = res["tokens"]
    assert res["cxmi"]["none"]["cxmi_nats"] == pytest.approx(sum(gains) / n_tokens, abs=1e-5)
    # the authors' docmt_cxmi.py: np.mean over sentences of SequenceScorer's "score" (a sentence's summed
    # log-probability over its tokens, </s> included) with context minus without (first sentences: 0)
    lengths = [len(t.split()) + 1 for t in tgt]
    gain_of = dict(zip([i for i in range(len(src)) if not (i == 0 or docs[i] != docs[i - 1])], gains))
    reference = float(np.mean([gain_of.get(i, 0.0) / lengths[i] for i in range(len(src))]))
    assert res["cxmi"]["none"]["cxmi_sentence_mean_nats"] == pytest.approx(reference, abs=1e-5)
    assert abs(reference - sum(gains) / n_tokens) > 1e-6  # the two estimates differ here
    assert len(res["cxmi"]["top_pcxmi_vs_none"]) == 20


def _voita_set(doc_corpus, tmp_path):
    """Four groups from the toy corpus: each test sentence after its
    predecessor, the reference against the reference with its first word
    replaced (the first candidate is true in groups 0 and 2)."""
    import json

    raw = doc_corpus[0]
    src = (raw / "test.src").read_text().splitlines()
    tgt = (raw / "test.tgt").read_text().splitlines()
    s_lines, d_lines, entries = [], [], []
    for g, i in enumerate((1, 2, 5, 6)):
        wrong = " ".join(["W0" if tgt[i].split()[0] != "W0" else "W1"] + tgt[i].split()[1:])
        cands = [tgt[i], wrong] if g % 2 == 0 else [wrong, tgt[i]]
        for c in cands:
            s_lines.append(f"{src[i - 1]} _eos {src[i]}")
            d_lines.append(f"{tgt[i - 1]} _eos {c}")
        entries.append({"dst": cands, "true_ind": g % 2})
    (tmp_path / "set.src").write_text("\n".join(s_lines) + "\n")
    (tmp_path / "set.dst").write_text("\n".join(d_lines) + "\n")
    (tmp_path / "set.json").write_text(json.dumps(entries))
    return ["--format", "voita", "--src", str(tmp_path / "set.src"), "--dst", str(tmp_path / "set.dst"),
            "--json", str(tmp_path / "set.json")]


def test_contrastive_accuracy_with_true_shuffled_and_no_context(doc_corpus, trained_checkpoint,
                                                                sentence_level_checkpoint, tmp_path):
    from fairseq_ctx.evaluation.contrastive.command import main as contrastive_main

    flags = _voita_set(doc_corpus, tmp_path)
    plain = _usage(doc_corpus, sentence_level_checkpoint, tmp_path, *flags)["contrastive"]
    assert plain["true"]["correct"] == plain["shuffled"]["correct"] == plain["none"]["correct"]
    ctx = _usage(doc_corpus, trained_checkpoint("ctxenc"), tmp_path, *flags)["contrastive"]
    # the true context: what fairseq-ctx-contrastive reports for the same set
    alone = contrastive_main([str(doc_corpus[1]), "--path", str(trained_checkpoint("ctxenc")), "--cpu", *flags])
    assert ctx["true"]["correct"] == alone["correct"] and ctx["true"]["groups"] == 4
    assert {ctx[k]["groups"] for k in ("shuffled", "none", "random")} == {4}


@pytest.mark.unit
def test_the_shuffled_contrastive_contexts_are_a_derangement():
    from fairseq_ctx.evaluation.conditions import SHUFFLED
    from fairseq_ctx.evaluation.context_usage import with_context_of
    from fairseq_ctx.evaluation.contrastive.groups import Candidate, Group

    groups = [Group([Candidate("s", "t", [f"c{i}"], target_context=[f"d{i}"])] * 2, 0) for i in range(7)]
    out = with_context_of(groups, SHUFFLED.donors(len(groups), seed=5))
    got = [g.candidates[0].source_context[0] for g in out]
    assert sorted(got) == [f"c{i}" for i in range(7)] and all(got[i] != f"c{i}" for i in range(7))
    assert all(g.candidates[1].target_context[0] == "d" + g.candidates[1].source_context[0][1:] for g in out)
    again = with_context_of(groups, SHUFFLED.donors(len(groups), seed=5))
    assert got == [g.candidates[0].source_context[0] for g in again]


@pytest.mark.unit
def test_every_condition_as_a_rule_and_as_donors():
    """One list: each condition's rule for a split (the model's size kept,
    0 for none; mode and shuffling its own; the seed given) and the items
    whose context each item gets under it."""
    from fairseq_ctx.data.context_selection import ContextRule
    from fairseq_ctx.evaluation.conditions import BY_NAME, CONDITIONS, NONE, RANDOM, SHUFFLED, TRUE

    assert [c.name for c in CONDITIONS] == ["true", "none", "shuffled", "random"] and BY_NAME["none"] is NONE
    trained = ContextRule(size=2, mode="random", seed=9, shuffle=True)   # e.g. the random-context control
    assert TRUE.rule(trained, 3) == ContextRule(size=2, mode="previous", seed=3, shuffle=False)
    assert NONE.rule(trained, 3) == ContextRule(size=0, mode="previous", seed=3, shuffle=False)
    assert SHUFFLED.rule(trained, 3) == ContextRule(size=2, mode="previous", seed=3, shuffle=True)
    assert RANDOM.rule(trained, 3) == ContextRule(size=2, mode="random", seed=3, shuffle=False)
    assert TRUE.donors(4, 1).tolist() == [0, 1, 2, 3] and NONE.donors(3, 1).tolist() == [-1, -1, -1]
    drawn = RANDOM.donors(50, 4)
    assert (drawn != np.arange(50)).all() and (drawn >= 0).all() and len(set(drawn.tolist())) < 50
    assert drawn.tolist() == RANDOM.donors(50, 4).tolist() != RANDOM.donors(50, 5).tolist()
    # the donors of a split's sentences are what the rule gives the same sentences as one-line documents
    assert drawn.tolist() == RANDOM.rule(ContextRule(size=1), 4).index(np.arange(50))[:, 0].tolist()


def test_scoring_under_a_condition_leaves_the_task_configuration_alone(doc_corpus, trained_checkpoint):
    """The usage report loads each condition's split with its own rule: the
    task's flags are the checkpoint's before and after, and a split loaded
    with the none rule has no context rows where the true one has."""
    from fairseq import checkpoint_utils

    import fairseq_ctx
    from fairseq_ctx.evaluation.conditions import CONDITIONS, NONE, TRUE

    fairseq_ctx.register()
    _, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(trained_checkpoint("ctxenc"))], arg_overrides={"data": str(doc_corpus[1])})
    before = {k: getattr(task.cfg, k) for k in ("context_size", "context_mode", "shuffle_context", "context_seed")}
    index = {}
    for c in CONDITIONS:
        task.load_dataset("test", context_rule=c.rule(task.context_rule, seed=7))
        index[c.name] = task.dataset("test").context_index.copy()
    assert {k: getattr(task.cfg, k) for k in before} == before
    assert (index[NONE.name] == -1).all() and (index[TRUE.name] >= 0).any()
    assert (index["shuffled"] != index[TRUE.name]).any() and (index["random"] >= 0).all()


# ----------------------------------------------------------- generated accuracy
def _group(cands, true_index=0, **meta):
    from fairseq_ctx.evaluation.contrastive.groups import Candidate, Group

    return Group([Candidate("src", c, ["ctx"], target_context=["tctx"]) for c in cands], true_index, meta=meta)


@pytest.mark.unit
def test_which_items_qualify_and_their_forms():
    from fairseq_ctx.evaluation.contrastive.generated import item_forms

    f, why = item_forms(_group(["And he said to her, go.", "And she said to her, go."]))
    assert why == "" and f.pairs == ((("he",), ("she",)),)
    # ContraPro-like: two wrong candidates, each one word away; the true one second
    f, _ = item_forms(_group(["Er ist rot.", "Es ist rot.", "Sie ist rot."], true_index=1))
    assert f.pairs == ((("es",), ("er",)), (("es",), ("sie",)))
    # a phrase: one contiguous block of several words
    f, _ = item_forms(_group(["I saw the old man there", "I saw a young woman there"]))
    assert f.pairs == ((("the", "old", "man"), ("a", "young", "woman")),)
    assert item_forms(_group(["his donkey to him", "her donkey to her"]))[1] == "differs in several places"
    assert item_forms(_group(["he went home", "he went"]))[1] == "one candidate only inserts words"
    assert item_forms(_group(["He went.", "he went"]))[1] == "a wrong candidate equals the true one"
    # Voita's ellipsis sets list the true translation twice: that copy is not a wrong candidate
    f, _ = item_forms(_group(["he went", "he went", "she went"]))
    assert f.pairs == ((("he",), ("she",)),)


@pytest.mark.unit
def test_the_check_counts_forms_relative_to_the_true_candidate():
    from fairseq_ctx.evaluation.contrastive.generated import check, item_forms

    f, _ = item_forms(_group(["she said he would come", "he said he would come"]))
    assert check(f, "She said he would come.") == "right"  # the reference itself, though it holds "he"
    assert check(f, "she told him that he would come") == "right"
    assert check(f, "He said he would come") == "wrong"  # one "he" too many, no "she"
    assert check(f, "she said he and he came") == "both"
    assert check(f, "they said it would come") == "neither"
    assert check(f, "shed said he would come") == "neither"  # whole words only: "shed" is not "she"
    g, _ = item_forms(_group(["Er ist rot.", "Es ist rot.", "Sie ist rot."], true_index=1))
    assert [check(g, t) for t in ("es ist rot", "sie ist rot", "er, es", "rot")] == \
        ["right", "wrong", "both", "neither"]


@pytest.mark.unit
def test_the_summary_and_the_scores_right_translates_wrong_matrix():
    from fairseq_ctx.evaluation.contrastive.generated import summarize

    groups = [_group(["a", "b"], dist=d) for d in (1, 1, 2, 2, 3)]
    res = summarize(groups, [0, 1, 2, 4], ["right", "neither", "wrong", "right"],
                    scored_right=[True, True, False, False])
    assert (res["items"], res["right"], res["wrong"], res["neither"], res["both"]) == (4, 2, 1, 1, 0)
    assert res["accuracy"] == 0.5
    assert res["by"]["dist"]["1"]["accuracy"] == 0.5 and res["by"]["dist"]["3"]["right"] == 1
    assert "2" in res["by"]["dist"] and res["by"]["dist"]["2"]["items"] == 1
    assert res["matrix"] == {"scores right, translates right": 1, "scores right, translates wrong": 1,
                             "scores wrong, translates right": 1, "scores wrong, translates wrong": 1}


GEN_FLAGS = ["--beam", "2", "--max-len-b", "12"]


def _other_word(sentence, vocabulary):
    """A word of the vocabulary that ``sentence`` does not hold."""
    held = set(sentence.lower().split())
    return next(w for w in vocabulary if w.lower() not in held)


def test_generated_accuracy_on_a_set_with_a_known_answer(doc_corpus, trained_checkpoint, tmp_path):
    """ctxenc: the items' true candidates are the model's own translations
    with the previous sentence (every item right), then the same with true
    and wrong swapped (every item wrong); the tool's translations are the
    hub's with and without the context."""
    from fairseq_ctx import hub

    raw, bin_dir = doc_corpus
    src = (raw / "test.src").read_text().splitlines()
    tgt = (raw / "test.tgt").read_text().splitlines()
    vocab = sorted({w for line in tgt for w in line.split()})
    ckpt = trained_checkpoint("ctxenc")
    model = hub.from_pretrained(str(ckpt), data_name_or_path=str(bin_dir), beam=2, max_len_b=12)
    items = [i for i in range(1, len(src)) if i % 4]  # sentences with a previous one in their document
    own = model.translate([src[i] for i in items], context=[src[i - 1] for i in items])
    alone = model.translate([src[i] for i in items])
    kept = [k for k, o in enumerate(own) if o.split()]  # an empty translation has no word to swap
    assert len(kept) >= 4
    items, own, alone = [items[k] for k in kept], [own[k] for k in kept], [alone[k] for k in kept]
    swapped = [" ".join([_other_word(o, vocab)] + o.split()[1:]) for o in own]
    right = _usage(doc_corpus, ckpt, tmp_path, *GEN_FLAGS, *write_voita_set(
        tmp_path, "right", [(src[i - 1], src[i], tgt[i - 1], [o, w], 0) for i, o, w in zip(items, own, swapped)]))
    gen = right["generated"]
    assert gen["qualified"] == gen["items"] == len(items) and set(gen["conditions"]) == {"own", "none"}
    assert gen["conditions"]["own"]["right"] == len(items) and gen["conditions"]["own"]["accuracy"] == 1.0
    assert [p["own"]["translation"] for p in gen["per_item"]] == own
    assert [p["none"]["translation"] for p in gen["per_item"]] == alone
    m = gen["conditions"]["own"]["matrix"]
    assert m["scores right, translates right"] + m["scores wrong, translates right"] == len(items)
    assert m["scores right, translates right"] == right["contrastive"]["true"]["correct"]
    wrong = _usage(doc_corpus, ckpt, tmp_path, *GEN_FLAGS, *write_voita_set(
        tmp_path, "wrong", [(src[i - 1], src[i], tgt[i - 1], [w, o], 0) for i, o, w in zip(items, own, swapped)]))
    assert wrong["generated"]["conditions"]["own"]["wrong"] == len(items)
    assert wrong["generated"]["conditions"]["own"]["accuracy"] == 0.0


def test_generated_accuracy_of_a_two_to_two_model_with_own_and_reference_translations(doc_corpus, tmp_path):
    """A --target-context model: 'own' decodes the item's context sentence
    first and feeds its translation (= the hub's translate_document), and
    'reference' forces the set's target context (= the hub's translate with
    target_context); its CXMI scores the current sentence's tokens only, the
    previous reference sentence forced as the target's prefix (by hand: the
    token layout of the task's docs, one forward pass each)."""
    from fairseq_ctx import hub
    from fairseq_ctx.architectures import TINY_FLAGS
    from tests.utils import train_in_process

    raw, bin_dir = doc_corpus
    ckpt = train_in_process(bin_dir, tmp_path / "two_to_two", "transformer", [
        *TINY_FLAGS, "--task", "document_translation", "--context-size", "1", "--concat-context",
        "--target-context"])
    src = (raw / "test.src").read_text().splitlines()
    tgt = (raw / "test.tgt").read_text().splitlines()
    items = [1, 2, 5]
    rows = [(src[i - 1], src[i], tgt[i - 1], [tgt[i], " ".join(["Wx"] + tgt[i].split()[1:])], 0) for i in items]
    res = _usage(doc_corpus, ckpt, tmp_path, *GEN_FLAGS, *write_voita_set(tmp_path, "set", rows))
    assert res["target_context"]
    gen = res["generated"]
    assert set(gen["conditions"]) == {"own", "reference", "none"}
    model = hub.from_pretrained(str(ckpt), data_name_or_path=str(bin_dir), beam=2, max_len_b=12)
    assert [p["own"]["translation"] for p in gen["per_item"]] == \
        [model.translate_document([src[i - 1], src[i]])[1] for i in items]
    assert [p["reference"]["translation"] for p in gen["per_item"]] == \
        model.translate([src[i] for i in items], context=[src[i - 1] for i in items],
                        target_context=[tgt[i - 1] for i in items])
    assert [p["none"]["translation"] for p in gen["per_item"]] == model.translate([src[i] for i in items])
    # CXMI against no context: s_prev <sep> s </s> -> t_prev <sep> y </s>, y </s> scored; none: s </s> -> y </s>
    from fairseq import checkpoint_utils

    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(ckpt)],
                                                                    arg_overrides={"data": str(bin_dir)})
    net, d = models[0].eval(), task.target_dictionary
    sep = d.index(task.cfg.context_separator)
    docs = (raw / "test.docids").read_text().splitlines()

    def logprob(source, target, n_scored):
        src_t = torch.tensor([source])
        tgt_t = torch.tensor(target)
        prev = torch.cat([torch.tensor([d.eos()]), tgt_t[:-1]]).unsqueeze(0)
        with torch.no_grad():
            lp = net.get_normalized_probs(net(src_t, torch.tensor([len(source)]), prev), log_probs=True)[0]
        return float(lp.gather(-1, tgt_t.unsqueeze(-1))[-n_scored:].sum())

    def ids(line):
        return d.encode_line(line, add_if_not_exist=False, append_eos=False).tolist()

    per = res["cxmi"]["none"]["per_sentence_bits"]
    gains = []
    for i in range(len(src)):
        if i == 0 or docs[i] != docs[i - 1]:  # no context either way; batched with other widths of padding
            assert per[i]["sum"] == pytest.approx(0.0, abs=1e-5), i
            continue
        n = len(ids(tgt[i])) + 1
        with_ctx = logprob([*ids(src[i - 1]), sep, *ids(src[i]), d.eos()],
                           [*ids(tgt[i - 1]), sep, *ids(tgt[i]), d.eos()], n)
        without = logprob([*ids(src[i]), d.eos()], [*ids(tgt[i]), d.eos()], n)
        assert per[i]["sum"] * LN2 == pytest.approx(with_ctx - without, abs=1e-4), i
        gains.append(with_ctx - without)
    assert any(abs(g) > 1e-4 for g in gains)
    assert res["tokens"] == sum(len(ids(t)) + 1 for t in tgt)  # the current sentences' tokens, nothing more
