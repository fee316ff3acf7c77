"""Every analysis hook of the tables (fairseq_ctx/tables/analyses.py) run
once end to end on tiny trained models, as a table run calls it (smoke
settings): the hooks' wiring -- the command line each builds, the files it
reads back, the summary it returns -- which the dry-run table tests do not
execute. The formulas behind them are tested in test_ctxsan, test_dc,
test_probing and test_ctxenc."""
import json
import random
import shutil
from types import SimpleNamespace

import pytest

from fairseq_ctx.architectures import BY_NAME, TINY_FLAGS
from fairseq_ctx.tables import analyses
from fairseq_ctx.tables.datasets import DATASETS
from fairseq_ctx.tables.running import RowState

from .utils import REPO, make_parallel_data, preprocess, train_in_process

pytestmark = pytest.mark.integration

MODELS = {  # row label -> variant of fairseq_ctx/architectures.py, trained at TINY_FLAGS
    "ctxsan": "ctxsan_both",  # both sides: the gates hook reports encoder and decoder
    "dc": "dc",
    "gret": "gret",
    "ctxenc": "ctxenc",
    "transformer": "transformer",
}


def _train(data_bin, save_dir, arch, flags):
    train_in_process(data_bin, save_dir, arch, [*flags, "--source-lang", "es", "--target-lang", "en"])
    # the hooks read a row's averaged checkpoint; one checkpoint is its own average
    shutil.copy(save_dir / "checkpoint_last.pt", save_dir / "checkpoint_avg.pt")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A corpus laid out as the Bible's (pieces es -> en, docids), one tiny
    model per architecture, and a stand-in for the table run: the attributes
    the hooks read (states, configs, table_dir, smoke, opts)."""
    root = tmp_path_factory.mktemp("hooks")
    plain = make_parallel_data(root / "plain", num_train=80, num_valid=12, num_test=12)
    pieces = root / "pieces"
    pieces.mkdir()
    for split in ("train", "valid", "test"):
        for ext, lang in (("src", "es"), ("tgt", "en")):
            lines = (plain / f"{split}.{ext}").read_text().splitlines()
            (pieces / f"{split}.{lang}").write_text("".join(" ".join("\u2581" + w for w in line.split()) + "\n"
                                                            for line in lines))
        (pieces / f"{split}.docids").write_text((plain / f"{split}.docids").read_text())
    bin_dir = preprocess(pieces, root / "bin", src="es", tgt="en")
    states = {}
    for label, name in MODELS.items():
        v = BY_NAME[name]
        _train(bin_dir, root / label, v.arch, [*TINY_FLAGS, *v.flags, *v.task])
        states[label] = RowState(SimpleNamespace(label=label, model_of=None), DATASETS["bible"], DATASETS["bible"],
                                 bin_dir, model_dir=root / label)
    probing_dir = root / "probing"
    probing_dir.mkdir()
    rng = random.Random(0)
    with open(probing_dir / "sentence_length.txt", "w") as f:  # a SentLen-like task in the corpus' pieces
        for split, n in (("tr", 120), ("va", 40), ("te", 40)):
            for _ in range(n):
                label = rng.choice(["short", "long"])
                words = [f"\u2581w{rng.randrange(24)}" for _ in range(rng.randint(2, 4) if label == "short"
                                                                        else rng.randint(10, 14))]
                f.write(f"{split}\t{label}\t{' '.join(words)}\n")
    return SimpleNamespace(
        states=states, configs=REPO / "configs", user_dir=REPO / "fairseq_ctx", table_dir=root / "table",
        smoke=True, opts=SimpleNamespace(cpu=True, probing_args=f"--probing-dir {probing_dir} --tasks SentLen "
                                                               "--hidden 50 --dropout 0 --epochs 5"),
        table=SimpleNamespace(rows=[], baseline=None, title="hooks"), model_state=lambda st: st)


def test_ctxsan_gates_hook(run):
    summary = analyses.CtxSanGates(["ctxsan"]).run(run)
    gates = json.loads((run.table_dir / "gates" / "gates.json").read_text())
    assert [len(m["sides"]["encoder"]) for m in gates["models"]] == [2]
    assert "ctxsan [encoder]" in summary and "ctxsan [decoder]" in summary
    assert (run.table_dir / "gates" / "gates.png").is_file()


def test_dc_divergence_hook(run):
    summary = analyses.DCDivergence(["dc"]).run(run)
    res = json.loads((run.table_dir / "dc_divergence" / "dc_divergence.json").read_text())
    assert res["head_reduction"] == "max" and sorted(res["checkpoints"][0]["dv"]) == ["1", "2"]
    assert summary.splitlines()[1].startswith("  dc: E_d ")


def test_context_attention_hook(run):
    summary = analyses.ContextAttention("ctxenc", "voita/task_previous.args").run(run)
    assert (run.table_dir / "context_attention.json").is_file()
    assert "words with the largest share of attention to context (ctxenc" in summary
    # smoke settings: every type ranked; both rankings printed under their settings
    assert "all positions; types with >= 1 such occurrences" in summary
    assert "sentence-initial position excluded; types with >= 1 such occurrences" in summary


def test_bow_prediction_hook(run):
    summary = analyses.BowPrediction("gret").run(run)
    res = json.loads((run.table_dir / "bow_prediction" / "bow_prediction.json").read_text())
    assert list(res["checkpoints"][0]["results"]) == ["gret", "last", "average"]
    assert summary.startswith("bag-of-words prediction (Table 5) of gret:")


def test_probing_hook(run):
    summary = analyses.Probing(["transformer", "dc"]).run(run)
    res = json.loads((run.table_dir / "probing" / "probing.json").read_text())
    assert res["tasks"] == ["SentLen"] and len(res["checkpoints"]) == 2
    assert summary.startswith("probing accuracies (Table 4) of transformer, dc:")
    skipped = analyses.Probing(["dc"]).run(SimpleNamespace(**{**vars(run), "opts": SimpleNamespace(
        cpu=True, probing_args=None)}))
    assert skipped.startswith("probing (Table 4): skipped")
