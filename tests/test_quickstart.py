"""scripts/quickstart.sh end to end on a tiny corpus laid out like data/bible:
a fixed number of updates for every model, its time estimated from a
calibration before training, each model translated from checkpoint_last.pt
with the README's fairseq-ctx-translate flags (the file that command writes,
the same BLEU), the table, the one-line note when the models are still in
their first descent; a re-run decodes without training again, a re-run with
another --updates stops; bad names and corpus directories stop with one line
before anything is prepared or trained."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import sacrebleu

from tests import cli_process
from tests.utils import REPO, make_parallel_data, preprocess

sys.path.insert(0, str(REPO / "scripts"))
import quickstart  # noqa: E402


def _quickstart(data, out, *archs, updates="5"):
    return subprocess.run(
        ["bash", "scripts/quickstart.sh", "--data", str(data), "--out", str(out), "--updates", updates,
         "--threads", "1", "--calibration-updates", "6", "--archs", *archs],
        cwd=REPO, env=cli_process.env_with_python(dict(os.environ)), capture_output=True, text=True, timeout=600)


@pytest.mark.unit
def test_too_few_updates_is_one_line():
    assert quickstart.too_few_updates(quickstart.MIN_UPDATES) is None
    assert quickstart.too_few_updates(quickstart.UPDATES) is None
    note = quickstart.too_few_updates(97)
    assert note == ("quickstart: 97 updates (--updates) are fewer than 400: the models are still in their first "
                    "descent, so their BLEU means nothing (default: 840)")


@pytest.mark.unit
def test_the_estimate_is_speed_times_updates():
    assert quickstart.estimate("ctxenc", 1.3, 840) == ("ctxenc: 1.30 s per update here, so its 840 updates take "
                                                       "about 18.2 minutes")
    assert quickstart.minutes(7200) == "2.0 hours"


@pytest.mark.unit
def test_the_plan_fits_the_share_and_decays_to_zero_at_its_last_update():
    log = "\n".join(f"| train_inner | epoch 001:  {u} / 274 loss=9, num_updates={u}, lr=1e-4, train_wall={w}, wall=9"
                    for u, w in ((10, 14), (20, 25), (30, 37)))
    assert quickstart.seconds_per_update(log) == (37 - 14) / 20
    # epochs shorter than the log interval: fairseq's end-of-epoch lines
    epochs = "\n".join(f"| train | epoch {u:03d} | loss 9 | num_updates {u} | lr 1e-4 | train_wall {w} | wall 9"
                       for u, w in ((10, 3), (30, 7)))
    assert quickstart.seconds_per_update(epochs) == (7 - 3) / 20
    assert quickstart.seconds_per_update("no timing") is None
    flags = quickstart.schedule(720)
    assert flags[flags.index("--total-num-update") + 1] == flags[flags.index("--max-update") + 1] == "720"
    assert flags[flags.index("--warmup-updates") + 1] == "180"
    assert quickstart.schedule(4000)[quickstart.schedule(4000).index("--warmup-updates") + 1] == "400"
    assert flags[flags.index("--end-learning-rate") + 1] == "0" and flags[flags.index("--power") + 1] == "1"


@pytest.mark.unit
def test_readme_translates_as_the_quickstart():
    """The README's translate line is the command the quickstart runs: the
    same checkpoint file name and decoding flags."""
    readme = (REPO / "README.md").read_text()
    line = re.search(r"fairseq-ctx-translate data/bible/bin (.*?)--output", readme, re.S).group(1)
    flags = " ".join(line.replace("\\\n", " ").split())
    assert f"/{quickstart.CHECKPOINT}" in flags
    assert flags.endswith(" ".join(quickstart.DECODE_FLAGS)), flags


def test_no_updates_is_a_usage_error(tmp_path):
    proc = _quickstart(tmp_path / "none", tmp_path / "out", "transformer", updates="0")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == "quickstart.py: error: --updates must be at least 1, got 0"


def test_bad_names_and_corpus_directories_stop_before_anything_runs(tmp_path):
    """One line each, before the corpus is prepared or a model trained: an
    --archs name nothing knows (fairseq's --arch list is asked), a --data
    directory that is not a corpus directory, a prepared one that lacks a
    file the quickstart reads."""
    out = tmp_path / "out"
    proc = _quickstart(tmp_path / "missing", out, "transformer", "transformr")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "fairseq_ctx: error: --archs transformr: no such variant or architecture (did you mean transformer, "
        "xm_transformer, transformer_lm?); variants: transformer, concat, ctxsan, ctxsan_both, dc, dc_full, "
        "gret, ctxenc, transformer_ctxenc_random, or any --arch of fairseq-train"]
    assert not (tmp_path / "missing").exists() and not out.exists()

    wrong = tmp_path / "wrong"  # e.g. the binarized directory instead of the corpus directory
    wrong.mkdir()
    (wrong / "dict.es.txt").write_text("a 1\n")
    proc = _quickstart(wrong, out, "transformer")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"fairseq_ctx: error: --data {wrong}: no bin/, raw/ or spm/ in it: give the corpus directory that "
        "scripts/prepare-bible.sh writes (data/bible), or a new one to prepare it there"]

    half = tmp_path / "half"  # prepared, but its raw test set is gone
    (half / "bin").mkdir(parents=True)
    for lang in ("es", "en"):
        (half / "bin" / f"dict.{lang}.txt").write_text("a 1\n")
    proc = _quickstart(half, out, "transformer")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"fairseq_ctx: error: --data {half}: missing raw/test.es (prepare it: bash scripts/prepare-bible.sh "
        f"--dest {half})"]
    assert not out.exists()


def test_quickstart_tiny_corpus(tmp_path):
    raw = make_parallel_data(tmp_path / "src", num_train=60, num_valid=8, num_test=9)
    data = tmp_path / "corpus"
    (data / "raw").mkdir(parents=True)
    lang = {"src": "es", "tgt": "en"}
    for split in ("train", "valid", "test"):
        for side, code in lang.items():
            shutil.copy(raw / f"{split}.{side}", data / "raw" / f"{split}.{code}")
        shutil.copy(raw / f"{split}.docids", data / "raw" / f"{split}.docids")
    preprocess(data / "raw", data / "bin", src="es", tgt="en")

    proc = _quickstart(data, tmp_path / "out", "transformer", "concat")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    note = quickstart.too_few_updates(5)
    assert lines[0] == note
    # the estimate of each model and of the whole run, from the calibrations, before any training
    plans = {a: json.loads((tmp_path / "out" / a / quickstart.PLAN).read_text()) for a in ("transformer", "concat")}
    first_training = next(i for i, line in enumerate(lines) if "fairseq_cli.train" in line and "--save-dir" in line
                          and ".calibration" not in line)
    for arch, plan in plans.items():
        assert plan["updates"] == 5 and plan["seconds_per_update"] > 0
        assert lines.index(quickstart.estimate(arch, plan["seconds_per_update"], 5)) < first_training
    total = sum(5 * plan["seconds_per_update"] for plan in plans.values())
    assert lines.index(f"quickstart: 2 model(s) of 5 updates on 1 thread(s): about {quickstart.minutes(total)} of "
                       "training from now, then translating the test set with each") < first_training
    rows = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [r["arch"] for r in rows] == ["transformer", "concat"]
    refs = (data / "raw" / "test.en").read_text().splitlines()
    for row in rows:
        assert row["updates"] == 5 and row["params"] > 0
        assert row["seconds_per_update_calibrated"] == plans[row["arch"]]["seconds_per_update"]
        assert row["checkpoint"].endswith(f"{row['arch']}/checkpoint_last.pt")
        assert row["translate"].endswith("--no-progress-bar") and " ".join(quickstart.DECODE_FLAGS) in row["translate"]
        hyps = (tmp_path / "out" / f"{row['arch']}.test.hyp").read_text().splitlines()
        assert len(hyps) == 9, "a test sentence was dropped"
        assert row["bleu"] == round(sacrebleu.BLEU().corpus_score(hyps, [refs]).score, 2)
        assert row["signature"].startswith("nrefs:1|")
    header = next(i for i, line in enumerate(lines) if line.startswith("arch "))
    assert lines[header].split() == ["arch", "params", "train", "min", "updates", "BLEU"]
    assert lines[header + 1].startswith("transformer ") and lines[header + 2].startswith("concat ")
    assert lines[header + 3].startswith("detokenized sacreBLEU on the test set (9 sentences) of checkpoint_last.pt")
    assert lines[header + 4:] == [note]  # 5 updates: the note again, under the table

    again = _quickstart(data, tmp_path / "out", "transformer")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "transformer: " + str(tmp_path / "out" / "transformer" / quickstart.CHECKPOINT) + \
        " has made its 5 updates; decoding only" in again.stdout.splitlines()
    other = _quickstart(data, tmp_path / "out", "transformer", updates="7")
    assert other.returncode == 1
    assert other.stderr.splitlines()[-1] == (
        f"fairseq_ctx: error: --updates 7: {tmp_path / 'out' / 'transformer'} holds transformer trained to a "
        "schedule of 5 updates; move it away (or pass --updates 5)")
