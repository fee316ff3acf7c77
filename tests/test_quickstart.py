"""scripts/quickstart.sh end to end on a tiny corpus laid out like data/bible:
train with a time budget, decode every test sentence, score, print the table;
a re-run decodes without training again."""
import json
import shutil
import subprocess

from tests.utils import REPO, make_parallel_data, preprocess


def _quickstart(data, out, *archs):
    return subprocess.run(
        ["bash", "scripts/quickstart.sh", "--data", str(data), "--out", str(out), "--minutes", "0.02",
         "--threads", "1", "--archs", *archs],
        cwd=REPO, capture_output=True, text=True, timeout=600)


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
    rows = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [r["arch"] for r in rows] == ["transformer", "concat"]
    for row in rows:
        assert row["updates"] >= 1 and row["params"] > 0 and 0 <= row["bleu"] <= 100
        assert row["signature"].startswith("nrefs:1|")
        hyps = (tmp_path / "out" / f"{row['arch']}.test.hyp").read_text().splitlines()
        assert len(hyps) == 9, "a test sentence was dropped"
    table = proc.stdout.splitlines()[-4:]  # header, two rows, signature line
    assert table[0].split() == ["arch", "params", "train", "min", "updates", "BLEU"], table
    assert table[1].startswith("transformer ") and table[2].startswith("concat ")

    again = _quickstart(data, tmp_path / "out", "transformer")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "already has its 0.02-minute budget; decoding only" in again.stdout
