"""The converged study (fairseq_ctx.study): the pronoun set's builder on a
made-up document, and the whole study command at --smoke size on a tiny
corpus laid out like data/bible, interrupted mid-run and resumed."""
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time

import pytest

from fairseq_ctx.study.pronouns import build, flip, gender, mine
from fairseq_ctx.study.train import _VALID_RE, should_stop
from fairseq_ctx.study import runs
from fairseq_ctx.study.runs import SMOKE, STUDY
from tests import cli_process
from tests.utils import REPO, preprocess
# short names: a test's log is several of these lines in one expression
from tests.utils import fairseq_epoch_end_line as _end, fairseq_valid_line as _valid


def _hold_lock(path):
    """``path`` (a run's train.lock or eval.lock) locked as another study
    process would: the open file to close to release it."""
    import fcntl

    held = open(path, "a")
    fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return held


def _lock_is_held(path):
    """Whether another open file of ``path`` holds its lock (probed without
    waiting; the probe's own lock is released at once)."""
    import fcntl

    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False


@pytest.mark.unit
def test_gender_and_flip():
    assert gender("And he said to his servant") == "masculine"
    assert gender("She gave her maid to him") is None  # both genders
    assert gender("They went up") is None
    assert gender("Her son was born") == "feminine"
    assert flip("He took his staff and struck him. Himself!") == "She took her staff and struck her. Herself!"
    # "her" before a content word is a possessive (his), elsewhere an object (him)
    assert flip("She gave her son to the priest, and he blessed her.") == \
        "He gave his son to the priest, and she blessed him."
    assert flip("he called her and she came") == "she called him and he came"


DOC_ES = ["Sara vivió en Gerar.", "Dijo a su siervo: ve.", "Y ella rió.", "Abraham subió al monte.",
          "Tomó su cuchillo.", "Los hombres callaron."]
DOC_EN = ["Sarah lived in Gerar, and she was old.", "She said to her servant, go.", "And she laughed.",
          "Abraham went up, and he prayed.", "He took his knife.", "The men were silent."]


@pytest.mark.unit
def test_mine_which_items_qualify():
    docids = ["d1"] * 3 + ["d2"] * 3
    items = mine(DOC_ES, DOC_EN, docids, "test")
    # line 2: feminine, previous feminine, no Spanish pronoun -> in
    # line 3: Spanish "ella" decides it alone -> out
    # line 4: first line of d2 after a d1 line -> out (new document)
    # line 5: masculine after masculine -> in; line 6: no pronoun -> out
    assert [(i["where"], i["class"]) for i in items] == [("test:2", "feminine"), ("test:5", "masculine")]
    assert items[0]["contrast"] == "He said to his servant, go."
    assert items[1]["src_prev"] == "Abraham subió al monte."


@pytest.mark.unit
def test_build_is_deterministic(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    for split in ("valid", "test"):
        (raw / f"{split}.es").write_text("\n".join(DOC_ES) + "\n")
        (raw / f"{split}.en").write_text("\n".join(DOC_EN) + "\n")
        (raw / f"{split}.docids").write_text("\n".join(["d1"] * 3 + ["d2"] * 3) + "\n")
    counts = build(str(raw), str(tmp_path / "a"))
    build(str(raw), str(tmp_path / "b"))
    assert counts == {"groups": 4, "by_class": {"masculine": 2, "feminine": 2}}
    for name in ("pronouns.src", "pronouns.dst", "pronouns.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    groups = json.loads((tmp_path / "a" / "pronouns.json").read_text())
    assert [g["true_ind"] for g in groups] == [0, 1, 0, 1]
    dst = (tmp_path / "a" / "pronouns.dst").read_text().splitlines()
    src = (tmp_path / "a" / "pronouns.src").read_text().splitlines()
    assert src[0] == "Sara vivió en Gerar. _eos Dijo a su siervo: ve." == src[1]
    assert dst[0] == "Sarah lived in Gerar, and she was old. _eos She said to her servant, go."
    assert dst[1].endswith("_eos He said to his servant, go.")
    # group 1 (masculine, true_ind 1): the contrast first, the reference second
    assert dst[2].endswith("_eos She took her knife.") and dst[3].endswith("_eos He took his knife.")


@pytest.mark.unit
def test_budget_and_schedule():
    """Every run stops at its budget; the learning rate warms up, then decays
    linearly to zero at exactly the budget (fairseq's polynomial_decay with
    power 1), and the pilot's runs carry budgets of their own."""
    from fairseq_ctx.study.runs import by_name
    from fairseq_ctx.study.train import settings_of

    hist = [{"valid_loss": 5.0, "updates": u} for u in (274, 548)]
    assert should_stop(hist, STUDY.with_budget(548)) == "made its budget of 548 updates"
    assert should_stop(hist, STUDY.with_budget(549)) == ""
    assert should_stop([], SMOKE) == ""
    flags = STUDY.with_budget(2000).schedule()
    value = {flags[i]: flags[i + 1] for i in range(len(flags) - 1) if flags[i].startswith("--")}
    assert value["--lr-scheduler"] == "polynomial_decay" and value["--power"] == "1"
    assert value["--end-learning-rate"] == "0" and value["--total-num-update"] == value["--max-update"] == "2000"
    assert value["--save-interval-updates"] == "100" and value["--keep-interval-updates"] == "5"
    pilot = by_name(["pilot-2000"])[0]
    assert (pilot.arch, pilot.flags, settings_of(pilot).budget) == ("transformer", [], 2000)
    assert settings_of(by_name(["transformer"])[0]).budget == STUDY.budget
    # fairseq's schedule: lr rises to its peak over the warm-up, reaches 0 at the budget
    from fairseq.optim.lr_scheduler.polynomial_decay_schedule import PolynomialDecayLRSchedule

    from fairseq.optim import FairseqOptimizer

    class Opt(FairseqOptimizer):
        def __init__(self):
            self.lr = 0.0

        def set_lr(self, lr):
            self.lr = lr

        def get_lr(self):
            return self.lr

    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"warmup_updates": 400, "force_anneal": None, "end_learning_rate": 0.0, "power": 1.0,
                            "total_num_update": 2000, "lr": [0.002]})
    sched = PolynomialDecayLRSchedule(cfg, Opt())
    assert abs(sched.step_update(400) - 0.002) < 1e-12
    assert abs(sched.step_update(1200) - 0.001) < 1e-12
    assert sched.step_update(2000) == 0.0
    line = ("2026-11-23 12:11:05 | INFO | valid | epoch 002 | valid on 'valid' subset | loss 6.203 | "
            "nll_loss 5.1 | ppl 34.3 | wps 9000 | wpb 4000 | bsz 100 | num_updates 548 | best_loss 6.203")
    m = _VALID_RE.search(line)
    assert (m.group(1), m.group(2), m.group(4)) == ("002", "6.203", "548")
    # the results JSON states the protocol that was applied
    from fairseq_ctx.study.report import setup_record

    assert setup_record(None, STUDY)["budget"].startswith(f"{STUDY.budget} updates for every run")


@pytest.mark.unit
def test_history_counts_finished_epochs_only(tmp_path):
    """Interval checkpoints validate mid-epoch: an epoch counts once fairseq
    logged its end, with its last validation; an invocation resumed from a
    mid-epoch checkpoint finishes that epoch in the next log file."""
    from fairseq_ctx.study.runs import by_name
    from fairseq_ctx.study.train import history

    run = by_name(["pilot-1000"])[0]
    logs = tmp_path / run.name / "logs"
    logs.mkdir(parents=True)
    (logs / "epoch-001.log").write_text(_valid(1, 7.5, 100) + _valid(1, 7.4, 200) + _end(1))
    (logs / "epoch-001.cpu").write_text("60")
    # killed after a mid-epoch validation of epoch 2
    (logs / "epoch-002.log").write_text(_valid(2, 7.0, 300))
    assert [h["updates"] for h in history(str(tmp_path), run)] == [200]
    # resumed: the next invocation finishes epoch 2, then epoch 3
    (logs / "epoch-002.log").write_text(_valid(2, 6.9, 400) + _valid(2, 6.8, 548) + _end(2)
                                        + _valid(3, 6.5, 822) + _end(3))
    (logs / "epoch-002.cpu").write_text("100")
    got = history(str(tmp_path), run)
    assert [(h["epoch"], h["updates"], h["valid_loss"]) for h in got] == [(1, 200, 7.4), (2, 548, 6.8), (3, 822, 6.5)]
    assert [h["train_seconds"] for h in got] == [60.0, 60.0, 160.0]


@pytest.mark.unit
def test_gret_is_paired_with_its_control_only_and_every_other_run_with_both_baselines():
    """GRET trains on top of a finished baseline: it is tested against the
    baseline continued the same way, never against the 4,000-update
    baseline; every other run against the plain and the FFN-768 baseline of
    its own seed (paired bootstrap, the baseline as the reference)."""
    from fairseq_ctx.study.report import baselines_of, pair_all
    from fairseq_ctx.study.runs import baseline_of, wide_baseline_of

    assert (baseline_of(1), baseline_of(2), baseline_of(3), baseline_of(4)) == (
        "transformer", "transformer-seed2", "transformer-seed3", None)
    assert (wide_baseline_of(1), wide_baseline_of(3)) == ("transformer-wide", "transformer-wide-seed3")
    assert baselines_of({"name": "transformer_gret", "seed": 1, "control": "transformer-continued"}) == \
        ["transformer-continued"]
    assert baselines_of({"name": "transformer_dc-seed2", "seed": 2}) == ["transformer-seed2", "transformer-wide-seed2"]
    assert baselines_of({"name": "transformer-wide", "seed": 1}) == ["transformer"]
    assert baselines_of({"name": "transformer", "seed": 1}) == ["transformer-wide"]

    refs = [f"the king saw his son number {i} ." for i in range(40)]
    worse = [r.replace("son", "father") for r in refs]
    records = [dict(name=n, seed=s, bleu=b, updates=4000, control=c) for n, s, b, c in (
        ("transformer", 1, 50.0, None), ("transformer-wide", 1, 100.0, None), ("transformer_dc", 1, 100.0, None),
        ("transformer-seed2", 2, 100.0, None), ("transformer_dc-seed2", 2, 100.0, None),
        ("transformer_gret", 1, 100.0, "transformer-continued"), ("transformer-continued", 1, 50.0, None))]
    hyps = {"transformer": worse, "transformer-wide": refs, "transformer_dc": refs, "transformer-seed2": refs,
            "transformer_dc-seed2": refs, "transformer_gret": refs, "transformer-continued": worse}
    assert pair_all(records, hyps, refs, {}).startswith("nrefs:1|bs:1000")
    by = {r["name"]: r["vs"] for r in records}
    assert by["transformer_dc"]["transformer"]["delta_bleu"] > 10 and by["transformer_dc"]["transformer"]["p_value"] < 0.05
    assert by["transformer_dc"]["transformer-wide"] == {"run": "transformer-wide", "delta_bleu": 0.0, "p_value": 1.0}
    # seed 2 is paired with seed 2's baseline (level), not seed 1's (worse)
    assert by["transformer_dc-seed2"]["transformer"] == {"run": "transformer-seed2", "delta_bleu": 0.0, "p_value": 1.0}
    assert list(by["transformer_gret"]) == ["transformer-continued"]
    assert by["transformer_gret"]["transformer-continued"]["delta_bleu"] > 10

    # translations not here: a run keeps its earlier result only if it is the
    # run it was computed for (same BLEU and updates)
    earlier = {"transformer_dc": dict(records[2]), "transformer-seed2": dict(records[3])}
    again = [dict(records[2], vs=None), dict(records[3], bleu=99.0, vs=None)]
    pair_all(again, {}, refs, earlier)
    assert again[0]["vs"] == earlier["transformer_dc"]["vs"] and again[1]["vs"] == {}


@pytest.mark.unit
def test_family_summary_and_deltas_on_made_up_records():
    """Per family (the name without -seedN): mean and sample sd over seeds,
    computed by hand; wins and significant wins per baseline."""
    from fairseq_ctx.study.report import family, markdown_table, summary

    assert [family(n) for n in ("transformer_dc", "transformer_dc-seed3", "transformer-wide-seed2")] == \
        ["transformer_dc", "transformer_dc", "transformer-wide"]

    def rec(name, seed, bleu, chrf, loss, acc, fem, d_plain, p_plain, d_wide, p_wide):
        test = {"true": {"accuracy": acc, "groups": 90,
                         "by_class": {"feminine": {"accuracy": fem, "groups": 45},
                                      "masculine": {"accuracy": 2 * acc - fem, "groups": 45}}}}
        return {"name": name, "label": "Enc-DC", "seed": seed, "params": 2808576, "bleu": bleu, "chrf": chrf,
                "valid_loss": loss, "usage": {"cxmi": {"none": {"bits": 0.0}}, "context_test": test},
                "vs": {"transformer": {"run": "t", "delta_bleu": d_plain, "p_value": p_plain},
                       "transformer-wide": {"run": "w", "delta_bleu": d_wide, "p_value": p_wide}}}

    records = [rec("transformer_dc", 1, 20.0, 40.0, 4.0, 0.5, 0.4, 0.5, 0.01, -0.2, 0.3),
               rec("transformer_dc-seed2", 2, 22.0, 42.0, 4.2, 0.6, 0.6, 0.3, 0.20, 0.1, 0.6),
               rec("transformer_dc-seed3", 3, 24.0, 41.0, 4.1, 0.7, 0.8, -0.2, 0.04, -0.4, 0.01),
               {"name": "transformer_ctxsan", "seed": 1, "bleu": None}]
    got = summary(records)
    assert list(got) == ["transformer_dc"]
    m = got["transformer_dc"]["metrics"]
    assert got["transformer_dc"]["seeds"] == [1, 2, 3]
    assert m["bleu"] == {"values": [20.0, 22.0, 24.0], "n": 3, "mean": 22.0, "sd": 2.0}
    assert m["chrf"]["mean"] == 41.0 and m["chrf"]["sd"] == 1.0
    assert m["valid_loss"]["mean"] == pytest.approx(4.1) and m["valid_loss"]["sd"] == pytest.approx(0.1)
    assert m["context_test_true"]["mean"] == pytest.approx(0.6) and m["context_test_true"]["sd"] == pytest.approx(0.1)
    assert m["context_test_true_feminine"]["mean"] == pytest.approx(0.6)
    assert m["context_test_true_feminine"]["sd"] == pytest.approx(0.2)
    plain, wide = got["transformer_dc"]["vs"]["transformer"], got["transformer_dc"]["vs"]["transformer-wide"]
    assert plain["mean"] == pytest.approx(0.2) and plain["sd"] == pytest.approx(0.3606, abs=1e-4)
    assert (plain["wins"], plain["significant_wins"], plain["significant_losses"]) == (2, 1, 1)
    assert wide["mean"] == pytest.approx(-0.1667, abs=1e-4)
    assert (wide["wins"], wide["significant_wins"], wide["significant_losses"]) == (1, 0, 1)
    table = markdown_table(records, got)
    assert "| Enc-DC | 3 | 2.81M | 22.00 ± 2.00 | 41.00 ± 1.00 | 4.100 ± 0.100 | 0.600 ± 0.100 |" in table
    assert "| +0.20 ± 0.36, ahead in 2/3 (p < 0.05: 1 ahead, 1 behind) " \
           "| -0.17 ± 0.25, ahead in 1/3 (p < 0.05: 1 behind) |" in table
    # a metric that fewer seeds have says so; one seed shows its value alone
    records[2]["usage"]["cxmi"] = {}
    records[1]["vs"] = {}
    records = records[1:]
    table = markdown_table(records, summary(records))
    assert "| Enc-DC | 2 | 2.81M | 23.00 ± 1.41 |" in table and "| +0.0000 (1 of 2 seeds) |" in table
    assert table.endswith("| -0.20, ahead in 0/1 (p < 0.05: 1 behind) | -0.40, ahead in 0/1 (p < 0.05: 1 behind) |")


@pytest.mark.unit
def test_gret_is_compared_with_its_control_alone_in_the_table():
    from fairseq_ctx.study.report import markdown_table, summary

    base = {"name": "transformer-continued", "label": "continued", "seed": 1, "bleu": 20.0, "params": 2e6,
            "vs": {"transformer-wide": {"run": "transformer-wide", "delta_bleu": 0.1, "p_value": 0.5}}}
    gret = {"name": "transformer_gret", "label": "GRET", "seed": 1, "bleu": 21.0, "params": 3e6,
            "control": "transformer-continued",
            "vs": {"transformer-continued": {"run": "transformer-continued", "delta_bleu": 1.0, "p_value": 0.01}}}
    table = markdown_table([base, gret], summary([base, gret])).splitlines()
    assert table[0].endswith("| Δ BLEU vs baseline | Δ BLEU vs FFN-768 | Δ BLEU vs its control |")
    assert table[2].endswith("|  | +0.10, ahead in 1/1 |  |")
    assert table[3].endswith("|  |  | +1.00, ahead in 1/1 (p < 0.05: 1 ahead) |")


@pytest.mark.unit
def test_the_docs_family_table_is_the_results_files():
    """docs/study.md carries the table ``--stage table`` prints from the
    committed results, and the results' own summary is not stale."""
    from fairseq_ctx.study.report import markdown_table, read, summary

    extra, runs = read(str(REPO / "benchmarks" / "study-bible-budget.json"))
    records = list(runs.values())
    assert extra["summary"] == summary(records)
    doc = (REPO / "docs" / "study.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- family-table: python3 -m fairseq_ctx.study --stage table -->\n(.*?)\n<!-- /family-table -->",
                  doc, re.S)
    assert m, "docs/study.md: the family-table markers are missing"
    assert m.group(1) == markdown_table(records, summary(records)), \
        "docs/study.md: the family table differs from the results; paste python3 -m fairseq_ctx.study --stage table"


@pytest.mark.unit
def test_stage_table_prints_the_results_table_and_names_a_missing_file(tmp_path, capsys):
    from fairseq_ctx.study.__main__ import main
    from fairseq_ctx.study.report import markdown_table, read, summary
    from fairseq_ctx.study.verdict import markdown as verdicts

    results = str(REPO / "benchmarks" / "study-bible-budget.json")
    main(["--stage", "table", "--results", results, "--data", str(tmp_path / "no-data")])
    records = list(read(results)[1].values())
    assert capsys.readouterr().out == markdown_table(records, summary(records)) + "\n\n" + verdicts(records) + "\n"
    with pytest.raises(SystemExit, match=r"^fairseq_ctx: error: --results .*none\.json: no such file$"):
        main(["--stage", "table", "--results", str(tmp_path / "none.json")])
    (tmp_path / "empty.json").write_text('{"runs": []}')
    with pytest.raises(SystemExit, match=r"^fairseq_ctx: error: --results .*empty\.json: no runs recorded there$"):
        main(["--stage", "table", "--results", str(tmp_path / "empty.json")])


def _interval_saves(run_dir, epoch_len: int, budget: int = 4000, every: int = 200, keep: int = 5):
    """The checkpoint files fairseq leaves for a run made one epoch per
    invocation: an update that ends an epoch is saved as the epoch's
    checkpoint, any other multiple of ``every`` as an interval one (the
    last update is mid-epoch: the budget ends the run there); the last
    ``keep`` of each kind stay.  Writes the epoch logs the study reads."""
    logs = run_dir / "logs"
    logs.mkdir(parents=True)
    interval, epochs = [], []
    for u in range(1, budget + 1):
        epoch = (u - 1) // epoch_len + 1
        if u % epoch_len == 0:
            epochs.append((epoch, u))
        elif u % every == 0:
            interval.append((epoch, u))
    n_epochs = (budget - 1) // epoch_len + 1
    for e in range(1, n_epochs + 1):
        end = min(e * epoch_len, budget)
        (logs / f"epoch-{e:03d}.log").write_text(_valid(e, 5.0, end) + _end(e))
    for e, u in interval[-keep:]:
        (run_dir / f"checkpoint_{e}_{u}.pt").write_text("")
    for e, u in epochs[-keep:]:
        (run_dir / f"checkpoint{e}.pt").write_text("")
    (run_dir / "checkpoint_last.pt").write_text("")
    return dict(interval), dict((u, e) for e, u in epochs)


@pytest.mark.unit
@pytest.mark.parametrize("epoch_len", [274, 468, 200])
def test_the_average_is_the_same_window_of_updates_for_every_run(tmp_path, epoch_len):
    """Exactly the checkpoints at budget - k * budget/20, k = 4..0, whatever
    the epoch length (274: a sentence-level run's, 468: concatenation's;
    200: every window update ends an epoch), or a failure naming what is
    missing."""
    from fairseq_ctx.study.evaluate import final_checkpoints
    from fairseq_ctx.study.runs import by_name
    from fairseq_ctx.study.train import StudyError

    run = by_name(["transformer"])[0]
    _interval_saves(tmp_path / run.name, epoch_len)
    got = [os.path.basename(p) for p in final_checkpoints(str(tmp_path), run, STUDY)]
    ends = {e * epoch_len: e for e in range(1, 4000 // epoch_len + 1)}
    want = [f"checkpoint{ends[u]}.pt" if u in ends else f"checkpoint_{(u - 1) // epoch_len + 1}_{u}.pt"
            for u in (3200, 3400, 3600, 3800, 4000)]
    assert got == want
    if epoch_len == 274:
        assert got == ["checkpoint_12_3200.pt", "checkpoint_13_3400.pt", "checkpoint_14_3600.pt",
                       "checkpoint_14_3800.pt", "checkpoint_15_4000.pt"]
    (tmp_path / run.name / want[1]).unlink()
    with pytest.raises(StudyError, match="no checkpoint of update\\(s\\) 3400 in .*the average is over updates "
                                         "3200, 3400, 3600, 3800, 4000"):
        final_checkpoints(str(tmp_path), run, STUDY)


@pytest.mark.unit
def test_a_finished_run_of_another_budget_is_refused(tmp_path):
    """train.done records the budget; a changed budget never reuses it."""
    from fairseq_ctx.study.runs import by_name
    from fairseq_ctx.study.train import StudyError, done_marker, is_trained

    run = by_name(["transformer"])[0]
    os.makedirs(tmp_path / run.name)
    with open(done_marker(str(tmp_path), run), "w") as f:
        json.dump({"budget": 2000}, f)
    assert is_trained(str(tmp_path), run)  # without settings: whether it finished at all
    with pytest.raises(StudyError, match="holds transformer trained to a budget of 2000 updates, not 4000"):
        is_trained(str(tmp_path), run, STUDY)
    assert is_trained(str(tmp_path), by_name(["transformer@2000"])[0], STUDY) is False  # its own directory
    with open(done_marker(str(tmp_path), run), "w") as f:
        json.dump({"budget": 4000}, f)
    assert is_trained(str(tmp_path), run, STUDY)


@pytest.mark.unit
def test_on_a_gpu_the_recipe_uses_the_foreach_adam():
    """The same recipe, with fairseq's Adam as foreach kernels on CUDA
    (equal numbers, tests/test_foreach_optim.py) and fairseq's own on CPU."""
    from dataclasses import replace

    from fairseq_ctx.study.runs import by_name
    from fairseq_ctx.study.train import train_command

    run = by_name(["transformer"])[0]
    cpu = train_command("bin", "user", "out", run, 1, STUDY)
    gpu = train_command("bin", "user", "out", run, 0, replace(STUDY, device="cuda"))
    assert cpu[cpu.index("--optimizer") + 1] == "adam" and "--cpu" in cpu
    assert gpu[gpu.index("--optimizer") + 1] == "adam_foreach" and "--cpu" not in gpu
    assert gpu[gpu.index("--max-epoch") + 1] == "0"  # one process for the whole run
    want = [a for a in cpu if a != "--cpu"]
    want[want.index("--optimizer") + 1], want[want.index("--max-epoch") + 1] = "adam_foreach", "0"
    assert want == gpu


@pytest.mark.unit
def test_concatenation_at_the_baselines_sentence_pairs(tmp_path):
    """concat-equal-data's budget is the study's scaled by concatenation's
    epoch length over the baseline's (a multiple of budget/20 so that the
    averaged window is saved); it waits until both have an epoch."""
    from fairseq_ctx.study.runs import by_name
    from fairseq_ctx.study.train import settings_of, train

    run = by_name(["concat-equal-data"])[0]
    assert run.flags == by_name(["concat"])[0].flags and run.uses_context
    lines = []
    assert train(run, "no-data", "no-user-dir", str(tmp_path), lines.append, STUDY) is False
    assert lines == ["[study] concat-equal-data: its budget is the study's scaled by the epoch lengths of concat and "
                     "transformer; concat has not finished an epoch yet: waits"]
    for name, length in (("concat", 468), ("transformer", 263)):
        logs = tmp_path / name / "logs"
        logs.mkdir(parents=True)
        (logs / "epoch-001.log").write_text(_valid(1, 7.0, length) + _end(1))
    got = settings_of(run, STUDY, str(tmp_path))
    assert got.budget == 7120 and got.save_every == 356 and 4000 * 468 / 263 == pytest.approx(7117.9, abs=0.1)
    assert settings_of(by_name(["concat"])[0], STUDY, str(tmp_path)).budget == 4000


@pytest.mark.unit
def test_record_status(tmp_path):
    """A run is 'not started' without a finished epoch, 'training' with one."""
    from types import SimpleNamespace

    from fairseq_ctx.study.__main__ import base_record
    from fairseq_ctx.study.runs import RUNS

    opts = SimpleNamespace(out=str(tmp_path), settings=STUDY, landed={})
    assert base_record(opts, RUNS[0])["status"] == "not started"
    logs = tmp_path / RUNS[0].name / "logs"
    logs.mkdir(parents=True)
    (logs / "epoch-001.log").write_text(
        "2026-11-23 12:11:05 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 7.4 | nll_loss 6.9 | "
        "ppl 120 | wps 9000 | wpb 4000 | bsz 100 | num_updates 274\n" + _end(1))
    rec = base_record(opts, RUNS[0])
    assert (rec["status"], rec["epochs"], rec["updates"], rec["best_valid_loss"]) == ("training", 1, 274, 7.4)


# ---------------------------------------------------------------------------
# the study command end to end at --smoke size
# ---------------------------------------------------------------------------

_EN_WORDS = "the king said that he was going to the house of his father and she saw her son".split()
_ES_WORDS = "el rey dijo que iba a la casa de su padre y vio hijo".split()


def _tiny_bible(root):
    """A corpus laid out like data/bible: raw/, spm/ (a sentencepiece model
    and the encoded splits) and bin/ with docids."""
    import sentencepiece as spm

    rng = random.Random(3)
    raw, spm_dir = root / "raw", root / "spm"
    raw.mkdir(parents=True)
    spm_dir.mkdir()
    sizes = {"train": 60, "valid": 8, "test": 10}
    for split, n in sizes.items():
        es, en, docids = [], [], []
        for i in range(n):
            k = rng.randint(3, 7)
            en.append(" ".join(rng.choice(_EN_WORDS) for _ in range(k)).capitalize() + ".")
            es.append(" ".join(rng.choice(_ES_WORDS) for _ in range(k)).capitalize() + ".")
            docids.append(f"{split}{i // 4}")
        if split == "test":  # two pronoun items: masculine after masculine, feminine after feminine
            en[1], en[2], es[2] = "And he said that.", "He saw his house.", "Vio la casa."
            en[5], en[6], es[6] = "And she saw that.", "She saw her son.", "Vio a su hijo."
        for ext, lines in (("es", es), ("en", en), ("docids", docids)):
            (raw / f"{split}.{ext}").write_text("\n".join(lines) + "\n")
    spm.SentencePieceTrainer.train(input=[str(raw / "train.es"), str(raw / "train.en")],
                                   model_prefix=str(spm_dir / "spm"), vocab_size=60, character_coverage=1.0,
                                   model_type="unigram", minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=str(spm_dir / "spm.model"))
    for split in sizes:
        for ext in ("es", "en"):
            lines = (raw / f"{split}.{ext}").read_text().splitlines()
            (spm_dir / f"{split}.{ext}").write_text(
                "\n".join(" ".join(sp.encode(line, out_type=str)) for line in lines) + "\n")
        (spm_dir / f"{split}.docids").write_text((raw / f"{split}.docids").read_text())
    preprocess(spm_dir, root / "bin", src="es", tgt="en")


def _cpu_model():
    """This machine's processor as /proc/cpuinfo names it, read here apart from the code under test."""
    import platform

    if os.path.exists("/proc/cpuinfo"):
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _study(data, out, results, *args, wait=True):
    # forked, with every Python child it starts (tests/cli_zygote.py)
    cmd = [cli_process.python(), "-m", "fairseq_ctx.study", "--smoke", "--data", str(data), "--out", str(out),
           "--results", str(results), *args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if not wait:
        return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)


def test_study_smoke_interrupt_resume(tmp_path):
    data, out, results = tmp_path / "bible", tmp_path / "runs", tmp_path / "bench" / "study.json"
    _tiny_bible(data)
    runs = ["--runs", "transformer", "concat"]

    # interrupted: killed once the first epoch of the first run has finished
    proc = _study(data, out, results, *runs, "--stage", "train", wait=False)
    first = out / "transformer" / "logs" / "epoch-001.seconds"
    deadline = time.time() + 300
    while not first.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert first.exists(), proc.stdout.read() if proc.poll() is not None else "epoch 1 never finished"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    epoch1 = (out / "transformer" / "logs" / "epoch-001.log").read_text()

    done = _study(data, out, results, *runs)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # resumed at epoch 2: epoch 1 was not trained again
    assert "[study] transformer: epoch 1 " not in done.stdout
    assert (out / "transformer" / "logs" / "epoch-001.log").read_text() == epoch1
    record = json.loads(results.read_text())
    by_name = {r["name"]: r for r in record["runs"]}
    assert list(by_name) == ["transformer", "concat"]
    # every run trained without the context test's chapters, and says so
    study = json.loads((data / "study" / "done.json").read_text())
    assert record["setup"]["train_data"] == study and study["per_class"] == 1
    assert study["train_pairs"] + study["train_pairs_dropped"] == 60
    assert set((data / "study" / "bin" / "train.es-en.docids").read_text().split("\n")) & \
        set(study["heldout_train_chapters"]) == set()
    for rec in by_name.values():
        assert rec["status"] == "trained" and rec["epochs"] == 2 and rec["updates"] > 0
        assert rec["train_data"] == str(data / "study" / "bin") and rec["precision"] == "fp32"
        assert rec["device"] == "cpu" and rec["budget"] == SMOKE.budget and len(rec["commit"]) >= 40
        # which CPU each epoch trained on, with how many threads (--threads, 1 by default)
        here = {"cpu_model": _cpu_model(), "threads": 1}
        assert [h["machine"] for h in rec["history"]] == [here, here]
        assert rec["machines"] == [dict(here, epochs=[1, 2])]
        assert [h["epoch"] for h in rec["history"]] == [1, 2]
        # recorded; the children here are forked and stood in for by a launcher
        # (tests/cli_zygote.py), whose own CPU is what the driver sees: the
        # measurement itself is test_a_childs_cpu_time_is_measured's
        assert 0 <= rec["history"][0]["cpu"] <= rec["history"][1]["train_seconds"]
        assert 0 <= rec["bleu"] <= 100 and rec["signature"].startswith("nrefs:1|")
        assert 0 <= rec["chrf"] <= 100 and rec["chrf_signature"].startswith("nrefs:1|")
        valid = json.loads((out / rec["name"] / "eval" / "valid.json").read_text())
        assert rec["valid_loss"] == valid["valid_loss"] > 0
        assert rec["decode_cpu_seconds"] >= 0 and rec["decode_seconds"] > 0
        # the usage report, run by the driver on the averaged model: the
        # balanced context test per condition and class, CXMI
        usage = json.loads((out / rec["name"] / "eval" / "usage.json").read_text())
        assert usage["path"].endswith(os.path.join(rec["name"], "eval", "average.pt"))
        assert (results.parent / rec["usage_report"]).read_text() == \
            (out / rec["name"] / "eval" / "usage.json").read_text()
        test = rec["usage"]["context_test"]
        assert sorted(test) == ["none", "random", "shuffled", "true"]   # fairseq_ctx.evaluation.conditions
        for cond, r in test.items():
            assert r["accuracy"] == round(usage["contrastive"][cond]["accuracy"], 4)
            assert {c: b["groups"] for c, b in r["by_class"].items()} == {"feminine": 1, "masculine": 1}
        assert rec["usage"]["cxmi"]["none"]["bits"] == round(usage["cxmi"]["none"]["cxmi_bits"], 5)
        hyps = (out / rec["name"] / "eval" / "test.hyp").read_text().splitlines()
        assert len(hyps) == 10, "a test sentence was dropped"
    # a sentence-level model's translation cannot depend on its context: no
    # generated accuracy, CXMI exactly 0, every condition the same
    assert "generated" not in by_name["transformer"]["usage"]
    assert by_name["transformer"]["usage"]["cxmi"]["none"]["bits"] == 0
    assert len({json.dumps(r) for r in by_name["transformer"]["usage"]["context_test"].values()}) == 1
    assert by_name["concat"]["usage"]["generated"]["qualified"] >= 0
    # a context model's attribution report of the context test's items: the
    # share of attribution on the previous verse's gender cues over all of
    # them and over those its context decides, and the page
    attribution = json.loads((out / "concat" / "eval" / "attribution.json").read_text())
    cues = by_name["concat"]["usage"]["attribution"]
    assert cues["all"]["items"] == len(attribution["items"]) == 2 == \
        json.loads((out / "concat" / "eval" / "usage.json").read_text())["attribution"]["items"]
    assert cues["context_decided"]["items"] == sum(it["scored_right"]["true"] and not it["scored_right"]["none"]
                                                   for it in attribution["items"])
    assert set(cues["all"]["by_class"]) == {"feminine", "masculine"}
    assert (results.parent / by_name["concat"]["attribution_page"]).read_text() == \
        (out / "concat" / "eval" / "attribution.html").read_text()
    assert "attribution" not in by_name["transformer"]["usage"] and "attribution_page" not in by_name["transformer"]
    assert "shuffled_bleu" in by_name["concat"] and "shuffled_bleu" not in by_name["transformer"]
    assert 0 <= by_name["concat"]["shuffled_p_value"] <= 1
    assert by_name["concat"]["shuffled_delta_bleu"] == pytest.approx(
        by_name["concat"]["shuffled_bleu"] - by_name["concat"]["bleu"], abs=0.02)
    # concat is paired with the plain baseline of its seed (the FFN-768 one was not run)
    assert list(by_name["concat"]["vs"]) == ["transformer"] and by_name["transformer"]["vs"] == {}
    assert 0 <= by_name["concat"]["vs"]["transformer"]["p_value"] <= 1
    assert record["summary"]["concat"]["vs"]["transformer"]["n"] == 1
    assert record["summary"]["transformer"]["metrics"]["bleu"]["values"] == [by_name["transformer"]["bleu"]]
    figures = results.parent / "study"
    assert (figures / "valid-loss.png").stat().st_size > 1000
    assert (figures / "bleu-by-length.png").stat().st_size > 1000
    assert record["bleu_by_length"]["unit"] == "sentencepiece source tokens"

    # a finished study is not trained or decoded again
    outputs = sorted((out / "transformer").rglob("*"))
    stamps = [p.stat().st_mtime_ns for p in outputs]
    again = _study(data, out, results, *runs)
    assert again.returncode == 0, again.stderr[-3000:]
    assert ": epoch " not in again.stdout
    assert sorted((out / "transformer").rglob("*")) == outputs
    assert [p.stat().st_mtime_ns for p in outputs] == stamps
    assert json.loads(results.read_text())["runs"][0]["bleu"] == by_name["transformer"]["bleu"]

    # evaluating one run keeps every run evaluated before in the results
    one = _study(data, out, results, "--runs", "concat", "--stage", "evaluate")
    assert one.returncode == 0, one.stderr[-3000:]
    again = {r["name"]: r for r in json.loads(results.read_text())["runs"]}
    assert list(again) == ["transformer", "concat"] and again["concat"]["vs"] == by_name["concat"]["vs"]

    # on a machine without the baseline's outputs (a fresh clone has the
    # committed results only), its record is carried over from the results
    # file and paired again through its translations kept beside the figures
    before = json.loads(results.read_text())
    assert (figures / "hyps" / "transformer.test.hyp").read_text().splitlines() == \
        (out / "transformer" / "eval" / "test.hyp").read_text().splitlines()
    shutil.rmtree(out / "transformer")
    fresh = _study(data, out, results, "--runs", "concat", "--stage", "evaluate")
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert ": evaluating" in fresh.stdout and "transformer: evaluating" not in fresh.stdout
    assert json.loads(results.read_text()) == before
    # without those translations either, the paired tests are kept as they were
    (figures / "hyps" / "transformer.test.hyp").unlink()
    fresh = _study(data, out, results, "--runs", "concat", "--stage", "evaluate")
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert ": evaluating" in fresh.stdout
    after = json.loads(results.read_text())
    assert after["runs"] == before["runs"]
    assert after["bleu_by_length"] == before["bleu_by_length"]
    assert after["bootstrap_signature"] == before["bootstrap_signature"]

    # the GPU runbook's study call, rehearsed on CPU: a one-second deadline
    # for the next run; what finished stays evaluated, a cut run resumes
    # later (no train.done, its logs as far as it got), and the results,
    # translations, usage reports and every run's train.done and logs are
    # copied to OUT
    # (through scripts/gpu-call.sh's study step, whose OUT holds them in one archive)
    result_dir = tmp_path / "gpu-out"
    env = cli_process.env_with_python(dict(os.environ, OMP_NUM_THREADS="1", JOBS="1", EVAL_RESERVE_S="0",
                                           DATA_BIN=str(data / "bin"), STUDY_OUT=str(out),
                                           STUDY_RESULTS=str(results), GPU_CALL_WORK=str(tmp_path / "gpu-work")))
    env.pop("OUT", None)
    # nor is it trained again there: it landed (its record is in the results)
    restored = _study(data, out, results, "--runs", "transformer", "concat", "--stage", "all")
    assert restored.returncode == 0, restored.stderr[-3000:]
    assert "[study] transformer: landed (its record is in the results); not trained again" in restored.stdout
    assert "transformer: epoch" not in restored.stdout and not (out / "transformer").exists()
    assert json.loads(results.read_text())["runs"] == before["runs"]
    cut = subprocess.run(["bash", "scripts/gpu-call.sh", "study", str(result_dir), "1", "--device", "cpu", "--smoke",
                          "--data", str(data), "--runs", "transformer", "concat", "transformer-wide"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert cut.returncode == 0, cut.stdout[-3000:] + cut.stderr[-3000:]
    final = {r["name"]: r for r in json.loads(results.read_text())["runs"]}
    assert final["transformer"]["bleu"] == by_name["transformer"]["bleu"]
    # where the one-second deadline falls depends on the machine: before the
    # cut run's first epoch (a slow one), in its epochs, or after them on a
    # fast one (the toy model's epochs, forked from the launcher, take under
    # a second each), so the run is trained within it; whatever it reached,
    # its record is what its logs show. (A kill mid-epoch is pinned down by
    # test_a_deadline_stops_training_and_starts_nothing_after_it.)
    from fairseq_ctx.study.runs import by_name as run_named
    from fairseq_ctx.study.train import history

    cut_epochs = history(str(out), run_named(["transformer-wide"])[0])
    wide_logs = out / "transformer-wide" / "logs"
    started = wide_logs.is_dir() and any(wide_logs.iterdir())
    trained_in_time = (out / "transformer-wide" / "train.done").exists()
    assert final["transformer-wide"]["epochs"] == len(cut_epochs)
    if not trained_in_time:
        # an epoch cut before it ended is "stopped"; a cut between epochs, or
        # as the last one saves its checkpoint, may say either
        in_epoch = started and len(list(wide_logs.glob("epoch-*.log"))) > len(cut_epochs)
        said = re.search(r"\[study\] deadline: transformer-wide: (stopped at the deadline|not continued, the "
                         r"deadline passed)", cut.stdout)
        assert said, cut.stdout[-3000:]
        if in_epoch:
            assert said.group(1) == "stopped at the deadline"
        elif not started:
            assert said.group(1) == "not continued, the deadline passed"
        assert final["transformer-wide"]["status"] == ("training" if cut_epochs else "not started")
        assert "bleu" not in final["transformer-wide"]
    else:
        assert "[study] deadline: transformer-wide" not in cut.stdout
    assert sorted(os.listdir(result_dir)) == ["call.log", "results.tgz"]
    with tarfile.open(result_dir / "results.tgz") as tar:
        tar.extractall(tmp_path / "back", filter="data")
    back = tmp_path / "back"
    copied = json.loads((back / "study" / results.name).read_text())
    assert copied["runs"] == json.loads(results.read_text())["runs"]
    assert (back / "study" / "study" / "usage" / "concat.json").exists()
    assert json.loads((back / "study" / "runs" / "concat" / "train.done").read_text())["budget"] == SMOKE.budget
    assert (back / "study" / "runs" / "transformer-wide" / "logs" / "epoch-001.log").exists() == started
    assert any(name.endswith("-study.log") for name in os.listdir(back / "logs"))
    # what came back is compared with the landed records (fairseq_ctx/study/agreement.py): concat
    # trained here is its landed record, epoch for epoch; one seed leaves no spread to judge by
    agree = subprocess.run([sys.executable, "-m", "fairseq_ctx.study.agreement", "--out",
                            str(back / "study" / "runs"), "--landed", str(results),
                            "--here", str(back / "study" / results.name), "--json", str(tmp_path / "a.json")],
                           cwd=REPO, capture_output=True, text=True, timeout=300)
    assert agree.returncode == 0, agree.stderr[-3000:]
    (same,) = json.loads((tmp_path / "a.json").read_text())["runs"]
    assert same["name"] == "concat" and [e["difference"] for e in same["epochs"]] == [0.0, 0.0]
    assert same["bleu_difference"] == 0 and same["device_here"] == "cpu" and same["agrees"] is None
    assert agree.stdout.splitlines() == [same["reading"]]
    # a call cut before its results file was written: the evaluation outputs
    # in the archive (no checkpoint there) rebuild the record on CPU, decoding
    # nothing; its pairing needs the baseline, which is not among them
    assert not list((back / "study" / "runs" / "concat").rglob("*.pt"))
    rebuilt = tmp_path / "rebuilt" / results.name
    again = _study(data, back / "study" / "runs", rebuilt, "--runs", "concat", "--stage", "evaluate")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    (record,) = json.loads(rebuilt.read_text())["runs"]
    assert record["vs"] == {} and {**record, "vs": final["concat"]["vs"]} == final["concat"]
    assert not list((back / "study" / "runs" / "concat").rglob("*.pt"))
    # and --stage status says so
    status = _study(data, out, results, "--runs", "transformer", "concat", "transformer-wide", "--stage", "status")
    assert status.returncode == 0, status.stderr[-3000:]
    states = {line.split()[0]: line.split(None, 4)[4] for line in status.stdout.splitlines()[1:4]}
    assert {k: v for k, v in states.items() if k != "transformer-wide"} == {
        "transformer": "landed (its record is in the results; not on this machine)", "concat": "evaluated"}
    if not trained_in_time:
        assert states["transformer-wide"] == ("stopped (resumes with the same command)" if started else
                                              "not started")
        assert "2 of 3 runs trained (2 evaluated; 1 landed earlier, not on this machine), 0 training now" \
            in status.stdout
    else:
        assert states["transformer-wide"] in ("trained", "evaluated")
        assert "3 of 3 runs trained" in status.stdout
        assert (back / "study" / "runs" / "transformer-wide" / "train.done").exists()


def test_the_studys_decoding_needs_no_libbleu(trained_checkpoint, doc_corpus, monkeypatch, capsys):
    """fairseq-generate's default scorer imports fairseq's compiled
    libbleu, which a fairseq built without it (the GPU kit's) lacks; the
    study scores the translations itself, so its decoding asks fairseq for
    sacreBLEU's scorer and translates every test sentence without libbleu."""
    import fairseq
    from fairseq_cli import generate

    from fairseq_ctx.study.evaluate import GENERATE

    monkeypatch.setitem(sys.modules, "fairseq.libbleu", None)  # `from fairseq import libbleu` raises
    monkeypatch.delattr(fairseq, "libbleu", raising=False)
    monkeypatch.setattr(sys, "argv", ["fairseq-generate", str(doc_corpus[1]), "--path",
                                      str(trained_checkpoint("transformer")), "--user-dir",
                                      str(REPO / "fairseq_ctx"), *GENERATE, "--cpu"])
    generate.cli_main()
    ids = sorted(int(line.split("\t")[0][2:]) for line in capsys.readouterr().out.splitlines()
                 if line.startswith("D-"))
    assert ids == list(range(14))  # doc_corpus's test set


def test_the_gpu_study_call_as_the_runbook_sends_it(tmp_path):
    """scripts/gpu-call.sh's study step as a GPU machine runs it, on CPU at
    smoke size: several jobs (two start for two runs), the runs trained
    and evaluated in the work directory and archived in place (evaluation
    outputs, no checkpoint, no lock), the results file beside them; from
    the archive alone, --stage evaluate rebuilds the same records, pairing
    included, decoding nothing (a call cut before its results file)."""
    data = tmp_path / "bible"
    _tiny_bible(data)
    out_dir, results = tmp_path / "gpu-out", "study-gpu.json"
    env = cli_process.env_with_python(dict(os.environ, OMP_NUM_THREADS="1", JOBS="6", DATA_BIN=str(data / "bin"),
                                           GPU_CALL_WORK=str(tmp_path / "work")))
    for name in ("OUT", "STUDY_OUT", "STUDY_RESULTS"):
        env.pop(name, None)
    call = subprocess.run(["bash", "scripts/gpu-call.sh", "study", str(out_dir), "600", "--device", "cpu", "--smoke",
                           "--data", str(data), "--runs", "transformer", "concat",
                           "--results", str(tmp_path / "written" / results)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert call.returncode == 0, call.stdout[-3000:] + call.stderr[-3000:]
    # two jobs, one a run: each run's first epoch started once, by one job; the other job skips it at
    # most twice (its first pass and its retry); six jobs would have skipped both runs four times more
    for run in ("transformer", "concat"):
        assert call.stdout.count(f"[study] {run}: epoch 1 (log") == 1
    assert call.stdout.count("another study process is training it; skipped") <= 4
    back = tmp_path / "back"
    with tarfile.open(out_dir / "results.tgz") as tar:
        tar.extractall(back, filter="data")
    written = json.loads((back / "study" / results).read_text())
    assert [r["name"] for r in written["runs"]] == ["transformer", "concat"]
    assert list(written["runs"][1]["vs"]) == ["transformer"]
    runs_dir = back / "study" / "runs"
    for run in ("transformer", "concat"):
        assert (runs_dir / run / "train.done").exists() and (runs_dir / run / "eval" / "test.hyp").exists()
    assert not list(runs_dir.rglob("*.pt")) and not list(runs_dir.rglob("*.lock"))
    rebuilt = tmp_path / "rebuilt" / results
    again = _study(data, runs_dir, rebuilt, "--runs", "transformer", "concat", "--stage", "evaluate")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert json.loads(rebuilt.read_text())["runs"] == written["runs"]
    assert not list(runs_dir.rglob("*.pt"))


def test_runs_at_a_budget_of_their_own_are_paired_at_that_budget_in_a_file_of_their_own(tmp_path):
    """RUN@N (the 8,000-update sensitivity check of the ranking): trained
    in directories of their own, paired with the baselines at N, tabled
    without the paper verdicts, never mixed with the study's runs."""
    data, out = tmp_path / "bible", tmp_path / "runs"
    study, rungs = tmp_path / "bench" / "study.json", tmp_path / "bench" / "study-2.json"
    _tiny_bible(data)
    # at the smoke size an epoch is one update: the smoke's own budget is the
    # one whose averaged checkpoints fairseq keeps (2 epochs), so the rung
    # is at 2 updates here
    done = _study(data, out, rungs, "--runs", "transformer@2", "concat@2")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    record = json.loads(rungs.read_text())
    by = {r["name"]: r for r in record["runs"]}
    assert list(by) == ["transformer-2", "concat-2"] and sorted(p.name for p in out.iterdir()) == list(sorted(by))
    for name, rec in by.items():
        assert (rec["rung_of"], rec["budget"], rec["updates"]) == (name[:-2], 2, 2)
        assert rec["status"] == "trained" and rec["bleu"] is not None
    # paired with the baseline at the same budget, kept where the study's table looks
    assert by["concat-2"]["vs"]["transformer"]["run"] == "transformer-2" and by["transformer-2"]["vs"] == {}
    assert record["summary"]["concat-2"]["vs"]["transformer"]["n"] == 1
    assert record["setup"]["budget"].startswith("2 updates for every run") and "updates 1, ..., 2" in \
        record["setup"]["budget"]
    assert record["bleu_by_length"]["unit"] == "sentencepiece source tokens"
    assert (rungs.parent / "study-2" / "hyps" / "concat-2.test.hyp").exists()
    # evaluating one keeps the other (rebuilt from its outputs)
    one = _study(data, out, rungs, "--runs", "concat@2", "--stage", "evaluate")
    assert one.returncode == 0, one.stderr[-3000:]
    assert [r["name"] for r in json.loads(rungs.read_text())["runs"]] == ["transformer-2", "concat-2"]
    table = _study(data, out, rungs, "--stage", "table")
    assert table.returncode == 0, table.stderr[-3000:]
    assert "| Concatenation, at equal updates, 2 updates | 1 |" in table.stdout and "| paper |" not in table.stdout

    def refused(results, *runs, stage="evaluate"):
        res = _study(data, out, results, "--runs", *runs, "--stage", stage)
        assert res.returncode != 0 and res.stderr.count("\n") == 1, res.stderr[-3000:]
        return res.stderr

    assert "--runs: transformer are the study's runs and concat-2 runs at a budget of their own" in \
        refused(rungs, "transformer", "concat@2")
    assert f"--results {rungs}: it holds runs at a budget of their own (transformer-2, concat-2)" in \
        refused(rungs, "transformer")
    assert f"--results {rungs}: one budget per results file, not 2, 6" in refused(rungs, "transformer@6")
    assert "--runs: one budget per results file, not 2, 10 (transformer-2, concat-10)" in \
        refused(rungs, "transformer@2", "concat@10", stage="train")
    assert "--runs: transformer are the study's runs" in refused(rungs, "transformer", "concat@2", stage="train")
    study.write_text(json.dumps({"runs": [{"name": "transformer", "seed": 1, "status": "not started"}]}))
    assert f"--results {study}: it holds the study's runs; runs at a budget of their own go to a file of " \
           "their own (by default benchmarks/study-bible-budget-2.json)" in refused(study, "concat@2")


@pytest.mark.unit
def test_runs_at_a_budget_of_their_own_default_to_a_results_file_of_their_own(monkeypatch):
    from fairseq_ctx.study import __main__ as driver

    seen = {}
    monkeypatch.setattr("fairseq_ctx.study.report.landed", lambda path: seen.setdefault("results", path) and {})
    with pytest.raises(SystemExit):   # stops at the missing --out, having chosen its results
        driver.main(["--runs", "transformer@8000", "transformer_ctxenc@8000", "--stage", "status",
                     "--out", "/nonexistent"])
    assert seen["results"] == str(REPO / "benchmarks" / "study-bible-budget-8000.json")
    seen.clear()
    with pytest.raises(SystemExit):
        driver.main(["--runs", "transformer", "--stage", "status", "--out", "/nonexistent"])
    assert seen["results"] == str(REPO / "benchmarks" / "study-bible-budget.json")
    # a --runs that mixes the kinds reads the study's file (training and evaluation refuse it)
    seen.clear()
    with pytest.raises(SystemExit):
        driver.main(["--runs", "transformer", "transformer@8000", "--stage", "status", "--out", "/nonexistent"])
    assert seen["results"] == str(REPO / "benchmarks" / "study-bible-budget.json")


def test_the_gpu_study_script_sends_runs_at_a_budget_of_their_own_to_their_file():
    """scripts/gpu-study.sh without STUDY_RESULTS leaves the results file to
    the driver: for RUN@N runs, their file of their own (at a budget that
    has none, so the table stage names it); the path it collects for OUT is
    the driver's, by the driver's rule."""
    from fairseq_ctx.study.__main__ import results_path

    rung_file = REPO / "benchmarks" / "study-bible-budget-1234.json"
    assert not rung_file.exists()
    env = {k: v for k, v in os.environ.items() if k != "STUDY_RESULTS"}
    res = subprocess.run(["bash", "scripts/gpu-study.sh", "5", "--device", "cpu", "--runs", "transformer@1234",
                          "transformer_ctxenc@1234", "--stage", "table"], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode != 0
    assert f"--results {rung_file}: no such file" in res.stderr, res.stderr[-2000:]
    assert results_path(["--runs", "transformer@1234", "transformer_ctxenc@1234"]) == str(rung_file)
    assert results_path(["--runs", "transformer", "concat"]) == str(REPO / "benchmarks" / "study-bible-budget.json")
    assert results_path(["--runs", "transformer@1234", "--results", "x.json"]) == "x.json"
    assert results_path(["--runs", "no-such-run"]) == ""   # the driver says why


def test_the_gpu_study_script_copies_the_results_file_the_driver_wrote(tmp_path):
    """With OUT set, scripts/gpu-study.sh copies the results file the driver
    used, named by --results among its arguments (no STUDY_RESULTS), with
    its figures directory, whatever the file's extension."""
    results = tmp_path / "bench" / "check.results"
    results.parent.mkdir()
    shutil.copy(REPO / "benchmarks" / "study-bible-budget-8000.json", results)
    (tmp_path / "bench" / "check").mkdir()
    (tmp_path / "bench" / "check" / "figure.txt").write_text("kept\n")
    env = dict({k: v for k, v in os.environ.items() if k != "STUDY_RESULTS"}, OUT=str(tmp_path / "out"),
               STUDY_OUT=str(tmp_path / "runs"))
    res = subprocess.run(["bash", "scripts/gpu-study.sh", "5", "--device", "cpu", "--stage", "table",
                          "--results", str(results)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "| Transformer (baseline), 8000 updates | " in res.stdout and res.stderr == ""
    assert (tmp_path / "out" / "study" / "check.results").read_bytes() == results.read_bytes()
    assert (tmp_path / "out" / "study" / "check" / "figure.txt").read_text() == "kept\n"
    # runs trained in OUT/study/runs (scripts/gpu-call.sh's work directory) are not copied onto themselves
    logs = tmp_path / "out" / "study" / "runs" / "transformer" / "logs"
    logs.mkdir(parents=True)
    (logs / "epoch-001.log").write_text("kept\n")
    res = subprocess.run(["bash", "scripts/gpu-study.sh", "5", "--device", "cpu", "--stage", "table",
                          "--results", str(results)], cwd=REPO, env=dict(env, STUDY_OUT=str(logs.parent.parent)),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and res.stderr == "", res.stderr[-2000:]
    assert os.listdir(logs) == ["epoch-001.log"] and (logs / "epoch-001.log").read_text() == "kept\n"


@pytest.mark.unit
def test_which_runs_a_results_file_holds_and_how_runs_at_a_budget_of_their_own_are_paired():
    from fairseq_ctx.study.__main__ import runs_of_results
    from fairseq_ctx.study.report import _baseline_key, baselines_of, family
    from fairseq_ctx.study.runs import RUNS, by_name
    from fairseq_ctx.study.train import StudyError

    assert runs_of_results("s.json", by_name(["transformer", "concat"]), {}) == RUNS
    # the rungs given, a name given twice once, the file's others rebuilt (one
    # still training, without a budget), in the study's order
    held = {"transformer_ctxenc-8000": {"name": "transformer_ctxenc-8000", "rung_of": "transformer_ctxenc",
                                        "status": "training"}}
    got = runs_of_results("r.json", by_name(["transformer_dc@8000", "transformer@8000", "transformer@8000"]), held)
    assert [(r.name, r.rung_of, r.budget) for r in got] == [
        ("transformer-8000", "transformer", 8000), ("transformer_ctxenc-8000", "transformer_ctxenc", 8000),
        ("transformer_dc-8000", "transformer_dc", 8000)]
    for runs, file, words in (
            (["transformer", "transformer@8000"], {}, "--runs: transformer are the study's runs"),
            (["transformer@8000", "concat@6000"], {}, "--runs: one budget per results file, not 6000, 8000"),
            (["transformer"], held, "it holds runs at a budget of their own (transformer_ctxenc-8000)"),
            (["transformer@4000"], held, "one budget per results file, not 4000, 8000"),
            (["transformer@8000"], {"transformer": {"name": "transformer"}}, "it holds the study's runs")):
        with pytest.raises(StudyError, match=re.escape(words)):
            runs_of_results("r.json", by_name(runs), file)
    for name, words in (("transformer_gret@8000", "starts from the study's baseline"),
                        ("concat-equal-data@8000", "derived from other runs' epochs")):
        with pytest.raises(SystemExit, match=re.escape(f"--runs {name}: ")):
            by_name([name])
        with pytest.raises(SystemExit, match=re.escape(words)):
            by_name([name])

    # paired with the baselines at its budget, kept under the study baseline's family
    dc = {"name": "transformer_dc-seed2-8000", "rung_of": "transformer_dc-seed2", "seed": 2, "budget": 8000}
    assert baselines_of(dc) == ["transformer-seed2-8000", "transformer-wide-seed2-8000"]
    assert [_baseline_key(dc, b) for b in baselines_of(dc)] == ["transformer", "transformer-wide"]
    wide = {"name": "transformer-wide-8000", "rung_of": "transformer-wide", "seed": 1, "budget": 8000}
    assert baselines_of(wide) == ["transformer-8000"] and _baseline_key(wide, "transformer-8000") == "transformer"
    # a rung's seeds are one family, apart from the study's
    assert [family(n) for n in ("transformer_dc-seed2-8000", "transformer_dc-8000", "transformer_dc-seed2")] == \
        ["transformer_dc-8000", "transformer_dc-8000", "transformer_dc"]


def test_a_childs_cpu_time_is_measured(tmp_path):
    """The CPU seconds recorded per epoch and per decoding are the child's
    own (a new interpreter here: in the smoke run the children are forked)."""
    from fairseq_ctx.study.train import _run_until, children_cpu_seconds

    burn = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass"
    start, before = time.time(), children_cpu_seconds()
    with open(tmp_path / "log", "w") as log:
        assert _run_until([sys.executable, "-c", burn], log, None) == 0
    cpu = children_cpu_seconds() - before
    assert 0.6 <= cpu <= time.time() - start


def test_a_deadline_stops_training_and_starts_nothing_after_it(tmp_path):
    """The process in training is stopped at the deadline (not waited for),
    and no run starts once it has passed."""
    from fairseq_ctx.study.runs import by_name
    from fairseq_ctx.study.train import DeadlineReached, _run_until, train

    start = time.time()
    with open(tmp_path / "log", "w") as log, pytest.raises(DeadlineReached):
        _run_until([sys.executable, "-c", "import time; time.sleep(60)"], log, time.time() + 1)
    assert time.time() - start < 30
    assert _run_until([sys.executable, "-c", "pass"], open(tmp_path / "log", "w"), time.time() + 60) == 0
    run = by_name(["transformer"])[0]
    with pytest.raises(DeadlineReached, match="transformer: not continued, the deadline passed"):
        train(run, "no-data", "no-user-dir", str(tmp_path), print, SMOKE, deadline=time.time() - 1)
    assert not (tmp_path / run.name / "logs").exists() or not any((tmp_path / run.name / "logs").iterdir())


@pytest.mark.unit
def test_cuda_asked_and_not_visible_fails_in_one_line(tmp_path, capsys, monkeypatch):
    """--device cuda never trains silently on the CPU."""
    import torch

    from fairseq_ctx.study.__main__ import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    data = tmp_path / "bible"
    (data / "bin").mkdir(parents=True)
    (data / "spm").mkdir()
    (data / "bin" / "dict.es.txt").write_text("")
    (data / "spm" / "spm.model").write_text("")
    with pytest.raises(SystemExit) as e:
        main(["--data", str(data), "--device", "cuda", "--out", str(tmp_path / "out")])
    assert str(e.value).startswith("fairseq_ctx: error: --device cuda: no CUDA device is visible")


@pytest.mark.unit
def test_gret_waits_for_its_warm_start_and_starts_from_it(tmp_path):
    from fairseq_ctx.study.runs import by_name
    from fairseq_ctx.study.train import train, train_command

    gret = by_name(["transformer_gret"])[0]
    lines = []
    assert train(gret, "bin", "user-dir", str(tmp_path), echo=lines.append) is False
    assert lines == ["[study] transformer_gret: waits for transformer (its warm start)"]
    cmd = train_command("bin", "user-dir", str(tmp_path), gret, 1)
    assert cmd[cmd.index("--gret-warm-start") + 1] == str(tmp_path / "transformer" / "checkpoint_best.pt")
    assert cmd[cmd.index("--max-epoch") + 1] == "1" and cmd[cmd.index("--seed") + 1] == "1"
    # GRET's control, the baseline trained on from the same checkpoint: fairseq's
    # fine-tuning start (fresh optimizer and schedule on the first epoch; later
    # epochs resume from the run's own checkpoint_last.pt)
    continued = by_name(["transformer-continued"])[0]
    assert gret.control == continued.name and continued.arch == "transformer"
    cmd = train_command("bin", "user-dir", str(tmp_path), continued, 3)
    assert cmd[cmd.index("--finetune-from-model") + 1] == str(tmp_path / "transformer" / "checkpoint_best.pt")
    assert "--gret-warm-start" not in cmd


@pytest.mark.unit
def test_ctxsan_without_gates_trains_ctxsan_with_the_flag_and_is_paired_with_ctxsan(tmp_path):
    """Footnote 1's ablation: the study's ctxsan with --ctxsan-no-gate,
    compared with ctxsan of its seed alone (the delta is the gates'); at a
    budget of its own (RUN@N), with ctxsan at that budget."""
    from fairseq_ctx.study.report import _baseline_key, baselines_of, markdown_table, summary
    from fairseq_ctx.study.runs import by_name
    from fairseq_ctx.study.train import train_command

    ablation, csan = by_name(["transformer_ctxsan-no-gate", "transformer_ctxsan"])
    cmd, csan_cmd = (train_command("bin", "user-dir", str(tmp_path), run, 1) for run in (ablation, csan))
    # the same command as ctxsan's but for its directory and the flag
    assert [a for a in cmd if a != "--ctxsan-no-gate"] == [a.replace("transformer_ctxsan", ablation.name)
                                                            if a.endswith("/transformer_ctxsan") else a
                                                            for a in csan_cmd]
    assert cmd.count("--ctxsan-no-gate") == 1 and cmd[cmd.index("--arch") + 1] == "transformer_ctxsan"
    rec = {"name": ablation.name, "seed": 1, "control": ablation.control, "budget": 4000}
    assert baselines_of(rec) == ["transformer_ctxsan"]
    # seeds 1-3, each paired with ctxsan of its seed
    seeds = by_name(["transformer_ctxsan-no-gate-seed2", "transformer_ctxsan-no-gate-seed3"])
    assert [(run.seed, run.control, run.model_flags) for run in seeds] == [
        (2, "transformer_ctxsan-seed2", ["--ctxsan-no-gate"]), (3, "transformer_ctxsan-seed3", ["--ctxsan-no-gate"])]
    assert [run.name for run in runs.RUNS][-3:] == ["transformer_ctxsan-no-gate", "transformer_ctxsan-no-gate-seed2",
                                                   "transformer_ctxsan-no-gate-seed3"]
    rung = by_name(["transformer_ctxsan-no-gate@8000"])[0]
    rec = {"name": rung.name, "seed": 1, "control": rung.control, "rung_of": rung.rung_of, "budget": 8000}
    assert baselines_of(rec) == ["transformer_ctxsan-8000"]
    assert _baseline_key(rec, "transformer_ctxsan-8000") == "transformer_ctxsan"
    # the table shows the pairing in its control column, at the study's budget and at its own
    for suffix, extra in (("", {}), ("-8000", {"rung_of": "transformer_ctxsan-no-gate", "budget": 8000})):
        paired = dict(name=f"transformer_ctxsan-no-gate{suffix}", label="no gate", seed=1, bleu=20.0,
                      control=f"transformer_ctxsan{suffix}", usage={"context_test": {}, "cxmi": {}},
                      vs={"transformer_ctxsan": {"run": f"transformer_ctxsan{suffix}", "delta_bleu": -1.25,
                                                 "p_value": 0.01}}, **extra)
        row = markdown_table([paired], summary([paired])).splitlines()[-1]
        assert row.endswith("| -1.25, ahead in 0/1 (p < 0.05: 1 behind) |"), row


@pytest.mark.unit
def test_the_gates_analysis_is_run_for_gated_ctxsan_only(tmp_path, monkeypatch):
    """ctxsan without its gates has no λ to plot (the analysis refuses its
    checkpoint): its evaluation is complete without it, and it is not run."""
    from fairseq_ctx.study import evaluate
    from fairseq_ctx.study.runs import by_name

    ablation, csan, wide = by_name(["transformer_ctxsan-no-gate", "transformer_ctxsan", "transformer-wide"])
    assert [evaluate.has_analysis(run) for run in (ablation, csan, wide)] == [False, True, False]
    for run in (ablation, csan):
        os.makedirs(evaluate.eval_dir(str(tmp_path), run))
        for tag in ("test.hyp", "test.json", "valid.json", "usage.json"):
            open(os.path.join(evaluate.eval_dir(str(tmp_path), run), tag), "w").close()
    assert evaluate.is_evaluated(str(tmp_path), ablation) and not evaluate.is_evaluated(str(tmp_path), csan)

    def no_call(*args, **kwargs):
        raise AssertionError("the analysis was run")

    monkeypatch.setattr(evaluate, "average", no_call)
    monkeypatch.setattr(evaluate, "_call", no_call)
    assert evaluate.analysis(str(tmp_path), ablation, "bin", STUDY) is None
    with pytest.raises(AssertionError, match="the analysis was run"):
        evaluate.analysis(str(tmp_path), csan, "bin", STUDY)


@pytest.mark.unit
def test_gret_and_its_control_start_from_the_shipped_average_of_the_landed_baseline(tmp_path, monkeypatch):
    """Where the landed baseline's average is shipped (scripts/ship_model.py:
    its record beside its weights, listed in SHA256SUMS), GRET and its
    control start from it on any machine: the baseline is not trained again
    and they wait for nothing, and a started run keeps the start it recorded;
    the weights must be the ones listed (one line naming the file, a status
    row, not a crash); a record that is not the landed one, or a study of
    another budget, does not use it."""
    from dataclasses import replace

    from fairseq_ctx.study import train as study_train
    from fairseq_ctx.study.report import landed
    from fairseq_ctx.study.runs import by_name
    from fairseq_ctx.study.status import report
    from fairseq_ctx.study.train import (StudyError, shipped_average, to_train, train, train_command,
                                         warm_start_checkpoint, warm_starts_wanted)

    # the committed files: GRET's study runs start from models/bible/baseline.pt
    committed = landed(os.path.join(REPO, "benchmarks", "study-bible-budget.json"))
    assert shipped_average("transformer", committed, STUDY) == os.path.join(REPO, "models", "bible", "baseline.pt")
    assert shipped_average("transformer", committed, SMOKE) is None

    shipped = tmp_path / "models"
    (shipped / "toy").mkdir(parents=True)
    record = {"name": "transformer", "seed": 1, "budget": 4000, "commit": "c" * 40, "bleu": 28.0, "chrf": 50.0,
              "valid_loss": 4.4, "status": "trained", "updates": 4000, "history": []}
    (shipped / "toy" / "base.json").write_text(json.dumps({k: v for k, v in record.items() if k != "history"}))
    (shipped / "toy" / "base.pt").write_bytes(b"weights")
    sums = shipped / "toy" / "SHA256SUMS"
    # sha256sum -b writes "HASH *NAME"
    sums.write_text(f"{hashlib.sha256(b'weights').hexdigest()} *base.pt\n")
    monkeypatch.setattr(study_train, "SHIPPED", str(shipped))
    results, out = tmp_path / "study.json", tmp_path / "out"
    out.mkdir()
    results.write_text(json.dumps({"runs": [record]}))
    done = landed(str(results))
    weights = str(shipped / "toy" / "base.pt")
    assert shipped_average("transformer", done, STUDY) == weights

    names = ["transformer", "transformer_gret", "transformer-continued"]
    runs = by_name(names)
    assert warm_starts_wanted(runs, str(out), done, STUDY) == {}
    order, lines, again = to_train(runs, str(out), done, STUDY)
    assert [r.name for r in order] == names[1:] and again == []
    assert lines == ["[study] transformer: landed (its record is in the results); not trained again"]
    for run, flag in zip(runs[1:], ("--gret-warm-start", "--finetune-from-model")):
        cmd = train_command("bin", "user-dir", str(out), run, 1, STUDY, done)
        assert cmd[cmd.index(flag) + 1] == weights
    status = report(str(out), runs, STUDY, done).splitlines()
    assert [line.split(None, 4)[4] for line in status[1:4]] == [
        "landed (its record is in the results; not on this machine)", "not started", "not started"]

    # the landed record is not the shipped one (another BLEU), or this study has another budget:
    # the baseline trains here again first
    for changed, settings in (({"bleu": 28.5}, STUDY), ({}, replace(STUDY, budget=2000))):
        results.write_text(json.dumps({"runs": [dict(record, **changed)]}))
        other = landed(str(results))
        assert shipped_average("transformer", other, settings) is None
        cmd = train_command("bin", "user-dir", str(out), runs[1], 1, settings, other)
        assert cmd[cmd.index("--gret-warm-start") + 1] == str(out / "transformer" / "checkpoint_best.pt")
        lines = []
        assert train(runs[1], "bin", "user-dir", str(out), lines.append, settings, landed=other) is False
        assert lines == ["[study] transformer_gret: waits for transformer (its warm start)"]

    # the first epoch records its start (then fails here: no fairseq-train runs), and a
    # run that has started keeps that start whatever lands meanwhile
    ran = []
    monkeypatch.setattr(study_train, "_run_until", lambda cmd, log, deadline: ran.append(cmd) or 1)
    for run, flag in zip(runs[1:], ("--gret-warm-start", "--finetune-from-model")):
        with pytest.raises(StudyError, match=f"{run.name}: fairseq-train failed"):
            train(run, "bin", "user-dir", str(out), print, STUDY, landed=done)
        assert ran[-1][ran[-1].index(flag) + 1] == weights
        assert (out / run.name / "logs" / "warm_start").read_text() == weights + "\n"
        assert warm_start_checkpoint(run, str(out), STUDY, other) == weights
        cmd = train_command("bin", "user-dir", str(out), run, 2, STUDY, other)
        assert cmd[cmd.index(flag) + 1] == weights
    (out / "transformer_gret" / "logs" / "warm_start").write_text("\n")
    with pytest.raises(StudyError, match=r"logs/warm_start is empty: write there the weights its first epoch"):
        warm_start_checkpoint(runs[1], str(out), STUDY, other)
    (out / "transformer_gret" / "logs" / "warm_start").write_text(weights + "\n")
    shutil.rmtree(out / "transformer-continued")  # not started again, for status below

    # weights that are not the ones listed: one line naming the file; status shows it in the row
    for content, listed, why in ((b"version https://git-lfs.github.com/spec/v1", True,
                                  "does not match its SHA256SUMS"),
                                 (b"weights", False, "is not listed in SHA256SUMS"), (None, True, "is missing")):
        sums.write_text(f"{hashlib.sha256(b'weights').hexdigest()}  base.pt\n" if listed else "")
        if content is None:
            (shipped / "toy" / "base.pt").unlink()
        else:
            (shipped / "toy" / "base.pt").write_bytes(content)
        with pytest.raises(StudyError, match=rf"base\.pt: the shipped average of transformer {why}"):
            shipped_average("transformer", done, STUDY)
        row = report(str(out), runs[2:], STUDY, done).splitlines()[1]
        assert row.split(None, 4)[4] == f"refused: {weights}: the shipped average of transformer {why}" + (
            " (a Git LFS pointer or a damaged copy?)" if "match" in why else "")


@pytest.mark.unit
def test_a_runs_files_are_written_whole_or_not_at_all(tmp_path, monkeypatch):
    """train.done, each epoch's .machine/.cpu/.seconds, the warm start and
    the evaluation's files are read while the run trains (--stage status)
    and after a kill: a write that fails leaves the file as it was."""
    from pathlib import Path

    from fairseq_ctx.study.train import write_whole

    path = tmp_path / "epoch-001.cpu"
    write_whole(str(path), "12.5")
    assert path.read_text() == "12.5"

    def killed(self, target):
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        write_whole(str(path), "99.0")
    assert path.read_text() == "12.5" and sorted(p.name for p in tmp_path.iterdir()) == ["epoch-001.cpu"]


@pytest.mark.unit
def test_the_machines_of_a_run_are_those_of_its_epochs():
    """A run resumed elsewhere lists every CPU it trained on, with its epochs;
    epochs from before machines were kept are not listed."""
    from fairseq_ctx.study.train import machines

    a, b = {"cpu_model": "AMD EPYC", "threads": 1}, {"cpu_model": "AMD EPYC", "threads": 2}
    hist = [{"epoch": 1}, {"epoch": 2, "machine": a}, {"epoch": 3, "machine": b}, {"epoch": 4, "machine": a}]
    assert machines(hist) == [dict(a, epochs=[2, 4]), dict(b, epochs=[3])]
    assert machines(hist[:1]) == []


@pytest.mark.unit
def test_a_run_locked_by_another_process_is_skipped(tmp_path):
    from fairseq_ctx.study.runs import by_name
    from fairseq_ctx.study.train import train

    run = by_name(["transformer_dc"])[0]
    (tmp_path / run.name).mkdir()
    held = _hold_lock(tmp_path / run.name / "train.lock")
    lines = []
    assert train(run, "unused-bin", "unused-user-dir", str(tmp_path), echo=lines.append) is False
    assert lines == ["[study] transformer_dc: another study process is training it; skipped"]
    assert not (tmp_path / run.name / "logs").exists()
    held.close()


@pytest.mark.unit
def test_a_run_lock_is_held_for_its_with_body_only_and_leaves_the_file_as_it_was(tmp_path):
    """train.lock and eval.lock are one helper: held while the body runs (as
    another open file of it sees), released when the body raises, and the
    lock file (which a session may have written to by hand) is not emptied."""
    from fairseq_ctx.study.runs import by_name
    from fairseq_ctx.study.train import run_lock

    run = by_name(["transformer_dc"])[0]
    path = tmp_path / run.name / "eval.lock"
    with pytest.raises(RuntimeError, match="in the body"):
        with run_lock(str(tmp_path), run, "eval.lock") as ours:  # makes the run's directory
            assert ours and _lock_is_held(path)
            path.write_text("kept\n")
            raise RuntimeError("in the body")
    assert not _lock_is_held(path) and path.read_text() == "kept\n"
    with run_lock(str(tmp_path), run, "eval.lock") as ours:
        with run_lock(str(tmp_path), run, "eval.lock") as again:  # another open file: another holder
            assert ours and again is False


@pytest.mark.unit
def test_a_run_is_evaluated_by_one_process_at_a_time(tmp_path, monkeypatch, capsys):
    """--jobs' children each evaluate the trained runs they come across, under
    the run's evaluation lock: one that another process is evaluating is
    skipped, one whose outputs are all there is not evaluated again; the
    results file's evaluation waits for the lock."""
    import threading
    from types import SimpleNamespace

    from fairseq_ctx.study import __main__ as driver
    from fairseq_ctx.study import evaluate
    from fairseq_ctx.study.runs import by_name

    out = tmp_path / "out"
    names = ["transformer", "concat", "transformer-wide"]
    for name in names:
        (out / name).mkdir(parents=True)

    evaluated = []

    def fake_evaluate(opts, run, *args):
        evaluated.append((run.name, _lock_is_held(out / run.name / "eval.lock")))
        return []

    monkeypatch.setattr(driver, "train", lambda *args: True)  # every run trained, by whichever process
    monkeypatch.setattr(driver, "evaluate_run", fake_evaluate)
    monkeypatch.setattr(driver, "read_refs", lambda opts: [])
    monkeypatch.setattr(driver, "fig_dir_of", lambda opts: str(tmp_path))
    monkeypatch.setattr(evaluate, "is_evaluated", lambda out_dir, run: run.name == "transformer-wide")
    held = _hold_lock(out / "concat" / "eval.lock")
    opts = SimpleNamespace(results=str(tmp_path / "study.json"), out=str(out), settings=STUDY, deadline_at=None,
                           evaluate_each=True, landed={})
    driver.train_all(opts, by_name(names), "bin", "user-dir")
    assert evaluated == [("transformer", True)] and not _lock_is_held(out / "transformer" / "eval.lock")
    assert capsys.readouterr().out.splitlines() == [
        "[study] transformer: evaluating", "[study] concat: another study process is evaluating it; skipped"]

    # the parent's evaluation (after its jobs, or a command of its own) waits, and says so
    said = []

    def evaluate_concat():
        with evaluate.evaluating(str(out), by_name(["concat"])[0], echo=said.append):
            fake_evaluate(opts, by_name(["concat"])[0])

    waiting = threading.Thread(target=evaluate_concat)
    waiting.start()
    waiting.join(0.5)
    assert waiting.is_alive() and evaluated == [("transformer", True)]
    assert said == ["[study] concat: another study process is evaluating it; waiting for it"]
    held.close()
    waiting.join(10)
    assert evaluated == [("transformer", True), ("concat", True)]
    # a free lock: taken at once, nothing said
    with evaluate.evaluating(str(out), by_name(["concat"])[0], echo=said.append) as ours:
        assert ours and _lock_is_held(out / "concat" / "eval.lock") and len(said) == 1


@pytest.mark.unit
def test_jobs_are_this_command_training_one_run_each_to_the_parents_deadline(monkeypatch):
    """--jobs N starts N copies of the command at --stage train with one job
    each (evaluating as runs finish when the whole study was asked for), all
    stopping at the parent's deadline as a time: a child's --deadline would
    count from its own start, seconds later."""
    import subprocess

    from fairseq_ctx.study.__main__ import parse_args, train_in_parallel

    started = []

    class Child:
        def __init__(self, cmd):
            started.append(cmd)

        def wait(self):
            return len(started) - 1

    monkeypatch.setattr(subprocess, "Popen", Child)
    argv = ["--device", "cuda", "--jobs", "3", "--deadline", "330", "--stage=all", "--runs", "transformer", "concat"]
    assert train_in_parallel(argv, 3, True, 1234567890.25) == [2, 2, 2]
    assert len(started) == 3 and started[0] == started[2]
    assert started[0][:3] == [sys.executable, "-m", "fairseq_ctx.study"]
    child = parse_args(started[0][3:])
    assert (child.jobs, child.stage, child.evaluate_each, child.deadline, child.deadline_at) == \
        (1, "train", True, None, 1234567890.25)
    assert (child.device, child.runs) == ("cuda", ["transformer", "concat"])
    started.clear()
    train_in_parallel(["--jobs=2", "--deadline=5"], 2, False)
    assert started[0][3:] == ["--stage", "train", "--jobs", "1"]


@pytest.mark.unit
def test_a_line_of_the_driver_is_one_write(monkeypatch):
    """--jobs' children share one stdout, unbuffered on a GPU machine: a line
    written in two pieces (print's text, then its newline) can interleave
    with another process's line."""
    from fairseq_ctx.study.__main__ import echo

    class Recorder:
        writes = []

        def write(self, text):
            self.writes.append(text)

        def flush(self):
            pass

    monkeypatch.setattr(sys, "stdout", Recorder())
    echo("[study] transformer: evaluating")
    assert Recorder.writes == ["[study] transformer: evaluating\n"]


@pytest.mark.unit
def test_pilot_chooses_the_shortest_budget_whose_double_gains_under_one_percent(tmp_path):
    from fairseq_ctx.study.train import pilot_choice

    def finish(budget, loss):
        (tmp_path / f"pilot-{budget}").mkdir()
        (tmp_path / f"pilot-{budget}" / "train.done").write_text(json.dumps(
            {"final_valid_loss": loss, "train_seconds": budget * 1.5, "device": "cpu"}))

    finish(1000, 5.00)
    finish(2000, 4.60)  # 8% better than 1000
    assert pilot_choice(str(tmp_path))[0] is None
    finish(4000, 4.56)  # 0.87% better than 2000
    choice, rows = pilot_choice(str(tmp_path))
    assert choice == 2000
    assert [(r["budget"], r.get("gain_of_double")) for r in rows] == [(1000, 0.08), (2000, 0.0087), (4000, None)]
    # a missing rung leaves the pair out
    (tmp_path / "pilot-2000" / "train.done").unlink()
    assert pilot_choice(str(tmp_path))[0] is None


@pytest.mark.unit
def test_a_run_at_a_budget_of_its_own():
    from fairseq_ctx.study.runs import by_name
    from fairseq_ctx.study.train import settings_of

    run = by_name(["transformer_ctxenc@1000"])[0]
    assert (run.name, run.arch, run.uses_context, settings_of(run).budget) == (
        "transformer_ctxenc-1000", "transformer_ctxenc", True, 1000)
    with pytest.raises(SystemExit, match="unknown run"):
        by_name(["nope@1000"])


@pytest.mark.unit
def test_the_capacity_matched_baseline_trains_wider_and_decodes_like_the_baseline(tmp_path):
    from fairseq_ctx.study.runs import WIDE, by_name
    from fairseq_ctx.study.train import train_command

    wide = by_name(["transformer-wide-seed2"])[0]
    cmd = train_command("BIN", "USER", str(tmp_path), wide, 1)
    last = len(cmd) - 1 - cmd[::-1].index("--encoder-ffn-embed-dim")  # argparse keeps the last value
    assert cmd[last + 1] == "768" and WIDE[1] == WIDE[3] == "768"
    assert wide.seed == 2 and "--encoder-ffn-embed-dim" not in wide.task_flags  # generate takes no model flags


@pytest.mark.unit
def test_the_study_errors_carry_the_one_prefix(tmp_path, capsys):
    from fairseq_ctx.study.__main__ import main
    from fairseq_ctx_prep.files import ERROR_PREFIX

    with pytest.raises(SystemExit) as e:
        main(["--data", str(tmp_path / "none"), "--smoke", "--out", str(tmp_path / "out")])
    assert str(e.value).startswith(f"{ERROR_PREFIX}--data {tmp_path / 'none'}: missing ")
    with pytest.raises(SystemExit) as e:
        runs.by_name(["no-such-run"])
    assert str(e.value).startswith(f"{ERROR_PREFIX}--runs: unknown run(s) no-such-run")


def _saved(epoch, updates, verb="Saved", name="checkpoint_last.pt"):
    return (f"x | INFO | fairseq.checkpoint_utils | {verb} checkpoint /r/{name} (epoch {epoch} @ {updates} updates"
            + (", score 5.0) (writing took 0.1 seconds)\n" if verb == "Saved" else ")\n"))


@pytest.mark.unit
@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="reads Linux's lock table")
def test_status_reads_where_every_run_stands_and_touches_nothing(tmp_path, capsys):
    """``--stage status``: each run's state, updates, resume point (the last
    checkpoint saved or loaded) and CPU minutes, the process holding a
    run's lock (from /proc/locks: asking takes no lock), and the training
    left at the measured rates (a run's own, else its kind's, else its
    architecture's, else every run's; a budget not known yet is named, not
    guessed). Nothing under --out changes."""

    from fairseq_ctx.study.__main__ import main
    from fairseq_ctx.study.runs import by_name
    from fairseq_ctx.study.status import lock_holder, remaining_cpu_seconds, run_status

    def write(path, text):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    # the baseline: trained (not evaluated), 3.0 CPU s an update
    write(tmp_path / "transformer" / "logs" / "epoch-001.log", _valid(1, 4.4, 4000) + _end(1))
    write(tmp_path / "transformer" / "logs" / "epoch-001.cpu", "12000")
    write(tmp_path / "transformer" / "train.done", json.dumps({"updates": 4000, "train_seconds": 12000.0,
                                                               "budget": 4000}))
    # the wide baseline: one finished epoch (250 updates, 500 CPU s: 2.0 s an
    # update), then a checkpoint at 400 and 450 updates logged; in training
    wide = tmp_path / "transformer-wide"
    write(wide / "logs" / "epoch-001.log", _valid(1, 6.0, 200) + _saved(1, 200) + _valid(1, 5.9, 250) + _end(1)
          + _saved(1, 250))
    write(wide / "logs" / "epoch-001.cpu", "500")
    write(wide / "logs" / "epoch-002.log", _valid(2, 5.5, 400) + _saved(2, 400, name="checkpoint_2_400.pt")
          + "x | INFO | train_inner | epoch 002:  200 / 250 loss=5.1, num_updates=450\n")
    held = _hold_lock(wide / "train.lock")
    # the context encoder: 4.0 s an update over its first epoch (100
    # updates); killed after resuming from a checkpoint at 120
    ctxenc = tmp_path / "transformer_ctxenc" / "logs"
    write(ctxenc / "epoch-001.log", _valid(1, 7.0, 100) + _end(1) + _saved(1, 100))
    write(ctxenc / "epoch-001.cpu", "400")
    write(ctxenc / "epoch-002.log", _saved(2, 120, verb="Loaded")
          + "x | INFO | train_inner | epoch 002:  50 / 100 loss=6.1, num_updates=150\n")
    # CSAN: trained to another budget (training refuses it until it is moved away)
    write(tmp_path / "transformer_ctxsan" / "train.done", json.dumps({"updates": 2000, "train_seconds": 1.0,
                                                                      "budget": 2000}))
    before = sorted((str(p), p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))

    names = ["transformer", "transformer-wide", "transformer_ctxenc", "transformer_ctxsan", "transformer-seed2",
             "concat", "transformer_dc", "concat-equal-data"]
    main(["--out", str(tmp_path), "--results", str(tmp_path / "none.json"), "--stage", "status", "--runs", *names])
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split(None, 4)[1:] for line in lines[1:1 + len(names)]}
    assert rows == {
        "transformer": ["4000/4000", "4000", "200.0", "trained"],
        "transformer-wide": ["450/4000", "400", "8.3", f"training (pid {os.getpid()})"],
        "transformer_ctxenc": ["150/4000", "120", "6.7", "stopped (resumes with the same command)"],
        "transformer_ctxsan": ["0/4000", "0", "0.0", "refused: trained to a budget of 2000"],
        "transformer-seed2": ["0/4000", "0", "0.0", "not started"],
        "concat": ["0/4000", "0", "0.0", "not started"],
        "transformer_dc": ["0/4000", "0", "0.0", "not started"],
        "concat-equal-data": ["0/?", "0", "0.0", "not started"],  # concat has no epoch yet
    }
    assert lines[1 + len(names)] == "1 of 8 runs trained (0 evaluated), 1 training now"
    # own rates: wide 2.0 from 400, ctxenc 4.0 from 120; transformer-seed2
    # its kind's (the baseline's 3.0); concat its architecture's (transformer:
    # 3.0 and 2.0); CSAN (from the start) and Enc-DC every run's (3, 2, 4)
    runs_ = by_name(names)
    left, unknown = remaining_cpu_seconds([run_status(str(tmp_path), run, STUDY) for run in runs_], runs_)
    assert left == 3600 * 2.0 + 3880 * 4.0 + 4000 * 3.0 + 4000 * 2.5 + 4000 * 3.0 + 4000 * 3.0
    assert unknown == ["concat-equal-data"]
    assert lines[2 + len(names)] == (f"training left: about {left / 3600:.1f} CPU hours for 6 runs at the rates "
                                     f"measured so far; not counted, budget or rate not known yet: concat-equal-data")
    assert sorted((str(p), p.stat().st_mtime_ns) for p in tmp_path.rglob("*")) == before
    main(["--out", str(tmp_path), "--results", str(tmp_path / "none.json"), "--stage", "status",
          "--runs", "transformer-wide"])
    assert capsys.readouterr().out.splitlines()[-1] == \
        "training left: about 2.0 CPU hours for 1 run at the rates measured so far"
    # a process writing the baseline's evaluation holds its eval.lock: trained, and said so
    evaluator = _hold_lock(tmp_path / "transformer" / "eval.lock")
    main(["--out", str(tmp_path), "--results", str(tmp_path / "none.json"), "--stage", "status",
          "--runs", "transformer", "transformer-wide"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split(None, 4)[1:] == ["4000/4000", "4000", "200.0",
                                           f"trained, being evaluated (pid {os.getpid()})"]
    assert lines[3:] == ["1 of 2 runs trained (0 evaluated), 1 training now",
                         "training left: about 2.0 CPU hours for 1 run at the rates measured so far"]
    evaluator.close()
    held.close()
    assert lock_holder(str(wide / "train.lock")) is None

    with pytest.raises(SystemExit, match="--out .*: no such directory"):
        main(["--out", str(tmp_path / "elsewhere"), "--stage", "status"])


@pytest.mark.unit
def test_lock_holder_matches_the_files_device_and_inode_in_the_lock_table(tmp_path):
    from fairseq_ctx.study.status import UNKNOWN, lock_holder

    path = tmp_path / "train.lock"
    path.write_text("")
    st = path.stat()
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}"
    table = tmp_path / "locks"
    lines = [f"1: FLOCK  ADVISORY  WRITE 11 {dev}:{st.st_ino + 1} 0 EOF",  # another file
             f"2: POSIX  ADVISORY  WRITE 12 {dev}:{st.st_ino} 0 EOF",  # not a flock
             f"3: OFDLCK ADVISORY  READ  -1 {dev}:{st.st_ino} 0 EOF",
             "4: FLOCK  ADVISORY  WRITE 13 <none>:0 0 EOF",  # malformed: passed over
             f"5: FLOCK  ADVISORY  WRITE 4242 {dev}:{st.st_ino} 0 EOF",
             f"5: -> FLOCK  ADVISORY  WRITE 14 {dev}:{st.st_ino} 0 EOF"]  # a waiter
    table.write_text("\n".join(lines) + "\n")
    assert lock_holder(str(path), locks=str(table)) == 4242
    table.write_text("\n".join(lines[:4] + lines[5:]) + "\n")
    assert lock_holder(str(path), locks=str(table)) is None
    assert lock_holder(str(path), locks=str(tmp_path / "absent")) == UNKNOWN
    assert lock_holder(str(tmp_path / "no-lock-file"), locks=str(table)) is None


@pytest.mark.unit
def test_status_of_a_run_whose_files_are_being_written(tmp_path):
    """A .cpu file or train.done caught half-written: that run says so, the
    rest of the table stands."""
    from fairseq_ctx.study.runs import by_name
    from fairseq_ctx.study.status import run_status

    logs = tmp_path / "transformer" / "logs"
    logs.mkdir(parents=True)
    (logs / "epoch-001.log").write_text(_valid(1, 6.0, 250) + _end(1))
    (logs / "epoch-001.cpu").write_text("")
    run = by_name(["transformer"])[0]
    assert run_status(str(tmp_path), run, STUDY)["state"] == "being written: ask again"
    (logs / "epoch-001.cpu").write_text("500")
    (tmp_path / "transformer" / "train.done").write_text('{"updates": 40')
    assert run_status(str(tmp_path), run, STUDY)["state"] == "being written: ask again"
    (tmp_path / "transformer" / "train.done").unlink()
    assert run_status(str(tmp_path), run, STUDY)["state"] == "stopped (resumes with the same command)"


@pytest.mark.unit
def test_a_landed_run_is_not_trained_again_unless_a_warm_start_needs_it(tmp_path, capsys, monkeypatch):
    """A fresh machine holds the committed results but no checkpoints: a run
    whose record is there at its budget is skipped by training and counted
    as done by --stage status; a record of another budget, or one never
    evaluated, does not count; a landed run that GRET or its control starts
    from is trained again just before the first of them and compared with
    its record; concatenation at equal data takes the epoch lengths of
    landed runs from their records."""
    from types import SimpleNamespace

    from fairseq_ctx.study import __main__ as driver
    from fairseq_ctx.study.report import landed
    from fairseq_ctx.study.runs import by_name
    from fairseq_ctx.study.train import compare_with_landed, history, settings_of, to_train

    def landed_of(records, where):
        (where / "other.json").write_text(json.dumps({"runs": records}))
        return landed(str(where / "other.json"))

    def hist(*epochs):
        return [{"epoch": i + 1, "updates": u, "valid_loss": loss, "train_seconds": 600.0 * (i + 1)}
                for i, (u, loss) in enumerate(epochs)]

    def rec(name, budget=4000, bleu=28.0, epochs=((263, 7.5), (526, 6.2))):
        return {"name": name, "status": "trained", "budget": budget, "updates": budget, "bleu": bleu,
                "history": hist(*epochs)}

    results, out = tmp_path / "study.json", tmp_path / "out"
    out.mkdir()
    results.write_text(json.dumps({"runs": [rec("transformer"), rec("transformer-wide", budget=2000),
                                            rec("transformer_dc", bleu=None), rec("concat", epochs=((158, 7.9),))]}))
    done = landed(str(results))
    assert sorted(done) == ["concat", "transformer", "transformer-wide"]
    # 4000 x 158 / 263 = 2403, to a multiple of budget/20
    assert settings_of(by_name(["concat-equal-data"])[0], STUDY, str(out), done).budget == 2400

    names = ["transformer", "transformer-wide", "transformer_dc", "transformer_gret", "transformer-continued"]
    order, lines, again = to_train(by_name(names), str(out), done, STUDY)
    assert [run.name for run in order] == ["transformer-wide", "transformer_dc", "transformer",
                                           "transformer_gret", "transformer-continued"]
    assert lines == ["[study] transformer: landed, but its checkpoint is not on this machine: trained again, "
                     "the warm start of transformer_gret"] and again == ["transformer"]
    assert to_train(by_name(["transformer", "concat"]), str(out), done, STUDY) == (
        [], ["[study] transformer: landed (its record is in the results); not trained again",
             "[study] concat: landed (its record is in the results); not trained again"], [])
    # a record without a budget is not a landed run
    assert "x" not in landed_of([{"name": "x", "status": "trained", "bleu": 1.0}], tmp_path)

    driver.main(["--out", str(out), "--results", str(results), "--stage", "status", "--runs", *names[:4]])
    status = capsys.readouterr().out.splitlines()
    assert [line.split(None, 4)[1:] for line in status[1:5]] == [
        ["4000/4000", "0", "20.0", "landed, not on this machine: trained again first, the warm start of "
                                   "transformer_gret"],
        ["0/4000", "0", "0.0", "not started"],  # landed at another budget
        ["0/4000", "0", "0.0", "not started"],  # never evaluated
        ["0/4000", "0", "0.0", "waits for transformer"]]
    assert status[5] == "1 of 4 runs trained (1 evaluated; 1 landed earlier, not on this machine), 0 training now"
    # its rate (1,200 CPU s for 526 updates) prices its training again and
    # the baseline's kind; Enc-DC and GRET take the mean of every run's
    assert status[6] == (f"training left: about {4 * 4000 * 1200 / 526 / 3600:.1f} CPU hours for 4 runs (transformer "
                         f"trained again for a warm start) at the rates measured so far")
    driver.main(["--out", str(out), "--results", str(results), "--stage", "status", "--runs", "transformer"])
    status = capsys.readouterr().out.splitlines()
    assert status[1].split(None, 4)[1:] == ["4000/4000", "4000", "20.0",
                                            "landed (its record is in the results; not on this machine)"]
    assert status[2:] == ["1 of 1 run trained (1 evaluated; 1 landed earlier, not on this machine), "
                          "0 training now"]

    # training: what the driver trains, in order, and the comparison of the
    # run trained again with its record (fairseq's own training stood in for)
    trained = []

    def fake_train(run, bin_dir, user_dir, out_dir, echo, settings, deadline, landed):
        losses = (7.5, 6.2) if run.name == "transformer" else (7.0,)
        logs = out / run.name / "logs"
        logs.mkdir(parents=True)
        for epoch, loss in enumerate(losses, 1):
            (logs / f"epoch-{epoch:03d}.log").write_text(_valid(epoch, loss, 263 * epoch) + _end(epoch))
        (out / run.name / "train.done").write_text(json.dumps({"updates": 4000, "train_seconds": 1.0,
                                                               "budget": 4000}))
        trained.append(run.name)
        return True

    monkeypatch.setattr(driver, "train", fake_train)
    opts = SimpleNamespace(results=str(results), out=str(out), settings=STUDY, deadline_at=None, evaluate_each=True,
                           landed=done)
    monkeypatch.setattr(driver, "evaluate_run", lambda opts, run, *a: trained.append(f"evaluated {run.name}"))
    monkeypatch.setattr(driver, "read_refs", lambda opts: [])
    monkeypatch.setattr(driver, "fig_dir_of", lambda opts: str(tmp_path))
    driver.train_all(opts, by_name(["transformer", "transformer-wide", "transformer-continued"]), "bin", "user-dir")
    # the run landed at another budget trains and is evaluated like any other;
    # the one trained again for the warm start is compared, not evaluated
    assert trained == ["transformer-wide", "evaluated transformer-wide", "transformer", "transformer-continued",
                       "evaluated transformer-continued"]
    assert capsys.readouterr().out.splitlines() == [
        "[study] transformer: landed, but its checkpoint is not on this machine: trained again, the warm start of "
        "transformer-continued",
        "[study] transformer-wide: evaluating",
        "[study] transformer: trained again; equals its landed record: the same validation loss after each of its "
        "2 epochs",
        "[study] transformer-continued: evaluating"]
    # status: trained again, its landed record kept, counted as evaluated
    driver.main(["--out", str(out), "--results", str(results), "--stage", "status", "--runs", "transformer"])
    status = capsys.readouterr().out.splitlines()
    assert status[1].split(None, 4)[4] == "trained again for a warm start (its landed record is kept)"
    assert status[2] == "1 of 1 run trained (1 evaluated), 0 training now"
    assert compare_with_landed(history(str(out), by_name(["transformer"])[0]), rec("transformer", epochs=(
        (263, 7.5), (526, 6.25)))) == ("differs from its landed record from epoch 2 on (valid loss 6.2 at 526 "
                                       "updates, landed 6.25 at 526)")


def _finished_run(out, name):
    """``out/name`` as training leaves a run: one epoch's log and its
    train.done at the study's budget."""
    (out / name / "logs").mkdir(parents=True)
    (out / name / "logs" / "epoch-001.log").write_text(_valid(1, 7.4, 263) + _end(1))
    (out / name / "train.done").write_text(json.dumps({"updates": 4000, "train_seconds": 1.0, "budget": 4000,
                                                       "final_valid_loss": 7.4}))


@pytest.mark.unit
def test_one_runs_failed_evaluation_leaves_the_others_records_written(tmp_path, monkeypatch, capsys):
    """A run whose evaluation fails (fairseq-generate exits non-zero) keeps
    the record the results file had, the runs evaluated beside it are
    written, and the command fails after, naming it."""
    from types import SimpleNamespace

    from fairseq_ctx.study import __main__ as driver
    from fairseq_ctx.study.report import read
    from fairseq_ctx.study.train import StudyError

    results, out = tmp_path / "study.json", tmp_path / "out"
    before = {"name": "transformer-wide", "status": "evaluated before", "seed": 1}
    results.write_text(json.dumps({"runs": [before]}))
    for name in ("transformer-wide", "concat"):
        _finished_run(out, name)
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "test.en").write_text("A line.\n")

    def fake_evaluate(opts, run, rec, *args):
        if run.name == "transformer-wide":
            raise StudyError("transformer-wide: fairseq-generate failed (exit 1); see its log")
        rec["status"] = "evaluated here"
        return []

    monkeypatch.setattr(driver, "evaluate_run", fake_evaluate)
    opts = SimpleNamespace(out=str(out), results=str(results), data=str(tmp_path), settings=STUDY, runs=None,
                           landed={}, study_data=None, device="cpu")
    with pytest.raises(StudyError, match="the evaluation of transformer-wide failed"):
        driver.evaluate_all(opts, runs.by_name(["transformer-wide", "concat"]), "bin", "user-dir")
    written = read(str(results))[1]
    assert written["transformer-wide"] == before and written["concat"]["status"] == "evaluated here"
    assert "[study] transformer-wide: evaluation failed: transformer-wide: fairseq-generate failed" in \
        capsys.readouterr().out


@pytest.mark.unit
@pytest.mark.filterwarnings("ignore:No artists with labels found")  # the kept record has no curve to plot
def test_a_failed_evaluation_leaves_the_committed_translations_beside_the_record_it_keeps(tmp_path, monkeypatch):
    """The figure directory's copies of a run's outputs (here its test
    translations) are made once every step of its evaluation has run: a
    step that fails after the decode (validation here) leaves the
    translations committed with the record the results file keeps."""
    from types import SimpleNamespace

    from fairseq_ctx.study import __main__ as driver
    from fairseq_ctx.study import evaluate, report
    from fairseq_ctx.study.train import StudyError

    results, out = tmp_path / "study.json", tmp_path / "out"
    before = {"name": "transformer-wide", "status": "evaluated before", "seed": 1}
    results.write_text(json.dumps({"runs": [before]}))
    (tmp_path / "study" / "hyps").mkdir(parents=True)  # the results file's figure directory
    (tmp_path / "study" / "hyps" / "transformer-wide.test.hyp").write_text("OLD\n")
    _finished_run(out, "transformer-wide")
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "test.en").write_text("A line.\n")
    decoded = tmp_path / "new.hyp"
    decoded.write_text("NEW\n")

    def validate(*args, **kwargs):
        raise StudyError("transformer-wide: fairseq-validate failed (exit 1)")

    monkeypatch.setattr(evaluate, "decode", lambda *a, **k: {"hyps": ["NEW"], "path": str(decoded), "seconds": 1.0,
                                                            "cpu_seconds": 1.0})
    monkeypatch.setattr(evaluate, "validate", validate)
    opts = SimpleNamespace(out=str(out), results=str(results), data=str(tmp_path), settings=STUDY, runs=None,
                           landed={}, study_data=None, study_dir=None, device="cpu")
    with pytest.raises(StudyError, match="the evaluation of transformer-wide failed"):
        driver.evaluate_all(opts, runs.by_name(["transformer-wide"]), "bin", "user-dir")
    assert report.read(str(results))[1]["transformer-wide"] == before
    assert report.read_hyps(str(tmp_path / "study"), "transformer-wide") == ["OLD"]


@pytest.mark.unit
def test_a_landed_run_trained_again_keeps_its_landed_record(tmp_path, monkeypatch):
    """Evaluating after the baseline was trained again for a warm start (a
    fresh machine): its landed record stays as committed, unless --runs
    names it."""
    from types import SimpleNamespace

    from fairseq_ctx.study import __main__ as driver
    from fairseq_ctx.study.report import landed, read

    committed = read(os.path.join(REPO, "benchmarks", "study-bible-budget.json"))[1]["transformer"]
    results, out = tmp_path / "study.json", tmp_path / "out"
    results.write_text(json.dumps({"runs": [committed]}))
    _finished_run(out, "transformer")
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "test.en").write_text("A line.\n")

    class Evaluated(Exception):
        pass

    def fake_evaluate(opts, run, *args):
        assert _lock_is_held(out / run.name / "eval.lock")  # evaluated under the run's evaluation lock
        raise Evaluated(run.name)

    monkeypatch.setattr(driver, "evaluate_run", fake_evaluate)
    opts = SimpleNamespace(out=str(out), results=str(results), data=str(tmp_path), settings=STUDY, runs=None,
                           landed=landed(str(results)), study_data=None, device="cpu")
    driver.evaluate_all(opts, runs.RUNS, "bin", "user-dir")
    assert read(str(results))[1]["transformer"] == committed
    opts.runs = ["transformer"]
    with pytest.raises(Evaluated, match="transformer"):
        driver.evaluate_all(opts, runs.by_name(["transformer"]), "bin", "user-dir")
