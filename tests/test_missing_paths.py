"""Every command of ours given a data folder that does not exist (or a
wrong path or name) stops with exactly one ``fairseq_ctx: error:`` line
naming the flag and the path, exit status 1, no traceback, before it loads a
model or trains (docs/errors.md). The quickstart's bad ``--archs`` name and
corpus directory are in tests/test_quickstart.py."""
import pytest

from tests.utils import run_cli

pytestmark = pytest.mark.integration

PREFIX = "fairseq_ctx: error: "


def _data_error(missing):
    return (f"{PREFIX}DATA-BIN {missing}: no such directory (the binarized data that fairseq-preprocess writes, "
            "e.g. data/bible/bin)")


def _errors(proc):
    """stderr without the INFO log lines fairseq and our tools print."""
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return [line for line in proc.stderr.splitlines() if " | INFO | " not in line]


def _one_line(module, args, expected):
    proc = run_cli(module, args, check=False)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert _errors(proc) == [expected]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A missing data folder, a text file and an empty contrastive set."""
    root = tmp_path_factory.mktemp("missing_paths")
    (root / "in.txt").write_text("w1 w2\nw3\n")
    (root / "set.json").write_text("[]")
    return root


@pytest.fixture(scope="module")
def ckpt(trained_checkpoint):
    return trained_checkpoint("ctxenc")


@pytest.mark.parametrize("module,extra", [
    ("fairseq_ctx.translate", ["--input", "{root}/in.txt"]),
    ("fairseq_ctx.evaluation.context_usage", []),
    ("fairseq_ctx.evaluation.contrastive", ["--format", "voita", "--src", "{root}/in.txt", "--dst", "{root}/in.txt",
                                 "--json", "{root}/set.json"]),
    ("fairseq_ctx.analysis.ctxsan_gates", ["--out", "{root}/gates"]),
    ("fairseq_ctx.analysis.dc_divergence", ["--out", "{root}/dc"]),
    ("fairseq_ctx.analysis.ctxenc_context_attention", ["--out", "{root}/attention.json"]),
    ("fairseq_ctx.analysis.gret_global_state", ["--out", "{root}/gret"]),
    ("fairseq_ctx.analysis.probing", ["--out", "{root}/probing", "--probing-dir", "{root}"]),
    ("fairseq_ctx.analysis.bow_prediction", ["--out", "{root}/bow"]),
])
def test_a_missing_data_folder_is_one_line(module, extra, files, ckpt):
    missing = files / "no-such-data"
    args = [missing, "--path", ckpt, *[a.format(root=files) for a in extra]]
    _one_line(module, args, _data_error(missing))
    assert not missing.exists()


def test_not_binarized_data_and_a_wrong_split_are_one_line(files, ckpt, doc_corpus):
    raw, bin_dir = doc_corpus
    _one_line("fairseq_ctx.translate", [raw, "--path", ckpt, "--input", files / "in.txt"],
              f"{PREFIX}DATA-BIN {raw}: no dict.*.txt in it; not binarized data (fairseq-preprocess output, e.g. "
              "data/bible/bin)")
    _one_line("fairseq_ctx.evaluation.context_usage", [bin_dir, "--path", ckpt, "--gen-subset", "tset"],
              f"{PREFIX}--gen-subset tset: no such split in {bin_dir} (it has: test, train, valid)")
    _one_line("fairseq_ctx.analysis.dc_divergence", [bin_dir, "--path", ckpt, "--gen-subset", "tset", "--out",
                                                     files / "dc"],
              f"{PREFIX}--gen-subset tset: no such split in {bin_dir} (it has: test, train, valid)")


def test_missing_files_are_one_line(files, ckpt, doc_corpus):
    _, bin_dir = doc_corpus
    _one_line("fairseq_ctx.translate", [bin_dir, "--path", ckpt, "--input", files / "in.txt",
                                        "--bpe", "sentencepiece", "--sentencepiece-model", files / "spm.model"],
              f"{PREFIX}--sentencepiece-model {files}/spm.model: no such file")
    _one_line("fairseq_ctx.translate", [bin_dir, "--path", ckpt, "--input", files / "in.txt",
                                        "--output", files / "no-dir" / "out.txt"],
              f"{PREFIX}--output {files}/no-dir/out.txt: no such directory {files}/no-dir")
    _one_line("fairseq_ctx.translate", [bin_dir, "--path", ckpt, "--input", files / "nothing.txt"],
              f"{PREFIX}--input {files}/nothing.txt: no such file")
    _one_line("fairseq_ctx.analysis.gret_global_state", [bin_dir, "--path", f"{ckpt}:{files}/other.pt",
                                                         "--out", files / "gret"],
              f"{PREFIX}--path {files}/other.pt: no such checkpoint file")
    _one_line("fairseq_ctx.evaluation.context_usage", [bin_dir, "--path", ckpt, "--results", files / "no-dir" / "u.json"],
              f"{PREFIX}--results {files}/no-dir/u.json: no such directory {files}/no-dir")
    _one_line("fairseq_ctx.evaluation.contrastive", [bin_dir, "--path", ckpt, "--format", "voita", "--src", files / "in.txt",
                                          "--dst", files / "in.txt", "--json", files / "missing.json"],
              f"{PREFIX}--json {files}/missing.json: no such file")
    _one_line("fairseq_ctx.analysis.ctxsan_pos", [files / "tokens.jsonl", "--out", files / "pos"],
              f"{PREFIX}TOKENS {files}/tokens.jsonl: no such tokens.jsonl file (fairseq-ctx-ctxsan-gates --out DIR "
              "writes DIR/tokens.jsonl)")
    _one_line("fairseq_ctx.average_checkpoints", ["--inputs", files / "runs", "--num-update-checkpoints", "2",
                                                  "--output", files / "avg.pt"],
              f"{PREFIX}--inputs {files}/runs: no such checkpoint directory")
    _one_line("fairseq_ctx.average_checkpoints", ["--inputs", ckpt, files / "b.pt", "--output", files / "avg.pt"],
              f"{PREFIX}--inputs {files}/b.pt: no such checkpoint file")


def test_the_runners_check_their_data_folder_first(files):
    missing = files / "no-such-corpus"
    _one_line("fairseq_ctx.study", ["--data", missing, "--out", files / "study"],
              f"{PREFIX}--data {missing}: missing {missing}/bin/dict.es.txt (run: bash scripts/prepare-bible.sh "
              f"--dest {missing})")
    _one_line("fairseq_ctx.tables", ["ctxsan-table1", "--smoke", "--cpu", "--data", missing, "--out",
                                     files / "tables"],
              f"{PREFIX}no binarized data (dict.SRC.txt) for wmt14_en_de: {missing}: prepare it "
              "(scripts/prepare-*.sh, README 'Data preparation') or pass --data [DATASET=]DIR")
    assert not (files / "study").exists() or not any((files / "study").iterdir())
    assert not (files / "tables" / "models").exists()


def test_the_table_runner_checks_the_references_before_training(files):
    bin_dir = files / "corpus" / "bin"  # dictionaries, but no raw/ or text/ with test.en beside it
    bin_dir.mkdir(parents=True)
    for lang in ("es", "en"):
        (bin_dir / f"dict.{lang}.txt").write_text("a 1\n")
    proc = run_cli("fairseq_ctx.tables", ["ctxsan-table1", "--smoke", "--cpu", "--data", bin_dir, "--out",
                                          files / "tables-refs"], check=False)
    assert proc.returncode == 1
    assert _errors(proc)[-1] == (
        f"{PREFIX}wmt14_en_de: no reference test.en in {bin_dir.parent}/raw or {bin_dir.parent}/text (give the "
        "directory of the detokenized references with --ref-dir)")
    assert not (files / "tables-refs" / "models").exists()
