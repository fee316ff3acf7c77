"""scripts/benchmark.py runs end to end and reports ratios against transformer,
each speed ratio beside its FLOP bound."""
import json
import math
import os
import types

import pytest
import torch

from tests import cli_process
from tests.utils import REPO, build_model, load_script, make_parallel_data, preprocess


def _benchmark_module():
    return load_script("benchmark")


def _benchmark(*args):
    """``python scripts/benchmark.py ARGS`` from the checkout, in a process of
    its own forked from the preloaded fork server (tests/cli_process.py)."""
    return cli_process.run("scripts/benchmark.py", args, cwd=REPO, env=dict(os.environ), timeout=600, script=True)


def test_benchmark_reports_ratios(tmp_path):
    data_bin = preprocess(make_parallel_data(tmp_path / "raw", num_train=64, num_valid=10), tmp_path / "bin")
    out = tmp_path / "bench.json"
    proc = _benchmark(str(data_bin), "--train-updates", "2", "--warmup-updates", "1",
                      "--decode-sentences", "10", "--max-tokens", "400", "--threads", "1", "--repeats", "2",
                      "--variants", "ctxenc",
                      "--variant", "wide-ffn", "transformer", "--encoder-ffn-embed-dim 512", "--json", str(out),
                      "--profile-steps")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "wide-ffn" in proc.stdout and "(1.00x)" in proc.stdout
    results = json.loads(out.read_text())["results"]
    assert set(results) == {"transformer", "ctxenc", "wide-ffn"}
    # FLOPs are counted in the first round only; the second ran the same batches
    runs = json.loads(out.read_text())["runs"]
    for label, rounds in runs.items():
        assert len(rounds) == 2 and rounds[1]["timed_train_tokens"] == rounds[0]["timed_train_tokens"]
        assert rounds[1]["train_flops_tok"] == rounds[0]["train_flops_tok"]
    # document order: only the model that can reuse sentence
    # states gets it, against the baseline's decode of every valid sentence
    assert "full_decode_tok_s" in runs["transformer"][0] and "doc_order_decode_tok_s" not in runs["transformer"][0]
    assert not any(k.startswith(("full_decode", "doc_order")) for k in results["wide-ffn"])
    ctxenc = results["ctxenc"]
    for key in ("full_decode_ratio", "full_decode_bound", "doc_order_decode_ratio", "doc_order_decode_bound"):
        assert math.isfinite(ctxenc[key]) and ctxenc[key] > 0
    # every valid sentence but a document's last is some other sentence's context
    assert ctxenc["doc_order_hits"] > 0 and ctxenc["doc_order_misses"] > 0
    assert ctxenc["doc_order_differing"] == 0 and ctxenc["doc_order_max_score_diff"] < 1e-4
    # each of the 10 valid sentences goes through the shared layers once, as
    # a source or as a context (the warm-up batch's states are not kept)
    assert ctxenc["doc_order_misses"] <= 10 + 2 and ctxenc["doc_order_speedup"] > 0
    # reusing states removes work: the reused decode's bound is above the ordinary one's
    assert ctxenc["doc_order_decode_bound"] > ctxenc["full_decode_bound"]
    assert "reused sentence states" in proc.stdout
    # the documentation's table, from the JSON alone (no data, nothing run)
    table = _benchmark("--markdown-of", str(out))
    assert table.returncode == 0, table.stderr[-3000:]
    row = next(line for line in table.stdout.splitlines() if line.startswith("| `wide-ffn`"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    res = results["wide-ffn"]
    assert cells[2:5] == [f"{res['train_ratio']:.2f}x", f"{res['train_bound']:.2f}x",
                          f"{res['train_ratio'] / res['train_bound']:.2f}"]
    assert f"| `ctxenc` | reused sentence states ({ctxenc['doc_order_hits']} reused; " \
           f"{ctxenc['doc_order_speedup']:.3f}x its ordinary decode) " \
           f"| {ctxenc['doc_order_decode_ratio']:.2f}x |" in table.stdout
    assert table.stdout in proc.stdout  # the run prints the same table
    # --profile-steps: one update and one decoded batch per variant under the profiler; on CPU no device
    # share and no launch, the costliest operations' own times within the time inside operations
    for label, res in results.items():
        for key in ("train_profile", "decode_profile"):
            prof = res[key]
            assert prof["device_busy"] is None and prof["launches"] == 0 and prof["device_recorded"] is None
            assert 0 < prof["op_ms"] <= prof["wall_ms"]
            assert 0 < sum(o["ms"] for o in prof["top_ops"]) <= prof["op_ms"] + 1e-3
        row = next(line for line in table.stdout.splitlines() if line.startswith(f"| `{label}`"))
        assert row.endswith(f"| -, {res['train_profile']['between_ops_ms'] / res['train_profile']['wall_ms']:.0%} "
                            f"| -, {res['decode_profile']['between_ops_ms'] / res['decode_profile']['wall_ms']:.0%} |")
    # one thread on CPU: timed by the process's CPU time (robust on a shared machine)
    assert json.loads(out.read_text())["settings"]["clock"] == "cpu" and "clock=cpu" in proc.stdout
    for key in ("params", "train_tok_s", "decode_sent_s", "decode_tok_s", "peak_mem_mb",
                "train_flops_tok", "decode_flops_tok"):
        assert results["transformer"][key + "_ratio"] == 1.0
        assert math.isfinite(results["wide-ffn"][key]) and results["wide-ffn"][key] > 0
    # A wider feed-forward layer has more parameters: the count is real, not copied.
    assert results["wide-ffn"]["params_ratio"] > 1.0
    # each measured speed ratio with its FLOP bound beside it
    for key in ("train_ratio", "train_bound", "decode_ratio", "decode_bound"):
        assert results["transformer"][key] == 1.0
    assert results["wide-ffn"]["train_ratio"] == results["wide-ffn"]["train_tok_s_ratio"]
    assert results["wide-ffn"]["decode_ratio"] == results["wide-ffn"]["decode_tok_s_ratio"]
    # the wider encoder FFN costs FLOPs in training and in decoding (encoder once per sentence)
    assert 0.5 < results["wide-ffn"]["train_bound"] < 1.0 and 0.5 < results["wide-ffn"]["decode_bound"] < 1.0
    assert "train ratio / bound" in proc.stdout and "1.00x / 1.00x" in proc.stdout
    # Fixed-length decoding (default 30 tokens): every variant generates the
    # same number of tokens per sentence, so speed ratios compare like with like.
    for res in results.values():
        assert res["decode_tok_s"] / res["decode_sent_s"] == pytest.approx(31, abs=1e-6)  # 30 + EOS


def test_benchmark_rejects_missing_data(tmp_path):
    proc = _benchmark("--markdown-of", str(tmp_path / "nope.json"))
    assert proc.returncode == 2 and "--markdown-of" in proc.stderr and "nope.json" in proc.stderr
    proc = _benchmark(str(tmp_path / "nope"))
    assert proc.returncode != 0 and "data directory not found" in proc.stderr
    # CPU time adds up threads: asked for with several, it is refused
    proc = _benchmark(str(tmp_path), "--clock", "cpu", "--threads", "2")
    assert proc.returncode != 0 and "--clock cpu: needs --threads 1" in proc.stderr


def test_benchmark_variants_come_from_the_architecture_list(tmp_path):
    """--variants NAME takes arch, model flags and task flags from
    fairseq_ctx/architectures.py; with no --variants, --archs or --variant
    the whole list runs; the plain transformer is always the baseline, first."""
    import argparse

    from fairseq_ctx.architectures import BY_NAME, VARIANTS

    bench = _benchmark_module()

    def variants(**given):
        return bench.variants_of(argparse.Namespace(**{"variants": [], "archs": None, "variant": [],
                                                       "baseline_flags": "", **given}))

    base = ("transformer", "transformer", [])
    assert variants() == [base] + [(v.name, v.arch, [*v.flags, *v.task]) for v in VARIANTS if v.name != "transformer"]
    assert len(variants()) == len(VARIANTS)
    assert variants(variants=["ctxsan_both", "ctxenc", "transformer"]) == [
        base, ("ctxsan_both", "transformer_ctxsan", ["--ctxsan-side", "both"]),
        ("ctxenc", "transformer_ctxenc", list(BY_NAME["ctxenc"].task))]
    assert BY_NAME["ctxenc"].task[:2] == ("--task", "document_translation")
    assert variants(variants=["concat"])[1] == ("concat", "transformer", list(BY_NAME["concat"].task))
    # --archs and --variant as before: only what they name (--archs alone, empty: the baseline alone)
    assert variants(archs=["transformer_dc", "transformer"]) == [base, ("transformer_dc", "transformer_dc", [])]
    assert variants(archs=[]) == [base]
    wide = variants(variant=[("w", "transformer", "--encoder-ffn-embed-dim 512")],
                    baseline_flags="--share-all-embeddings")
    assert wide == [("transformer", "transformer", ["--share-all-embeddings"]),
                    ("w", "transformer", ["--encoder-ffn-embed-dim", "512"])]
    assert variants(variants=["dc"], archs=["transformer_gret"]) == [
        base, ("dc", "transformer_dc", []), ("transformer_gret", "transformer_gret", [])]
    proc = _benchmark(str(tmp_path), "--variants", "nope")
    assert proc.returncode == 2 and "invalid choice: 'nope'" in proc.stderr and "ctxsan_both" in proc.stderr


@pytest.mark.unit
def test_flop_bound_of_a_context_model_matches_a_hand_count():
    """ctxsan, encoder side, global context, both Q and K (n = 2), tiny dims:
    per encoder layer, beyond the plain transformer's products, the forward
    pass has the n gate-logit columns of the fused Q/K/V projection and the
    p zero columns that align its rows to 8 elements (2*N*d*(n + p)), folding V^H and V^C into the projections (2 * 2*n*d*d), and
    the context projection of one mean per sentence (2*B*d*(n*d + n)); the
    backward pass computes both gradients of each, twice the forward. The
    counter also counts attention on CPU (the same for both models)."""
    bench = _benchmark_module()
    torch.manual_seed(0)
    flags = ["--dropout", "0"]
    plain = build_model("transformer", flags + ["--encoder-embed-dim", "16", "--decoder-embed-dim", "16",
                                                "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32",
                                                "--encoder-layers", "2", "--decoder-layers", "2",
                                                "--encoder-attention-heads", "2", "--decoder-attention-heads", "2"])
    ctxsan = build_model("transformer_ctxsan_tiny", flags + ["--ctxsan-side", "encoder", "--ctxsan-context", "global"])
    d, layers, n = 16, 2, 2
    dic = plain.encoder.dictionary
    B, S, T = 3, 7, 5
    g = torch.Generator().manual_seed(0)
    src = torch.randint(dic.nspecial, len(dic), (B, S), generator=g)
    prev = torch.randint(dic.nspecial, len(dic), (B, T), generator=g)

    def flops(model):
        model.train()

        def step():
            model(src, torch.full((B,), S), prev)[0].sum().backward()
        return bench.count_flops(step)

    base_flops, ctx_flops = flops(plain), flops(ctxsan)
    N = B * S
    p = -(3 * d + n) % 8  # zero columns that align the fused projection's rows (modules/fused_attention.py)
    forward = 2 * N * d * (n + p) + 2 * (2 * n * d * d) + 2 * B * d * (n * d + n)
    assert ctx_flops - base_flops == layers * 3 * forward
    # attention is counted on CPU, with torch's formulas for the fused kernels:
    # 2 products forward (q k^T, a v), 5 backward (the scores recomputed, 4 gradients)
    q = torch.randn(B, 2, S, 8, requires_grad=True)
    attention = bench.count_flops(
        lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward())
    assert attention == (2 + 5) * (2 * B * 2 * S * S * 8)

    # the bound from per-round pairs, as the script reports it
    tokens = B * T
    runs = {"transformer": [{"train_tok_s": 10.0, "decode_tok_s": 5.0, "train_flops_tok": base_flops / tokens,
                             "decode_flops_tok": 1.0}],
            "ctxsan": [{"train_tok_s": 9.0, "decode_tok_s": 5.0, "train_flops_tok": ctx_flops / tokens,
                        "decode_flops_tok": 1.0}]}
    results = {label: {"train_tok_s_ratio": r[0]["train_tok_s"] / 10.0, "decode_tok_s_ratio": 1.0}
               for label, r in runs.items()}
    bench.add_bounds(results, runs)
    assert results["transformer"]["train_bound"] == 1.0
    assert results["ctxsan"]["train_bound"] == pytest.approx(base_flops / (base_flops + layers * 3 * forward))
    assert results["ctxsan"]["train_ratio"] == pytest.approx(0.9)


@pytest.mark.unit
def test_document_order_decodes_are_compared_sentence_by_sentence():
    bench = _benchmark_module()
    same = {0: ([4, 5, 2], -1.0), 1: ([6, 2], -0.5)}
    differing, diff = bench.compare_decodes(same, {0: ([4, 5, 2], -1.0 + 1e-6), 1: ([6, 2], -0.5)})
    assert differing == 0 and diff == pytest.approx(1e-6)
    # a differing hypothesis is counted, and its score is not compared
    assert bench.compare_decodes(same, {0: ([4, 7, 2], -3.0), 1: ([6, 2], -0.5)}) == (1, 0.0)
    with pytest.raises(SystemExit, match="different sentences"):
        bench.compare_decodes(same, {0: ([4, 5, 2], -1.0)})


def test_later_rounds_must_run_the_first_rounds_batches(monkeypatch):
    """Rounds after the first take the first round's FLOP counts, which is
    only right when they ran the same batches."""
    bench = _benchmark_module()
    first = {"batches_sha1": "ab", "timed_train_tokens": 100, "decoded_sentences": 10, "decoded_tokens": 310,
             "train_flops_tok": 7.0, "decode_flops_tok": 3.0}
    child_output = dict(first, train_flops_tok=None, decode_flops_tok=None)

    def fake_run(cmd, **kwargs):
        assert "--no-flops" in cmd
        return types.SimpleNamespace(returncode=0, stderr="",
                                     stdout="BENCHMARK_JSON " + json.dumps(child_output) + "\n")
    monkeypatch.setattr(bench.subprocess, "run", fake_run)
    opts = types.SimpleNamespace(size="tiny", device="cpu", precision="fp32", peak_tflops=0.0, max_tokens=400,
                                 train_updates=2,
                                 warmup_updates=1, decode_sentences=10, decode_batch_size=4, beam=2,
                                 decode_length=30, max_len_a=1.2, max_len_b=10, gen_subset="valid", threads=1,
                                 clock="cpu", doc_order=True, data="data", optimizer="adam")
    result = bench.run_child(opts, "v", "transformer", [], first=first)
    assert result["train_flops_tok"] == 7.0 and result["decode_flops_tok"] == 3.0
    child_output["decoded_tokens"] = 300
    with pytest.raises(bench.ChildFailed, match="decoded_tokens"):
        bench.run_child(opts, "v", "transformer", [], first=first)
    child_output.update(decoded_tokens=310, batches_sha1="cd")  # same counts, other batches
    with pytest.raises(bench.ChildFailed, match="batches_sha1"):
        bench.run_child(opts, "v", "transformer", [], first=first)


@pytest.mark.unit
def test_document_order_only_where_a_variant_can_reuse_states():
    """The baseline's decode of the whole subset is only worth its time when a
    variant (transformer_ctxenc and its sizes) is compared with it."""
    import fairseq_ctx  # noqa: F401  (registers the architectures)

    bench = _benchmark_module()
    assert bench.reuses_sentence_states("transformer_ctxenc")
    assert bench.reuses_sentence_states("transformer_ctxenc_tiny")
    for arch in ("transformer", "transformer_dc", "transformer_ctxsan", "transformer_gret"):
        assert not bench.reuses_sentence_states(arch), arch
    assert not bench.reuses_sentence_states("no_such_arch")  # its child reports it


@pytest.mark.unit
def test_mfu_is_counted_flops_per_second_over_the_gpus_datasheet_peak():
    bench = _benchmark_module()
    assert bench.peak_flops("NVIDIA H100 80GB HBM3", "bf16") == 989.4e12
    assert bench.peak_flops("NVIDIA H100 PCIe", "fp16") == 756e12  # not the SXM part's peak
    assert bench.peak_flops("NVIDIA A100-SXM4-80GB", "fp32") == 19.5e12
    assert bench.peak_flops("Some Future GPU", "bf16") is None and bench.peak_flops(None, "fp32") is None
    assert bench.peak_flops("Some Future GPU", "bf16", 500.0) == 500e12
    results = {"transformer": {"peak_flops": 1e12, "train_flops_tok": 3e6, "train_tok_s": 1e5,
                               "decode_flops_tok": 1e6, "decode_tok_s": 2e4},
               "cpu-run": {"peak_flops": None, "train_flops_tok": 3e6, "train_tok_s": 1e5}}
    bench.add_mfu(results)
    assert results["transformer"]["train_mfu"] == pytest.approx(0.3)
    assert results["transformer"]["decode_mfu"] == pytest.approx(0.02)
    assert "train_mfu" not in results["cpu-run"]


# ---------------------------------------------------------------- where a step's time goes

def _x(cat, name, ts, dur, tid=1):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}


@pytest.mark.unit
def test_a_step_profile_splits_the_wall_time_between_operations_waits_python_and_the_gpu():
    """scripts/step_profile.py on a trace laid out by hand (microseconds):
    nested operations on two threads, launch and synchronizing calls inside
    them, kernels on two streams that overlap, and the events a Chrome
    trace holds besides (metadata, flows, annotations), which count for
    nothing."""
    step_profile = load_script("step_profile")
    trace = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "ts": 0, "args": {"name": "python3"}},
        {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 1, "pid": 1, "tid": 1, "ts": 10},
        _x("user_annotation", "reduce-grads", 0, 500),
        _x("cpu_op", "aten::A", 0, 100), _x("cpu_op", "aten::B", 10, 30), _x("cpu_op", "aten::C", 20, 10),
        _x("cpu_op", "aten::D", 50, 10), _x("cpu_op", "aten::E", 200, 50),
        _x("cpu_op", "aten::F", 300, 100, tid=2),  # the autograd engine's thread
        _x("cuda_runtime", "cudaLaunchKernel", 12, 3), _x("cuda_driver", "cuLaunchKernel", 52, 3),
        _x("cuda_runtime", "cudaGetDevice", 55, 1),  # neither a launch nor a wait
        _x("cuda_runtime", "cudaStreamSynchronize", 210, 30), _x("cuda_runtime", "cudaMemcpyAsync", 245, 3),
        _x("kernel", "k1", 20, 100, tid=7), _x("kernel", "k2", 100, 80, tid=8), _x("gpu_memset", "memset", 400, 10),
    ]
    s = step_profile.summarize(trace, wall_ms=0.5, cuda=True)
    assert s["op_ms"] == pytest.approx(0.25)  # A (B, C, D inside it), E, F: 100 + 50 + 100
    assert (s["wait_ms"], s["waits"]) == (pytest.approx(0.033), 2)
    assert s["between_ops_ms"] == pytest.approx(0.25)  # every CUDA call lies inside an operation
    assert (s["launches"], s["launch_ms"]) == (2, pytest.approx(0.006))
    assert s["device_ms"] == pytest.approx(0.17) and s["device_busy"] == pytest.approx(0.34)  # 20-180, 400-410
    assert s["kernels"] == 2 and s["device_recorded"] is True
    assert [(k["name"], k["ms"], k["count"]) for k in s["top_kernels"]] == [("k1", 0.1, 1), ("k2", 0.08, 1)]
    own = {o["name"]: o["ms"] for o in s["top_ops"]}
    assert own == pytest.approx({"aten::A": 0.06, "aten::E": 0.05, "aten::F": 0.1, "aten::B": 0.02,
                                 "aten::C": 0.01, "aten::D": 0.01})
    # on one thread the operations' own times add up to the time inside them
    one_thread = [e for e in trace if e.get("tid") == 1 and e.get("cat") == "cpu_op"]
    assert sum(ms for ms, _ in step_profile._self_ms(one_thread).values()) == \
        pytest.approx(step_profile._union_ms(step_profile._spans(one_thread)))
    # CUDA asked for and nothing recorded on the device: said, not read as an idle GPU
    host_only = [e for e in trace if e.get("cat") not in step_profile.DEVICE_CATEGORIES]
    s = step_profile.summarize(host_only, wall_ms=0.5, cuda=True)
    assert s["device_recorded"] is False and s["device_busy"] is None and s["kernels"] is None
    assert step_profile.summarize(host_only, wall_ms=0.5, cuda=False)["device_recorded"] is None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_cuda_update_profile_sees_its_launches_and_kernels(doc_corpus):
    """On CUDA the profile of one training update counts the kernel launches
    the profiler's own event list holds, and the kernels that ran lie within
    the update's wall time."""
    step_profile = load_script("step_profile")
    update_ops = load_script("update_ops")
    argv = update_ops.trainer_args(str(doc_corpus[1]), "transformer", "bf16", "adam_foreach")
    argv.remove("--cpu")
    trainer, sample = update_ops.build_trainer(argv)
    trainer.train_step([sample])
    prof, wall_ms = step_profile.run_profiled(lambda: trainer.train_step([sample]), cuda=True)
    s = step_profile.summarize(step_profile.trace_events(prof), wall_ms, cuda=True)
    assert s["device_recorded"] is True, s
    assert s["launches"] == sum(1 for e in prof.events() if step_profile.is_launch(e.name)) > 0, s
    # a kernel a launch (no CUDA graph here): a launch call missing from the names would leave kernels over
    assert s["launches"] >= 0.9 * s["kernels"] > 0, s
    assert 0 < s["device_busy"] <= 1.05 and s["op_ms"] <= s["wall_ms"] * 1.05, s
