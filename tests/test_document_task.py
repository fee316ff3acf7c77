"""Tests of --task document_translation: which sentences form each context
(across shuffled batches), the concatenation mode, interactive documents,
bad data, and runs with transformer_ctxenc and plain transformer."""
import math
import re
import shutil

import numpy as np
import pytest
import torch

import fairseq_ctx  # noqa: F401  (registers the task and the archs)
from fairseq import checkpoint_utils, options, tasks
from fairseq.sequence_generator import SequenceGenerator

from fairseq_ctx.data.context_selection import compute_context_index
from fairseq_ctx.data.token_layout import build_context_tokens, concat_context_source, split_concatenated
from tests.utils import USER_DIR, generate, make_parallel_data, preprocess, run_cli, train

torch.set_num_threads(1)

TASK = ["--task", "document_translation"]
EOS, PAD, SEP = 2, 1, 99


# ---------------------------------------------------------------------------
# context indices and token layout
# ---------------------------------------------------------------------------

@pytest.mark.unit
def test_context_index_previous_and_next():
    docids = ["a", "a", "a", "b", "b", "a"]  # the last "a" is a new document
    prev = compute_context_index(docids, 2, "previous")
    assert prev.tolist() == [[-1, -1], [-1, 0], [0, 1], [-1, -1], [-1, 3], [-1, -1]]
    nxt = compute_context_index(docids, 1, "next")
    assert nxt.tolist() == [[1], [2], [-1], [4], [-1], [-1]]
    assert compute_context_index(docids, 0).shape == (6, 0)


@pytest.mark.unit
def test_context_index_random_and_shuffle():
    n = 50
    docids = [f"d{i // 5}" for i in range(n)]
    rnd = compute_context_index(docids, 3, "random", seed=3)
    assert rnd.shape == (n, 3) and rnd.min() >= 0 and rnd.max() < n
    assert not (rnd == np.arange(n)[:, None]).any()
    assert (rnd == compute_context_index(docids, 3, "random", seed=3)).all()



@pytest.mark.unit
@pytest.mark.parametrize("seed", range(20))
def test_shuffled_context_is_a_derangement(seed):
    """--shuffle-context: row i gets the context row of sentence p[i], p a
    permutation without fixed point (every sentence's context comes from
    another sentence, every sentence's context goes to one), fixed by the
    seed.  Every sentence has a context of its own here (--context-mode
    next in one document: i+1, and -1 for the last), so a row's context
    names the sentence it came from."""
    n = 51
    plain = compute_context_index([0] * n, 1, "next")[:, 0]
    owner = {int(c): i for i, c in enumerate(plain)}
    shuffled = compute_context_index([0] * n, 1, "next", shuffle=True, seed=seed)
    source = np.array([owner[int(c)] for c in shuffled[:, 0]])
    assert sorted(source.tolist()) == list(range(n))  # a permutation: every context handed out once
    assert not (source == np.arange(n)).any()  # no sentence keeps its own
    assert (compute_context_index([0] * n, 1, "next", shuffle=True, seed=seed) == shuffled).all()
    assert compute_context_index([0], 1, "next", shuffle=True).tolist() == [[-1]]


@pytest.mark.unit
@pytest.mark.parametrize("mode, shuffle", [("none", False), ("concat", False), ("concat", True),
                                           ("separate", True)])
def test_ordered_indices_equal_fairseqs(mode, shuffle):
    """DocumentContextDataset.ordered_indices is LanguagePairDataset's on the
    sizes the batches really have: with ``concat`` those of the glued
    sources (the context counted), else the sentence's own."""
    from fairseq.data import LanguagePairDataset

    from fairseq_ctx.data.document_context_dataset import DocumentContextDataset
    from tests.utils import toy_dictionary

    d = toy_dictionary()
    g = torch.Generator().manual_seed(0)

    def sent():
        n = int(torch.randint(1, 9, (1,), generator=g))
        return torch.cat([torch.randint(d.nspecial, len(d), (n,), generator=g), torch.tensor([d.eos()])])

    src, tgt = [sent() for _ in range(40)], [sent() for _ in range(40)]
    index = compute_context_index([i // 5 for i in range(40)], 2)
    glued = [concat_context_source([src[j] for j in index[i] if j >= 0], src[i], d.eos(), SEP) if mode == "concat"
             else src[i] for i in range(40)]

    def pair(sources):
        return LanguagePairDataset(sources, np.array([len(t) for t in sources]), d, tgt,
                                   np.array([len(t) for t in tgt]), d, shuffle=shuffle)

    ds = DocumentContextDataset(pair(src), index, src, np.array([len(t) for t in src]), SEP, input_mode=mode)
    np.random.seed(7)
    ours = ds.ordered_indices()
    np.random.seed(7)
    theirs = pair(glued).ordered_indices()
    assert ours.tolist() == theirs.tolist()
    if mode == "concat" and not shuffle:  # the glued sizes decide the order, not the sentences'
        assert ours.tolist() != pair(src).ordered_indices().tolist()


@pytest.mark.unit
def test_an_empty_line_is_no_ones_context():
    """``ContextRule.lines_index``: an empty line is no sentence. With docids
    it does not split its document (the line after it gets the one before
    it); without, it ends one; its own row is empty; random and shuffled
    contexts never hand it out. Lines without an empty one: ``index``."""
    from fairseq_ctx.data.context_selection import ContextRule

    empty = np.array([0, 0, 1, 0, 0, 0, 1, 1, 0], dtype=bool)
    docids = ["a", "a", "a", "a", "b", "b", "b", "c", "c"]
    rule = ContextRule(size=2)
    assert rule.lines_index(empty, docids).tolist() == [
        [-1, -1], [-1, 0], [-1, -1], [0, 1], [-1, -1], [-1, 4], [-1, -1], [-1, -1], [-1, -1]]
    assert rule.lines_index(empty).tolist() == [
        [-1, -1], [-1, 0], [-1, -1], [-1, -1], [-1, 3], [3, 4], [-1, -1], [-1, -1], [-1, -1]]
    assert ContextRule(size=1, mode="next").lines_index(empty, docids)[:, 0].tolist() == [
        1, 3, -1, -1, 5, -1, -1, -1, -1]
    for other in (ContextRule(size=2, mode="random", seed=3), ContextRule(size=1, shuffle=True, seed=3)):
        index = other.lines_index(empty, docids)
        assert not np.isin(index, np.flatnonzero(empty)).any() and (index[empty] == -1).all()
    full = np.zeros(len(docids), dtype=bool)
    assert (rule.lines_index(full, docids) == rule.index(docids)).all()
    # a context file's split: random contexts are its sentences, never an empty line; its own line of the
    # file is an empty line's context no more
    index, of_split = ContextRule(size=2, mode="random", seed=3).context_file_index(~empty, "f", empty)
    assert of_split and not np.isin(index, np.flatnonzero(empty)).any() and (index[empty] == -1).all()
    index, of_split = ContextRule(size=1).context_file_index(np.ones(len(empty), dtype=bool), "f", empty)
    assert not of_split and index[:, 0].tolist() == np.where(empty, -1, np.arange(len(empty))).tolist()


@pytest.mark.unit
@pytest.mark.parametrize("cap, left_pad", [(None, True), (4, True), (4, False), (2, True)])
def test_glued_transport_splits_back_into_the_separate_batch(cap, left_pad):
    """``separate-glued`` (fairseq-interactive's transport of a separate
    context) gives, once split again, the ``separate`` batch token for token
    with the context cut on its own (empty, cut to its last sentence, cut
    mid-sentence), the same sizes and the same cut count; it pickles as
    itself (dataloader workers)."""
    import pickle

    from fairseq.data import LanguagePairDataset

    from fairseq_ctx.data.context_input import GLUED, SEPARATE
    from fairseq_ctx.data.document_context_dataset import DocumentContextDataset
    from tests.utils import toy_dictionary

    d = toy_dictionary()
    g = torch.Generator().manual_seed(1)

    def sent():
        n = int(torch.randint(1, 6, (1,), generator=g))
        return torch.cat([torch.randint(d.nspecial, len(d), (n,), generator=g), torch.tensor([d.eos()])])

    src = [sent() for _ in range(12)]
    index = compute_context_index([i // 4 for i in range(12)], 2)
    sizes = np.array([len(t) for t in src])

    def dataset(mode):
        pair = LanguagePairDataset(src, sizes, d, left_pad_source=left_pad)
        return DocumentContextDataset(pair, index, src, sizes, SEP, input_mode=mode, max_context_tokens=cap)

    separate, glued = dataset(SEPARATE), dataset(GLUED)
    assert (separate.sizes == glued.sizes).all() and (glued.src_sizes == sizes).all()
    want = separate.collater([separate[i] for i in range(12)])
    batch = glued.collater([glued[i] for i in range(12)])
    assert "ctx_tokens" not in batch["net_input"]
    got = dict(zip(("src_tokens", "src_lengths", "ctx_tokens", "ctx_lengths"), split_concatenated(
        batch["net_input"]["src_tokens"], d.pad(), d.eos(), SEP, left_pad=left_pad)))
    # the collater sorts by source length, the glued source's here: compare row by id
    rows = batch["id"].argsort()
    want_rows = want["id"].argsort()
    for key, value in got.items():
        assert value[rows].tolist() == want["net_input"][key][want_rows].tolist(), key
    if cap is not None:
        assert 0 < glued.cap_context(cap) == separate.cap_context(cap)
    assert pickle.loads(pickle.dumps(GLUED)) is GLUED and SEPARATE.stream is GLUED


def test_batch_buckets_refused_in_one_line(data):
    _, bin_dir = data
    with pytest.raises(ValueError, match="^--num-batch-buckets: not supported with --task document_translation"):
        setup(bin_dir, ["--num-batch-buckets", "4"])


def test_alignments_refused_with_concat_context(data):
    """fairseq's alignments index the source's tokens; with the context
    glued in front they would point into the context, so the pair is refused
    (a separate context leaves the source as it is)."""
    _, bin_dir = data
    with pytest.raises(ValueError, match="^--load-alignments: not supported with --concat-context"):
        setup(bin_dir, ["--concat-context", "--load-alignments"])


def test_match_source_len_refused_with_concat_context(doc_corpus, trained_checkpoint):
    """fairseq-generate's ``--match-source-len`` makes each output as long
    as its source; with the context glued in front that is the glued
    length, not the sentence's: one line naming both flags."""
    from fairseq_ctx.architectures import BY_NAME

    _, _, proc = generate(doc_corpus[1], trained_checkpoint("concat"), extra=["--match-source-len"],
                          task_flags=BY_NAME["concat"].task, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "fairseq_ctx: error: --match-source-len: not supported with --concat-context (the output would match the "
        "length of the source with its context glued in front, not the sentence's)")


def test_alignments_with_a_separate_context_are_the_sentence_pairs(tmp_path):
    """--load-alignments with a separate context: the batch's alignments
    are those of fairseq's translation task for the same sentences, since
    the source stays as it was (the context is a tensor of its own)."""
    raw = make_parallel_data(tmp_path / "raw", num_train=40, num_valid=6, num_test=6, docs_every=4)
    for split in ("train", "valid", "test"):  # each target word is its source word's twin: i-i
        lines = (raw / f"{split}.src").read_text().splitlines()
        (raw / f"{split}.align").write_text("".join(" ".join(f"{i}-{i}" for i in range(len(line.split()))) + "\n"
                                                    for line in lines))
    bin_dir = preprocess(raw, tmp_path / "bin", extra=["--align-suffix", "align"])
    batches = {}
    for task_flags in (TASK, ["--task", "translation"]):
        args = options.parse_args_and_arch(options.get_training_parser(), [
            str(bin_dir), *task_flags, "--arch", "transformer_ctxenc_tiny", "--load-alignments"])
        task = tasks.setup_task(args)
        task.load_dataset("train")
        ds = task.dataset("train")
        batches[task_flags[-1]] = ds.collater([ds[i] for i in range(9, 17)])
    doc, plain = batches["document_translation"], batches["translation"]
    assert doc["alignments"].numel() > 0 and torch.equal(doc["alignments"], plain["alignments"])
    assert torch.equal(doc["net_input"]["src_tokens"], plain["net_input"]["src_tokens"])
    assert "ctx_tokens" in doc["net_input"] and "ctx_tokens" not in plain["net_input"]


@pytest.mark.unit
def test_negative_context_size():
    with pytest.raises(ValueError, match="--context-size"):
        compute_context_index(["a"], -1)


@pytest.mark.unit
def test_token_layout_round_trip():
    c1, c2, src = torch.tensor([5, 6, EOS]), torch.tensor([7, EOS]), torch.tensor([8, 9, 10, EOS])
    assert build_context_tokens([], EOS, SEP).tolist() == [EOS]
    assert build_context_tokens([c1, c2], EOS, SEP).tolist() == [5, 6, SEP, 7, EOS]
    # a cut just after a sentence leaves no separator first
    assert build_context_tokens([c1, c2], EOS, SEP, max_tokens=3).tolist() == [7, EOS]
    assert build_context_tokens([c1, c2], EOS, SEP, max_tokens=4).tolist() == [6, SEP, 7, EOS]
    glued = concat_context_source([c1, c2], src, EOS, SEP)
    assert glued.tolist() == [5, 6, SEP, 7, SEP, 8, 9, 10, EOS]
    assert concat_context_source([], src, EOS, SEP).tolist() == src.tolist()
    assert concat_context_source([c1], src, EOS, SEP, max_tokens=3).tolist() == src.tolist()
    assert concat_context_source([c1, c2], src, EOS, SEP, max_tokens=5).tolist() == src.tolist()
    assert concat_context_source([c1, c2], src, EOS, SEP, max_tokens=6).tolist() == [7, SEP, 8, 9, 10, EOS]
    # an empty context sentence makes two separators meet: both go when the cut leaves them first
    assert concat_context_source([c1, torch.tensor([EOS])], src, EOS, SEP, max_tokens=6).tolist() == src.tolist()
    batch = torch.tensor([[5, 6, SEP, 7, SEP, 8, 9, 10, EOS], [PAD] * 6 + [8, 9, EOS]])
    s, s_len, c, c_len = split_concatenated(batch, PAD, EOS, SEP, left_pad=True)
    assert s.tolist() == [[8, 9, 10, EOS], [PAD, 8, 9, EOS]] and s_len.tolist() == [4, 3]
    assert c.tolist() == [[5, 6, SEP, 7, EOS], [PAD] * 4 + [EOS]] and c_len.tolist() == [5, 1]


# ---------------------------------------------------------------------------
# the task on binarized data
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("doc")
    raw = make_parallel_data(root / "raw", num_train=90, num_valid=12, num_test=13, docs_every=4)
    return raw, preprocess(raw, root / "bin")


def parse(bin_dir, extra=(), arch="transformer_ctxenc_tiny"):
    return options.parse_args_and_arch(options.get_training_parser(),
                                       [str(bin_dir), *TASK, "--arch", arch, *extra])


def setup(bin_dir, extra=()):
    return tasks.setup_task(parse(bin_dir, extra))


def _strip(row):
    return row[row.ne(PAD)].tolist()


@pytest.mark.parametrize("concat, size", [(False, 1), (True, 1), (False, 2), (True, 2)])
def test_context_is_previous_sentence_across_shuffled_batches(data, concat, size):
    raw, bin_dir = data
    task = setup(bin_dir, ["--context-size", str(size)] + (["--concat-context"] if concat else []))
    task.load_dataset("train")
    ds = task.dataset("train")
    docids = (raw / "train.docids").read_text().splitlines()
    eos, sep = task.source_dictionary.eos(), task.sep
    assert task.source_dictionary[sep] == "<sep>" and len(task.source_dictionary) == len(task.target_dictionary)
    itr = task.get_batch_iterator(ds, max_sentences=7, seed=3, required_batch_size_multiple=1)
    seen, orders = set(), []
    for batch in itr.next_epoch_itr(shuffle=True):
        ids = batch["id"].tolist()
        orders.extend(ids)
        for r, i in enumerate(ids):
            src = ds.pair.src[i].tolist()
            # the sentences i-size .. i-1 that are in i's document, oldest first
            prev = [ds.pair.src[j].tolist()[:-1] for j in range(max(i - size, 0), i) if docids[j] == docids[i]]
            joined = [t for k, p in enumerate(prev) for t in ([sep] if k else []) + p]
            if concat:
                assert "ctx_tokens" not in batch["net_input"]
                expected = src if not prev else joined + [sep] + src
                assert _strip(batch["net_input"]["src_tokens"][r]) == expected
            else:
                assert _strip(batch["net_input"]["src_tokens"][r]) == src
                ctx = _strip(batch["net_input"]["ctx_tokens"][r])
                assert ctx == joined + [eos]
                assert batch["net_input"]["ctx_lengths"][r] == len(ctx)
            if size == 1 and i > 0 and docids[i - 1] == docids[i]:
                assert len(prev) == 1 and prev[0] == ds.pair.src[i - 1].tolist()[:-1]
            seen.add(i)
    assert seen == set(range(len(ds)))
    assert orders != sorted(orders)  # batches really came shuffled
    assert sum(1 for i in range(len(ds)) if i == 0 or docids[i] != docids[i - 1]) > 10


@pytest.mark.parametrize("concat", [False, True])
def test_truncate_source_cuts_sentences_and_contexts_to_the_limit(data, concat):
    """fairseq's ``--truncate-source`` (keep a source's first
    ``--max-source-positions`` - 1 tokens and its EOS) with the task: each
    sentence is fairseq's translation task's truncated source, its context
    the previous sentence truncated the same way, and a glued source (the
    sentence, then as much of the context as fits) stays within the limit."""
    limit = 6
    flags = ["--truncate-source", "--max-source-positions", str(limit), *(["--concat-context"] if concat else [])]
    task = setup(data[1], flags)
    task.load_dataset("train")
    ds = task.dataset("train")
    plain = tasks.setup_task(options.parse_args_and_arch(options.get_training_parser(), [
        str(data[1]), "--arch", "transformer", "--truncate-source", "--max-source-positions", str(limit)]))
    plain.load_dataset("train")
    docids = (data[0] / "train.docids").read_text().splitlines()
    eos, sep = task.source_dictionary.eos(), task.sep
    fitted = 0
    assert max(ds.pair.src_sizes) == limit < max(len(line.split()) + 1 for line in
                                                 (data[0] / "train.src").read_text().splitlines())
    for i in range(len(ds)):
        want = plain.dataset("train")[i]["source"].tolist()
        assert len(want) <= limit and want[-1] == eos
        prev = plain.dataset("train")[i - 1]["source"].tolist()[:-1] if i and docids[i - 1] == docids[i] else []
        got = ds[i]["source"].tolist()
        if concat:
            assert len(got) <= limit and got[-len(want):] == want
            if len(got) > len(want):  # some context fitted: the newest end of the previous sentence, then <sep>
                assert got[-len(want) - 1] == sep and got[:-len(want) - 1] == prev[len(prev) - len(got) + len(want) + 1:]
        else:
            assert got == want
            assert ds[i]["context"].tolist() == prev + [eos]
        fitted += len(got) > len(want) if concat else len(prev) == limit - 1
    assert fitted > 4  # contexts that were cut (separate) or glued in part (concat): both paths ran


@pytest.fixture(scope="module")
def explicit(data, tmp_path_factory):
    """The data with an explicit context file for 'valid' instead of its
    docids: line i's context is another line of the split (i + 5), none on
    every fourth line; returns (bin dir, context lines)."""
    from fairseq.data import Dictionary, indexed_dataset

    raw, bin_dir = data
    out = tmp_path_factory.mktemp("explicit") / "bin"
    shutil.copytree(bin_dir, out)
    (out / "valid.src-tgt.docids").unlink()
    lines = (raw / "valid.src").read_text().splitlines()
    ctx = ["" if i % 4 == 0 else lines[(i + 5) % len(lines)] for i in range(len(lines))]
    d = Dictionary.load(str(out / "dict.src.txt"))
    prefix = str(out / "valid.src-tgt.context.src")
    builder = indexed_dataset.make_builder(prefix + ".bin", impl="mmap", vocab_size=len(d))
    for c in ctx:
        builder.add_item(d.encode_line(c, add_if_not_exist=False, append_eos=True))
    builder.finalize(prefix + ".idx")
    return out, ctx


CONTEXT_MODES = {"previous": [], "next": ["--context-mode", "next"], "random": ["--context-mode", "random"],
                 "shuffled": ["--shuffle-context"], "none": ["--context-size", "0"]}


def _contexts(bin_dir, flags, concat=True):
    """Context of every sentence of 'valid' as the task gives it (text,
    '' for none), and (``concat``) the task's glued sources with
    --concat-context."""
    task = setup(bin_dir, flags)
    task.load_dataset("valid")
    ds, d = task.dataset("valid"), task.source_dictionary
    if not concat:
        return [d.string(ds[i]["context"]) for i in range(len(ds))]
    glued = setup(bin_dir, [*flags, "--concat-context"])
    glued.load_dataset("valid")
    return ([d.string(ds[i]["context"]) for i in range(len(ds))],
            [d.string(glued.dataset("valid")[i]["source"]) for i in range(len(ds))])


@pytest.mark.parametrize("mode", list(CONTEXT_MODES))
@pytest.mark.parametrize("source", ["docids", "file"])
def test_every_context_mode_on_every_context_source(data, explicit, source, mode):
    """Which context each sentence of a split receives, for every context
    mode on both context sources (a docids file, an explicit context file),
    compared with the context written out by hand from the raw text; the
    glued source of --concat-context carries the same context."""
    raw = data[0]
    lines = (raw / "valid.src").read_text().splitlines()
    docids = (raw / "valid.docids").read_text().splitlines()
    n = len(lines)
    bin_dir, file_ctx = (data[1], None) if source == "docids" else explicit
    if source == "docids":
        previous = [lines[i - 1] if i > 0 and docids[i - 1] == docids[i] else "" for i in range(n)]
    else:
        previous = file_ctx
    if source == "file" and mode == "next":
        with pytest.raises(ValueError, match="^--context-mode next needs documents.*valid.src-tgt.context.src"):
            _contexts(bin_dir, CONTEXT_MODES[mode])
        return
    got, glued = _contexts(bin_dir, CONTEXT_MODES[mode])
    assert glued == [f"{c} <sep> {s}" if c else s for c, s in zip(got, lines)]
    if mode == "previous":
        assert got == previous
    elif mode == "next":
        assert got == [lines[i + 1] if i + 1 < n and docids[i + 1] == docids[i] else "" for i in range(n)]
    elif mode == "none":
        assert got == [""] * n
    elif mode == "random":
        # another sentence of the split (from either source: the sources, not the context file),
        # not all from the sentence's own document, fixed by the seed and changed by it
        assert all(c in lines[:i] + lines[i + 1:] for i, c in enumerate(got))
        assert any(c not in [s for s, d in zip(lines, docids) if d == docids[i]] for i, c in enumerate(got))
        assert _contexts(bin_dir, CONTEXT_MODES[mode], concat=False) == got
        assert _contexts(bin_dir, [*CONTEXT_MODES[mode], "--context-seed", "9"], concat=False) != got
    else:  # shuffled: the same contexts handed out again, none to its own sentence
        unique = {c for c in previous if c and previous.count(c) == 1}
        assert len(unique) >= n // 2
        for seed in range(2, 10):
            assert sorted(got) == sorted(previous) and got != previous
            assert not [i for i in range(n) if previous[i] in unique and got[i] == previous[i]], seed
            got = _contexts(bin_dir, [*CONTEXT_MODES[mode], "--context-seed", str(seed)], concat=False)


def test_bad_data(data, tmp_path):
    _, bin_dir = data
    with pytest.raises(ValueError, match="--context-size"):
        setup(bin_dir, ["--context-size", "-1"])
    broken = tmp_path / "bin"
    shutil.copytree(bin_dir, broken)
    (broken / "valid.src-tgt.docids").unlink()
    with pytest.raises(FileNotFoundError, match="valid.src-tgt.docids"):
        setup(broken).load_dataset("valid")
    lines = (broken / "test.src-tgt.docids").read_text().splitlines()
    (broken / "test.src-tgt.docids").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(ValueError, match=r"has 12 lines but the split has 13"):
        setup(broken).load_dataset("test")
    # a training shard (train1) loaded with train: the docids file must hold its lines too, and the error says so
    for f in list(broken.glob("train.src-tgt.*")):
        if not f.name.endswith(".docids"):
            shutil.copy(f, broken / f.name.replace("train.", "train1.", 1))
    n = len((broken / "train.src-tgt.docids").read_text().splitlines())
    with pytest.raises(ValueError, match=rf"has {n} lines but the split has {2 * n} sentences \(its shards train1 "
                                         r"loaded with it: the file holds their lines too, in that order\)"):
        # (fairseq 0.12's --upsample-primary default of -1 cannot combine shards at all: 1 is its old default)
        setup(broken, ["--upsample-primary", "1"]).load_dataset("train", combine=True)
    proc = train(broken, tmp_path / "ckpt", arch="transformer_ctxenc_tiny", model_flags=(),
                 task_flags=TASK, max_update=1, check=False)
    assert proc.returncode != 0 and "valid.src-tgt.docids" in proc.stderr


# ---------------------------------------------------------------------------
# command line with transformer_ctxenc
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ctxenc(data, tmp_path_factory):
    raw, bin_dir = data
    ckpt = tmp_path_factory.mktemp("ctxenc_ckpt")
    train(bin_dir, ckpt, arch="transformer_ctxenc_tiny", model_flags=(), task_flags=TASK, max_update=4)
    return ckpt / "checkpoint_last.pt"


def load(bin_dir, ckpt):
    task = setup(bin_dir)
    models, _ = checkpoint_utils.load_model_ensemble([str(ckpt)], task=task)
    for m in models:
        m.eval()
    return task, models


def translate_alone(task, models, source, context):
    """The model run on one sentence with the given context sentences."""
    d = task.source_dictionary
    enc = lambda s: d.encode_line(s, add_if_not_exist=False, append_eos=True).long()  # noqa: E731
    ds = task.build_context_dataset([enc(source)], [[enc(c) for c in context]])
    sample = task.model_input(models, ds.collater([ds[0]]))
    hypo = SequenceGenerator(models, task.target_dictionary, beam_size=2, max_len_b=20).generate(
        models, sample)[0][0]
    return task.target_dictionary.string(hypo["tokens"]), hypo["score"].item() / math.log(2)


def test_generate_matches_single_sentence_with_context(data, ctxenc):
    raw, bin_dir = data
    hyps, srcs, _ = generate(bin_dir, ctxenc, task_flags=TASK, beam=2)
    assert sorted(hyps) == list(range(13))
    lines = (raw / "test.src").read_text().splitlines()
    docids = (raw / "test.docids").read_text().splitlines()
    task, models = load(bin_dir, ctxenc)
    for i in (0, 1, 3, 4, 7):
        context = [lines[i - 1]] if i > 0 and docids[i - 1] == docids[i] else []
        hyp, score = translate_alone(task, models, lines[i], context)
        assert hyp == hyps[i][0]
        assert abs(score - hyps[i][1]) < 1e-3
    # and the context matters: a wrong context gives another score
    _, wrong = translate_alone(task, models, lines[1], [lines[6]])
    assert abs(wrong - hyps[1][1]) > 1e-3


def test_interactive_two_documents(data, ctxenc):
    """Buffers of two lines: [a1, a2] [<empty>, b1] [b2], so the history of
    document b crosses a buffer boundary."""
    raw, bin_dir = data
    a1, a2, b1, b2 = (raw / "test.src").read_text().splitlines()[:4]
    proc = run_cli("fairseq_cli.interactive", [
        bin_dir, "--user-dir", USER_DIR, "--path", ctxenc, "--beam", 2, "--max-len-b", 20, "--cpu",
        "--buffer-size", 2, "--batch-size", 2, *TASK,
    ], input="\n".join([a1, a2, "", b1, b2]) + "\n")
    out = {int(m.group(1)): (m.group(3), float(m.group(2)))
           for m in re.finditer(r"^H-(\d+)\t(\S+)\t(.*)$", proc.stdout, re.M)}
    assert sorted(out) == [0, 1, 3, 4]  # the empty line separates documents, no output
    task, models = load(bin_dir, ctxenc)
    for i, (line, context) in zip((0, 1, 3, 4), ((a1, []), (a2, [a1]), (b1, []), (b2, [b1]))):
        hyp, score = translate_alone(task, models, line, context)
        assert out[i][0] == hyp and abs(out[i][1] - score) < 1e-3


def test_interactive_reads_typed_special_symbols_as_unk(data, ctxenc, tmp_path):
    """A typed ``</s>``, ``<sep>``, ``<pad>`` or ``<s>`` in a
    fairseq-interactive line is read as ``<unk>`` (each would break the
    glued layout: a second separator, a token dropped as padding, a ``<s>``
    the S- line hides), as the line's own and as the next line's context:
    the whole output (S-, H-, P- lines) equals that of the same input with
    ``<unk>`` typed in their place."""
    from tests.utils import interactive_output

    raw, bin_dir = data
    a1, a2 = (raw / "test.src").read_text().splitlines()[:2]
    symbols = ("</s>", "<sep>", "<pad>", "<s>")
    typed = [a1] + [f"{sym} {a2}" for sym in symbols]
    unk = [a1] + [f"<unk> {a2}"] * len(symbols)
    outputs = []
    for name, lines in (("typed", typed), ("unk", unk)):
        (tmp_path / name).mkdir()
        outputs.append(interactive_output(bin_dir, ctxenc, lines, tmp_path / name, task_flags=TASK))
    shown = [[line for line in out.splitlines() if re.match(r"^[SHP]-\d+\t", line)] for out in outputs]
    assert len(shown[0]) == 3 * len(typed) and shown[0] == shown[1]
    assert sum("<unk>" in line for line in shown[0] if line.startswith("S-")) == len(symbols)


def test_shuffled_and_random_context_runs(data, ctxenc):
    _, bin_dir = data
    ref, _, _ = generate(bin_dir, ctxenc, task_flags=TASK, extra=["--score-reference"])
    shuf, _, _ = generate(bin_dir, ctxenc, task_flags=TASK + ["--shuffle-context"], extra=["--score-reference"])
    assert sorted(shuf) == sorted(ref) == list(range(13))
    assert any(abs(shuf[i][1] - ref[i][1]) > 1e-5 for i in ref)
    # random context (the paper's control row), in-process to save a CLI run
    args = parse(bin_dir, ["--context-mode", "random", "--criterion", "label_smoothed_cross_entropy",
                           "--label-smoothing", "0.1"])
    task = tasks.setup_task(args)
    models, _ = checkpoint_utils.load_model_ensemble([str(ctxenc)], task=task)
    task.load_dataset("valid")
    ds = task.dataset("valid")
    sample = ds.collater([ds[i] for i in range(len(ds))])
    docids = [d for d in (data[0] / "valid.docids").read_text().splitlines()]
    ctx_lines = ds.context_index[:, 0]
    assert (ctx_lines >= 0).all() and any(docids[j] != docids[i] for i, j in enumerate(ctx_lines))
    loss, _, _ = task.valid_step(sample, models[0], task.build_criterion(args))
    assert math.isfinite(loss.item())


# ---------------------------------------------------------------------------
# sentence-level transformer with the task
# ---------------------------------------------------------------------------

def test_concat_context_with_transformer(data, tmp_path):
    """The paper's concatenation row: --arch transformer, context glued to the source."""
    raw, bin_dir = data
    flags = TASK + ["--concat-context"]
    train(bin_dir, tmp_path, arch="transformer", task_flags=flags, max_update=2,
          extra=["--share-all-embeddings"])
    hyps, srcs, _ = generate(bin_dir, tmp_path / "checkpoint_last.pt", task_flags=flags, beam=2)
    assert sorted(hyps) == list(range(13))
    assert all(math.isfinite(s) for _, s in hyps.values())
    lines = (raw / "test.src").read_text().splitlines()
    docids = (raw / "test.docids").read_text().splitlines()
    for i in range(13):
        has_prev = i > 0 and docids[i - 1] == docids[i]
        assert srcs[i] == (f"{lines[i - 1]} <sep> {lines[i]}" if has_prev else lines[i])


def test_sentence_level_model_ignores_context(data):
    """Without --concat-context a sentence-level model gets batches without
    the context keys and runs as usual."""
    _, bin_dir = data
    args = parse(bin_dir, ["--encoder-layers", "1", "--decoder-layers", "1",
                           "--encoder-embed-dim", "16", "--decoder-embed-dim", "16",
                           "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32"],
                 arch="transformer")
    task = tasks.setup_task(args)
    task.load_dataset("valid")
    assert task.dataset("valid").input_mode == "separate"
    model = task.build_model(args)
    assert task.context_input == "none"
    assert task.dataset("valid").input_mode == "none"
    batch = task.dataset("valid").collater([task.dataset("valid")[i] for i in range(4)])
    assert "ctx_tokens" not in batch["net_input"]
    # a batch made before the model was known loses its context keys on the way in
    task.dataset("valid").input_mode = "separate"
    batch = task.dataset("valid").collater([task.dataset("valid")[i] for i in range(4)])
    assert "ctx_tokens" in batch["net_input"]
    net_input = task.model_input([model], batch)["net_input"]
    assert "ctx_tokens" not in net_input
    out, _ = model(**net_input)
    assert out.shape[0] == 4


def test_interactive_needs_previous_context(data):
    _, bin_dir = data
    for extra in (["--context-mode", "next"], ["--shuffle-context"]):
        task = setup(bin_dir, extra)
        with pytest.raises(ValueError, match="--context-mode previous"):
            task.build_dataset_for_inference([torch.tensor([5, 2])], [2])


@pytest.mark.unit
def test_read_docids_counts_newlines_only(tmp_path):
    from fairseq_ctx.tasks.document_translation import DocumentTranslationTask

    path = tmp_path / "x.docids"
    path.write_text("Genesis\u2028 1\r\nGenesis 2\n", encoding="utf-8")
    assert DocumentTranslationTask.read_docids(str(path), 2).tolist() == ["Genesis\u2028 1", "Genesis 2"]


@pytest.mark.unit
def test_context_owners_name_no_architecture():
    """The task, its decoding, the context rule, the hub and the contrastive
    scorer work for any architecture: none imports a model's module or
    names an architecture (a model joins through ``accepts_context`` and
    fairseq's hooks)."""
    import importlib
    import inspect

    for name in ("fairseq_ctx.tasks.document_translation", "fairseq_ctx.tasks.document_decoding",
                 "fairseq_ctx.data.context_input", "fairseq_ctx.data.split_context", "fairseq_ctx.hub",
                 "fairseq_ctx.evaluation.contrastive", "fairseq_ctx.evaluation.contrastive.scorer", "fairseq_ctx.evaluation.contrastive.command"):
        source = inspect.getsource(importlib.import_module(name))
        found = re.findall(r"fairseq_ctx\.model[s]?\b|fairseq_ctx\.modules|\b(?:ctxenc|ctxsan|gret|dc)\b", source)
        assert not found, (name, found)


@pytest.mark.parametrize("size", [1, 2])
def test_max_tokens_counts_a_separate_context_as_the_baseline_does_not(data, size):
    """--max-tokens batches a context-encoder model's pairs exactly as the
    baseline's (the separate context is not counted: same sentences in the
    same batches, the context encoder's tokens on top, docs/document-task.md),
    while --concat-context counts the glued source (fewer pairs a batch)."""
    _, bin_dir = data
    dims = ["--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "16", "--decoder-embed-dim", "16",
            "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32", "--context-size", str(size)]

    def batches(arch, extra=()):
        args = parse(bin_dir, [*dims, *extra], arch=arch)
        task = tasks.setup_task(args)
        task.load_dataset("train")
        task.build_model(args)  # the model decides how the context travels
        itr = task.get_batch_iterator(task.dataset("train"), max_tokens=60, seed=3, required_batch_size_multiple=1)
        out = [b["id"].tolist() for b in itr.next_epoch_itr(shuffle=True)]
        return out, task.dataset("train").input_mode

    baseline, mode = batches("transformer")
    assert mode == "none"
    ctxenc, mode = batches("transformer_ctxenc")
    assert mode == "separate"
    assert ctxenc == baseline
    concat, mode = batches("transformer", ["--concat-context"])
    assert mode == "concat"
    assert len(concat) > len(baseline)  # the glued sources fill --max-tokens sooner
    assert sorted(i for b in concat for i in b) == sorted(i for b in baseline for i in b)


@pytest.mark.parametrize("name", ["ctxenc", "concat", "ctxsan"])
def test_eval_bleu_decodes_what_the_validation_loss_reads(data, name):
    """``--eval-bleu`` (fairseq's validation BLEU, which ``--best-checkpoint-metric
    bleu`` selects by) decodes each validation batch with the inputs the
    validation loss reads: the same source and context tensors reach the
    encoder in both (contexts for the context encoder, glued in front of
    the source for concatenation, none for a sentence-level model)."""
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    from fairseq_ctx.architectures import TINY_FLAGS, variant

    v = variant(name)
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(data[1]), "--user-dir", USER_DIR, "--arch", v.arch, *TINY_FLAGS, *v.flags, *v.task, "--task",
        "document_translation", "--criterion", "label_smoothed_cross_entropy", "--eval-bleu",
        "--eval-bleu-args", '{"beam": 1, "max_len_b": 5}', "--cpu"])
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model).eval()
    criterion = task.build_criterion(cfg.criterion)
    task.load_dataset("valid")
    sample = next(iter(task.get_batch_iterator(dataset=task.dataset("valid"), max_sentences=8, seed=1)
                       .next_epoch_itr(shuffle=False)))
    inputs = []
    forward = model.encoder.forward
    model.encoder.forward = lambda src_tokens, *a, **kw: inputs.append(
        (src_tokens, kw.get("ctx_tokens"))) or forward(src_tokens, *a, **kw)
    with torch.no_grad():
        _, _, logging_output = task.valid_step(sample, model, criterion)
    assert "_bleu_sys_len" in logging_output and len(inputs) >= 2  # the loss's forward, then the decoding's
    (loss_src, loss_ctx), decoded = inputs[0], inputs[1:]
    for src, ctx in decoded:
        assert torch.equal(src, loss_src)
        assert (ctx is None) == (loss_ctx is None) and (ctx is None or torch.equal(ctx, loss_ctx))
    assert torch.equal(loss_src, sample["net_input"]["src_tokens"])  # (concatenation's glued by the dataset)
    assert (loss_ctx is not None) == (name == "ctxenc")
    if loss_ctx is not None:
        assert torch.equal(loss_ctx, sample["net_input"]["ctx_tokens"])
