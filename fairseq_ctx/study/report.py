"""The study's results: one JSON record per run, the validation curves, BLEU
by source length, and a Markdown table for the docs."""
import json
import os
import shutil
from typing import Dict, List, Optional, Set, Tuple

from fairseq_ctx.study.runs import Settings


# what paired() and paired_controls() add to a record
PAIRED_KEYS = ("delta_bleu", "p_value", "paired_with", "delta_bleu_vs_control", "p_value_vs_control")


def paired(records: List[Dict], hyps: Dict[str, List[str]], refs: List[str], baseline: Optional[str]):
    """Paired bootstrap p-value and delta of every run against the baseline
    (sacreBLEU's implementation through fairseq_ctx.evaluation)."""
    from fairseq_ctx.evaluation.bleu import paired_bootstrap

    if baseline is None or baseline not in hyps:
        return ""
    others = {name: h for name, h in hyps.items() if name != baseline}
    results, signature = paired_bootstrap(hyps[baseline], others, refs)
    for rec in records:
        res = results.get(rec["name"])
        if res is not None:
            rec["delta_bleu"] = round(res.delta, 2)
            rec["p_value"] = round(res.p_value, 4)
            rec["paired_with"] = baseline
    return signature


def paired_controls(records: List[Dict], hyps: Dict[str, List[str]], refs: List[str]):
    """Paired bootstrap of each run that names a ``control`` run against it
    (GRET against the baseline continued from the same checkpoint)."""
    from fairseq_ctx.evaluation.bleu import paired_bootstrap

    for rec in records:
        control = rec.get("control")
        if control and rec["name"] in hyps and control in hyps:
            res = paired_bootstrap(hyps[control], {rec["name"]: hyps[rec["name"]]}, refs)[0][rec["name"]]
            rec["delta_bleu_vs_control"] = round(res.delta, 2)
            rec["p_value_vs_control"] = round(res.p_value, 4)


def paired_by_seed(records: List[Dict], hyps: Dict[str, List[str]], refs: List[str], carried_seeds: Set[int],
                   previous: Dict[str, Dict]) -> str:
    """:func:`paired` and :func:`paired_controls` within each seed: every
    run against the baseline trained with its own seed, wherever both
    translations are here. In a seed with a trained run whose translations
    are not here (``carried_seeds``), a run that could not be paired keeps
    the paired results of ``previous`` (records by name) only if it is the
    run they were computed for (same BLEU and updates). Returns the
    bootstrap's signature ("" when nothing was paired)."""
    from fairseq_ctx.study.runs import baseline_of

    signature = ""
    for seed in sorted({rec["seed"] for rec in records}):
        group = [rec for rec in records if rec["seed"] == seed]
        seed_hyps = {rec["name"]: hyps[rec["name"]] for rec in group if rec["name"] in hyps}
        signature = paired(group, seed_hyps, refs, baseline=baseline_of(seed)) or signature
        paired_controls(group, seed_hyps, refs)
        if seed not in carried_seeds:
            continue
        for rec in group:
            prev = previous.get(rec["name"], {})
            if rec.get("bleu") is None or (prev.get("bleu"), prev.get("updates")) != (rec["bleu"], rec["updates"]):
                continue
            for key in PAIRED_KEYS:
                if key not in rec and key in prev:
                    rec[key] = prev[key]
    return signature


def shuffled_drop(rec: Dict, hyps: List[str], shuffled_hyps: List[str], refs: List[str]):
    """BLEU with shuffled context against true context, paired bootstrap
    (the same resamples and settings as :func:`paired`): whether a context
    model's drop is more than resampling noise."""
    from fairseq_ctx.evaluation.bleu import paired_bootstrap

    res = paired_bootstrap(hyps, {"shuffled": shuffled_hyps}, refs)[0]["shuffled"]
    rec["shuffled_delta_bleu"] = round(res.delta, 2)
    rec["shuffled_p_value"] = round(res.p_value, 4)


def seed_spread(records: List[Dict]) -> Dict[str, Dict]:
    """BLEU and validation loss of each architecture trained with two seeds."""
    spread = {}
    for rec in records:
        if rec["seed"] == 1:
            continue
        first = [r for r in records if r["seed"] == 1 and r["arch"] == rec["arch"] and r["flags"] == rec["flags"]
                 and not r.get("warm_start")]
        if first and "bleu" in first[0] and "bleu" in rec:
            spread[rec["arch"]] = {"bleu": [first[0]["bleu"], rec["bleu"]],
                                   "bleu_spread": round(abs(first[0]["bleu"] - rec["bleu"]), 2),
                                   "valid_loss": [first[0]["valid_loss"], rec["valid_loss"]]}
    return spread


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


def _fmt(value, spec: str, missing: str = "") -> str:
    return missing if value is None else format(value, spec)


def markdown_table(records: List[Dict]) -> str:
    head = ("| run | params | epochs | updates | train min | best valid loss | BLEU | Δ vs baseline (p) "
            "| shuffled-context BLEU (Δ, p) | pronoun acc. (he / she) | with shuffled context |")
    lines = [head, "|" + "---|" * 11]
    for rec in records:
        contrast = rec.get("contrastive_accuracy")
        by = rec.get("contrastive_by_class", {})
        cls = (f" ({_fmt(by.get('masculine', {}).get('accuracy'), '.2f')} / "
               f"{_fmt(by.get('feminine', {}).get('accuracy'), '.2f')})") if by else ""
        delta = "" if rec.get("delta_bleu") is None else f"{rec['delta_bleu']:+.2f} ({rec['p_value']:.3f})"
        shuffled = _fmt(rec.get("shuffled_bleu"), ".2f")
        if rec.get("shuffled_delta_bleu") is not None:
            shuffled += f" ({rec['shuffled_delta_bleu']:+.2f}, p {rec['shuffled_p_value']:.3f})"
        lines.append(
            f"| {rec['label']} | {rec['params'] / 1e6:.2f}M | {rec['epochs']} | {rec['updates']} "
            f"| {rec['train_minutes']:.0f} | {rec['valid_loss']:.3f} | {_fmt(rec.get('bleu'), '.2f', 'pending')} "
            f"| {delta} | {shuffled} "
            f"| {_fmt(contrast, '.3f')}{cls} | {_fmt(rec.get('shuffled_contrastive_accuracy'), '.3f')} |")
    return "\n".join(lines)


def setup_record(pronoun_counts: Optional[Dict], settings: Settings) -> Dict:
    return {"corpus": "Bible es-en (scripts/prepare-bible.sh): 29,746 train / 567 valid / 553 test verses, "
                      "chapters as documents, 8k joint sentencepiece",
            "size": list(settings.size), "recipe": list(settings.recipe),
            "schedule": " ".join(settings.schedule()),
            "budget": f"{settings.budget} updates for every run; the learning rate warms up linearly over "
                      f"{settings.warmup} updates and decays linearly to zero at the budget; decode the average of "
                      f"the last {settings.average} checkpoints, saved every {settings.save_every} updates",
            "decoding": "beam 4, --max-len-a 1.5 --max-len-b 10, every test sentence; detokenized sacreBLEU",
            "pronoun_set": pronoun_counts,
            "machine": "CPU, one thread per run (taskset, OMP_NUM_THREADS=1)"}


def read(path: str) -> Tuple[Dict, Dict[str, Dict]]:
    """A results file written by :func:`write`, as (its other keys, its runs
    by name); both empty when there is no file yet."""
    if not os.path.exists(path):
        return {}, {}
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    runs = data.pop("runs", [])
    return data, {rec["name"]: rec for rec in runs}


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


def read_hyps(fig_dir: str, name: str) -> Optional[List[str]]:
    from fairseq_ctx.evaluation.bleu import read_lines

    path = _hyps_path(fig_dir, name)
    return read_lines(path) if os.path.exists(path) else None


def write(path: str, records: List[Dict], extra: Dict):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path + ".part", "w") as f:
        json.dump(dict(extra, runs=records), f, indent=1, ensure_ascii=False)
    os.replace(path + ".part", path)
