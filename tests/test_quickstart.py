"""scripts/quickstart.sh end to end on a tiny corpus laid out like data/bible:
one time budget for the whole run, each model translated from
checkpoint_last.pt with the README's fairseq-ctx-translate flags (the file
that command writes, the same BLEU), the table, the one-line note when a
model is still in its warm-up; a re-run decodes without training again."""
import json
import re
import shutil
import subprocess
import sys

import sacrebleu

from tests.utils import REPO, make_parallel_data, preprocess

sys.path.insert(0, str(REPO / "scripts"))
import quickstart  # noqa: E402


def _quickstart(data, out, *archs, minutes="0.04", decode_minutes="0"):
    return subprocess.run(
        ["bash", "scripts/quickstart.sh", "--data", str(data), "--out", str(out), "--minutes", minutes,
         "--decode-minutes", decode_minutes, "--threads", "1", "--calibration-updates", "6", "--archs", *archs],
        cwd=REPO, capture_output=True, text=True, timeout=600)


def test_budget_is_split_between_architectures():
    assert quickstart.budget_split(15, 2, 1) == 13
    assert quickstart.budget_split(30, 2, 2) == 13
    assert quickstart.budget_split(4, 2, 2) is None


def test_too_few_updates_is_one_line():
    assert quickstart.too_few_updates("transformer", quickstart.MIN_UPDATES, 12.0, 15) is None
    note = quickstart.too_few_updates("transformer", 97, 12.5, 15)
    assert "\n" not in note and "only 97 updates in 12.5 training minutes, fewer than 400" in note
    assert "15-minute budget" in note and "means nothing" in note


def test_the_plan_fits_the_share_and_decays_to_zero_at_its_last_update():
    log = "\n".join(f"| train_inner | epoch 001:  {u} / 274 loss=9, num_updates={u}, lr=1e-4, train_wall={w}, wall=9"
                    for u, w in ((10, 14), (20, 25), (30, 37)))
    assert quickstart.seconds_per_update(log) == (37 - 14) / 20
    # epochs shorter than the log interval: fairseq's end-of-epoch lines
    epochs = "\n".join(f"| train | epoch {u:03d} | loss 9 | num_updates {u} | lr 1e-4 | train_wall {w} | wall 9"
                       for u, w in ((10, 3), (30, 7)))
    assert quickstart.seconds_per_update(epochs) == (7 - 3) / 20
    assert quickstart.seconds_per_update("no timing") is None
    assert quickstart.plan_updates(1000, 1.25) == int(0.9 * 1000 / 1.25)
    flags = quickstart.schedule(720)
    assert flags[flags.index("--total-num-update") + 1] == flags[flags.index("--max-update") + 1] == "720"
    assert flags[flags.index("--warmup-updates") + 1] == "180"
    assert quickstart.schedule(4000)[quickstart.schedule(4000).index("--warmup-updates") + 1] == "400"
    assert flags[flags.index("--end-learning-rate") + 1] == "0" and flags[flags.index("--power") + 1] == "1"


def test_readme_translates_as_the_quickstart():
    """The README's translate line is the command the quickstart runs: the
    same checkpoint file name and decoding flags."""
    readme = (REPO / "README.md").read_text()
    line = re.search(r"fairseq-ctx-translate data/bible/bin (.*?)--output", readme, re.S).group(1)
    flags = " ".join(line.replace("\\\n", " ").split())
    assert f"/{quickstart.CHECKPOINT}" in flags
    assert flags.endswith(" ".join(quickstart.DECODE_FLAGS)), flags


def test_too_small_budget_is_a_usage_error(tmp_path):
    proc = _quickstart(tmp_path / "none", tmp_path / "out", "transformer", "concat", minutes="3",
                       decode_minutes="2")
    assert proc.returncode == 2
    assert "--minutes 3 leaves no training time after --decode-minutes 2 for each of 2" in proc.stderr


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
    assert "0.04 minutes in all: 0.02 training minutes for each of 2 architecture(s), 0 for translating each" in proc.stdout
    rows = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [r["arch"] for r in rows] == ["transformer", "concat"]
    refs = (data / "raw" / "test.en").read_text().splitlines()
    for row in rows:
        assert 1 <= row["updates"] < quickstart.MIN_UPDATES and row["params"] > 0
        assert row["checkpoint"].endswith(f"{row['arch']}/checkpoint_last.pt")
        assert row["translate"].endswith("--no-progress-bar") and " ".join(quickstart.DECODE_FLAGS) in row["translate"]
        hyps = (tmp_path / "out" / f"{row['arch']}.test.hyp").read_text().splitlines()
        assert len(hyps) == 9, "a test sentence was dropped"
        assert row["bleu"] == round(sacrebleu.BLEU().corpus_score(hyps, [refs]).score, 2)
        assert row["signature"].startswith("nrefs:1|")
    lines = proc.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("arch "))
    assert lines[header].split() == ["arch", "params", "train", "min", "updates", "BLEU"]
    assert lines[header + 1].startswith("transformer ") and lines[header + 2].startswith("concat ")
    assert lines[header + 3].startswith("detokenized sacreBLEU on the test set (9 sentences) of checkpoint_last.pt")
    notes = lines[header + 4:]   # both models are in their warm-up: one line each, under the table
    assert len(notes) == 2 and all("fewer than 400: on this machine" in n for n in notes), notes
    plan = json.loads((tmp_path / "out" / "transformer" / quickstart.PLAN).read_text())
    assert rows[0]["updates"] == plan["updates"]  # the run made the updates it planned

    again = _quickstart(data, tmp_path / "out", "transformer", minutes="0.02")
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"has made its {plan['updates']} updates; decoding only" in again.stdout
