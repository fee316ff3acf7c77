"""``fairseq-ctx-prepare-corpus`` (fairseq_ctx_prep/user_corpus.py): a
user's document-aligned corpus in each input layout -> binarized data with
``.docids`` that ``--task document_translation`` trains on; malformed input
stops with one line naming the file and line."""
import itertools
from pathlib import Path

import pytest

from fairseq_ctx_prep import user_corpus
from fairseq_ctx_prep.files import PrepError, read_lines
from tests.utils import make_parallel_data, train

SRC, TGT = "de", "en"


def _documents(raw: Path, split: str):
    """[(docid, [(src, tgt), ...]), ...] of make_parallel_data's split."""
    rows = zip(read_lines(raw / f"{split}.src"), read_lines(raw / f"{split}.tgt"),
               read_lines(raw / f"{split}.docids"))
    return [(doc, [(s, t) for s, t, _ in group]) for doc, group in itertools.groupby(rows, key=lambda r: r[2])]


def write_corpus(root: Path, fmt: str, raw: Path) -> dict:
    """The tiny corpus of ``raw`` in layout ``fmt`` under ``root``; returns
    the --train/--valid/--test prefixes."""
    root.mkdir(parents=True, exist_ok=True)
    prefixes = {}
    for split in ("train", "valid", "test"):
        docs = _documents(raw, split)
        src, tgt, ids = [], [], []
        for k, (doc, pairs) in enumerate(docs):
            if fmt == "blank" and k:
                src.append("")
                tgt.append("")
                if k == 1:  # several blank lines are one break
                    src.append("  ")
                    tgt.append("")
            for s, t in pairs:
                if fmt == "tsv":
                    src.append(f"{doc}\t{s}")
                    tgt.append(f"{doc}\t{t}")
                else:
                    src.append(s)
                    tgt.append(t)
                    ids.append(doc)
        prefix = root / f"my-{split}"
        Path(f"{prefix}.{SRC}").write_text("\n".join(src) + "\n", encoding="utf-8")
        Path(f"{prefix}.{TGT}").write_text("\n".join(tgt) + "\n", encoding="utf-8")
        if fmt == "docids":
            Path(f"{prefix}.docids").write_text("\n".join(ids) + "\n", encoding="utf-8")
        prefixes[split] = str(prefix)
    return prefixes


def argv(prefixes, dest, fmt, *extra):
    return ["-s", SRC, "-t", TGT, "--train", prefixes["train"], "--valid", prefixes["valid"],
            "--test", prefixes["test"], "--format", fmt, "--dest", str(dest), "--workers", "1", *extra]


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    return make_parallel_data(tmp_path_factory.mktemp("corpus_raw"), num_train=48, num_valid=8, num_test=7,
                              docs_every=5)


def _groups(lines):
    """Document boundaries of a docids list, independent of the id names."""
    return [len(list(g)) for _, g in itertools.groupby(lines)]


@pytest.mark.unit
@pytest.mark.parametrize("fmt", user_corpus.FORMATS)
def test_read_documents_all_layouts_agree(raw, tmp_path, fmt):
    prefixes = write_corpus(tmp_path / fmt, fmt, raw)
    for split in ("train", "valid", "test"):
        rows = list(user_corpus.read_documents(prefixes[split], SRC, TGT, fmt))
        assert [r[0] for r in rows] == read_lines(raw / f"{split}.src")
        assert [r[1] for r in rows] == read_lines(raw / f"{split}.tgt")
        assert _groups([r[2] for r in rows]) == _groups(read_lines(raw / f"{split}.docids"))


@pytest.fixture(scope="module")
def prepared(raw, tmp_path_factory):
    """The corpus binarized twice: tsv with sentencepiece, blank-line
    documents with Moses + subword-nmt BPE and separate vocabularies."""
    root = tmp_path_factory.mktemp("corpus")
    out = {}
    for fmt, extra in (("tsv", ["--vocab-size", "60"]),
                       ("blank", ["--subword", "bpe", "--merges", "40", "--separate-vocab"])):
        prefixes = write_corpus(root / f"in-{fmt}", fmt, raw)
        dest = root / f"out-{fmt}"
        assert user_corpus.main(argv(prefixes, dest, fmt, *extra)) == 0
        out[fmt] = (prefixes, dest, extra)
    return out


@pytest.mark.parametrize("fmt", ["tsv", "blank"])
def test_binarized_with_docids(raw, prepared, fmt):
    _, dest, _ = prepared[fmt]
    bin_dir = dest / "bin"
    for split in ("train", "valid", "test"):
        for lang in (SRC, TGT):
            assert (bin_dir / f"{split}.{SRC}-{TGT}.{lang}.bin").is_file()
        docids = read_lines(bin_dir / f"{split}.{SRC}-{TGT}.docids")
        assert _groups(docids) == _groups(read_lines(raw / f"{split}.docids"))
        assert read_lines(dest / "text" / f"{split}.{SRC}") == read_lines(raw / f"{split}.src")
    if fmt == "tsv":  # the user's ids are kept
        assert read_lines(bin_dir / f"test.{SRC}-{TGT}.docids")[0] == read_lines(raw / "test.docids")[0]
        assert (dest / "subword" / "joint.model").is_file()
        assert (bin_dir / f"dict.{SRC}.txt").read_text() == (bin_dir / f"dict.{TGT}.txt").read_text()
    else:  # Moses + subword-nmt, one model per language
        assert (dest / "subword" / f"{SRC}.codes").is_file() and (dest / "subword" / f"{TGT}.codes").is_file()
        assert (bin_dir / f"dict.{SRC}.txt").read_text() != (bin_dir / f"dict.{TGT}.txt").read_text()


def test_rerun_skips_finished_steps(prepared, capsys):
    prefixes, dest, extra = prepared["tsv"]
    assert user_corpus.main(argv(prefixes, dest, "tsv", *extra)) == 0
    out = capsys.readouterr().out
    assert out.count("already done, skipping") == 5, out
    assert "done: train 48 pairs in 10 documents, valid 8 pairs in 2 documents" in out


def test_trains_with_document_task(prepared, tmp_path):
    _, dest, _ = prepared["tsv"]
    proc = train(dest / "bin", tmp_path, arch="transformer_ctxenc_tiny", model_flags=(),
                 task_flags=["--task", "document_translation", "--source-lang", SRC, "--target-lang", TGT],
                 max_update=1)
    assert "train: 48 sentences, 10 documents" in proc.stdout + proc.stderr
    assert (tmp_path / "checkpoint_last.pt").is_file()


# ---------------------------------------------------------------------------
# malformed input: one line, naming the file and the line
# ---------------------------------------------------------------------------

def _error(tmp_path, capsys, fmt, edit):
    raw = make_parallel_data(tmp_path / "raw", num_train=12, num_valid=4, num_test=4, docs_every=3)
    prefixes = write_corpus(tmp_path / "in", fmt, raw)
    edit(Path(prefixes["train"]))
    assert user_corpus.main(argv(prefixes, tmp_path / "out", fmt)) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("fairseq_ctx: error: ")
    return err


def _rewrite(path: Path, line_no: int, new: str = None, drop: bool = False):
    lines = read_lines(path)
    if drop:
        del lines[line_no - 1]
    else:
        lines[line_no - 1] = new
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.unit
def test_tsv_line_without_docid(tmp_path, capsys):
    err = _error(tmp_path, capsys, "tsv", lambda p: _rewrite(Path(f"{p}.{TGT}"), 5, "W1 W2 W3"))
    assert f"my-train.{TGT} line 5: no document id (expected DOCID<TAB>sentence)" in err


@pytest.mark.unit
def test_tsv_docid_mismatch(tmp_path, capsys):
    err = _error(tmp_path, capsys, "tsv", lambda p: _rewrite(Path(f"{p}.{TGT}"), 2, "other\tW1"))
    assert f"my-train.{TGT} line 2: document id 'other', but " in err and f"my-train.{SRC} line 2 has" in err


@pytest.mark.unit
def test_line_count_mismatch(tmp_path, capsys):
    err = _error(tmp_path, capsys, "docids", lambda p: _rewrite(Path(f"{p}.{TGT}"), 12, drop=True))
    assert f"my-train.{TGT} has 11 lines, " in err and f"my-train.{SRC} has more (line 12)" in err


@pytest.mark.unit
def test_docids_empty_id(tmp_path, capsys):
    err = _error(tmp_path, capsys, "docids", lambda p: _rewrite(Path(f"{p}.docids"), 7, " "))
    assert "my-train.docids line 7: empty document id" in err


@pytest.mark.unit
def test_document_not_consecutive(tmp_path, capsys):
    err = _error(tmp_path, capsys, "docids", lambda p: _rewrite(Path(f"{p}.docids"), 7, "train-doc0"))
    assert "my-train.docids line 7: document 'train-doc0' continues after another document " \
           "(first seen on line 1)" in err


@pytest.mark.unit
def test_blank_break_on_one_side_only(tmp_path, capsys):
    err = _error(tmp_path, capsys, "blank", lambda p: _rewrite(Path(f"{p}.{SRC}"), 2, ""))
    assert f"my-train.{SRC} line 2 is blank (a document break) but " in err and f"my-train.{TGT} line 2 is not" in err


@pytest.mark.unit
def test_missing_file(tmp_path, capsys):
    err = _error(tmp_path, capsys, "docids", lambda p: Path(f"{p}.docids").unlink())
    assert "missing input file: " in err and "my-train.docids" in err


@pytest.mark.unit
def test_bad_flags_exit_with_usage(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        user_corpus.parse_args(["-s", "de", "-t", "de", "--train", "a", "--valid", "b", "--test", "c",
                                "--dest", str(tmp_path)])
    assert exc.value.code == 2
    assert "--source-lang and --target-lang must differ" in capsys.readouterr().err


@pytest.mark.unit
def test_reader_rejects_empty_file(tmp_path):
    for lang in (SRC, TGT):
        (tmp_path / f"x.{lang}").write_text("")
    with pytest.raises(PrepError, match="is empty"):
        list(user_corpus.read_documents(str(tmp_path / "x"), SRC, TGT, "tsv"))


# ---------------------------------------------------------------------------
# an error leaves nothing half-written
# ---------------------------------------------------------------------------

# a malformed line in the test split: train and valid are read (and were
# written to DEST/text.tmp) before it stops
MALFORMED_TEST_SPLIT = {
    "tsv": (lambda p: _rewrite(Path(f"{p}.{SRC}"), 3, "W1 W2"), "line 3: no document id"),
    "docids": (lambda p: _rewrite(Path(f"{p}.docids"), 3, ""), "line 3: empty document id"),
    "blank": (lambda p: _rewrite(Path(f"{p}.{TGT}"), 2, ""), "line 2 is blank (a document break)"),
}


def _leftovers(root: Path):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.unit
@pytest.mark.parametrize("fmt", user_corpus.FORMATS)
def test_malformed_input_leaves_no_output(tmp_path, capsys, fmt):
    raw = make_parallel_data(tmp_path / "raw", num_train=12, num_valid=4, num_test=4, docs_every=3)
    prefixes = write_corpus(tmp_path / "in", fmt, raw)
    edit, needle = MALFORMED_TEST_SPLIT[fmt]
    edit(Path(prefixes["test"]))
    out = tmp_path / "out" / "corpus"   # neither it nor its parent exist yet
    assert user_corpus.main(argv(prefixes, out, fmt)) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("fairseq_ctx: error: ") and needle in err and "my-test" in err, err
    assert not out.exists(), _leftovers(out)

    # into a directory that exists: it is left as it was
    out.mkdir(parents=True)
    (out / "notes.txt").write_text("mine\n")
    assert user_corpus.main(argv(prefixes, out, fmt)) == 1
    assert _leftovers(out) == ["notes.txt"]


@pytest.mark.unit
def test_failed_later_step_keeps_finished_steps_only(tmp_path, capsys, monkeypatch):
    """fairseq-preprocess failing: the steps before it stay published (a
    re-run resumes there), DEST/bin.tmp is gone and bin has no marker."""
    from fairseq_ctx_prep import pipeline

    raw = make_parallel_data(tmp_path / "raw", num_train=12, num_valid=4, num_test=4, docs_every=3)
    prefixes = write_corpus(tmp_path / "in", "docids", raw)

    def failing_preprocess(cmd, logfile):
        logfile.write_text("out of disk\n")
        raise PrepError(f"`{' '.join(cmd[:3])} ...` failed with exit code 1; see {logfile}")

    monkeypatch.setattr(pipeline, "run_logged", failing_preprocess)
    out = tmp_path / "out"
    assert user_corpus.main(argv(prefixes, out, "docids", "--vocab-size", "60")) == 1
    assert "failed with exit code 1; see" in capsys.readouterr().err
    left = _leftovers(out)
    assert not [p for p in left if p.endswith(".tmp") or p == "bin" or p.startswith("bin/")], left
    assert sorted(p for p in left if p.startswith(".done/")) == [".done/clean", ".done/subword", ".done/text",
                                                                  ".done/tok"]
    assert "binarize.log" in left and "final/train.de" in left
