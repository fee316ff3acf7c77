"""What the study trains: one model size, one recipe, one update budget for
every run (see ``docs/study.md``).

Size: 3+3 layers, d=128, FFN 512, 4 heads, shared embeddings (2.41M
parameters for the baseline with the Bible corpus's 8k joint vocabulary,
2.7-2.8M for the context models; the FFN-768 baseline matches Enc-DC's
2.81M).

Recipe: Adam (0.9, 0.98), dropout 0.1, label smoothing 0.1, weight decay
1e-4, gradient norm clipped at 1, 4096-token batches.

Budget (``Settings``): every run makes exactly ``budget`` (4,000) updates;
the learning rate warms up linearly over 400 updates to 2e-3 and decays
linearly to zero at the budget (fairseq's ``polynomial_decay``, power 1).
4,000 is a decision, not the pilot's rule: the pilot's baseline gained
8.98% in validation loss from 2,000 to 4,000 updates and would still gain
a few percent at 8,000, whose runs would double the cost of the whole study;
an equal-budget comparison below the baseline's plateau answers "which
architecture learns more from the same updates", and the 8,000 rung of the
baseline and the context encoder (seed 1) is the sensitivity check where a
GPU allows it.  Interval checkpoints every budget/20 updates; the five at
budget - k * budget/20, k = 0..4, are averaged for decoding
(``fairseq_ctx.study.evaluate.final_checkpoints``).

Data: every run trains on the corpus's training split without the chapters
of the balanced context test (``fairseq_ctx.study.data``,
``context_per_class`` items per class), so the test is held out from all.

The driver runs fairseq one epoch per invocation on CPU (``--max-epoch``
raised by one, resuming from ``checkpoint_last.pt``), so an interrupted run
loses at most the updates since its last checkpoint, saved every
budget/20 updates and at each epoch's end (``fairseq_ctx.study.train``).

Every run uses ``--task document_translation``: the task adds its separator
symbol to the dictionaries, so every model here has the same vocabulary (the
baseline, sentence-level, simply ignores the context), GRET can start from the
baseline's weights, and paired comparisons decode the same data.
"""
import re
from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional, Tuple

from fairseq_ctx.errors import ERROR_PREFIX  # every tool's (docs/errors.md)

SIZE = [
    "--encoder-layers", "3", "--decoder-layers", "3",
    "--encoder-embed-dim", "128", "--decoder-embed-dim", "128",
    "--encoder-ffn-embed-dim", "512", "--decoder-ffn-embed-dim", "512",
    "--encoder-attention-heads", "4", "--decoder-attention-heads", "4",
    "--share-all-embeddings",
]

RECIPE = [
    "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--lr", "0.002",
    "--clip-norm", "1.0", "--dropout", "0.1", "--weight-decay", "0.0001",
    "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
    "--max-tokens", "4096", "--required-batch-size-multiple", "1", "--num-workers", "0",
    "--log-format", "simple", "--log-interval", "50",
]

DOC_TASK = ["--task", "document_translation", "--context-size", "1"]


@dataclass(frozen=True)
class Settings:
    """Model size, recipe and update budget, the same for every run."""

    size: tuple = tuple(SIZE)
    recipe: tuple = tuple(RECIPE)
    # updates of every run; the learning rate warms up linearly over
    # ``warmup`` updates to its peak, then decays linearly to zero at ``budget``
    budget: int = 4000
    warmup: int = 400
    # interval checkpoints: one every budget / ``saves`` updates, the last
    # ``average`` of them averaged for decoding (the last quarter of training)
    saves: int = 20
    average: int = 5
    # where fairseq runs ("cpu" or "cuda"); not part of the recipe, recorded per run
    device: str = "cpu"
    # items per class of the balanced context test, whose chapters every
    # run's training split leaves out (fairseq_ctx.study.data)
    context_per_class: int = 45

    def with_budget(self, budget: int) -> "Settings":
        return replace(self, budget=budget)

    @property
    def save_every(self) -> int:
        return max(1, self.budget // self.saves)

    def schedule(self) -> List[str]:
        """fairseq's flags for the warm-up and linear decay to zero
        (``polynomial_decay`` with power 1) over exactly ``budget`` updates."""
        return ["--lr-scheduler", "polynomial_decay", "--power", "1", "--end-learning-rate", "0",
                "--warmup-updates", str(self.warmup), "--total-num-update", str(self.budget),
                "--max-update", str(self.budget),
                "--save-interval-updates", str(self.save_every), "--keep-interval-updates", str(self.average),
                # fairseq saves an epoch's end as an epoch checkpoint, not an
                # interval one: both kinds are kept for the average
                "--keep-last-epochs", str(self.average)]


STUDY = Settings()
# --smoke: the same pipeline at a toy size and a tiny budget, for tests and
# for checking a set-up before the real run (its numbers mean nothing).
SMOKE = Settings(
    size=("--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "16", "--decoder-embed-dim", "16",
          "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32", "--encoder-attention-heads", "2",
          "--decoder-attention-heads", "2", "--share-all-embeddings"),
    recipe=tuple(RECIPE[:RECIPE.index("--log-interval")]) + ("--log-interval", "5"),
    budget=2, warmup=1, saves=2, average=2, context_per_class=1)

# The pilot that chooses STUDY.budget: the baseline trained at budgets
# doubling from PILOT_START; the budget is the shortest B whose double
# improves the final validation loss by less than PILOT_GAIN (relative).
PILOT_START = 1000
PILOT_GAIN = 0.01


@dataclass
class Run:
    """One training run: ``name`` is its directory under the study's output."""

    name: str
    arch: str
    seed: int = 1
    # flags for training and decoding alike (task mode, architecture options)
    flags: List[str] = field(default_factory=list)
    # a run whose checkpoint_best.pt initialises this one (GRET, and the
    # baseline continued from itself as GRET's control)
    warm_start: Optional[str] = None
    # a run this one is also tested against (paired bootstrap), beside the baseline
    control: Optional[str] = None
    # decode again with --shuffle-context and score the contrastive set
    uses_context: bool = False
    label: str = ""
    # a budget of its own (the pilot's runs); None: the study's
    budget: Optional[int] = None
    # model flags for training only (the checkpoint keeps them for decoding)
    model_flags: List[str] = field(default_factory=list)
    # (a run batched like this one, a reference run): this run's budget is
    # the study's times the first's epoch length over the second's, so that
    # it sees as many sentence pairs as the reference (both epochs cover the
    # whole training split once)
    budget_from: Optional[Tuple[str, str]] = None
    # the study's run this one repeats at a budget of its own (``RUN@N``):
    # paired with the baselines at that budget, in a results file of its own
    rung_of: Optional[str] = None

    @property
    def task_flags(self) -> List[str]:
        return DOC_TASK + self.flags


# The Transformer widened to the largest context model's size: FFN 768
# instead of 512 gives 2,807,424 parameters against Enc-DC's 2,808,576
# (the baseline has 2,412,672), so a gain over it is not capacity.
WIDE = ["--encoder-ffn-embed-dim", "768", "--decoder-ffn-embed-dim", "768"]
SEEDS = (1, 2, 3)


def _seeded(name: str, arch: str, seed: int, **kw) -> Run:
    return Run(name if seed == 1 else f"{name}-seed{seed}", arch, seed=seed, **kw)


# Training order = order of information: seed by seed, the two baselines,
# then the context encoder, Enc-DC and ctxsan (each seed makes every
# comparison once more); then the one-seed controls and configurations.
RUNS = [run for seed in SEEDS for run in (
    _seeded("transformer", "transformer", seed, label="Transformer (baseline)"),
    _seeded("transformer-wide", "transformer", seed, model_flags=WIDE,
            label="Transformer, FFN 768 (capacity-matched baseline)"),
    _seeded("transformer_ctxenc", "transformer_ctxenc", seed, uses_context=True, label="Context encoder (Voita)"),
    _seeded("transformer_dc", "transformer_dc", seed, label="Enc-DC (Ampomah)"),
    _seeded("transformer_ctxsan", "transformer_ctxsan", seed, label="CSAN deep-global+deep (Yang)"),
)] + [
    Run("transformer_ctxenc_random", "transformer_ctxenc", flags=["--context-mode", "random"],
        uses_context=True, label="Context encoder, random context"),
    Run("concat", "transformer", flags=["--concat-context"], uses_context=True,
        label="Concatenation, at equal updates"),
    # the glued source counts in --max-tokens: at equal updates concatenation
    # sees fewer sentence pairs than the baseline; this run sees as many
    Run("concat-equal-data", "transformer", flags=["--concat-context"], uses_context=True,
        budget_from=("concat", "transformer"), label="Concatenation, at the baseline's sentence pairs"),
    Run("transformer_gret", "transformer_gret", warm_start="transformer", control="transformer-continued",
        label="GRET (Weng), warm start"),
    # GRET's control: the baseline trained on from its final checkpoint with
    # the same fresh optimizer, warm-up and budget as GRET's warm start, so
    # that what a restart alone gives is not credited to GRET's modules
    Run("transformer-continued", "transformer", warm_start="transformer",
        label="Transformer, continued (GRET's control)"),
] + [
    # Yang et al.'s footnote 1 (-5.23 BLEU without {λ_Q, λ_K}): ctxsan as
    # the study trains it with the gates taken out, paired with ctxsan of
    # the same seed, so that the delta is the gates' alone; seeds 1-3, as
    # the family it is compared with
    _seeded("transformer_ctxsan-no-gate", "transformer_ctxsan", seed, model_flags=["--ctxsan-no-gate"],
            control=_seeded("transformer_ctxsan", "transformer_ctxsan", seed).name,
            label="CSAN without its gates (Yang's footnote 1)")
    for seed in SEEDS
]


def pilot_ladder(top: int = 64000) -> List[Run]:
    """The pilot's runs: the baseline at budgets doubling from PILOT_START."""
    budgets, b = [], PILOT_START
    while b <= top:
        budgets.append(b)
        b *= 2
    return [pilot_run(b) for b in budgets]


def pilot_run(budget: int) -> Run:
    return Run(f"pilot-{budget}", "transformer", budget=budget, label=f"Transformer, pilot, {budget} updates")


def by_name(names=None) -> List[Run]:
    if not names:
        return list(RUNS)
    study = {run.name: run for run in RUNS}
    known = dict(study)
    for n in names:
        m = re.fullmatch(r"pilot-(\d+)", n)
        if m and int(m.group(1)) > 0:
            known[n] = pilot_run(int(m.group(1)))
        # RUN@N: that run at a budget of N updates (its own directory, RUN-N);
        # not a warm start (its start is the study's baseline) nor a run
        # whose budget is derived (concat-equal-data's)
        m = re.fullmatch(r"(.+)@(\d+)", n)
        if m and m.group(1) in study and int(m.group(2)) > 0:
            base = study[m.group(1)]
            if base.warm_start or base.budget_from:
                raise SystemExit(f"{ERROR_PREFIX}--runs {n}: {base.name} cannot run at a budget of its own ("
                                 + ("it starts from the study's baseline" if base.warm_start else
                                    "its budget is derived from other runs' epochs") + ")")
            known[n] = rung(base, int(m.group(2)))
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"{ERROR_PREFIX}--runs: unknown run(s) {', '.join(unknown)}; "
                         f"known: {', '.join(known)}")
    return [known[n] for n in names]


def rung(run: Run, budget: int) -> Run:
    """``run`` at a budget of ``budget`` updates (``RUN@N``): its own
    directory, ``RUN-N``; the sensitivity check of the study's ranking."""
    # a run paired with a control is paired with that control at the same budget
    return replace(run, name=f"{run.name}-{budget}", budget=budget, rung_of=run.name,
                   control=f"{run.control}-{budget}" if run.control else None,
                   label=f"{run.label}, {budget} updates")


def run_of(rec: Dict) -> Run:
    """The run a results record is of: the study's run of its name, or for
    a run at a budget of its own (``rung_of``) ``RUN@N`` again, N read from
    its name ``RUN-N`` (a record not trained yet has no budget)."""
    if rec.get("rung_of"):
        return by_name([f"{rec['rung_of']}@{rec['name'][len(rec['rung_of']) + 1:]}"])[0]
    return by_name([rec["name"]])[0]


def baseline_of(seed: int) -> Optional[str]:
    """The name of the plain Transformer trained from scratch with ``seed``
    (every run of that seed is paired with it), or None."""
    for run in RUNS:
        if run.arch == "transformer" and run.seed == seed and not (run.flags or run.model_flags or run.warm_start):
            return run.name
    return None


def wide_baseline_of(seed: int) -> Optional[str]:
    """The name of the capacity-matched baseline (FFN 768) trained with ``seed``, or None."""
    for run in RUNS:
        if run.arch == "transformer" and run.seed == seed and run.model_flags == WIDE and not run.warm_start:
            return run.name
    return None
