"""The study's results: one JSON record per run, the validation curves, BLEU
by source length, and a Markdown table for the docs."""
import json
import os
import re
import shutil
from typing import Dict, List, Optional, Tuple

from fairseq_ctx.study.runs import Settings

ALPHA = 0.05  # a paired difference with a bootstrap p below this is called significant


def family(name: str) -> str:
    """A run's family: its name without ``-seedN`` (the seeds of one
    configuration), before a budget of its own (``RUN-N`` of ``RUN@N``)."""
    return re.sub(r"-seed\d+(?=(-\d+)?$)", "", name)


def baselines_of(rec: Dict) -> List[str]:
    """The runs ``rec`` is paired with: its ``control`` alone where it names
    one (GRET trains on top of a finished baseline; its control trained on
    the same way), else the plain and the capacity-matched baseline of its
    own seed (not itself); for a run at a budget of its own (``rung_of``,
    ``RUN@N``), those baselines at the same budget."""
    from fairseq_ctx.study.runs import baseline_of, wide_baseline_of

    if rec.get("control"):
        return [rec["control"]]
    study_name = rec.get("rung_of") or rec["name"]
    bases = [b for b in (baseline_of(rec["seed"]), wide_baseline_of(rec["seed"])) if b and b != study_name]
    return [f"{b}-{rec['budget']}" for b in bases] if rec.get("rung_of") else bases


def _baseline_key(rec: Dict, base: str) -> str:
    """Where ``rec["vs"]`` keeps the pairing with ``base``: the family of
    the study's baseline (``transformer``, ``transformer-wide``), so that
    a run at a budget of its own is tabled like the study's runs."""
    if rec.get("rung_of"):
        base = base[:-len(f"-{rec['budget']}")]
    return family(base)


def pair_all(records: List[Dict], hyps: Dict[str, List[str]], refs: List[str], previous: Dict[str, Dict]) -> str:
    """Paired bootstrap (sacreBLEU's, 1000 resamples) of every run against
    each run of :func:`baselines_of`: ``rec["vs"][family of the baseline] =
    {"run", "delta_bleu", "p_value"}`` (:func:`_baseline_key`).  A pair
    whose translations are not both here keeps the result of ``previous``
    (records by name) if it was computed for the same run (same BLEU and
    updates).  Returns the bootstrap's signature ("" when nothing was
    paired)."""
    from fairseq_ctx.evaluation.bleu import paired_bootstrap

    signature = ""
    for rec in records:
        if rec.get("bleu") is None:
            continue
        prev = previous.get(rec["name"], {})
        same = (prev.get("bleu"), prev.get("updates")) == (rec["bleu"], rec["updates"])
        vs = {}
        for base in baselines_of(rec):
            key = _baseline_key(rec, base)
            if rec["name"] in hyps and base in hyps:
                res, signature = paired_bootstrap(hyps[base], {rec["name"]: hyps[rec["name"]]}, refs)
                vs[key] = {"run": base, "delta_bleu": round(res[rec["name"]].delta, 2),
                           "p_value": round(res[rec["name"]].p_value, 4)}
            elif same and key in prev.get("vs", {}):
                vs[key] = prev["vs"][key]
        rec["vs"] = vs
    return signature


def _mean_sd(values: List[float]) -> Dict:
    """Mean and sample standard deviation (n - 1; None for one value)."""
    n = len(values)
    mean = sum(values) / n
    sd = (sum((v - mean) ** 2 for v in values) / (n - 1)) ** 0.5 if n > 1 else None
    # + 0.0 turns a rounded -0.0 into 0.0, which prints without a sign
    return {"n": n, "mean": round(mean, 4) + 0.0, "sd": None if sd is None else round(sd, 4)}


def _metrics(rec: Dict) -> Dict[str, Optional[float]]:
    """The per-run numbers summarised over seeds."""
    usage = rec.get("usage", {})
    test = usage.get("context_test", {})
    out = {"bleu": rec.get("bleu"), "chrf": rec.get("chrf"), "valid_loss": rec.get("valid_loss"),
           "cxmi_bits": usage.get("cxmi", {}).get("none", {}).get("bits")}
    for cond, r in test.items():
        out[f"context_test_{cond}"] = r["accuracy"]
        for cls, b in r.get("by_class", {}).items():
            out[f"context_test_{cond}_{cls}"] = b["accuracy"]
    cues = usage.get("attribution")
    if cues:   # the share of attribution on the previous verse's gender cues, and a uniform one's
        for subset, r in ((k, cues[k]) for k in ("all", "context_decided")):
            out[f"gender_cue_share_{subset}"], out[f"gender_cue_uniform_share_{subset}"] = \
                r["cue_share"], r["uniform_share"]
        out["context_decided_items"] = cues["context_decided"]["items"]
    return out


def summary(records: List[Dict]) -> Dict[str, Dict]:
    """Per family (:func:`family`), over its evaluated seeds: mean and sd of
    every metric of :func:`_metrics`, with the seeds' values; and per
    baseline family its runs are paired with (:func:`pair_all`), the
    per-seed deltas, their mean and sd, in how many seeds the run's BLEU is
    higher ("wins") and in how many significantly so (:func:`tally`)."""
    out: Dict[str, Dict] = {}
    for rec in records:
        if rec.get("bleu") is None:
            continue
        fam = out.setdefault(family(rec["name"]), {"label": rec["label"], "seeds": [], "metrics": {}, "vs": {}})
        fam["seeds"].append(rec["seed"])
        for key, value in _metrics(rec).items():
            if value is not None:
                fam["metrics"].setdefault(key, {"values": []})["values"].append(value)
        for base, r in rec.get("vs", {}).items():
            fam["vs"].setdefault(base, {"deltas": [], "p_values": []})
            fam["vs"][base]["deltas"].append(r["delta_bleu"])
            fam["vs"][base]["p_values"].append(r["p_value"])
    for fam in out.values():
        for m in fam["metrics"].values():
            m.update(_mean_sd(m["values"]))
        for v in fam["vs"].values():
            v.update(tally(v["deltas"], v["p_values"]))
    return out


def tally(deltas: List[float], p_values: List[float]) -> Dict:
    """Per-seed paired deltas (> 0: ahead) and their bootstrap p-values
    (two-sided): mean and sd (:func:`_mean_sd`), in how many seeds ahead
    ("wins"), and in how many ahead or behind with p < ``ALPHA``."""
    pairs = list(zip(deltas, p_values))
    return {**_mean_sd(deltas), "wins": sum(1 for d in deltas if d > 0),
            "significant_wins": sum(1 for d, p in pairs if d > 0 and p < ALPHA),
            "significant_losses": sum(1 for d, p in pairs if d < 0 and p < ALPHA)}


def shuffled_drop(rec: Dict, hyps: List[str], shuffled_hyps: List[str], refs: List[str]):
    """BLEU with shuffled context against true context, paired bootstrap
    (the same resamples and settings as :func:`pair_all`): whether a context
    model's drop is more than resampling noise."""
    from fairseq_ctx.evaluation.bleu import paired_bootstrap

    res = paired_bootstrap(hyps, {"shuffled": shuffled_hyps}, refs)[0]["shuffled"]
    rec["shuffled_delta_bleu"] = round(res.delta, 2)
    rec["shuffled_p_value"] = round(res.p_value, 4)


def plot_curves(records: List[Dict], path: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for rec in records:
        hist = rec.get("history") or []
        if not hist:
            continue
        style = "--" if rec["seed"] != 1 else "-"
        axes[0].plot([h["updates"] for h in hist], [h["valid_loss"] for h in hist], style, marker=".",
                     label=rec["name"])
        axes[1].plot([h["train_seconds"] / 60 for h in hist], [h["valid_loss"] for h in hist], style, marker=".",
                     label=rec["name"])
    axes[0].set_xlabel("updates")
    axes[1].set_xlabel("training CPU minutes (one thread)")
    axes[0].set_ylabel("validation loss (label-smoothed, base 2)")
    axes[1].legend(fontsize=8)
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.suptitle("Bible es-en study: validation loss per epoch")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _pm(metric: Optional[Dict], spec: str, seeds: int) -> str:
    """mean ± sd of a summary metric (the sd unsigned); the value alone for
    one seed; "(k of n seeds)" where fewer of the family's n seeds have it."""
    if not metric:
        return ""
    text = format(metric["mean"], spec)
    if metric["sd"] is not None:
        text += " ± " + format(metric["sd"], spec.lstrip("+"))
    if metric["n"] < seeds:
        text += f" ({metric['n']} of {seeds} seeds)"
    return text


def _vs(v: Optional[Dict]) -> str:
    """A family's paired deltas against one baseline: their mean ± sd, in
    how many seeds it is ahead, and how many of its seeds the bootstrap
    calls significant (p < ``ALPHA``) either way."""
    if not v:
        return ""
    text = f"{_pm(v, '+.2f', v['n'])}, ahead in {v['wins']}/{v['n']}"
    marks = [f"{k} ahead" for k in [v["significant_wins"]] if k] + \
            [f"{k} behind" for k in [v["significant_losses"]] if k]
    return text + (f" (p < {ALPHA:g}: {', '.join(marks)})" if marks else "")


def markdown_table(records: List[Dict], summary: Dict[str, Dict]) -> str:
    """Per family: seeds, BLEU, chrF, averaged-model validation loss, the
    context test (true context; he / she), CXMI against no context, mean ±
    sd over seeds; and the paired deltas against each baseline with wins.
    A family with a ``control`` (GRET) is compared with it alone, in the
    last column (:func:`baselines_of`)."""
    # keyed as pair_all keeps the pairing (a control at a budget of its own under its study family)
    controls = {family(rec["name"]): _baseline_key(rec, rec["control"]) for rec in records if rec.get("control")}
    head = ["run", "seeds", "params", "BLEU", "chrF", "valid loss", "context test", "he / she", "CXMI bits",
            "Δ BLEU vs baseline", "Δ BLEU vs FFN-768"] + (["Δ BLEU vs its control"] if controls else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    params = {}
    for rec in records:
        params.setdefault(family(rec["name"]), rec.get("params") or 0)
    for name, fam in summary.items():
        m, n = fam["metrics"], len(fam["seeds"])
        he_she = ""
        if "context_test_true_masculine" in m:
            he_she = f"{_pm(m['context_test_true_masculine'], '.2f', n)} / {_pm(m['context_test_true_feminine'], '.2f', n)}"
        row = [fam["label"], str(n), f"{params.get(name, 0) / 1e6:.2f}M", _pm(m.get("bleu"), ".2f", n),
               _pm(m.get("chrf"), ".2f", n), _pm(m.get("valid_loss"), ".3f", n),
               _pm(m.get("context_test_true"), ".3f", n), he_she, _pm(m.get("cxmi_bits"), "+.4f", n)]
        if name in controls:
            row += ["", "", _vs(fam["vs"].get(controls[name]))]
        else:
            row += [_vs(fam["vs"].get("transformer")), _vs(fam["vs"].get("transformer-wide"))]
            row += [""] if controls else []
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def setup_record(study_data: Optional[Dict], settings: Settings) -> Dict:
    return {"corpus": "Bible es-en (scripts/prepare-bible.sh): chapters as documents, 8k joint sentencepiece; "
                      "the training split without the balanced context test's chapters "
                      "(fairseq_ctx.study.data)",
            "train_data": study_data,
            "size": list(settings.size), "recipe": list(settings.recipe),
            "schedule": " ".join(settings.schedule()),
            "budget": f"{settings.budget} updates for every run; the learning rate warms up linearly over "
                      f"{settings.warmup} updates and decays linearly to zero at the budget; decode the average of "
                      f"the checkpoints at updates {settings.budget - (settings.average - 1) * settings.save_every}"
                      f", ..., {settings.budget} (every {settings.save_every})",
            "decoding": "beam 4, --max-len-a 1.5 --max-len-b 10, every test sentence; detokenized sacreBLEU and chrF",
            "context_test": f"fairseq_ctx.study.context_set, {settings.context_per_class} items per class, "
                            "scored by fairseq-ctx-context-usage with true, no, shuffled and random context",
            "machine": "each record names its device, precision and the commit that trained it"}


def read(path: str) -> Tuple[Dict, Dict[str, Dict]]:
    """A results file written by :func:`write`, as (its other keys, its runs
    by name); both empty when there is no file yet."""
    if not os.path.exists(path):
        return {}, {}
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    runs = data.pop("runs", [])
    return data, {rec["name"]: rec for rec in runs}


def landed(path: str) -> Dict[str, Dict]:
    """The runs of the results file at ``path`` that finished and were
    evaluated, by name: what landed, in this session or an earlier one.  A
    fresh machine holds their records and translations (committed) but not
    their checkpoints; training skips them and ``--stage status`` counts
    them (fairseq_ctx.study.train.to_train)."""
    return {name: rec for name, rec in read(path)[1].items()
            if rec.get("status") == "trained" and rec.get("bleu") is not None
            and rec.get("budget") is not None and rec.get("updates") == rec.get("budget")}


def _hyps_path(fig_dir: str, name: str) -> str:
    return os.path.join(fig_dir, "hyps", name + ".test.hyp")


def keep_hyps(fig_dir: str, name: str, hyp_path: str):
    """Keep a run's test translations (the decoded ``hyp_path``) beside the
    figures, committed with the results, so that a machine without its
    checkpoints can still pair it."""
    path = _hyps_path(fig_dir, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    shutil.copyfile(hyp_path, path + ".part")
    os.replace(path + ".part", path)


def keep_usage(fig_dir: str, name: str, usage_path: str, results: str) -> str:
    """Keep a run's context-usage report beside the figures (committed);
    returns its path relative to the results file."""
    path = os.path.join(fig_dir, "usage", name + ".json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    shutil.copyfile(usage_path, path + ".part")
    os.replace(path + ".part", path)
    return os.path.relpath(path, os.path.dirname(results) or ".")


def read_hyps(fig_dir: str, name: str) -> Optional[List[str]]:
    from fairseq_ctx.evaluation.bleu import read_lines

    path = _hyps_path(fig_dir, name)
    return read_lines(path) if os.path.exists(path) else None


def write(path: str, records: List[Dict], extra: Dict):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path + ".part", "w") as f:
        json.dump(dict(extra, runs=records), f, indent=1, ensure_ascii=False)
    os.replace(path + ".part", path)
