"""Probing analyses: SentEval probing tasks (DC Table 4,
fairseq_ctx/analysis/probing.py) and bag-of-words prediction (GRET Table 5,
fairseq_ctx/analysis/bow_prediction.py).

The two tiny models (transformer_gret_tiny and a tiny plain transformer, two
updates each) are binarized and trained in-process with fairseq's own
preprocess/train entry points, which saves two interpreter start-ups; one
command runs in a subprocess to check the one-line error of the real CLI."""
import json
import random

import pytest
import torch

from fairseq_ctx.analysis import bow_prediction, probing
from fairseq_ctx.errors import FairseqCtxError
from tests.utils import (TINY_MODEL_FLAGS, build_model, make_parallel_data, run_cli, toy_dictionary,
                         train_in_process)


# ---------------------------------------------------------------------------
# fixtures: tiny trained checkpoints and SentEval-format files
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from fairseq import options
    from fairseq_cli import preprocess

    root = tmp_path_factory.mktemp("probing")
    raw = make_parallel_data(root / "raw", num_train=60, num_valid=8, num_test=8)
    data_bin = root / "bin"
    preprocess.main(options.get_preprocessing_parser().parse_args([
        "--source-lang", "src", "--target-lang", "tgt", "--trainpref", str(raw / "train"),
        "--validpref", str(raw / "valid"), "--testpref", str(raw / "test"), "--destdir", str(data_bin),
        "--joined-dictionary", "--workers", "1",
    ]))
    return {
        "root": root,
        "data_bin": data_bin,
        "gret": train_in_process(data_bin, root / "gret", "transformer_gret_tiny", ()),
        "transformer": train_in_process(data_bin, root / "transformer", "transformer", TINY_MODEL_FLAGS),
    }


def _sentlen_lines(rng, n_per_split=(200, 50, 100)):
    """A SentLen-like task on the toy vocabulary: 'short' sentences have 2-4
    words, 'long' ones 10-14, so the label follows from the length."""
    lines = []
    for split, n in zip(("tr", "va", "te"), n_per_split):
        for _ in range(n):
            label = rng.choice(["short", "long"])
            length = rng.randint(2, 4) if label == "short" else rng.randint(10, 14)
            words = " ".join(f"w{rng.randrange(24)}" for _ in range(length))
            lines.append(f"{split}\t{label}\t{words}\n")
    return lines


def _write_task_files(directory):
    """All ten files; each holds a SentLen-like task (only the names differ)."""
    directory.mkdir(parents=True, exist_ok=True)
    for i, (_, stem, _) in enumerate(probing.TASKS):
        (directory / f"{stem}.txt").write_text("".join(_sentlen_lines(random.Random(i))))
    return directory


# ---------------------------------------------------------------------------
# features: pooling, padding, batching
# ---------------------------------------------------------------------------

@pytest.mark.unit
def test_pool_encoder_out_by_hand():
    # B=2, T=3, C=2; row 0 left-padded (one pad), row 1 right-padded (one pad)
    x = torch.tensor([[[9.0, 9.0], [1.0, 2.0], [3.0, 4.0]],
                      [[5.0, 6.0], [7.0, 8.0], [9.0, 9.0]]])  # B x T x C
    tokens = torch.tensor([[1, 5, 2], [5, 2, 1]])  # pad = 1
    enc = {"encoder_out": [x.transpose(0, 1)], "gret_global": [torch.tensor([[0.5], [0.25]])]}
    out = probing.pool_encoder_out(enc, tokens, pad_idx=1, kinds=("mean", "last", "gret"))
    assert torch.equal(out["mean"], torch.tensor([[2.0, 3.0], [6.0, 7.0]]))
    assert torch.equal(out["last"], torch.tensor([[3.0, 4.0], [7.0, 8.0]]))
    assert torch.equal(out["gret"], torch.tensor([[0.5], [0.25]]))
    with pytest.raises(probing.NoGlobalStateError, match="no GRET global state"):
        probing.pool_encoder_out({"encoder_out": [x.transpose(0, 1)]}, tokens, 1, ("gret",))


@pytest.mark.unit
def test_length_batches():
    lengths = [5, 1, 9, 3, 3, 7, 2]
    batches = probing.length_batches(lengths, max_tokens=12, max_sentences=3)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        assert len(b) <= 3 and (len(b) == 1 or len(b) * max(lengths[i] for i in b) <= 12)


@pytest.mark.unit
@pytest.mark.parametrize("arch,flags", [
    ("transformer", TINY_MODEL_FLAGS), ("transformer_gret_tiny", ()), ("transformer_dc_tiny", ()),
    ("transformer_ctxsan_tiny", ()), ("transformer_ctxenc_tiny", ()),
])
@pytest.mark.parametrize("left_pad", [True, False])
def test_features_ignore_padding(arch, flags, left_pad):
    """A sentence's pooled feature is the same alone and batched with a
    longer one (left or right padding), for every architecture."""
    d = toy_dictionary()
    torch.manual_seed(0)
    model = build_model(arch, flags, dictionary=d)
    short = d.encode_line("w1 w2 w3", add_if_not_exist=False)
    long = d.encode_line("w4 w5 w6 w7 w8 w9 w10 w11", add_if_not_exist=False)
    kinds = ("mean", "last", "gret") if "gret" in arch else ("mean", "last")
    alone = probing.sentence_features(model, [short], d.pad(), d.eos(), left_pad=left_pad, kinds=kinds)
    both = probing.sentence_features(model, [long, short, long], d.pad(), d.eos(), left_pad=left_pad, kinds=kinds)
    assert not model.training
    for kind in kinds:
        assert both[kind].shape == (3, 16) and alone[kind].shape == (1, 16)
        torch.testing.assert_close(both[kind][1], alone[kind][0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(both[kind][0], both[kind][2])
    # mean = the plain mean over the unpadded sentence's states (</s> included)
    with torch.no_grad():
        enc = model.encoder(short.unsqueeze(0), src_lengths=torch.tensor([len(short)]))
    torch.testing.assert_close(alone["mean"][0], enc["encoder_out"][0][:, 0].mean(dim=0))
    torch.testing.assert_close(alone["last"][0], enc["encoder_out"][0][-1, 0])


# ---------------------------------------------------------------------------
# probing: data checks and the command
# ---------------------------------------------------------------------------

@pytest.mark.unit
def test_read_probing_file_and_errors(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("tr\tB\tx y\ntr\tA\tz\n\nva\tA\tq\nte\tB\tmore\tfields\tlast one\n")
    data = probing.read_probing_file(str(good))
    assert data["tr"]["labels"] == ["B", "A"] and data["te"]["sentences"] == ["last one"]
    classes, labels = probing.label_index(data, str(good))
    assert classes == ["A", "B"] and labels["tr"].tolist() == [1, 0] and labels["te"].tolist() == [1]

    cases = {
        "tr\tA\tx\ntr\tB y\n": r"bad\.txt:2: expected 'split<TAB>label<TAB>sentence', got 2",
        "tr\tA\tx\nxx\tB\ty\n": r"bad\.txt:2: unknown split 'xx'",
        "tr\tA\tx\ntr\tB\t \n": r"bad\.txt:2: empty sentence",
        "tr\tA\tx\ntr\tB\ty\nva\tA\tz\n": r"bad\.txt: no lines of split 'te'",
    }
    bad = tmp_path / "bad.txt"
    for text, message in cases.items():
        bad.write_text(text)
        with pytest.raises(probing.ProbingDataError, match=message):
            probing.read_probing_file(str(bad))
    bad.write_text("tr\tA\tx\ntr\tB\ty\nva\tA\tz\nte\tC\tw\n")
    with pytest.raises(probing.ProbingDataError, match=r"bad\.txt:4: label 'C' of split 'te'"):
        probing.label_index(probing.read_probing_file(str(bad)), str(bad))
    with pytest.raises(probing.ProbingDataError, match=r"missing\.txt: no such probing file"):
        probing.read_probing_file(str(tmp_path / "missing.txt"))


def test_probing_end_to_end(trained, tmp_path):
    """--download (from a file:// mirror) fills --probing-dir; both
    checkpoints side by side; every task in the JSON; SentLen beats chance."""
    mirror = _write_task_files(tmp_path / "mirror")
    probing_dir = tmp_path / "probing"
    summary = probing.main([
        str(trained["data_bin"]), "--path", f"{trained['gret']}:{trained['transformer']}",
        "--probing-dir", str(probing_dir), "--download", "--download-url", mirror.as_uri(),
        "--out", str(tmp_path / "out"), "--hidden", "50", "--dropout", "0", "--epochs", "30",
        "--lr", "0.01", "--cpu",
    ])
    assert sorted(p.name for p in probing_dir.iterdir()) == sorted(f"{s}.txt" for _, s, _ in probing.TASKS)
    written = json.loads((tmp_path / "out" / "probing.json").read_text())
    assert written == json.loads(json.dumps(summary))
    names = [t for t, _, _ in probing.TASKS]
    assert written["tasks"] == names
    assert [c["arch"] for c in written["checkpoints"]] == ["transformer_gret_tiny", "transformer"]
    for c in written["checkpoints"]:
        assert sorted(c["results"]) == sorted(names)
        for res in c["results"].values():
            assert res["n_tr"] == 200 and res["n_va"] == 50 and res["n_te"] == 100
            assert res["num_classes"] == 2 and res["unk_rate"] == 0.0 and 0.0 <= res["test_acc"] <= 1.0
        assert c["feature_dim"] == 16
        assert c["results"]["SentLen"]["test_acc"] >= 0.7, c["results"]["SentLen"]
        assert set(c["averages"]) == {"Surface", "Syntactic", "Semantic", "All"}


def test_probing_errors(trained, tmp_path):
    probing_dir = _write_task_files(tmp_path / "probing")
    (probing_dir / "bigram_shift.txt").unlink()
    args = [str(trained["data_bin"]), "--path", str(trained["gret"]), "--probing-dir", str(probing_dir),
            "--out", str(tmp_path / "out"), "--cpu"]
    with pytest.raises(FairseqCtxError, match=r"bigram_shift\.txt: no such probing file"):
        probing.main(args)
    with pytest.raises(FairseqCtxError, match=r"nothere\.pt: no such checkpoint"):
        probing.main([str(trained["data_bin"]), "--path", str(tmp_path / "nothere.pt"), "--out", str(tmp_path)])
    # the command line: one line naming the file and line
    (probing_dir / "bigram_shift.txt").write_text("tr\tO\tw1 w2\ntr\tI w2 w1\n")
    proc = run_cli("fairseq_ctx.analysis.probing", args + ["--tasks", "BShift"], check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        f"fairseq_ctx: error: {probing_dir / 'bigram_shift.txt'}:2: expected 'split<TAB>label<TAB>sentence', "
        "got 2 tab-separated field(s): 'tr\\tI w2 w1'")
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------------------
# bag-of-words prediction
# ---------------------------------------------------------------------------

@pytest.mark.unit
def test_topk_precision_by_hand():
    # vocabulary of 8, ids 0 and 1 special (never predicted, never targets)
    logits = torch.tensor([[9.0, 9, 5, 4, 3, 2, 1, 0],   # ranking 2,3,4,5,6,7
                           [0.0, 0, 0, 1, 2, 3, 4, 5],   # ranking 7,6,5,4,3,2
                           [1.0, 2, 3, 4, 5, 6, 7, 8]])
    bags = [torch.tensor([3, 6, 3]), torch.tensor([7, 1, 2]), torch.tensor([0, 1])]
    bag = bow_prediction.bag_matrix(bags, 8, num_special=2)
    assert bag.tolist() == [[0, 0, 0, 1, 0, 0, 1, 0], [0, 0, 1, 0, 0, 0, 0, 1], [0] * 8]
    p = bow_prediction.topk_precision(logits, bag, [1, 2, 5, 6, 100], num_special=2)
    # sentence 1: {3,6} found at ranks 2 and 5; sentence 2: {7,2} at ranks 1 and 6;
    # sentence 3 has an empty bag and is left out
    assert p == {1: 0.25, 2: 0.5, 5: 0.75, 6: 1.0, 100: 1.0}
    # the loss is -sum over the bag of log softmax over the non-special words
    loss = bow_prediction.bow_loss(logits[:1], bag[:1], num_special=2)
    logp = torch.log_softmax(logits[0, 2:], dim=0)
    torch.testing.assert_close(loss, -(logp[1] + logp[4]))


def test_bow_prediction_end_to_end(trained, tmp_path):
    summary = bow_prediction.main([
        str(trained["data_bin"]), "--path", str(trained["gret"]), "--out", str(tmp_path),
        "--topk", "1,5,1000", "--epochs", "2", "--cpu",
    ])
    written = json.loads((tmp_path / "bow_prediction.json").read_text())
    assert written == json.loads(json.dumps(summary))
    (c,) = written["checkpoints"]
    assert c["arch"] == "transformer_gret_tiny" and c["num_train"] == 60 and c["num_valid"] == 8
    assert c["num_test"] == 8 and c["k_at_least_vocab"] == [1000]
    assert list(c["results"]) == ["gret", "last", "average"]
    for r in c["results"].values():
        prec = r["precision"]
        assert 0.0 <= prec["1"] <= prec["5"] <= prec["1000"] == 1.0
        assert r["feature_dim"] == 16 and len(r["history"]) == 2 and 1 <= r["chosen_epoch"] <= 2


def test_bow_prediction_needs_global_state(trained, tmp_path):
    args = [str(trained["data_bin"]), "--path", str(trained["transformer"]), "--out", str(tmp_path),
            "--epochs", "1", "--cpu"]
    with pytest.raises(FairseqCtxError, match=r"transformer\) has no GRET global state"):
        bow_prediction.main(args)
    summary = bow_prediction.main(args + ["--representations", "last,average"])
    assert list(summary["checkpoints"][0]["results"]) == ["last", "average"]


@pytest.mark.unit
def test_bow_evaluate_matches_the_hand_checked_precision():
    """evaluate() is what main() reports: batch by batch (2 sentences a batch
    here, so the empty bag sits in a batch of its own kind), the mean over the
    sentences with a non-empty bag. An identity predictor passes the logits of
    test_topk_precision_by_hand through. (Tried: ``n += int(keep.sum())`` ->
    ``n += len(idx)`` fails, giving 3/4 of each value.)"""
    logits = torch.tensor([[9.0, 9, 5, 4, 3, 2, 1, 0],
                           [0.0, 0, 0, 1, 2, 3, 4, 5],
                           [1.0, 2, 3, 4, 5, 6, 7, 8],
                           [9.0, 9, 5, 4, 3, 2, 1, 0]])
    bags = [torch.tensor([3, 6, 3]), torch.tensor([7, 1, 2]), torch.tensor([0, 1]), torch.tensor([2, 7])]
    p = bow_prediction.evaluate(torch.nn.Identity(), logits, bags, [1, 2, 5, 6, 100], vocab=8, num_special=2,
                                batch_size=2)
    # sentences 1-2 as in test_topk_precision_by_hand; sentence 4: {2, 7} at ranks 1 and 6; 3 is left out
    assert p == pytest.approx({1: (0 + 0.5 + 0.5) / 3, 2: (0.5 + 0.5 + 0.5) / 3, 5: (1 + 0.5 + 0.5) / 3,
                               6: 1.0, 100: 1.0})


def test_bow_bags_are_the_target_words(trained):
    """extract_split's bags are the distinct non-special ids of each target
    sentence (the toy target is the source in upper case, so a bag built from
    the source side would hold other ids; tried: reading ``src_tokens``
    instead of ``target`` fails)."""
    from fairseq_ctx.cli import load_checkpoint

    model, task, _ = load_checkpoint(str(trained["gret"]), str(trained["data_bin"]), "cpu")
    task.load_dataset("test")
    feats = bow_prediction.extract_split(model, task, "test", ["last"], 4000)
    d = task.target_dictionary
    raw = (trained["root"] / "raw" / "test.tgt").read_text().splitlines()
    expected = sorted(tuple(sorted({d.index(w) for w in line.split()})) for line in raw)
    assert sorted(tuple(b.tolist()) for b in feats.bags) == expected
    assert all(min(b.tolist()) >= d.nspecial for b in feats.bags)


@pytest.mark.unit
def test_probing_never_fits_or_selects_on_te():
    """te holds va's features with the labels swapped: a probe fitted on tr
    and selected on va then scores exactly 1 - va accuracy on te, whatever
    the epoch and grid point. Fitting on te would lower va accuracy (< 0.9);
    selecting the epoch or the grid point by te accuracy would pick another
    run than the best on va. (Tried: ``accuracy(model, x["va"], y["va"])`` ->
    ``x["te"], y["te"]`` in train_probe fails; ``key=... r["valid_acc"]`` ->
    ``r["test_acc"]`` in probe_task fails; the loss on te batches instead of
    tr fails.)"""
    g = torch.Generator().manual_seed(0)
    x = {s: torch.randn(n, 4, generator=g) for s, n in (("tr", 400), ("va", 200))}
    y = {s: (v[:, 0] + 0.3 * v[:, 1] > 0).long() for s, v in x.items()}
    x["te"], y["te"] = x["va"].clone(), 1 - y["va"]
    res = probing.probe_task(x, y, 2, hiddens=[0, 8], dropouts=[0.0], lr=2e-3, epochs=15, patience=0)
    assert res["valid_acc"] >= 0.9
    assert res["valid_acc"] == max(r["valid_acc"] for r in res["grid"])
    for r in [res] + res["grid"]:
        assert r["test_acc"] == pytest.approx(1 - r["valid_acc"], abs=1e-12)
    # early epochs are worse on va (better on te): selection by te would have picked one of them
    assert res["best_epoch"] > 1
