"""Translating as a user would: the stateless Python API
(``fairseq_ctx.hub``) and ``fairseq-ctx-translate`` against fairseq-generate on
the same binarized sentences and documents, for every architecture and the
sentence-level and concatenation baselines; fairseq-generate with the
document task translating all 553 of 553 sentences without extra flags.

The checkpoints are trained one update in this process (fairseq_cli.train's
own ``main``) to keep the file fast; the reference decodes are
fairseq_cli.generate's ``main`` on the binarized split, and two runs go
through the real command lines (fairseq-generate and fairseq-ctx-translate)."""
import argparse
import math
import re

import pytest
import torch

import fairseq_ctx  # noqa: F401
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from fairseq_ctx import hub
from fairseq_ctx.architectures import BY_NAME
from fairseq_ctx.errors import ConfigError, DataError
from fairseq_ctx.translate import documents_of, main as translate_main
from tests.utils import TINY_MODEL_FLAGS, USER_DIR, make_parallel_data, preprocess, run_cli

torch.set_num_threads(1)

DOC = ["--task", "document_translation"]  # the document task with no other flag (its defaults)
GEN = ["--beam", "2", "--max-len-b", "6", "--cpu"]
# valid split: documents a (3 sentences), b (1), c (4); sentence 5 is a copy of
# sentence 2, so the same sentence appears with two different contexts
VALID_DOCIDS = ["a", "a", "a", "b", "c", "c", "c", "c"]
SAME = (2, 5)


def _listed(name, extra=()):
    """A variant of fairseq_ctx/architectures.py, with extra training flags."""
    v = BY_NAME[name]
    return v.arch, list(v.flags), list(v.task), list(extra)


# name -> (arch, model flags, task flags, extra training flags)
MODELS = {
    "ctxenc": _listed("ctxenc"),
    "concat": _listed("concat", ["--share-all-embeddings"]),
    # Not in the architecture list (no architecture of its own): the plain
    # sentence-level Transformer trained and decoded under the document task,
    # which must then give it no context.
    "transformer_doc": ("transformer", [], DOC, []),
    "ctxsan": _listed("ctxsan"),
    "dc": _listed("dc"),
    "gret": _listed("gret"),
}
USES_CONTEXT = {"ctxenc", "concat"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("translate")
    raw = make_parallel_data(root / "raw", num_train=60, num_valid=8, num_test=553, docs_every=4)
    for side in ("src", "tgt"):
        lines = (raw / f"valid.{side}").read_text().splitlines()
        lines[SAME[1]] = lines[SAME[0]]
        (raw / f"valid.{side}").write_text("\n".join(lines) + "\n")
    (raw / "valid.docids").write_text("\n".join(VALID_DOCIDS) + "\n")
    return raw, preprocess(raw, root / "bin")


def train_here(data_bin, save_dir, arch, task_flags=(), extra=()):
    """fairseq-train's main in this process: one update, tiny dimensions."""
    from fairseq import distributed_utils
    from fairseq_cli import train as train_cli

    argv = [str(data_bin), "--user-dir", USER_DIR, "--arch", arch, *TINY_MODEL_FLAGS, *task_flags,
            "--optimizer", "adam", "--lr", "0.005", "--criterion", "label_smoothed_cross_entropy",
            "--max-tokens", "500", "--max-update", "1", "--save-dir", str(save_dir), "--no-progress-bar",
            "--num-workers", "0", "--seed", "1", "--cpu", "--no-epoch-checkpoints", "--disable-validation",
            "--required-batch-size-multiple", "1", *extra]
    args = options.parse_args_and_arch(options.get_training_parser(), argv)
    distributed_utils.call_main(convert_namespace_to_omegaconf(args), train_cli.main)
    return save_dir / "checkpoint_last.pt"


@pytest.fixture(scope="module")
def checkpoints(corpus, tmp_path_factory):
    _, bin_dir = corpus
    root = tmp_path_factory.mktemp("ckpts")
    return {name: train_here(bin_dir, root / name, arch, task_flags, [*flags, *extra])
            for name, (arch, flags, task_flags, extra) in MODELS.items()}


def generate_here(data_bin, ckpt, out_dir, task_flags=(), subset="valid"):
    """fairseq-generate's main in this process; ``{id: (D text, score)}``."""
    from fairseq_cli import generate as generate_cli

    argv = [str(data_bin), "--user-dir", USER_DIR, "--path", str(ckpt), "--gen-subset", subset,
            "--batch-size", "3", "--results-path", str(out_dir), *GEN, *task_flags]
    if "document_translation" not in task_flags:  # fairseq's own task drops the last batch otherwise (#5036)
        argv += ["--required-batch-size-multiple", "1"]
    args = options.parse_args_and_arch(options.get_generation_parser(), argv)
    generate_cli.main(convert_namespace_to_omegaconf(args))
    text = (out_dir / f"generate-{subset}.txt").read_text()
    return {int(m.group(1)): (m.group(3), float(m.group(2)))
            for m in re.finditer(r"^D-(\d+)\t(\S+)\t(.*)$", text, re.M)}


def load_hub(ckpt, bin_dir):
    return hub.from_pretrained(str(ckpt), data_name_or_path=str(bin_dir), beam=2, max_len_b=6, batch_size=3)


# ---------------------------------------------------------------------------
# the Python API against fairseq-generate, every architecture
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(MODELS))
def test_hub_matches_generate(corpus, checkpoints, tmp_path, name):
    raw, bin_dir = corpus
    _, _, task_flags, _ = MODELS[name]
    ref = generate_here(bin_dir, checkpoints[name], tmp_path, task_flags)
    assert sorted(ref) == list(range(len(VALID_DOCIDS)))
    lines = (raw / "valid.src").read_text().splitlines()
    model = load_hub(checkpoints[name], bin_dir)
    assert model.context_input == ("separate" if name == "ctxenc" else "concat" if name == "concat" else "none")

    # documents, given whole: the task's context from the docids
    docs = [lines[0:3], lines[3:4], lines[4:8]]
    flat = [t for doc in model.translate_documents(docs) for t in doc]
    assert flat == [ref[i][0] for i in range(len(lines))]
    # the same sentence with two different contexts, given explicitly
    a, b = SAME
    same = model.translate([lines[a], lines[b]], context=[lines[a - 1], [lines[b - 1]]])
    assert same == [ref[a][0], ref[b][0]]
    # and the hypothesis scores (base 2, as fairseq-generate prints them)
    hypos = model.generate([model.encode(lines[a]), model.encode(lines[b])], beam=2, max_len_b=6,
                           contexts=[[model.encode(lines[a - 1])], [model.encode(lines[b - 1])]])
    scores = [h[0]["score"].item() / math.log(2) for h in hypos]
    assert scores == pytest.approx([ref[a][1], ref[b][1]], abs=1e-3)
    # decode takes the tokens as a tensor or as a list of ids (fairseq's Dictionary.string takes both)
    assert [model.decode(h[0]["tokens"]) for h in hypos] == [model.decode(h[0]["tokens"].tolist()) for h in hypos] \
        == [ref[a][0], ref[b][0]]
    if name in USES_CONTEXT:  # the context reached the model
        assert abs(ref[a][1] - ref[b][1]) > 1e-4
    else:
        assert ref[a][1] == pytest.approx(ref[b][1], abs=1e-4)


def test_hub_is_stateless_and_keeps_every_input(corpus, checkpoints):
    raw, bin_dir = corpus
    lines = (raw / "valid.src").read_text().splitlines()
    model = load_hub(checkpoints["ctxenc"], bin_dir)
    calls = {
        "doc": lambda: model.translate_document(lines[4:8]),
        "ctx": lambda: model.translate(lines[1:3], context=[lines[0], [lines[6], lines[7]]]),
        "none": lambda: model.translate([lines[3], "", "  ", lines[2]]),
    }
    first = {k: f() for k, f in calls.items()}
    second = {k: calls[k]() for k in reversed(list(calls))}
    assert first == second
    assert len(first["none"]) == 4 and first["none"][1:3] == ["", ""] and all(first["none"][::3])
    # no context is no context, whatever came before: equal to a fresh model's
    assert load_hub(checkpoints["ctxenc"], bin_dir).translate([lines[3], lines[2]]) == first["none"][::3]
    # empty strings inside a document get "" and are no context for the next sentence
    with_gap = model.translate_document([lines[4], "", lines[5]])
    assert with_gap == [first["doc"][0], "", first["doc"][1]]
    assert model.translate_documents([[], [lines[3]]]) == [[], [model.translate(lines[3])]]
    with pytest.raises(ValueError, match="one entry per sentence"):
        model.translate(lines[:2], context=[lines[0]])


# ---------------------------------------------------------------------------
# fairseq-ctx-translate
# ---------------------------------------------------------------------------

@pytest.mark.unit
def test_documents_of():
    lines = ["a", "b", "", "c", "", "", "d", "e"]
    assert documents_of(lines) == ([0, 1, 3, 6, 7], [0, 0, 1, 3, 3])
    assert documents_of(lines, ["x", "x", "x", "y", "y", "y", "x", "x"]) == ([0, 1, 3, 6, 7], [0, 0, 1, 2, 2])


def test_translate_cli_matches_generate(corpus, checkpoints, tmp_path):
    """Three documents (3, 1 and 4 sentences) separated by empty lines, one
    of them doubled: one output line per input line, empty where empty, the
    others fairseq-generate's D- lines; the same with --docids."""
    raw, bin_dir = corpus
    ref = generate_here(bin_dir, checkpoints["ctxenc"], tmp_path, DOC)
    lines = (raw / "valid.src").read_text().splitlines()
    text = lines[0:3] + [""] + lines[3:4] + ["", ""] + lines[4:8]
    (tmp_path / "in.txt").write_text("\n".join(text) + "\n")
    proc = run_cli("fairseq_ctx.translate", [bin_dir, "--path", checkpoints["ctxenc"], "--input",
                                             tmp_path / "in.txt", *GEN])
    out = proc.stdout.split("\n")
    assert out[-1] == "" and len(out[:-1]) == len(text)
    expected = [ref[i][0] for i in range(3)] + [""] + [ref[3][0]] + ["", ""] + [ref[i][0] for i in range(4, 8)]
    assert out[:-1] == expected
    assert re.search(r"fairseq-ctx-translate: 8 sentences in 3 documents \(3 empty lines\) translated in "
                     r"[0-9.]+ s, [0-9.]+ sentences/s; context: separate x1", proc.stderr)
    # --docids: documents by id, no separator lines needed
    (tmp_path / "in2.txt").write_text("\n".join(lines) + "\n")
    (tmp_path / "in2.docids").write_text("\n".join(VALID_DOCIDS) + "\n")
    outputs = translate_main([str(bin_dir), "--path", str(checkpoints["ctxenc"]), "--input", str(tmp_path / "in2.txt"),
                              "--docids", str(tmp_path / "in2.docids"), "--output", str(tmp_path / "out2.txt"),
                              "--no-progress-bar", *GEN])
    assert (tmp_path / "out2.txt").read_text().split("\n")[:-1] == outputs == [ref[i][0] for i in range(8)]


@pytest.mark.parametrize("group", ["ctxenc", "sentence-level"])
def test_translate_cli_ensemble_matches_generate(corpus, checkpoints, tmp_path, tmp_path_factory, group):
    """``--path a.pt:b.pt``: fairseq-ctx-translate decodes with fairseq's
    ensemble as fairseq-generate does, for the context encoder with a second
    checkpoint of its own (documents by --docids; the context reaches both
    models) and for the sentence-level architectures together. Each model
    alone translates other words than the ensemble (the second context
    encoder trains four updates for that), so none is left out. A context
    encoder and a sentence-level model are refused together in one line."""
    raw, bin_dir = corpus
    if group == "ctxenc":
        arch, flags, task_flags, extra = MODELS["ctxenc"]
        second = train_here(bin_dir, tmp_path_factory.mktemp("ctxenc_seed2"), arch, task_flags,
                            [*flags, *extra, "--seed", "2", "--max-update", "4"])
        paths = [checkpoints["ctxenc"], second]
    else:
        task_flags, paths = [], [checkpoints[n] for n in ("ctxsan", "dc", "gret")]
    path = ":".join(map(str, paths))
    ref = generate_here(bin_dir, path, tmp_path / "ref", task_flags)
    singles = [generate_here(bin_dir, p, tmp_path / f"single{k}", task_flags) for k, p in enumerate(paths)]
    texts = lambda decoded: [decoded[i][0] for i in range(8)]  # noqa: E731
    assert all(texts(single) != texts(ref) for single in singles)  # every model counts, in the words too
    (tmp_path / "in.txt").write_text((raw / "valid.src").read_text())
    docids = ["--docids", str(tmp_path / "in.docids")] if task_flags else []
    (tmp_path / "in.docids").write_text("\n".join(VALID_DOCIDS) + "\n")
    outputs = translate_main([str(bin_dir), "--path", path, "--input", str(tmp_path / "in.txt"), *docids,
                              "--output", str(tmp_path / "out.txt"), "--no-progress-bar", *GEN])
    assert outputs == [ref[i][0] for i in range(8)]
    if group == "ctxenc":  # a context encoder and a sentence-level model: one reads what the other cannot
        mixed = f"{paths[0]}:{checkpoints['transformer_doc']}"
        with pytest.raises(ConfigError, match="^cannot ensemble context-aware and sentence-level models$"):
            translate_main([str(bin_dir), "--path", mixed, "--input", str(tmp_path / "in.txt"), *docids,
                            "--output", str(tmp_path / "mixed.txt"), "--no-progress-bar", *GEN])


def test_an_empty_line_in_a_binarized_split_is_no_context(corpus, checkpoints, tmp_path):
    """An empty line inside a document of a binarized split (docids) is no
    sentence, as it is for fairseq-ctx-translate and the hub: the sentence
    after it gets the one before it as context. fairseq-generate still
    translates the empty line; every other sentence's translation and score
    equals those of the split without it."""
    raw, bin_dir = corpus
    ref = generate_here(bin_dir, checkpoints["ctxenc"], tmp_path / "ref", DOC)
    gap = tmp_path / "gap"
    gap.mkdir()
    for side in ("src", "tgt"):
        lines = (raw / f"valid.{side}").read_text().splitlines()
        (gap / f"test.{side}").write_text("\n".join(lines[4:5] + [""] + lines[5:8]) + "\n")
    run_cli("fairseq_cli.preprocess", ["--source-lang", "src", "--target-lang", "tgt", "--testpref", gap / "test",
                                       "--destdir", gap / "bin", "--srcdict", bin_dir / "dict.src.txt",
                                       "--tgtdict", bin_dir / "dict.tgt.txt", "--workers", "1"])
    (gap / "bin" / "test.src-tgt.docids").write_text("c\n" * 5)
    out = generate_here(gap / "bin", checkpoints["ctxenc"], tmp_path / "out", DOC, subset="test")
    assert sorted(out) == list(range(5))
    for i, j in zip((0, 2, 3, 4), range(4, 8)):
        assert out[i][0] == ref[j][0] and out[i][1] == pytest.approx(ref[j][1], abs=1e-4), i


def test_translate_cli_bad_input(corpus, checkpoints, tmp_path):
    raw, bin_dir = corpus
    base = [str(bin_dir), "--path", str(checkpoints["ctxenc"]), "--no-progress-bar", *GEN]
    (tmp_path / "bin.txt").write_bytes(b"w1 w2\nw3\x00w4\n")
    with pytest.raises(DataError, match=r"bin.txt:2: binary data"):
        translate_main(base + ["--input", str(tmp_path / "bin.txt")])
    (tmp_path / "latin1.txt").write_bytes(b"w1\nw2\nw\xe9\n")
    with pytest.raises(DataError, match=r"latin1.txt:3: not UTF-8"):
        translate_main(base + ["--input", str(tmp_path / "latin1.txt")])
    (tmp_path / "in.txt").write_text("w1 w2\n\nw3\n")
    (tmp_path / "ids").write_text("a\nb\n")
    with pytest.raises(DataError, match=r"--docids .*ids: 2 lines, but the input .*in.txt has 3"):
        translate_main(base + ["--input", str(tmp_path / "in.txt"), "--docids", str(tmp_path / "ids")])
    (tmp_path / "long.txt").write_text("w1 w2\n" + " ".join(["w3"] * 12) + "\n")
    with pytest.raises(DataError, match=r"long.txt:2: 13 tokens .* source limit of 10"):
        translate_main(base + ["--input", str(tmp_path / "long.txt"), "--max-source-positions", "10"])
    out = translate_main(base + ["--input", str(tmp_path / "long.txt"), "--max-source-positions", "10",
                                 "--skip-invalid-size-inputs-valid-test", "--output", str(tmp_path / "o")])
    assert len(out) == 2 and out[0] and out[1] == ""
    with pytest.raises(ConfigError, match="--path"):
        translate_main([str(bin_dir), "--input", str(tmp_path / "in.txt")])


@pytest.mark.parametrize("flags", [["--replace-unk"], ["--constraints"], ["--lm-path", "lm.pt"], ["--nbest", "2"],
                                   ["--print-alignment"], ["--score-reference"], ["--prefix-size", "1"],
                                   ["--print-step"], ["--retain-iter-history"], ["--results-path", "out"]],
                         ids=lambda flags: flags[0])
def test_translate_cli_refuses_what_it_would_ignore(corpus, checkpoints, tmp_path, flags):
    """Generation flags that fairseq's parser accepts but one translation
    per input line cannot honour (a language model fused in, n-best lists,
    alignments, references) stop in one line naming the flag, before any
    model is loaded, rather than being dropped."""
    raw, bin_dir = corpus
    (tmp_path / "in.txt").write_text("w1 w2\n")
    with pytest.raises(ConfigError, match=f"^fairseq-ctx-translate: {flags[0]} is not supported \\((fairseq-|this )"):
        translate_main([str(bin_dir), "--path", str(checkpoints["ctxenc"]), "--input", str(tmp_path / "in.txt"),
                        "--no-progress-bar", *GEN, *flags])



def test_translate_help_names_every_refused_flag():
    """--help (which imports neither torch nor fairseq) lists the flags the
    tool refuses: the same as its refusal table, none more, none fewer."""
    from fairseq.dataclass.configs import CommonEvalConfig, GenerationConfig

    from fairseq_ctx.translate import _ignored_flags, _quick_help

    cfg = argparse.Namespace(generation=GenerationConfig(), common_eval=CommonEvalConfig())
    refused = [flag for flag, given, _ in _ignored_flags(cfg)]
    assert not any(given for _, given, _ in _ignored_flags(cfg))  # fairseq's defaults trip none
    epilog = _quick_help().split("Ten stop in one line")[1].split("example:")[0]
    assert sorted(re.findall(r"--[a-z-]+", epilog)) == sorted(refused) and len(refused) == 10

# ---------------------------------------------------------------------------
# no sentence dropped
# ---------------------------------------------------------------------------

def test_generate_translates_all_553_sentences(corpus, checkpoints):
    """fairseq's default --required-batch-size-multiple 8 drops the last
    batch when it is not a multiple of 8 (553 = 34 x 16 + 9): the document
    task batches every split but the training one with 1."""
    raw, bin_dir = corpus
    proc = run_cli("fairseq_cli.generate", [bin_dir, "--user-dir", USER_DIR, "--path", checkpoints["ctxenc"],
                                            "--gen-subset", "test", "--batch-size", "16", "--beam", "1",
                                            "--max-len-b", "2", "--cpu", *DOC])
    ids = sorted(int(m) for m in re.findall(r"^H-(\d+)\t", proc.stdout, re.M))
    assert ids == list(range(553))
    # in process: validation batches keep every sentence, training batches keep the multiple
    args = options.parse_args_and_arch(options.get_training_parser(),
                                       [str(bin_dir), *DOC, "--arch", "transformer_ctxenc"])
    task = tasks.setup_task(args)
    task.load_dataset("test", combine=False)
    task.load_dataset("train", combine=True)
    test = task.get_batch_iterator(task.dataset("test"), max_sentences=16, required_batch_size_multiple=8)
    assert sorted(i for b in test.next_epoch_itr(shuffle=False) for i in b["id"].tolist()) == list(range(553))
    train = task.get_batch_iterator(task.dataset("train"), max_sentences=16, required_batch_size_multiple=8)
    sizes = [len(b["id"]) for b in train.next_epoch_itr(shuffle=False)]
    assert all(s % 8 == 0 for s in sizes) and sum(sizes) < 60
