"""The table machinery (fairseq_ctx/tables): the argument-file reader, every
config in configs/ against fairseq's own argument parser, the command lines
of every table's rows (smoke flags after the row's, row flags kept), and one
table (GRET Table 4: warm start, averaging, decoding, scoring, bootstrap) in
--smoke mode end to end on a tiny Bible-like corpus, then re-run to check that
finished rows are not trained again."""
import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from fairseq_ctx.tables import all_tables, config
from fairseq_ctx.tables.config import ArgsFileError, flag_value, read_arg_lines, read_args
from fairseq_ctx.tables.datasets import DATASETS
from fairseq_ctx.tables.definition import BLEU_FLAVOURS, TableError
from fairseq_ctx.tables.running import SMOKE_AVERAGE, SMOKE_GENERATE, SMOKE_TRAIN, TableRun, smoke_model_flags

from . import cli_process
from .utils import REPO, USER_DIR, make_parallel_data, preprocess

CONFIGS = REPO / "configs"


# ---------------------------------------------------------------------------
# the reader
# ---------------------------------------------------------------------------

def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.unit
def test_comments_blank_lines_and_values(tmp_path):
    f = write(tmp_path / "a.args", "# header\n\n  --arch transformer\n--share-all-embeddings\n"
                                   "   # indented comment\n--adam-betas (0.9,0.98)\n-s en\n--lr=5e-4\n")
    assert read_args(f) == ["--arch", "transformer", "--share-all-embeddings", "--adam-betas", "(0.9,0.98)",
                            "-s", "en", "--lr=5e-4"]
    lines = read_arg_lines(f)
    assert [a.line for a in lines] == [3, 4, 6, 7, 8]
    assert flag_value(lines, "--lr") == "5e-4" and flag_value(lines, "--share-all-embeddings") is True


@pytest.mark.unit
def test_includes_are_relative_nested_and_in_place(tmp_path):
    write(tmp_path / "recipes" / "base.args", "--lr 7e-4\n@include common.args\n--dropout 0.1\n")
    write(tmp_path / "recipes" / "common.args", "--optimizer adam\n")
    row = write(tmp_path / "table" / "row.args", "# row\n@include ../recipes/base.args\n--dropout 0.3\n")
    assert read_args(row) == ["--lr", "7e-4", "--optimizer", "adam", "--dropout", "0.1", "--dropout", "0.3"]
    assert flag_value(row, "--dropout") == "0.3"  # later flags win, as in argparse
    origins = [a.origin for a in read_arg_lines(row)]
    assert origins[1].endswith(os.path.join("recipes", "common.args") + ":1")


@pytest.mark.unit
@pytest.mark.parametrize("text, message", [
    ("--arch transformer\ntransformer\n", r"x\.args:2: expected a flag"),
    ("--adam-betas (0.9, 0.98)\n", r"x\.args:1: one flag and at most one value per line"),
    ("--lr 5e-4  # peak\n", r"x\.args:1: comments must be on their own line"),
    ("\n\n@include missing.args\n", r"x\.args:3: @include missing\.args: no such file"),
    ("@include\n", r"x\.args:1: expected '@include PATH'"),
    ("@define x\n", r"x\.args:1: unknown directive"),
])
def test_errors_name_file_and_line(tmp_path, text, message):
    f = write(tmp_path / "x.args", text)
    with pytest.raises(ArgsFileError, match=message):
        read_args(f)


@pytest.mark.unit
def test_include_cycle_and_missing_file(tmp_path):
    write(tmp_path / "a.args", "@include b.args\n")
    write(tmp_path / "b.args", "--lr 1\n@include a.args\n")
    with pytest.raises(ArgsFileError, match="@include cycle: .*a.args -> .*b.args -> .*a.args"):
        read_args(tmp_path / "a.args")
    with pytest.raises(ArgsFileError, match="nope.args: no such argument file"):
        read_args(tmp_path / "nope.args")


def test_command_line_prints_flags_for_shell_substitution(tmp_path, capsys):
    f = write(tmp_path / "a.args", "# c\n--arch transformer\n--share-all-embeddings\n")
    assert config.main([str(f)]) == 0
    assert capsys.readouterr().out == "--arch transformer --share-all-embeddings\n"
    assert config.main(["--explain", str(f)]) == 0
    assert "a.args:2" in capsys.readouterr().out
    bad = write(tmp_path / "bad.args", "oops\n")
    assert config.main([str(bad)]) == 1
    assert "bad.args:1: expected a flag" in capsys.readouterr().err
    # the shell wrapper runs the module by file path (no fairseq import)
    out = subprocess.run([str(REPO / "scripts" / "ctx-args"), str(f)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["--arch", "transformer", "--share-all-embeddings"]


# ---------------------------------------------------------------------------
# every config in configs/ is accepted by fairseq's parser
# ---------------------------------------------------------------------------

ALL_CONFIGS = sorted(CONFIGS.rglob("*.args"))
AVERAGE_FLAGS = {"--num-update-checkpoints", "--num-epoch-checkpoints", "--checkpoint-upper-bound"}


def is_generate_config(path: Path) -> bool:
    return path.name.endswith(".generate.args") or path.name.startswith("generate")


def parse_with_fairseq(tokens, generate=False):
    """fairseq's own parse of a config's tokens (training or generation
    parser, the architecture's and task's options included); returns the
    namespace, or raises AssertionError with argparse's message."""
    from fairseq import options

    if generate:
        parser, argv = options.get_generation_parser(), ["/nonexistent", "--path", "x.pt", *tokens]
    else:
        parser = options.get_training_parser()
        argv = ["/nonexistent"] + ([] if "--arch" in tokens else ["--arch", "transformer"]) + list(tokens)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return options.parse_args_and_arch(parser, argv + ["--user-dir", USER_DIR])
    except SystemExit:
        raise AssertionError(err.getvalue().strip().splitlines()[-1]) from None


@pytest.mark.unit
def test_the_configs_directory_has_every_table_row():
    assert len(ALL_CONFIGS) > 90
    for table in all_tables():
        for row in table.rows:
            for cfg in (row.train, row.generate or table.generate, row.average or table.average):
                if cfg:
                    assert (CONFIGS / cfg).is_file(), (table.name, row.label, cfg)
            assert (row.dataset or table.dataset) in DATASETS
    for ds in DATASETS.values():
        assert ds.train_config(CONFIGS).is_file() and ds.generate_config(CONFIGS).is_file()
        assert all(ds.langs(CONFIGS))


@pytest.mark.unit
def test_every_config_parses_and_fairseq_accepts_its_flags():
    import fairseq_ctx  # noqa: F401

    failures = []
    for path in ALL_CONFIGS:
        rel = path.relative_to(CONFIGS)
        try:
            tokens = read_args(path)
            if rel.parts[0] == "recipes" and path.name.startswith("average"):
                flags = [t for t in tokens if t.startswith("-")]
                assert flags and set(flags) <= AVERAGE_FLAGS, f"not fairseq-ctx-average-checkpoints flags: {flags}"
                assert all(int(t) > 0 for t in tokens if not t.startswith("-"))
                continue
            args = parse_with_fairseq(tokens, generate=is_generate_config(path))
            if "--arch" in tokens:
                assert args.arch == flag_value(path, "--arch")
        except (ArgsFileError, AssertionError, ValueError) as e:
            failures.append(f"{rel}: {e}")
    assert not failures, "\n".join(failures)


@pytest.mark.unit
def test_the_parser_check_rejects_an_unknown_flag():
    with pytest.raises(AssertionError, match="unrecognized arguments: --ctxsan-contex"):
        parse_with_fairseq(["--arch", "transformer_ctxsan", "--ctxsan-contex", "global"])
    with pytest.raises(AssertionError, match="unrecognized arguments: --dc-kernel-size"):
        parse_with_fairseq(["--arch", "transformer", "--dc-kernel-size", "3"])  # DC flag on a plain transformer


@pytest.mark.unit
def test_gpu_assumption_is_in_every_training_row():
    """Papers that give a GPU count or follow Vaswani et al.'s 8 GPUs (ctxsan,
    Voita) are emulated with --update-freq 8; DC and GRET give their batch
    without a GPU count, and their configs take it as written (--update-freq 1)."""
    for table in all_tables():
        for row in table.rows:
            if row.train:
                expected = "8" if table.gpus_stated else "1"
                assert flag_value(CONFIGS / row.train, "--update-freq") == expected, (table.name, row.label)
    assert {t.name for t in all_tables() if not t.gpus_stated} == {
        "dc-table1", "dc-table2", "dc-table5", "dc-kernel", "gret-table1", "gret-table3", "gret-table4"}


# ---------------------------------------------------------------------------
# command lines of every row
# ---------------------------------------------------------------------------

def opts(**kw):
    base = dict(root=str(REPO), smoke=True, out="/nonexistent/out", data=None, ref_dir=None, rows=None, gpus=None, cpu=False,
                extra_train_args=None, extra_generate_args=None, probing_args=None, bootstrap_samples=10,
                no_analyses=False, dry_run=True)
    base.update(kw)
    return SimpleNamespace(**base)


def is_flag(tok):
    return tok.startswith("--") or (tok.startswith("-") and tok[1:2].isalpha())


def effective(cmd):
    """flag -> last value in a command line (argparse's view); True for a bare flag."""
    out = {}
    for i, tok in enumerate(cmd):
        if is_flag(tok):
            nxt = cmd[i + 1] if i + 1 < len(cmd) else None
            out[tok] = nxt if nxt is not None and not is_flag(nxt) else True
    return out


SMOKE_OWNED = {t for t in SMOKE_TRAIN + SMOKE_GENERATE + smoke_model_flags({}) if t.startswith("--")} | {
    "--save-dir", "--user-dir", "--log-format", "--source-lang", "--target-lang", "--remove-bpe", "--tokenizer",
    "--required-batch-size-multiple"}


@pytest.mark.parametrize("table", all_tables(), ids=lambda t: t.name)
def test_smoke_flags_come_last_and_keep_every_row_flag(table):
    run = TableRun(table, opts())
    run._assign_dirs()
    for st in run.states.values():
        row = st.row
        gen = run.generate_cmd(st)
        assert gen[-len(SMOKE_GENERATE):] == SMOKE_GENERATE
        assert gen[gen.index("--required-batch-size-multiple") + 1] == "1"
        if not row.train:
            assert "--shuffle-context" in gen  # Voita's evaluation-only row
            continue
        cmd = run.train_cmd(st)
        assert cmd[3] == str(st.bin_dir) == str((REPO / "data" / "bible" / "bin").resolve())
        assert cmd[-len(SMOKE_TRAIN):] == SMOKE_TRAIN
        final = effective(cmd[4:])
        for a in read_arg_lines(CONFIGS / row.train):
            if a.flag in SMOKE_OWNED:
                continue
            assert final.get(a.flag) == flag_value(CONFIGS / row.train, a.flag), (table.name, row.label, a.flag)
        for a in read_arg_lines(CONFIGS / (row.generate or table.generate)):
            if a.flag not in SMOKE_OWNED:
                assert effective(gen[4:]).get(a.flag) == flag_value(CONFIGS / (row.generate or table.generate),
                                                                    a.flag), (table.name, row.label, a.flag)
        if row.warm_start:
            assert final["--gret-warm-start"] == str(run.states[row.warm_start].avg)
        assert run.average_argv(st)[-2:] == SMOKE_AVERAGE
    if table.name == "dc-table5":  # every layer subset needs 6 encoder layers
        assert all(effective(run.train_cmd(st)[4:])["--encoder-layers"] == "6" for st in run.states.values())


@pytest.mark.parametrize("smoke", [True, False], ids=["smoke", "full"])
def test_tables_sharing_a_model_train_it_with_one_command(smoke):
    """Rows of different tables that name the same config and dataset share a
    model directory (trained once), so their training commands must agree."""
    seen = {}
    for table in all_tables():
        run = TableRun(table, opts(smoke=smoke))
        run._assign_dirs()
        for st in run.states.values():
            if st.row.train:
                cmd = run.train_cmd(st)
                other = seen.setdefault(st.model_dir, (table.name, st.row.label, cmd))
                assert other[2] == cmd, f"{st.model_dir}: {other[:2]} and {(table.name, st.row.label)} differ"
    assert len(seen) < sum(1 for t in all_tables() for r in t.rows if r.train)  # some are shared


def test_gpus_and_full_mode_command_lines():
    from fairseq_ctx.tables import get_table

    table = get_table("dc-table1")
    # the paper's 4960 tokens as written: one GPU, the config's --update-freq 1, nothing appended
    run = TableRun(table, opts(smoke=False, data=["wmt14_en_de=/data/wmt"]))
    run._assign_dirs()
    cmd = run.train_cmd(run.states["Enc-DC"])
    assert cmd.count("--update-freq") == 1 and effective(cmd[4:])["--update-freq"] == "1"
    assert effective(cmd[4:])["--max-tokens"] == "4960"
    # ... which 2 GPUs cannot share: one line naming the flag and the opt-in reading
    with pytest.raises(TableError, match=r"--gpus 2: .*--batch-reading 8gpu"):
        TableRun(table, opts(smoke=False, gpus=2))
    # the 8-GPU reading: 8 batches per update, on one GPU or spread over 2
    for gpus, uf in ((None, "8"), (2, "4")):
        run = TableRun(table, opts(smoke=False, gpus=gpus, batch_reading="8gpu", data=["wmt14_en_de=/data/wmt"]))
        run._assign_dirs()
        cmd = run.train_cmd(run.states["Enc-DC"])
        assert cmd[3] == "/data/wmt" and effective(cmd[4:])["--update-freq"] == uf
        assert "4960 tokens x update-freq " + uf in run.plan(run.states["Enc-DC"])
    # a paper that states its 8 GPUs is not affected by the reading
    ctx = TableRun(get_table("ctxsan-table1"), opts(smoke=False, gpus=2, batch_reading="8gpu"))
    ctx._assign_dirs()
    assert effective(ctx.train_cmd(ctx.states["BASE"])[4:])["--update-freq"] == "4"
    assert "--max-update" in cmd and effective(cmd[4:])["--max-update"] == "160000"
    gen = run.generate_cmd(run.states["Enc-DC"])
    assert effective(gen[4:])["--beam"] == "4" and effective(gen[4:])["--lenpen"] == "0.6"
    assert effective(gen[4:])["--tokenizer"] == "moses" and effective(gen[4:])["--target-lang"] == "de"


@pytest.mark.unit
def test_dry_run_of_every_table_prints_every_command(capsys, tmp_path):
    from fairseq_ctx.tables.__main__ import main

    for table in all_tables():
        assert main([table.name, "--smoke", "--dry-run", "--out", str(tmp_path)]) == 0
        out = capsys.readouterr().out
        # one plan line per row: data, batch, updates, the paper's BLEU flavour
        plans = [line for line in out.splitlines() if "paper's BLEU: " in line]
        assert len(plans) == len(table.rows), table.name
        assert all("data Bible" in p for p in plans), table.name
        flavours = {"ctxsan-table1": "compound-split (our tok BLEU column)", "dc-table1": "nist (our BLEU column)",
                    "gret-table1": "nist (our BLEU column)", "voita-bleu": "unstated (our BLEU column)"}
        if table.name in flavours:
            assert all(flavours[table.name] in p for p in plans), (table.name, plans[0])
        if table.name == "dc-table2":   # sacreBLEU for Vi, multi-bleu.pl for Es, Fr, Ro
            assert sum("multi-bleu (our tok BLEU column)" in p for p in plans) == 24
            assert sum("sacrebleu (our BLEU column)" in p for p in plans) == 8
        trained = sum(1 for r in table.rows if r.train)
        assert out.count("-m fairseq_cli.train ") == trained, table.name
        assert out.count("-m fairseq_cli.generate ") == len(table.rows), table.name
        assert out.count("fairseq-ctx-average-checkpoints") == trained, table.name
    # a compound-split figure is never called NIST
    assert "NIST" not in BLEU_FLAVOURS["compound-split"][1] and "NIST" not in BLEU_FLAVOURS["multi-bleu"][1]


# ---------------------------------------------------------------------------
# one table end to end in smoke mode, on a tiny Bible-like corpus
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_bible(tmp_path_factory):
    """A corpus laid out as scripts/prepare-bible.sh's: sentencepiece-style
    pieces binarized in bin/ (es -> en, docids beside), detokenized references
    in raw/."""
    root = tmp_path_factory.mktemp("tiny_bible")
    plain = make_parallel_data(root / "plain", num_train=160, num_valid=16, num_test=20)
    pieces, raw = root / "pieces", root / "raw"
    pieces.mkdir()
    raw.mkdir()
    for split in ("train", "valid", "test"):
        for ext, lang in (("src", "es"), ("tgt", "en")):
            lines = (plain / f"{split}.{ext}").read_text().splitlines()
            (pieces / f"{split}.{lang}").write_text("".join(" ".join("\u2581" + w for w in line.split()) + "\n"
                                                            for line in lines))
            (raw / f"{split}.{lang}").write_text("".join(line + "\n" for line in lines))
        (pieces / f"{split}.docids").write_text((plain / f"{split}.docids").read_text())
    preprocess(pieces, root / "bin", src="es", tgt="en")
    return root


@pytest.mark.unit
def test_score_generation_computes_the_papers_tokenized_bleu(tmp_path):
    """multi-bleu (DC's IWSLT Es/Fr/Ro): Moses-tokenized, hyphens kept;
    compound-split (ctxsan's En-De): hyphens split as ##AT##-##AT##."""
    from fairseq_ctx.tables.running import score_generation, tokenize_for

    refs = ["A well-known house, old.", "The dog runs."]
    hyps = ["A well-known house, old.", "The cat runs."]
    (tmp_path / "ref.txt").write_text("".join(r + "\n" for r in refs))
    (tmp_path / "gen.log").write_text("".join(f"D-{i}\t-0.5\t{h}\n" for i, h in enumerate(hyps)))
    multi = score_generation(tmp_path / "gen.log", tmp_path / "ref.txt", "en", "multi-bleu")
    split = score_generation(tmp_path / "gen.log", tmp_path / "ref.txt", "en", "compound-split")
    none = score_generation(tmp_path / "gen.log", tmp_path / "ref.txt", None, None)
    assert multi["tok_kind"] == "multi-bleu" and multi["tok_signature"].endswith("|pre:moses-en")
    assert split["tok_signature"].endswith("+compound-split") and none["tok_bleu"] is None
    assert tokenize_for(multi, refs)[0] == "A well-known house , old ."
    assert tokenize_for(split, refs)[0] == "A well ##AT##-##AT## known house , old ."
    # one more n-gram match each from the split hyphen: the two flavours differ
    assert 0 < multi["tok_bleu"] < split["tok_bleu"] < 100


def run_table(table, *args, cwd=REPO):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "fairseq_ctx.tables", table, *map(str, args)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{table} failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout + proc.stderr


def _forked_commands(real_run):
    """``subprocess.run`` for the runner (fairseq_ctx/tables/running.py): its
    ``python -m fairseq_cli.train`` / ``fairseq_cli.generate`` commands run as
    they are, each in a process of its own forked from the preloaded fork
    server (tests/cli_process.py), their output appended to the log file the
    runner gives; any other command runs as the runner asked."""
    def run(cmd, cwd=None, env=None, stdout=None, stderr=None, **kwargs):
        cmd = [str(c) for c in cmd]
        if cmd[:2] != [sys.executable, "-m"] or stderr != subprocess.STDOUT or kwargs:
            return real_run(cmd, cwd=cwd, env=env, stdout=stdout, stderr=stderr, **kwargs)
        proc = cli_process.run(cmd[2], cmd[3:], cwd=cwd or os.getcwd(), env=os.environ if env is None else env)
        stdout.write(proc.stdout + proc.stderr)
        stdout.flush()
        return subprocess.CompletedProcess(cmd, proc.returncode)
    return run


def test_gret_table4_smoke_end_to_end_and_resume(tiny_bible, tmp_path, monkeypatch, capsys):
    from fairseq_ctx.tables import running
    from fairseq_ctx.tables.__main__ import main

    out = tmp_path / "out"
    # the first run in this process (as `python -m fairseq_ctx.tables` from the checkout runs it), its
    # training and decoding commands in processes of their own; the re-runs below are new interpreters
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setattr(running, "subprocess", SimpleNamespace(run=_forked_commands(subprocess.run),
                                                               STDOUT=subprocess.STDOUT))
    assert main(["gret-table4", "--smoke", "--data", str(tiny_bible / "bin"), "--out", str(out),
                 "--bootstrap-samples", "50"]) == 0
    captured = capsys.readouterr()
    stdout = captured.out + captured.err
    monkeypatch.undo()
    result = json.loads((out / "gret-table4" / "table.json").read_text())
    rows = {r["label"]: r for r in result["rows"]}
    assert list(rows) == ["Transformer-Base", "GRET-Base", "Transformer-Big", "GRET-Big"]
    for label, r in rows.items():
        assert r["status"] == "done", (label, r["error"])
        assert r["score"]["sentences"] == 20  # every test sentence decoded and scored
        assert r["score"]["reference"] == str(tiny_bible / "raw" / "test.en")
        assert r["score"]["signature"].startswith("nrefs:1|case:mixed")
        # GRET reports NIST BLEU (mteval-v13a = sacreBLEU's 13a): no tokenized BLEU for its rows
        assert r["score"]["tok_bleu"] is None and r["paper_bleu"]["flavour"] == "nist"
        assert Path(r["model_dir"], "checkpoint_avg.pt").is_file()
        assert r["params"] > 0
    assert rows["GRET-Base"]["compare"]["baseline"] == "Transformer-Base"
    assert rows["GRET-Big"]["compare"]["baseline"] == "Transformer-Big"
    assert 0 < rows["GRET-Big"]["compare"]["p_value"] <= 1 and "tok_p_value" not in rows["GRET-Big"]["compare"]
    # GRET rows start from their baseline's averaged checkpoint
    gret_log = Path(rows["GRET-Base"]["model_dir"], "train.log").read_text()
    assert "warm start from " + str(Path(rows["Transformer-Base"]["model_dir"], "checkpoint_avg.pt")) in gret_log
    # the averaging used the last 2 update checkpoints of the smoke run
    assert "checkpoint_1_3.pt, " in stdout and "checkpoint_1_2.pt" in stdout
    table = (out / "gret-table4" / "table.txt").read_text()
    assert "SMOKE RUN" in table and "29.33" in table and "273M" in table  # the paper's numbers beside ours
    assert "paper's BLEU on WMT14 En->De: NIST BLEU: mteval-v13a.pl" in table and "tok BLEU" not in table
    # the plan line: smoke batch, and the epochs read from the binarized train split (160 pairs)
    assert "GRET-Base: data Bible" in stdout and "512 tokens x update-freq 1 x 1 GPU" in stdout
    assert "3 updates = at most " in stdout and " epochs of 160 pairs" in stdout
    # a re-run trains and decodes nothing again
    again = run_table("gret-table4", "--smoke", "--data", tiny_bible / "bin", "--out", out,
                      "--bootstrap-samples", "50")
    assert "fairseq_cli.train" not in again and "fairseq_cli.generate" not in again
    assert again.count(": trained (") == 4 and again.count(": scored (") == 4
    assert json.loads((out / "gret-table4" / "table.json").read_text())["rows"][3]["score"] == rows["GRET-Big"]["score"]
    # one row, from another directory with --root: only that row's models are looked at, exit status 0
    again = run_table("gret-table4", "--root", REPO, "--rows", "GRET-Base", "--smoke", "--data", tiny_bible / "bin",
                      "--out", out, "--bootstrap-samples", "50", cwd=tmp_path)
    assert again.count(": trained (") == 2 and "Transformer-Big: trained" not in again
    assert "Transformer-Big: not in --rows; its earlier score is used" in again


@pytest.mark.unit
def test_missing_data_stops_before_any_work(tmp_path, capsys):
    from fairseq_ctx.tables.__main__ import main

    assert main(["voita-bleu", "--out", str(tmp_path / "out"), "--data", str(tmp_path / "nothing")]) == 1
    assert "fairseq_ctx: error: no binarized data (dict.SRC.txt) for opensubtitles_en_ru" in capsys.readouterr().err
    assert not (tmp_path / "out" / "models").exists()


def test_paths_come_from_the_repository_run_from(tmp_path, monkeypatch):
    """ctx-args emits an absolute --user-dir from any directory; the runner
    takes configs, data and runs/ from --root or the checkout around the
    current directory, and refuses a directory outside any checkout."""
    from fairseq_ctx.tables import get_table
    from fairseq_ctx.tables.definition import TableError

    out = subprocess.run([str(REPO / "scripts" / "ctx-args"), str(CONFIGS / "dc" / "iwslt.generate.args")],
                         cwd=tmp_path, capture_output=True, text=True, check=True).stdout.split()
    assert out[out.index("--user-dir") + 1] == str(REPO / "fairseq_ctx")
    table = get_table("dc-table1")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TableError, match="not inside a fairseq_ctx checkout"):
        TableRun(table, opts(root=None))
    run = TableRun(table, opts(root=str(REPO), out=None))
    assert run.out == REPO / "runs" / "tables-smoke"
    assert all(st.bin_dir == REPO / "data" / "bible" / "bin" for st in run.states.values())
    monkeypatch.chdir(REPO / "configs")
    assert TableRun(table, opts(root=None)).root == REPO


def test_rows_runs_only_the_rows_asked_and_what_their_models_need():
    from fairseq_ctx.tables import get_table

    run = TableRun(get_table("gret-table4"), opts(rows=["4"]))
    assert run.needed_rows(run._selected()) == {"GRET-Big", "Transformer-Big"}   # its warm start
    run = TableRun(get_table("ctxsan-table1"), opts(rows=["3"]))
    needed = run.needed_rows(run._selected())
    assert needed == {"enc deep-global"}   # the baseline is not trained for it
    skipped = [a.name for a in run.table.analyses if any(label not in needed for label in a.rows_needed(run.table))]
    assert skipped == ["ctxsan gates"]     # length buckets use whichever rows were scored


# ---------------------------------------------------------------------------
# the length-bucket analysis hook
# ---------------------------------------------------------------------------

def test_length_buckets_hook_counts_binarized_subwords(tmp_path):
    """The DC table's hook on a decoded split: lengths from the binarized
    source (subwords without </s>), not the S- lines (detokenized words)."""
    from fairseq_ctx.tables.analyses import LengthBuckets
    from fairseq_ctx.tables.dc import TABLE1
    from .test_evaluation import generate_log, random_corpus, write, write_binarized

    refs = random_corpus(4, seed=8)
    bpe = ["a@@ b@@ c@@ d@@ e@@ f@@ g@@ h@@ i", "a b", "x@@ y " * 10, "w " * 50]  # 9, 2, 20, 50 subwords
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_binarized(bin_dir / "test.en-de.en", bpe)
    write(tmp_path / "ref.txt", refs)
    states = {}
    for label in ("Transformer", "Enc-DC"):
        gen = generate_log(tmp_path / f"{label}.log", refs, range(4), srcs=["abcdefghi", "ab", "xy " * 10, "w"])
        states[label] = SimpleNamespace(row=SimpleNamespace(label=label), gen_log=gen, bin_dir=bin_dir,
                                        data_cfg=DATASETS["wmt14_en_de"],
                                        score={"reference": str(tmp_path / "ref.txt"), "tok_bleu": None})
    run = SimpleNamespace(table=SimpleNamespace(rows=[s.row for s in states.values()], baseline="Transformer",
                                                title="DC"),
                          states=states, configs=CONFIGS, table_dir=tmp_path / "out", gen_subset=lambda st: "test")
    hook, = [a for a in TABLE1.analyses if isinstance(a, LengthBuckets)]
    summary = hook.run(run)
    res = json.loads((tmp_path / "out" / "length_buckets.json").read_text())
    assert [(b["label"], b["n"]) for b in res["buckets"]] == \
        [("<10", 2), ("10-19", 0), ("20-29", 1), ("30-39", 0), ("40-49", 0), (">=50", 1)]
    assert res["groups"] == 6 and res["paper_unit"] == "subword tokens" and res["src"].endswith("test.en-de.en")
    assert res["buckets"][0]["bleu"]["Enc-DC"] == pytest.approx(100.0)
    assert "6 groups closed on the left" in summary and (tmp_path / "out" / "length_buckets.png").is_file()


@pytest.mark.unit
def test_dictionary_sizes_and_the_ctxsan_parameter_note(tmp_path):
    """ctxsan's 88.0M implies a 28.6k vocabulary: every ctxsan table says so, and
    every table prints the dictionary sizes of its data beside our counts."""
    from fairseq_ctx.tables import get_table
    from fairseq_ctx.tables.reporting import dictionary_sizes

    (tmp_path / "dict.en.txt").write_text("the 10\nhouse 3\nmadeupword0000 0\n")
    (tmp_path / "dict.de.txt").write_text("das 9\n")
    assert dictionary_sizes(tmp_path, "en", "de") == {"en": 7, "de": 5}
    assert dictionary_sizes(tmp_path / "none", "en", "de") == {}
    for name in ("ctxsan-table1", "ctxsan-table2", "ctxsan-table3"):
        assert any("V is about 28.6k" in n and "1.5M" in n for n in get_table(name).notes), name
