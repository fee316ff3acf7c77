"""Printing a table run: the paper's layout with our numbers beside the
paper's (parameters, speeds relative to the baseline, BLEU, the bootstrap
difference and p-value), footnotes with every signature, and ``table.json``.
"""
from typing import Any, Dict, List

from .definition import BLEU_FLAVOURS


def format_table(run) -> str:
    """The table in the paper's layout, ours beside the paper's numbers, with footnotes."""
    table = run.table
    ref = run.speed_ref()
    header = list(table.columns) + ["params", "(paper)"]
    for kind in ("train", "decode"):
        header += [f"{kind} (rel)"]
        if kind in table.speed:
            header += ["(paper)"]
    tok = any(run.tok_kind(st) for st in run.states.values())
    header += ["BLEU"] + (["tok BLEU"] if tok else []) + ["(paper)", "diff", "p"]
    rows = [header]
    base_params = {}
    for st in run.states.values():
        b = run.baseline_of(st.row)
        if b and run.states[b].train.get("params"):
            base_params[st.row.label] = run.states[b].train["params"]
    for st in run.states.values():
        row = st.row
        line = [str(c) for c in row.cells] + [""] * (len(table.columns) - len(row.cells))
        p = st.train.get("params")
        if p is None:
            line.append("-")
        else:
            cell = _millions(p)
            bp = base_params.get(row.label)
            if bp is not None and not row.model_of:
                cell += f" ({_signed_millions(p - bp)})"
            line.append(cell)
        line.append(_paper(row.paper.get("params")))
        for kind in ("train", "decode"):
            ours = st.train.get("updates_per_s") if kind == "train" else (st.score or {}).get("sentences_per_s")
            theirs = row.paper.get(kind)
            refv = None
            if ref is not None:
                refv = ref.train.get("updates_per_s") if kind == "train" else (ref.score or {}).get("sentences_per_s")
            line.append(f"{ours / refv:.2f}x" if ours and refv else "-")
            if kind in table.speed:
                ref_paper = ref.row.paper.get(kind) if ref is not None else None
                if isinstance(theirs, (int, float)) and isinstance(ref_paper, (int, float)) and ref_paper:
                    line.append(f"{theirs:g} ({theirs / ref_paper:.2f}x)")
                else:
                    line.append(_paper(theirs))
        sc = st.score or {}
        if st.status == "failed":
            line += ["FAILED"] + (["-"] if tok else []) + [_paper(row.paper.get("bleu")), "-", "-"]
        else:
            line.append(f"{sc['bleu']:.2f}" if "bleu" in sc else "-")
            if tok:
                line.append(f"{sc['tok_bleu']:.2f}" if sc.get("tok_bleu") is not None else "-")
            line.append(_paper(row.paper.get("bleu")))
            c = st.compare
            key = "tok_" if run.tok_kind(st) and "tok_delta" in c else ""
            line.append(f"{c[key + 'delta']:+.2f}" if c else "-")
            line.append(f"{c[key + 'p_value']:.3f}" if c else "-")
        rows.append(line)
    widths = [max(len(x[i]) for x in rows) for i in range(len(header))]
    text = [f"{table.title}" + ("   [SMOKE RUN: tiny models, 3 updates, Bible data; not comparable]"
                             if run.smoke else "")]
    for i, line in enumerate(rows):
        text.append("  ".join(c.ljust(w) if j < len(table.columns) else c.rjust(w)
                              for j, (c, w) in enumerate(zip(line, widths))))
        if i == 0:
            text.append("-" * len(text[-1]))
    text += _footnotes(run, tok)
    return "\n".join(text)

def _footnotes(run, tok: bool) -> List[str]:
    notes = []
    scored = [st for st in run.states.values() if st.score]
    sigs = sorted({st.score["signature"] for st in scored})
    if scored:
        sets = sorted({f"{st.dataset.title if not run.smoke else 'Bible (for ' + st.dataset.title + ')'} "
                       f"{st.score['subset']} ({st.score['sentences']} sentences, all scored)" for st in scored})
        notes.append("data: " + "; ".join(sets))
    notes.append("BLEU: detokenized sacreBLEU, " + ", ".join(sigs) if sigs else "BLEU: -")
    if tok:
        tsigs = sorted({st.score["tok_signature"] for st in scored if st.score.get("tok_signature")})
        notes.append("tok BLEU: the paper's tokenized BLEU, " + (", ".join(tsigs) or "-"))
    # how the paper scored each dataset of the table, named with its recipe
    flavours: Dict[str, List[str]] = {}
    for st in run.states.values():
        title = st.dataset.title
        if title not in flavours.setdefault(run.flavour(st), []):
            flavours[run.flavour(st)].append(title)
    for flavour, titles in flavours.items():
        notes.append(f"paper's BLEU on {', '.join(titles)}: {BLEU_FLAVOURS[flavour][1]}")
    dicts = []
    for st in run.states.values():
        sizes = dictionary_sizes(st.bin_dir, *st.data_cfg.langs(run.configs))
        line = f"{st.data_cfg.title}: " + ", ".join(f"{lang} {n}" for lang, n in sizes.items())
        if sizes and line not in dicts:
            dicts.append(line)
    if dicts:
        notes.append("dictionaries (entries of dict.LANG.txt + 4 fairseq specials; the document task adds <sep>): "
                     + "; ".join(dicts))
    ref = run.speed_ref()
    notes.append(f"params: ours (difference from the row's baseline); speeds: ours relative to "
                 f"{ref.row.label if ref else '-'} (train: updates/s, decode: sentences/s of fairseq-generate)")
    notes.append(f"diff, p: against the row's baseline in the paper's metric ({'tok BLEU' if tok else 'BLEU'} "
                 f"where given), paired bootstrap resampling ({run.opts.bootstrap_samples} samples, sacreBLEU), "
                 "two-sided")
    if run.table.paper_note:
        notes.append("paper: " + run.table.paper_note)
    notes += list(run.table.notes)
    return [""] + notes

def dictionary_sizes(bin_dir, src: str, tgt: str) -> Dict[str, int]:
    """Size of each side's fairseq dictionary (entries of ``dict.LANG.txt``
    plus the 4 symbols fairseq adds: <s>, <pad>, </s>, <unk>); empty where
    the files are missing (a dry run before the data is prepared)."""
    from pathlib import Path
    out = {}
    for lang in (src, tgt):
        path = Path(bin_dir) / f"dict.{lang}.txt"
        if path.is_file():
            with open(path, encoding="utf-8") as f:
                out[lang] = sum(1 for line in f if line.strip()) + 4
    return out


def as_json(run) -> Dict[str, Any]:
    """Every row's configs, status, numbers and the paper's, for ``table.json``."""
    return {
        "table": run.table.name, "title": run.table.title, "smoke": run.smoke, "out": str(run.out),
        "rows": [{
            "label": st.row.label, "cells": list(st.row.cells), "dataset": st.dataset.name,
            "data": str(st.bin_dir), "train_config": st.row.train, "model_of": st.row.model_of,
            "generate_config": run.gen_config(st.row), "model_dir": str(st.model_dir) if st.model_dir else None,
            "status": st.status, "error": st.error, "log": str(st.log) if st.log else None,
            "params": st.train.get("params"), "updates_per_s": st.train.get("updates_per_s"),
            "score": st.score, "compare": st.compare, "paper": st.row.paper,
            "paper_bleu": {"flavour": run.flavour(st), "column": BLEU_FLAVOURS[run.flavour(st)][0],
                           "recipe": BLEU_FLAVOURS[run.flavour(st)][1]},
        } for st in run.states.values()],
        "paper_note": run.table.paper_note, "notes": list(run.table.notes),
        "failures": [{"what": n, "error": m, "log": lg} for n, m, lg in run.failures],
        "timings_s": {k: round(v, 1) for k, v in run.timings.items()},
    }


def _millions(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e6:.3f}M"


def _signed_millions(n: int) -> str:
    return ("+" if n >= 0 else "-") + _millions(abs(n))


def _paper(v) -> str:
    if v is None:
        return "n/a"
    return f"{v:g}" if isinstance(v, (int, float)) else str(v)

