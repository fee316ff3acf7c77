"""Translating raw documents with a 2-to-2 concatenation model (Tiedemann and
Scherrer 2017; ``--concat-context --target-context``): the target context is the model's own previous
translations, forced as the decoder's prefix, decoded round by round
(sentence ``i`` of every document once sentence ``i-1`` is done).

``fairseq-ctx-translate`` and the hub against a hand-written
sentence-by-sentence decode; line counts with empty lines and a
one-sentence document; no target context across documents;
fairseq-interactive feeding its translations back; source-context models
unchanged (against fairseq-generate).  Everything runs in this process on
the shared tiny corpus (``doc_corpus``)."""
import re

import pytest
import torch

import fairseq_ctx  # noqa: F401
from fairseq_ctx import hub
from fairseq_ctx.architectures import BY_NAME, TINY_FLAGS
from fairseq_ctx.data.previous_translations import cut_warning
from fairseq_ctx.errors import ConfigError
from fairseq_ctx.tasks import document_decoding
from fairseq_ctx.translate import main as translate_main
from tests.utils import generate_in_process, interactive_in_process, interactive_output, train_in_process

torch.set_num_threads(1)

TWO_TO_TWO = ["--task", "document_translation", "--context-size", "1", "--concat-context", "--target-context"]
# a small length limit so that runaway outputs of the barely trained model stay cheap
# (and the prefix cut to the generator's limit is exercised)
GEN = ["--beam", "2", "--max-len-b", "24", "--cpu", "--no-progress-bar"]


@pytest.fixture(scope="module")
def two_to_two(doc_corpus, tmp_path_factory):
    raw, bin_dir = doc_corpus
    ckpt = train_in_process(bin_dir, tmp_path_factory.mktemp("two_to_two"), "transformer",
                            [*TINY_FLAGS, *TWO_TO_TWO])
    return raw, bin_dir, ckpt


def load(ckpt, bin_dir, **kw):
    return hub.from_pretrained(str(ckpt), data_name_or_path=str(bin_dir), beam=2, max_len_b=24, **kw)


def by_hand(model, document, cut=None):
    """Translate ``document`` one sentence at a time with fairseq's generator:
    source ``s_prev <sep> s`` (the task's --concat-context layout), the
    previous hypothesis forced as the prefix ``h_prev <sep>`` (its newest
    ``max_len - len(s)`` tokens at most, a leading <sep> dropped; ``cut``
    gets the sentence's position where it was cut), the output cut after
    its last <sep>.  Returns (texts, token lists)."""
    task, models = model.task, model.models
    generator = model.build_generator()
    sd, td = task.source_dictionary, task.target_dictionary
    texts, tokens = [], []
    prev_src = prev_hyp = None
    for sentence in document:
        src = sd.encode_line(sentence, add_if_not_exist=False).long()
        glued = src if prev_src is None else torch.cat([prev_src[:-1], torch.tensor([task.sep]), src])
        sample = {"net_input": {"src_tokens": glued[None], "src_lengths": torch.tensor([len(glued)])}}
        prefix = None
        if prev_hyp is not None:
            prefix = torch.cat([prev_hyp[:-1], torch.tensor([task.tgt_sep])])
            max_len = min(int(generator.max_len_a * len(glued) + generator.max_len_b), generator.max_len - 1)
            cap = max_len - len(src)
            if len(prefix) > cap:
                if cut is not None:
                    cut.append(len(texts))
                prefix = prefix[len(prefix) - cap:]
                while len(prefix) and prefix[0] == task.tgt_sep:
                    prefix = prefix[1:]
            prefix = prefix[None]
        with torch.no_grad():
            best = generator.generate(models, sample, prefix_tokens=prefix)[0][0]["tokens"]
        if prefix is not None:
            assert best[:prefix.size(1)].tolist() == prefix[0].tolist()  # the prefix was forced
        seps = (best == task.tgt_sep).nonzero()
        hyp = best[int(seps[-1]) + 1:] if len(seps) else best
        texts.append(td.string(hyp))
        tokens.append(hyp.tolist())
        prev_src, prev_hyp = src, hyp
    return texts, tokens


def write(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return str(path)


# ---------------------------------------------------------------------------
# the pieces: prefix layout, rounds
# ---------------------------------------------------------------------------

@pytest.mark.unit
def test_prefix_layout_and_rounds():
    """The forced prefix is the glued training target without the current
    sentence, cut from the left (never leaving <sep> first); rounds are
    positions in the document and no batch mixes two of them."""
    import numpy as np
    from fairseq.data import LanguagePairDataset

    from fairseq_ctx.data.context_selection import document_positions
    from fairseq_ctx.data.document_context_dataset import DocumentContextDataset
    from fairseq_ctx.data.previous_translations import PreviousTranslations
    from fairseq_ctx.data.token_layout import concat_context_source, target_prefix
    from tests.utils import toy_dictionary

    eos, sep = 2, 99
    t1, t2, cur = torch.tensor([5, 6, eos]), torch.tensor([7, eos]), torch.tensor([8, 9, eos])
    assert target_prefix([t1, t2], eos, sep).tolist() == [5, 6, sep, 7, sep]
    assert torch.cat([target_prefix([t1, t2], eos, sep), cur]).tolist() == \
        concat_context_source([t1, t2], cur, eos, sep).tolist()
    assert target_prefix([t1, t2], eos, sep, max_tokens=3).tolist() == [7, sep]
    assert target_prefix([], eos, sep).tolist() == [] and target_prefix([t1], eos, sep, 0).tolist() == []
    assert document_positions(["a", "a", "b", "a", "a", "a"]).tolist() == [0, 1, 0, 0, 1, 2]

    translations = PreviousTranslations(np.array([[-1], [0], [-1]]), [None] * 3, sep, eos, pad=1,
                                        slots=np.arange(3), max_tokens=8, reserve=np.array([3, 3, 3]))
    assert translations.prefix_tokens([1, 2]).shape == (2, 0)  # nothing translated yet
    translations.record([0], [[{"tokens": torch.tensor([4, 4, 4, 4, eos])}]])
    assert translations.prefix_tokens([2, 1]).tolist() == [[1, 1, 1, 1, 1], [4, 4, 4, 4, sep]]
    assert translations.cut == set()  # 8 - 3 tokens fit the whole prefix
    assert translations.prefix_tokens([1], max_len=6).tolist() == [[4, 4, sep]]  # 6 - 3 newest tokens
    assert translations.cut == {1}
    # a missing translation (its sentence skipped) ends the prefix: an older one never takes its slot
    gap = PreviousTranslations(np.array([[-1, 0], [0, 1], [1, 2]]), [t1, None, t2], sep, eos, pad=1)
    assert gap.previous(0) == [t1] and gap.previous(1) == []
    assert [t.tolist() for t in gap.previous(2)] == [t2.tolist()]

    d = toy_dictionary()
    sources = [d.encode_line(" ".join(["w1"] * n), add_if_not_exist=False) for n in (5, 1, 3, 2, 4, 6, 1)]
    pair = LanguagePairDataset(sources, np.array([len(t) for t in sources]), d, shuffle=False)
    rounds = document_positions([0, 0, 0, 1, 1, 2, 3])
    ds = DocumentContextDataset(pair, np.full((7, 0), -1), [], [], sep, input_mode="none", rounds=rounds)
    batches = ds.batch_by_size(ds.ordered_indices(), max_sentences=2)
    assert [rounds[b].tolist() for b in batches] == [[0, 0], [0, 0], [1, 1], [2]]
    assert sorted(i for b in batches for i in b) == list(range(7))


# ---------------------------------------------------------------------------
# fairseq-ctx-translate and the hub: previous translations as the target context
# ---------------------------------------------------------------------------

def test_translate_equals_sentence_by_sentence(two_to_two, tmp_path, monkeypatch):
    """Three documents (4 sentences, 1, 3) with empty lines between them and
    --batch-size 2 (several batches per round): one output line per input
    line, empty where empty, each document's lines those of the hand-written
    decode; the hub gives the same tokens."""
    raw, bin_dir, ckpt = two_to_two
    src = (raw / "test.src").read_text().splitlines()
    docs = [src[0:4], src[4:5], src[8:11]]
    text = docs[0] + [""] + docs[1] + ["", ""] + docs[2] + [""]
    model = load(ckpt, bin_dir)
    assert model.target_context and model.context_input == "concat" and model.context_size == 1
    cut = []
    expected_texts, expected_tokens = zip(*(by_hand(model, d, cut) for d in docs))

    warned = []
    monkeypatch.setattr(hub.logger, "warning", warned.append)
    out = translate_main([str(bin_dir), "--path", str(ckpt), "--input", write(tmp_path / "in.txt", text),
                          "--output", str(tmp_path / "out.txt"), "--batch-size", "2", *GEN])
    # the prefixes cut to the output limit (the barely trained model's runaway outputs), in one line
    assert cut and warned == [cut_warning(len(cut), len(flat := [s for d in docs for s in d]))]
    written = (tmp_path / "out.txt").read_text().split("\n")
    assert written[-1] == "" and written[:-1] == out and len(out) == len(text)
    expected = list(expected_texts[0]) + [""] + list(expected_texts[1]) + ["", ""] + list(expected_texts[2]) + [""]
    assert out == expected
    assert any(out[1:4])  # not all empty: a real comparison
    # a caller that stops before the last batch (doc 0's fourth sentence, a
    # round of its own) hears of the cuts in the sentences it decoded
    warned.clear()
    dataset = model.document_dataset([model.encode(s) for s in flat], [d for d, doc in enumerate(docs) for _ in doc])
    batches = model.iterate(dataset, model.build_generator())
    decoded = 0
    for ids, _, _ in batches:
        decoded += len(ids)
        if decoded == len(flat) - 1:
            break
    batches.close()
    assert decoded == len(flat) - 1 and dataset.translations.cut
    assert warned == [cut_warning(len(dataset.translations.cut), decoded)]

    # the hub: the same hypotheses, token for token
    docids = [d for d, doc in enumerate(docs) for _ in doc]
    hypos = model.generate([model.encode(s) for s in flat], docids=docids)
    assert [h[0]["tokens"].tolist() for h in hypos] == [t for doc in expected_tokens for t in doc]
    assert model.translate_documents(docs) == [list(t) for t in expected_texts]
    # --docids instead of empty lines; the order of documents in the input changes nothing
    order = [2, 0, 1]
    lines = [s for d in order for s in docs[d]]
    ids = [f"doc{d}" for d in order for _ in docs[d]]
    out = translate_main([str(bin_dir), "--path", str(ckpt), "--input", write(tmp_path / "in2.txt", lines),
                          "--docids", write(tmp_path / "in2.ids", ids), "--output", str(tmp_path / "o2"), *GEN])
    assert out == [t for d in order for t in expected_texts[d]]


def test_documents_never_share_target_context(two_to_two):
    """A document's first sentence is translated with no target context (as
    alone), whatever document precedes it; a later sentence gets its own
    document's previous translation, which the explicit API confirms, and
    another target context would change its output."""
    raw, bin_dir, ckpt = two_to_two
    src = (raw / "test.src").read_text().splitlines()
    model = load(ckpt, bin_dir)
    a, b = src[0:3], src[4:7]
    together = model.translate_documents([a, b])
    assert together == [model.translate_document(a), model.translate_document(b)]
    assert together[1][0] == model.translate(b[0])  # no context at all, source or target
    # sentence 2 of b: source context b[0], target context b's first translation
    explicit = model.translate(b[1], context=b[0], target_context=together[1][0])
    assert explicit == together[1][1]
    # the target context reaches the model: another previous translation, another score
    sd = model.encode(b[1])
    ctx = [model.encode(b[0])]
    td = model.tgt_dict
    own = model.generate(sd, contexts=ctx, target_contexts=[td.encode_line(together[1][0], add_if_not_exist=False)])
    other = model.generate(sd, contexts=ctx,
                           target_contexts=[td.encode_line(together[0][-1] + " W1", add_if_not_exist=False)])
    own, other = own[0], other[0]
    assert abs(own["score"] - other["score"]) > 1e-4
    with pytest.raises(ValueError, match="not both"):
        model.generate([sd], docids=[0], target_contexts=[[]])


def test_one_sentence_documents_and_empty_lines(two_to_two, tmp_path):
    """Only empty lines and one-sentence documents: every line accounted for,
    each sentence translated as alone."""
    raw, bin_dir, ckpt = two_to_two
    src = (raw / "test.src").read_text().splitlines()
    text = ["", src[0], "", "", src[5], src[6], "", src[9], "  "]
    out = translate_main([str(bin_dir), "--path", str(ckpt), "--input", write(tmp_path / "in.txt", text),
                          "--output", str(tmp_path / "o"), *GEN])
    assert len(out) == len(text) and [o for o, t in zip(out, text) if not t.strip()] == ["", "", "", "", ""]
    model = load(ckpt, bin_dir)
    assert [out[1], out[7]] == model.translate([src[0], src[9]])
    assert out[4:6] == model.translate_document(src[5:7])
    # a lone empty document, and no documents at all
    assert model.translate_documents([[], [""], src[9:10]]) == [[], [""], [out[7]]]


# ---------------------------------------------------------------------------
# fairseq-interactive: the previous translations are the target context
# ---------------------------------------------------------------------------

def test_interactive_feeds_translations_back(two_to_two, tmp_path, monkeypatch):
    """fairseq-interactive (--buffer-size 4 --batch-size 4, so documents
    span buffers) gives each line its document's previous translation as
    the target context: its H- lines equal fairseq-ctx-translate's output.
    A batch the task did not build last stops with one line."""
    raw, bin_dir, ckpt = two_to_two
    src = (raw / "test.src").read_text().splitlines()
    text = src[0:4] + [""] + src[4:5] + [""] + src[8:14]
    warned = []
    monkeypatch.setattr(document_decoding.logger, "warning", warned.append)
    hyps = interactive_in_process(bin_dir, ckpt, text, tmp_path, beam=2,
                                  task_flags=[*TWO_TO_TWO, "--max-len-b", "24"])
    # a line per batch with a cut prefix; together, the lines whose prefix the hand-written decode cuts
    cut = []
    model = load(ckpt, bin_dir)
    for doc in (src[0:4], src[4:5], src[8:14]):
        by_hand(model, doc, cut)
    said = [re.fullmatch(r"(\d+) of (\d+) sentences had their previous translations .* \(in this batch\)", w)
            for w in warned]
    assert cut and all(said) and sum(int(m.group(1)) for m in said) == len(cut)
    out = translate_main([str(bin_dir), "--path", str(ckpt), "--input", write(tmp_path / "in.txt", text),
                          "--output", str(tmp_path / "o"), *GEN])
    assert hyps == [o for o, t in zip(out, text) if t]
    assert hyps[:4] == model.translate_document(src[0:4])

    # the rows of an interactive batch are those of the batch the task collated last
    task = model.task
    task.reset_document()
    tokens = [model.encode(s) for s in src[0:3]]
    dataset = task.build_dataset_for_inference(tokens, [len(t) for t in tokens])
    assert dataset.rounds.tolist() == [0, 1, 2] and dataset.translations is not None
    itr = task.get_batch_iterator(dataset, max_sentences=4).next_epoch_itr(shuffle=False)
    batch = next(itr)
    wrong = {"net_input": {k: torch.cat([batch["net_input"][k]] * 2) for k in ("src_tokens", "src_lengths")}}
    with pytest.raises(ConfigError, match="fairseq-ctx-translate"):
        task.inference_step(model.build_generator(), model.models, wrong)
    task.reset_document()


def test_interactive_aligns_the_sentence_it_keeps(two_to_two, tmp_path, monkeypatch):
    """fairseq-interactive --print-alignment with a 2-to-2 model: a line's
    output is decoded after its previous translation forced as the prefix,
    and keeps what follows the last <sep>; its ``A-`` pairs are that
    sentence's, one per word of the ``H-`` line (fairseq's hard alignment
    pairs every target word but </s> with one source word), not the whole
    output's."""
    raw, bin_dir, ckpt = two_to_two
    cut = []
    keep = document_decoding.DocumentDecoding.keep_last_sentence

    def counting(self, sample, hypos):
        cut.extend(bool((h["tokens"] == self.setup.tgt_sep).any()) for beam in hypos for h in beam[:1])
        return keep(self, sample, hypos)

    monkeypatch.setattr(document_decoding.DocumentDecoding, "keep_last_sentence", counting)
    lines = (raw / "test.src").read_text().splitlines()[:8]
    output = interactive_output(bin_dir, ckpt, lines, tmp_path, task_flags=TWO_TO_TWO,
                                extra=["--print-alignment", "hard"])
    hyps = dict(re.findall(r"^H-(\d+)\t\S+\t(.*)$", output, re.M))
    pairs = dict(re.findall(r"^A-(\d+)\t(.*)$", output, re.M))
    assert sorted(hyps) == sorted(pairs) and len(hyps) == 8 and any(cut)
    for i, hyp in hyps.items():
        assert sorted(int(p.split("-")[1]) for p in pairs[i].split()) == list(range(len(hyp.split()))), i


def test_keep_last_sentence_cuts_every_hypothesis_after_one_read():
    """Each hypothesis keeps what follows its last <sep> (tokens, positional
    scores, alignment pairs renumbered), one without a separator stays
    whole, and the whole batch's cuts are read from the device at once (a
    sync on a GPU), not once per hypothesis."""
    from types import SimpleNamespace

    from tests.utils import host_reads, toy_dictionary

    d = toy_dictionary()
    sep = d.add_symbol("<sep>")
    setup = SimpleNamespace(tgt_dict=d, tgt_sep=sep, left_pad_target=False)
    rows = [[5, sep, 6, 7, 2], [5, 6, 2], [sep, 8, sep, 9, 10, 11, 2], [sep, 2]]
    hypos = [[{"tokens": torch.tensor(r), "positional_scores": torch.arange(len(r)) / 10,
               "alignment": [(0, t) for t in range(len(r) - 1)], "score": -1.0} for r in rows[:2]],
             [{"tokens": torch.tensor(r), "positional_scores": torch.arange(len(r)) / 10,
               "alignment": [(1, t) for t in range(len(r) - 1)], "score": -2.0} for r in rows[2:]]]
    with host_reads() as reads:
        document_decoding.DocumentDecoding.keep_last_sentence(SimpleNamespace(setup=setup), {}, hypos)
    assert sum(reads.values()) == 1, dict(reads)
    flat = [h for beam in hypos for h in beam]
    for h, row, cut, src in zip(flat, rows, [2, 0, 3, 1], [0, 0, 1, 1]):
        assert h["tokens"].tolist() == row[cut:]
        assert torch.equal(h["positional_scores"], torch.arange(len(row))[cut:] / 10)
        assert h["alignment"] == [(src, t - cut) for t in range(cut, len(row) - 1)]
    assert [h["score"] for h in flat] == [-1.0, -1.0, -2.0, -2.0]  # the whole output's


# ---------------------------------------------------------------------------
# source-context models: unchanged
# ---------------------------------------------------------------------------

def test_source_context_model_unchanged(doc_corpus, trained_checkpoint, tmp_path):
    """The concatenation model with source context only batches all
    sentences freely and equals fairseq-generate on the binarized split."""
    raw, bin_dir = doc_corpus
    variant = BY_NAME["concat"]
    ckpt = trained_checkpoint("concat")
    ref, _ = generate_in_process(bin_dir, ckpt, tmp_path, task_flags=list(variant.task))
    lines = (raw / "test.src").read_text().splitlines()
    docids = (raw / "test.docids").read_text().splitlines()
    out = translate_main([str(bin_dir), "--path", str(ckpt), "--input", write(tmp_path / "in.txt", lines),
                          "--docids", write(tmp_path / "ids", docids), "--output", str(tmp_path / "o"),
                          "--beam", "2", "--max-len-b", "20", "--batch-size", "8", "--cpu", "--no-progress-bar"])
    assert out == [ref[i][0] for i in range(len(lines))]
    model = hub.from_pretrained(str(ckpt), data_name_or_path=str(bin_dir))
    assert not model.target_context
    dataset = model.document_dataset([model.encode(s) for s in lines], docids)
    assert dataset.rounds is None and dataset.translations is None
