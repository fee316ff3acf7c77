"""The analyses a table runs on its trained rows, where the paper has the
figure: BLEU by source length, context gates (ctxsan), DC divergence (kernel
sweep), words attending to context (Voita), bag-of-words prediction (GRET
Table 5), probing (DC Table 4). Each calls the analysis command's ``main``
in-process (printing its command line, to run it by hand) and returns a
summary for ``table.txt``.
"""
import abc
import json
import shlex
from typing import List, Optional, Sequence

from .config import read_args
from .running import SMOKE_ANALYSIS_LIMIT, RowState, StepFailed, quote_command, tokenize_for


class Analysis(abc.ABC):
    """An analysis a table runs on its trained rows (subclasses below)."""
    name = "analysis"

    rows: Sequence[str] = ()

    def rows_needed(self, table) -> List[str]:
        """Rows whose results the analysis reads; it is skipped (one line)
        when ``--rows`` left one of them out."""
        return list(self.rows)

    @abc.abstractmethod
    def run(self, run) -> Optional[str]:
        """Run on ``run``'s models (writing files to its table directory) and
        return a summary printed and appended to ``table.txt``, or None."""

    @staticmethod
    def _models(run, labels: Sequence[str]) -> List[RowState]:
        states = [run.model_state(run.states[label]) for label in labels]
        missing = [s.row.label for s in states if s.model_dir is None or not s.avg.exists()]
        if missing:
            raise StepFailed(f"no averaged checkpoint for {', '.join(missing)}")
        return states

    @staticmethod
    def _call(module: str, argv: List[str]):
        """Run an analysis command's ``main(argv)`` in this process (its
        command line is printed, to run it by hand)."""
        import importlib

        print(f"+ python3 -m {module} {quote_command(argv)}", flush=True)
        try:
            return importlib.import_module(module).main(argv)
        except SystemExit as e:
            if e.code not in (0, None):
                raise StepFailed(f"{module} exited with status {e.code}")


class LengthBuckets(Analysis):
    """BLEU by source length of the rows (ctxsan Fig. 5, DC Fig. 5, GRET Fig. 5).

    Lengths are subword tokens of the binarized source split that was
    decoded (the dataset's sizes without ``</s>``): the DC paper's unit
    ("fewer than ten subword tokens"); ctxsan and GRET do not name theirs, and
    the same unit is used for them (``paper_unit`` says so in the output).
    Not the ``S-`` lines of fairseq-generate: those are printed after BPE
    removal and detokenization, so they count words.  Buckets are closed on
    the left (:mod:`fairseq_ctx.evaluation.length_buckets`)."""
    name = "length buckets"

    def __init__(self, rows: Optional[Sequence[str]] = None, edges=(10, 20, 30, 40, 50), figure: str = "",
                 paper_unit: str = "subword tokens"):
        self.rows, self.edges, self.figure, self.paper_unit = rows, tuple(edges), figure, paper_unit

    def rows_needed(self, table) -> List[str]:
        return []   # any scored rows will do (at least one)

    def run(self, run):
        from fairseq_ctx.evaluation import (binarized_lengths, bleu_by_length, detok_bleu, format_length_table,
                                            plot_length_buckets, read_generate_log, read_lines, tokenized_bleu)
        labels = list(self.rows or [r.label for r in run.table.rows])
        states = [run.states[label] for label in labels if run.states[label].score]
        if len(states) < 1:
            raise StepFailed("no scored rows")
        base_label = run.table.baseline if run.table.baseline in [s.row.label for s in states] else None
        ref = states[0].score["reference"]
        states = [s for s in states if s.score["reference"] == ref]
        refs = read_lines(ref)
        src_lang, tgt_lang = states[0].data_cfg.langs(run.configs)
        subset = run.gen_subset(states[0])
        prefix = states[0].bin_dir / f"{subset}.{src_lang}-{tgt_lang}.{src_lang}"
        try:
            lengths = binarized_lengths(prefix)
        except Exception as e:  # EvaluationError, or fairseq's on a damaged file
            raise StepFailed(f"source lengths from {prefix}: {e}")
        if len(lengths) != len(refs):
            raise StepFailed(f"{prefix}: {len(lengths)} sentences, but the reference {ref} has {len(refs)}")
        unit = "subword tokens of the binarized source (without </s>)"
        hyps = {s.row.label: read_generate_log(s.gen_log, len(refs), "D") for s in states}
        score0 = states[0].score
        if score0.get("tok_bleu") is not None:   # the paper's tokenized BLEU
            split_refs = tokenize_for(score0, refs)
            split = {k: tokenize_for(score0, v) for k, v in hyps.items()}
            res = bleu_by_length(None, split, split_refs, self.edges, score_fn=lambda h, r: tokenized_bleu(h, r)[0],
                                 lengths=lengths, unit=unit)
            res["metric"] = ("tokenized BLEU (multi-bleu, Moses-tokenized)" if score0.get("tok_kind") == "multi-bleu"
                             else "tokenized compound-split BLEU")
        else:
            res = bleu_by_length(None, hyps, refs, self.edges, score_fn=lambda h, r: detok_bleu(h, r)[0],
                                 lengths=lengths, unit=unit)
            res["metric"] = "detokenized sacreBLEU"
        res.update(src=str(prefix), figure=self.figure, paper_unit=self.paper_unit)
        run.table_dir.mkdir(parents=True, exist_ok=True)
        (run.table_dir / "length_buckets.json").write_text(json.dumps(res, indent=2) + "\n")
        png = run.table_dir / "length_buckets.png"
        plot_length_buckets(res, png, baseline=base_label, title=f"{run.table.title}: {res['metric']} by source length")
        return (f"{res['metric']} by source length ({self.figure}; {res['groups']} groups closed on the left; "
                f"{unit}; paper's unit: {self.paper_unit}):\n{format_length_table(res, base_label)}\nplot: {png}")


class CtxSanGates(Analysis):
    """Mean context gates per layer (ctxsan Figures 2 and 3)."""
    name = "ctxsan gates"

    def __init__(self, rows: Sequence[str]):
        self.rows = rows

    def run(self, run):
        states = self._models(run, self.rows)
        out = run.table_dir / "gates"
        if (out / "gates.json").exists():
            return f"context gates (Figures 2-3): {out / 'gates.png'} (already there)"
        argv = [str(states[0].bin_dir), "--path", ":".join(str(s.avg) for s in states), "--gen-subset", "valid",
                "--out", str(out)]
        if run.smoke or run.opts.cpu:
            argv += ["--cpu"]
        import io
        import contextlib
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):  # it prints its whole JSON summary
            self._call("fairseq_ctx.analysis.ctxsan_gates", argv)
        summary = json.loads((out / "gates.json").read_text())
        lines = ["mean context gates lambda_Q / lambda_K per layer (Figures 2-3; validation set):"]
        for label, m in zip(self.rows, summary["models"]):
            for side, layers in m["sides"].items():
                cells = ", ".join(f"{r['layer']}: " + "/".join("-" if r[f'lambda_{s}'] is None else f"{r[f'lambda_{s}']:.2f}"
                                                               for s in ("q", "k")) for r in layers)
                lines.append(f"  {label} [{side}] {cells}")
        lines.append(f"plot: {out / 'gates.png'}")
        return "\n".join(lines)


class DCDivergence(Analysis):
    """JS divergence between the DC attentions per encoder layer (DC Fig. 4)."""
    name = "dc divergence"

    def __init__(self, rows: Sequence[str]):
        self.rows = rows

    def run(self, run):
        states = self._models(run, self.rows)
        out = run.table_dir / "dc_divergence"
        if not (out / "dc_divergence.json").exists():
            argv = [str(states[0].bin_dir), "--path", ":".join(str(s.avg) for s in states), "--gen-subset", "valid",
                    "--out", str(out), "--user-dir", str(run.user_dir),
                    *read_args(states[0].data_cfg.train_config(run.configs))]
            if run.smoke:
                argv += ["--cpu", "--limit", str(SMOKE_ANALYSIS_LIMIT)]
            elif run.opts.cpu:
                argv += ["--cpu"]
            self._call("fairseq_ctx.analysis.dc_divergence", argv)
        summary = json.loads((out / "dc_divergence.json").read_text())
        lines = ["Jensen-Shannon divergence of alpha_g and alpha_l (Fig. 4; validation set, nats):"]
        for label, c in zip(self.rows, summary["checkpoints"]):
            lines.append(f"  {label}: E_d {c['E_d']:.4f}; per layer " +
                         ", ".join(f"{k}: {v:.4f}" for k, v in c["dv"].items()))
        lines.append(f"plot: {out / 'dc_divergence.png'}")
        return "\n".join(lines)


class ContextAttention(Analysis):
    """Source words that attend most to context (Voita et al.'s top-10 table)."""
    name = "context attention"

    def __init__(self, row: str, task_config: str, top_k: int = 10):
        self.row, self.task_config, self.top_k = row, task_config, top_k
        self.rows = (row,)

    def run(self, run):
        st, = self._models(run, [self.row])
        out = run.table_dir / "context_attention.json"
        argv = [str(st.bin_dir), "--path", str(st.avg), "--gen-subset", "test", "--out", str(out),
                "--user-dir", str(run.user_dir), "--top-k", str(self.top_k),
                *read_args(run.configs / self.task_config), *read_args(st.data_cfg.train_config(run.configs))]
        if run.smoke:
            argv += ["--cpu", "--limit", str(SMOKE_ANALYSIS_LIMIT), "--min-count", "1"]
        elif run.opts.cpu:
            argv += ["--cpu"]
        if not out.exists():
            out.parent.mkdir(parents=True, exist_ok=True)  # the script writes a file, not a directory
            self._call("fairseq_ctx.analysis.ctxenc_context_attention", argv)
        from fairseq_ctx.analysis.ctxenc_context_attention import format_table
        return (f"words with the largest share of attention to context ({self.row}; test set; paper: it, yours, "
                f"ones, you, I, yes, ...; both rankings, settings on each):\n"
                + format_table(json.loads(out.read_text()), self.top_k))


class BowPrediction(Analysis):
    """Bag-of-words prediction from GRET's global state vs the last / average
    encoder states (GRET Table 5; fairseq_ctx/analysis/bow_prediction.py)."""
    name = "bow prediction"
    PAPER = "paper (Table 5, precision Top-200/500/1000): Last 43/52/64%, Average 49/57/69%, GRET 63/74/81%"

    def __init__(self, row: str):
        self.row = row
        self.rows = (row,)

    def run(self, run):
        st, = self._models(run, [self.row])
        out = run.table_dir / "bow_prediction"
        if not (out / "bow_prediction.json").exists():
            argv = [str(st.bin_dir), "--path", str(st.avg), "--out", str(out)]
            if run.smoke:
                argv += ["--cpu", "--epochs", "1", "--train-limit", "256", "--topk", "10,50,100"]
            elif run.opts.cpu:
                argv += ["--cpu"]
            self._call("fairseq_ctx.analysis.bow_prediction", argv)
        from fairseq_ctx.analysis.bow_prediction import format_table
        summary = json.loads((out / "bow_prediction.json").read_text())
        return f"bag-of-words prediction (Table 5) of {self.row}:\n{format_table(summary)}\n{self.PAPER}"


class Probing(Analysis):
    """SentEval probing of the encoders (DC Table 4; fairseq_ctx/analysis/probing.py).
    Needs the probing files and the data's preprocessing, given with
    ``--probing-args`` (e.g. ``"--probing-dir probing --tokenizer moses --bpe
    subword_nmt --bpe-codes CODES"``); skipped without it."""
    name = "probing"

    def __init__(self, rows: Sequence[str]):
        self.rows = rows

    def run(self, run):
        if not run.opts.probing_args:
            return ("probing (Table 4): skipped; pass --probing-args \"--probing-dir DIR [--tokenizer moses --bpe "
                    "subword_nmt --bpe-codes CODES]\" to run fairseq_ctx.analysis.probing on "
                    + ", ".join(self.rows))
        states = self._models(run, self.rows)
        out = run.table_dir / "probing"
        if not (out / "probing.json").exists():
            argv = [str(states[0].bin_dir), "--path", ":".join(str(s.avg) for s in states), "--out", str(out),
                    *shlex.split(run.opts.probing_args)]
            if run.smoke or run.opts.cpu:
                argv += ["--cpu"]
            self._call("fairseq_ctx.analysis.probing", argv)
        from fairseq_ctx.analysis.probing import format_table
        return f"probing accuracies (Table 4) of {', '.join(self.rows)}:\n" + \
            format_table(json.loads((out / "probing.json").read_text()))


# ---------------------------------------------------------------------------
# command line
