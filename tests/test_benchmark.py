"""scripts/benchmark.py runs end to end and reports ratios against transformer."""
import json
import math
import subprocess
import sys

import pytest

from tests.utils import REPO, make_parallel_data, preprocess


def test_benchmark_reports_ratios(tmp_path):
    data_bin = preprocess(make_parallel_data(tmp_path / "raw", num_train=64, num_valid=10), tmp_path / "bin")
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "scripts/benchmark.py", str(data_bin), "--train-updates", "2", "--warmup-updates", "1",
         "--decode-sentences", "10", "--max-tokens", "400", "--threads", "1",
         "--variant", "wide-ffn", "transformer", "--encoder-ffn-embed-dim 512", "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "wide-ffn" in proc.stdout and "(1.00x)" in proc.stdout
    results = json.loads(out.read_text())["results"]
    assert set(results) == {"transformer", "wide-ffn"}
    for key in ("params", "train_tok_s", "decode_sent_s", "decode_tok_s", "peak_mem_mb"):
        assert results["transformer"][key + "_ratio"] == 1.0
        assert math.isfinite(results["wide-ffn"][key]) and results["wide-ffn"][key] > 0
    # A wider feed-forward layer has more parameters: the count is real, not copied.
    assert results["wide-ffn"]["params_ratio"] > 1.0
    # Fixed-length decoding (default 30 tokens): every variant generates the
    # same number of tokens per sentence, so speed ratios compare like with like.
    for res in results.values():
        assert res["decode_tok_s"] / res["decode_sent_s"] == pytest.approx(31, abs=1e-6)  # 30 + EOS


def test_benchmark_rejects_missing_data(tmp_path):
    proc = subprocess.run([sys.executable, "scripts/benchmark.py", str(tmp_path / "nope")], cwd=REPO,
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "data directory not found" in proc.stderr
