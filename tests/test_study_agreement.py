"""Whether a study run trained again elsewhere agrees with its landed record
within seed noise (fairseq_ctx/study/agreement.py): the committed
machine-agreement record recomputed from logs, the verdict's two rules on
made-up records, the t quantiles against scipy's, and the command's one-line
errors."""
import json
import os

import pytest

from fairseq_ctx.study.agreement import _T975, compare, main, prediction_interval
from fairseq_ctx.study.runs import run_of
from fairseq_ctx.study.train import StudyError, history, train_walls
from tests.utils import REPO, fairseq_epoch_end_line, fairseq_train_line, fairseq_valid_line

LANDED = os.path.join(REPO, "benchmarks", "study-bible-budget.json")
MACHINES = os.path.join(REPO, "benchmarks", "study-machine-agreement.json")


def _write_logs(run_dir, epochs, cpu_per_update=1.0, wall_per_update=None):
    """Epoch logs as the study writes them: fairseq's validation line and its
    end-of-epoch line, the epoch's CPU (and wall) seconds beside."""
    logs = run_dir / "logs"
    logs.mkdir(parents=True)
    before = 0
    for epoch, updates, loss in epochs:
        (logs / f"epoch-{epoch:03d}.log").write_text(
            fairseq_valid_line(epoch, loss, updates) + fairseq_epoch_end_line(epoch))
        (logs / f"epoch-{epoch:03d}.cpu").write_text(str(cpu_per_update * (updates - before)))
        if wall_per_update is not None:
            (logs / f"epoch-{epoch:03d}.seconds").write_text(str(wall_per_update * (updates - before)))
        before = updates


@pytest.mark.unit
def test_the_machine_agreement_record_is_what_the_tool_computes_from_the_logs(tmp_path):
    """benchmarks/study-machine-agreement.json was written by hand from the
    runs trained again on the third machine; the tool, given logs with the
    same validation losses, computes the same per-epoch comparison against
    the landed records and the same summaries."""
    committed = json.loads(open(MACHINES).read())
    for run in committed["runs"]:
        _write_logs(tmp_path / run["name"], [(e["epoch"], e["updates"], e["valid_loss_here"]) for e in run["epochs"]])
    out = tmp_path / "agreement.json"
    main(["--out", str(tmp_path), "--landed", LANDED, "--json", str(out)])
    got = {r["name"]: r for r in json.loads(out.read_text())["runs"]}
    assert sorted(got) == sorted(r["name"] for r in committed["runs"])
    for run in committed["runs"]:
        mine = got[run["name"]]
        for key in ("seeds", "landed_commit", "landed_device", "landed_train_minutes", "max_abs_difference",
                    "mean_abs_difference", "mean_seeds_sd", "seed_pairs", "seed_pairs_bound"):
            assert mine[key] == run[key], key
        fields = ("epoch", "updates", "valid_loss_here", "valid_loss_landed", "difference", "seeds_valid_loss",
                  "seeds_sd", "seeds_range")
        assert [{k: e[k] for k in fields} for e in mine["epochs"]] == [{k: e[k] for k in fields} for e in run["epochs"]]
        assert mine["agrees"] is True and mine["reading"].endswith("agrees within seed noise")
    # docs/study.md: two of the baseline's seeds 0.043 to 0.070 apart over those epochs, FFN-768's 0.041 to 0.053
    for name, apart in (("transformer", (0.043, 0.07)), ("transformer-wide-seed3", (0.041, 0.053))):
        spread = [p["mean_abs_difference"] for p in got[name]["seed_pairs"]]
        assert (round(min(spread), 3), round(max(spread), 3)) == apart


def _records(bleus, losses, budget=100):
    """Landed records of one family, seed by seed: ``losses[i]`` the
    validation loss per epoch of seed i+1."""
    names = ["transformer", "transformer-seed2", "transformer-seed3"]
    return {name: {"name": name, "budget": budget, "bleu": bleu, "device": "cpu", "precision": "fp32",
                   "history": [{"epoch": e + 1, "updates": 10 * (e + 1), "valid_loss": loss}
                               for e, loss in enumerate(seed_losses)]}
            for name, bleu, seed_losses in zip(names, bleus, losses)}


def _hist(losses, wall=None):
    return [dict({"epoch": e + 1, "updates": 10 * (e + 1), "valid_loss": loss, "train_seconds": 5.0 * (e + 1)},
                 **({"seconds": wall} if wall is not None else {}))
            for e, loss in enumerate(losses)]


@pytest.mark.unit
def test_a_run_agrees_when_it_moves_less_than_a_seed_and_its_bleu_could_be_one_more_seed():
    landed = _records([28.75, 29.01, 28.78], [[7.0, 6.0], [7.1, 6.1], [6.9, 5.9]])  # sd 0.1 at both epochs
    # the losses: 0.05 from the landed record on average
    near = compare("transformer", _hist([7.04, 5.94], wall=0.5), landed, {"bleu": 29.2, "device": "NVIDIA H200"})
    assert [e["difference"] for e in near["epochs"]] == [0.04, -0.06]
    assert [e["seeds_sd"] for e in near["epochs"]] == [0.1, 0.1]
    assert near["mean_abs_difference"] == 0.05 and near["mean_seeds_sd"] == 0.1
    # the seed pairs 0.1, 0.1 and 0.2 apart: mean 0.1333, sd 0.0577, t(0.975, 2) = 4.303, sqrt(1 + 1/3)
    assert [p["mean_abs_difference"] for p in near["seed_pairs"]] == [0.1, 0.1, 0.2]
    assert near["seed_pairs"][2]["seeds"] == ["transformer-seed2", "transformer-seed3"]
    assert near["seed_pairs_bound"] == pytest.approx(0.2 / 1.5 + 4.303 * (0.1 / 3 ** 0.5) * (4 / 3) ** 0.5, abs=1e-4)
    # the BLEU interval: mean 28.8467, sd 0.1422, t(0.975, 2) = 4.303, sqrt(1 + 1/3)
    assert near["seeds_bleu_interval"] == [28.14, 29.55]
    assert near["bleu_difference"] == 0.45 and near["agrees"] is True and near["device_here"] == "NVIDIA H200"
    # per update: CPU seconds from the cumulative train_seconds, wall from the epochs' own seconds
    assert [e["cpu_seconds_per_update_here"] for e in near["epochs"]] == [0.5, 0.5]
    assert [e["seconds_per_update_here"] for e in near["epochs"]] == [0.05, 0.05]
    # moved more than another seed would move it: 0.45 on average
    far = compare("transformer", _hist([7.45, 6.45]), landed)
    assert far["mean_abs_difference"] == 0.45 and far["agrees"] is False
    assert far["reading"].endswith("does NOT agree within seed noise") and "bleu_here" not in far
    # close in loss, but a BLEU no seed of the family would reach
    assert compare("transformer", _hist([7.0, 6.0]), landed, {"bleu": 29.7})["agrees"] is False
    # an epoch beyond the landed record has nothing to compare with
    assert len(compare("transformer", _hist([7.0, 6.0, 5.5]), landed)["epochs"]) == 2


@pytest.mark.unit
def test_two_landed_seeds_are_farther_apart_than_their_seeds_sd():
    """Why the bound is of seed pairs: of the 15 pairs of landed seeds (5
    families, 3 seeds, 16 epochs each), 11 are farther apart on average than
    their family's mean standard deviation, a bound that would call most
    runs trained again on another seed moved by the machine."""
    from fairseq_ctx.study.report import landed as read_landed

    landed = read_landed(LANDED)
    beyond_sd, pairs = 0, 0
    for name in ("transformer", "transformer-wide", "transformer_ctxenc", "transformer_dc", "transformer_ctxsan"):
        seeds = compare(name, [], landed)["seeds"]
        assert len(seeds) == 3
        got = compare(name, landed[seeds[1]]["history"], landed)
        for p in got["seed_pairs"]:
            pairs += 1
            beyond_sd += p["mean_abs_difference"] > got["mean_seeds_sd"]
    assert (beyond_sd, pairs) == (11, 15)


@pytest.mark.unit
def test_without_two_landed_seeds_there_is_no_verdict():
    landed = {k: v for k, v in _records([28.75, 29.01, 28.78], [[7.0, 6.0], [7.1, 6.1], [6.9, 5.9]]).items()
              if k == "transformer"}
    one = compare("transformer", _hist([7.0, 6.0]), landed, {"bleu": 28.75})
    assert one["agrees"] is None and one["mean_seeds_sd"] is None and one["seeds_bleu_interval"] is None
    assert "0 pairs of landed seeds: no spread of seed pairs to compare with" in one["reading"]
    assert one["reading"].endswith("no verdict")
    # two seeds: one pair, no spread of pairs; the BLEU still has its interval
    two = {k: v for k, v in _records([28.75, 29.01, 28.78], [[7.0, 6.0], [7.1, 6.1], [6.9, 5.9]]).items()
           if k != "transformer-seed3"}
    pair = compare("transformer", _hist([7.0, 6.0]), two, {"bleu": 29.0})
    assert pair["seed_pairs_bound"] is None and "1 pair of landed seeds" in pair["reading"]
    # a BLEU inside its interval is no verdict without the losses' check
    assert pair["seeds_bleu_interval"] is not None and pair["agrees"] is None
    assert pair["reading"].endswith("no verdict")
    # another budget's records are not the run's seeds
    other = _records([28.75, 29.01, 28.78], [[7.0, 6.0], [7.1, 6.1], [6.9, 5.9]])
    other["transformer-seed2"]["budget"] = 200
    assert compare("transformer", _hist([7.0]), other)["seeds"] == ["transformer", "transformer-seed3"]
    assert compare("transformer", [], landed)["agrees"] is None


@pytest.mark.unit
def test_a_gpu_runs_one_log_times_its_last_epoch_only(tmp_path):
    """On a GPU one fairseq process trains the whole run: one log holds every
    epoch, and the process's times belong to the last epoch it finished, so
    the time per update is known there and nowhere else (not 0 before it);
    fairseq's own time in each epoch's training steps splits it: the epoch
    each process finished first (shapes new to it) apart from the others,
    each summed (an epoch's whole seconds are coarse)."""
    logs = tmp_path / "transformer" / "logs"
    logs.mkdir(parents=True)
    walls = {1: 3, 2: 1, 3: 2, 4: 1}
    # a deadline stopped the first process after epoch 2; the second resumed at epoch 3
    for log, epochs in (("epoch-001.log", (1, 2)), ("epoch-003.log", (3, 4))):
        (logs / log).write_text("".join(
            fairseq_valid_line(e, 8.0 - e, 10 * e) + fairseq_epoch_end_line(e)
            + fairseq_train_line(e, 10 * e, walls[e], 2 * e + 1) for e in epochs))
    for n, seconds, cpu in ((1, "4.0", "3.0"), (3, "6.0", "5.0")):
        (logs / f"epoch-{n:03d}.seconds").write_text(seconds)
        (logs / f"epoch-{n:03d}.cpu").write_text(cpu)
    landed = _records([28.75, 29.01, 28.78], [[7.0, 6.0, 5.0, 4.0], [7.1, 6.1, 5.1, 4.1], [6.9, 5.9, 4.9, 3.9]])
    run = run_of(landed["transformer"])
    assert train_walls(str(tmp_path), run) == {
        1: {"train_wall": 3.0, "first_of_process": True}, 2: {"train_wall": 1.0, "first_of_process": False},
        3: {"train_wall": 2.0, "first_of_process": True}, 4: {"train_wall": 1.0, "first_of_process": False}}
    got = compare("transformer", history(str(tmp_path), run), landed, walls=train_walls(str(tmp_path), run))
    assert [e["seconds_per_update_here"] for e in got["epochs"]] == [None, 0.2, None, 0.25]
    assert [e["cpu_seconds_per_update_here"] for e in got["epochs"]] == [None, 0.15, None, 0.2]
    assert [(e["train_wall_here"], e["epoch_updates"], e["first_of_process_here"]) for e in got["epochs"]] == [
        (3.0, 10, True), (1.0, 10, False), (2.0, 10, True), (1.0, 10, False)]
    assert got["train_wall_seconds_per_update_here"] == {"first_epochs_of_processes": 0.25, "other_epochs": 0.1}
    assert [e["difference"] for e in got["epochs"]] == [0.0] * 4 and got["agrees"] is True
    # a log without fairseq's epoch summaries: no time to split
    assert compare("transformer", history(str(tmp_path), run), landed)["train_wall_seconds_per_update_here"] == {
        "first_epochs_of_processes": None, "other_epochs": None}
    # the command reads them from the logs
    (tmp_path / "landed.json").write_text(json.dumps({"runs": [dict(rec, status="trained", updates=rec["budget"])
                                                                for rec in landed.values()]}))
    (written,) = main(["--out", str(tmp_path), "--landed", str(tmp_path / "landed.json"), "--runs", "transformer"])
    assert written == got


@pytest.mark.unit
def test_another_recipe_or_budget_is_refused_and_a_rung_is_found_in_its_own_directory():
    landed = _records([28.75, 29.01, 28.78], [[7.0, 6.0], [7.1, 6.1], [6.9, 5.9]])
    other = [dict(h, updates=h["updates"] + 1) for h in _hist([7.0, 6.0])]
    with pytest.raises(StudyError, match=r"^transformer: epoch 1 ended at 11 updates here, at 10 in its landed "
                                         r"record: not the same recipe$"):
        compare("transformer", other, landed)
    with pytest.raises(StudyError, match=r"^transformer: trained here to a budget of 200 updates, landed at 100"):
        compare("transformer", _hist([7.0]), landed, {"budget": 200})
    # a run at a budget of its own (RUN@N) lives in RUN-N
    rung = run_of({"name": "transformer_dc-8000", "rung_of": "transformer_dc", "budget": 8000})
    assert (rung.name, rung.budget, rung.arch) == ("transformer_dc-8000", 8000, "transformer_dc")
    assert run_of({"name": "transformer-seed2", "budget": 4000}).seed == 2


@pytest.mark.unit
def test_the_t_quantiles_are_scipys():
    stats = pytest.importorskip("scipy.stats")
    for df, t in _T975.items():
        assert t == round(float(stats.t.ppf(0.975, df)), 3)
    assert prediction_interval([1.0]) is None and prediction_interval([1.0] * 20) is None


@pytest.mark.unit
def test_bad_paths_and_runs_are_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["--out", str(tmp_path / "none")])
    assert str(e.value) == f"fairseq_ctx: error: --out {tmp_path / 'none'}: no such file or directory"
    with pytest.raises(SystemExit) as e:
        main(["--out", str(tmp_path)])
    assert str(e.value).startswith(f"fairseq_ctx: error: --out {tmp_path}: no run there has a landed record in ")
    with pytest.raises(SystemExit) as e:
        main(["--out", str(tmp_path), "--runs", "pilot-1000"])
    assert str(e.value).startswith("fairseq_ctx: error: --runs pilot-1000: no landed record in ")
    with pytest.raises(SystemExit) as e:
        main(["--out", str(tmp_path), "--runs", "transformer"])
    assert str(e.value) == (f"fairseq_ctx: error: --out {tmp_path}: no logs of transformer there "
                            f"({tmp_path}/transformer/logs/epoch-NNN.log)")
