"""Contrastive evaluation: does a model give the best score to the right
translation, when only the context tells which one is right?

Usage::

    python3 -m fairseq_ctx.contrastive DATA-BIN --path CKPT --format voita \\
        --src deixis_dev.src --dst deixis_dev.dst --json deixis_dev.json \\
        [--bpe sentencepiece --sentencepiece-model spm.model] \\
        [--task document_translation --context-size 1 --concat-context] \\
        [--batch-size 32] [--max-tokens N] [--length-normalize] \\
        [--ties {official,wrong,right,half}] [--results results.json] [--scores-out scores.txt]
    # scores made elsewhere (any system), no model:
    python3 -m fairseq_ctx.contrastive --format voita --src S --dst D --json J \\
        --scores-in scores.txt [--maximize] [--results results.json]

``DATA-BIN`` holds the dictionaries (``dict.{src,tgt}.txt``) the model was
trained with.  The model and its task come from the checkpoint
(``checkpoint_utils.load_model_ensemble_and_task``); ``--context-size``,
``--concat-context``/``--no-concat-context``, ``--source-lang`` and
``--target-lang`` override the checkpoint's task flags.  ``--task`` may be
given but must name the checkpoint's task: ``document_translation`` adds a
separator symbol to the dictionaries, so a checkpoint only loads with the task
it was trained with.  ``--path a.pt:b.pt`` scores with an ensemble (the mean of
the models' probabilities per token, as fairseq's ``SequenceScorer``).
``--bpe``/``--tokenizer`` split the text as for ``fairseq-generate``;
``--source-bpe-model``/``--target-bpe-model`` give one subword model per
language; more than 5% ``<unk>`` among the scored tokens of a side is warned
about (a model trained on subword units scored on words).

Score of a candidate = log p(current target sentence | current source
sentence, source context[, target context]), summed over its tokens
including the final ``</s>`` (natural log), by teacher forcing through the
model's forward pass, batched (``--batch-size`` candidates, and at most
``--max-tokens`` padded tokens with the context counted), never beam search.
The candidates of a source are batched together and, for encoder-decoder
models, the encoder runs once per distinct source + context of a batch;
``reorder_encoder_out`` hands its output to each candidate, as beam search
does for hypotheses (``--no-share-encoder``: the model's own forward per
candidate; the same scores).  ``--length-normalize`` divides by the number
of target tokens.  Identical inputs (same tokens of source, contexts and
target after ``--tokenizer``/``--bpe`` and the dictionary; unknown words
become ``<unk>``) are scored once, so they tie exactly.

How the context reaches the model is the task's business
(``DocumentTranslationTask.build_context_dataset`` / ``model_input``): the
newest ``--context-size`` context sentences (all when a group has fewer) go
to a context-aware architecture as ``ctx_tokens``,
are glued to the source with the separator when the task has
``--concat-context``, and are dropped for a sentence-level model (or a
checkpoint trained with ``--task translation``).  A model trained with
``--concat-context --target-context`` (the 2-to-2 concatenation baseline)
also gets the newest ``--context-size`` target context sentences, glued
before the candidate as a forced decoder prefix; only the candidate's own
tokens are scored.

What a model without target context can see, per suite:

* Voita et al. (2019): the candidates of a group share the source, the
  source context and the target context, and differ only in the current
  sentence.  Deixis (T/V forms, speaker gender) and lexical cohesion
  (consistent translation of a repeated name or word) are decided by the
  previous *translations*; English source context carries neither, so a
  source-context model can at best learn biases there.  In the ellipsis
  sets the elided material is in the context sentence on both sides, so
  source context can help there.
* ContraPro (Müller et al. 2018): the German pronoun agrees with the
  antecedent's German gender: the source context gives the antecedent, the
  target context its gender as translated.
* Bawden et al. (2018): in the anaphora set the four pairs of a block share
  the same source and source context and swap the correct and incorrect
  translations, so a model blind to the target context gives the same
  score to the same sentence in both roles: it is right on at most half the
  pairs (exactly half without ties), by design.  In the lexical-choice set
  89 of the 100 blocks have different source context sentences for their
  two examples, so source context can decide those.

A group (one test example: a source, its context, 2 or more candidate
translations, one of them true) is right when the true candidate has the
best score.  Ties follow ``--ties official`` (default): each suite's own
script, exactly: Voita's ``evaluate_consistency.py`` takes ``np.argmin`` of
the losses, so the first of the candidates tied for the best wins (a group
that lists the true translation twice, as some of ellipsis_vp and
ellipsis_infl do, is right when its first copy is ``true_ind``);
ContraPro's and Bawden's ``evaluate.py`` compare strictly, so a tie is
wrong.  ``wrong``, ``right`` and ``half`` (1/k for a k-way tie) apply one
rule to every format.  Scores are compared exactly (``--tie-tolerance``
default 0, as the scripts do); the number of groups whose true candidate
tied is always reported.

Score files (``--scores-out``, ``--scores-in``): one score per candidate
line, in the order of the text files (the order the official scripts
read); losses (negated log-probabilities, lower is better, what all three
official scripts expect by default) unless ``--maximize``
(log-probabilities).  Written at full precision, so our files can be fed to
the official scripts and theirs to ours, and ``--scores-out`` then
``--scores-in`` gives the same report.  The results JSON has ``accuracy``
(a fraction), ``correct``, ``groups``, ``tied`` and ``by`` (one breakdown
per key below), and ``blocks`` for Bawden's sets.

Formats (``--format``):

``voita`` (Voita et al., ACL 2019, "When a Good Translation is Wrong in
Context"): ``--src``/``--dst`` one candidate per line, the context sentences
and the current one joined by ``_eos`` (``--segment-separator``), oldest
first; ``--json`` a list with one entry per group, ``{"src": ..., "dst":
[candidates], "true_ind": i, "ctx_dist": d}``; the group's lines are the next
``len(dst)`` lines of the text files.  Text is taken from the text files (so
they may be preprocessed), grouping and labels from the JSON; the
``.dst`` lines' context part is the target context.  Reported overall and
by ``ctx_dist`` (1, 2, 3; Voita's script prints it for all but the ellipsis
sets).

``contrapro`` (Müller et al., WMT 2018): ``--json contrapro.json`` (a list of
``{"src segment", "ref segment", "src pronoun", "ref pronoun", "ante
distance", "errors": [{"contrastive", ...}], ...}``) and the files that
ContraPro's ``conversion_scripts/json2text_and_context.pl --context K``
writes: ``--src contrapro.text.en``/``--dst contrapro.text.de`` with, per
example, the reference line followed by one line per error, and optionally
``--src-context contrapro.context.en`` and ``--tgt-context
contrapro.context.de`` with K lines (oldest first; empty at a document
start) per text line; K is ``--context-lines`` or inferred from the line
counts.  True candidate: the reference.  Reported, as ContraPro's
``evaluate.py`` prints them, by antecedent distance (0, 1, 2, 3, >3), by
``src pronoun:ref pronoun`` (lower-cased) and by ``intrasegmental``.

``bawden`` (Bawden et al., NAACL 2018, "Evaluating Discourse Phenomena in
NMT", github.com/rbawden/discourse-mt-test-sets): ``--json`` the set itself,
``anaphora.json`` (``{id: {"src": [previous, current], "trg": [{"correct" or
"semi-correct": [prev, cur], "incorrect": [prev, cur], "type": ...}, ...]}}``)
or ``lexical-choice.json`` (``{id: {"examples": [{"src": [prev, cur], "trg":
{"correct": [prev, cur], "incorrect": [prev, cur]}}], "type": ...}}``); each
correct/incorrect pair is a group.  Or the files of the repository's
``json2rawtext.py`` (possibly preprocessed): ``--src X.current.en``,
``--src-context X.prev.en``, ``--dst X.current.fr``, ``--tgt-context
X.prev.fr``, two lines per group, correct first, grouped by the JSON when
given (which adds the breakdowns), else by consecutive line pairs.
Reported by type (``m.sg`` ... for anaphora, the block type for lexical
choice), by correct/semi-correct (anaphora), and the number of blocks
entirely right, as the set's ``evaluate.py``.

Malformed input stops with one line naming the file and line (or JSON
entry), e.g. ``fairseq_ctx: error: deixis_dev.dst: 999 lines, but
deixis_dev.json lists 1000 candidates in 500 groups``.
"""
from __future__ import annotations  # torch.Tensor in annotations: torch is imported by the scorer only

import argparse
import json
import logging
import math
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from fairseq_ctx.cli import BPE_EXAMPLES, TOKENIZER_EXAMPLES, build_encoders, parse_with_encoders
from fairseq_ctx.errors import FairseqCtxError, install_excepthook

if TYPE_CHECKING:
    import torch

logger = logging.getLogger("fairseq_ctx.contrastive")

FORMATS = ("voita", "contrapro", "bawden")
TIE_MODES = ("official", "wrong", "right", "half")
# How each suite's own evaluation script treats a tie for the best score
# (``--ties official``): Voita's evaluate_consistency.py takes ``np.argmin`` of
# the losses, so the first of the tied candidates wins; ContraPro's
# evaluate.py and Bawden's evaluate.py compare strictly, so a tie is wrong.
OFFICIAL_RULE = {"voita": "first", "contrapro": "strict", "bawden": "strict"}
TIE_RULES = ("first", "strict")


class ContrastiveDataError(FairseqCtxError):
    """A contrastive test set file that cannot be read as its format says."""


@dataclass
class Candidate:
    """One translation to score: ``target`` given ``source``, the source
    context sentences and the target context sentences (the previous
    translations), both oldest first.  ``where`` names its file and line."""
    source: str
    target: str
    source_context: List[str] = field(default_factory=list)
    where: str = ""
    target_context: List[str] = field(default_factory=list)


@dataclass
class Group:
    """One contrastive example: candidates of which ``true_index`` is right;
    ``meta`` holds the values results are broken down by; ``rule`` is the
    official tie rule of its suite (``first`` or ``strict``, see
    ``OFFICIAL_RULE``); ``block`` the id of the block of examples it belongs
    to (Bawden et al. report how many blocks are entirely right)."""
    candidates: List[Candidate]
    true_index: int
    meta: Dict[str, Any] = field(default_factory=dict)
    where: str = ""
    rule: str = "strict"
    block: Optional[str] = None


# ---------------------------------------------------------------------------
# readers
# ---------------------------------------------------------------------------

def read_lines(path) -> List[str]:
    """Lines of a UTF-8 text file without their newlines (a final newline
    does not make an extra empty line)."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().splitlines()
    except FileNotFoundError:
        raise ContrastiveDataError(f"{path}: no such file") from None
    except UnicodeDecodeError as e:
        raise ContrastiveDataError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise ContrastiveDataError(f"{path}: no such file") from None
    except json.JSONDecodeError as e:
        raise ContrastiveDataError(f"{path}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None


def split_segments(line: str, separator: str = "_eos") -> List[str]:
    """``"c1 _eos c2 _eos s"`` -> ``["c1", "c2", "s"]`` (context oldest first,
    the current sentence last); the separator must stand as its own token."""
    parts = re.split(rf"(?:^|\s){re.escape(separator)}(?=\s|$)", line)
    return [p.strip() for p in parts]


def _check_nonempty(text: str, where: str, what: str):
    if not text.strip():
        raise ContrastiveDataError(f"{where}: empty {what}")


def read_voita(src_path, dst_path, json_path, separator: str = "_eos",
               max_groups: Optional[int] = None) -> List[Group]:
    """Voita et al. (2019) consistency sets (see the module docstring)."""
    entries = read_json(json_path)
    if not isinstance(entries, list):
        raise ContrastiveDataError(f"{json_path}: expected a JSON list of groups, got {type(entries).__name__}")
    sizes = []
    for i, e in enumerate(entries):
        where = f"{json_path}: entry {i}"
        if not isinstance(e, dict) or not isinstance(e.get("dst"), list) or "true_ind" not in e:
            raise ContrastiveDataError(f"{where}: expected an object with a 'dst' list and 'true_ind'")
        n, t = len(e["dst"]), e["true_ind"]
        if n < 2:
            raise ContrastiveDataError(f"{where}: {n} candidate(s); a group needs at least 2")
        if not isinstance(t, int) or isinstance(t, bool) or not 0 <= t < n:
            raise ContrastiveDataError(f"{where}: true_ind {t!r} is not an index into its {n} candidates")
        sizes.append(n)
    total = sum(sizes)
    src, dst = read_lines(src_path), read_lines(dst_path)
    for path, lines in ((src_path, src), (dst_path, dst)):
        if len(lines) != total:
            raise ContrastiveDataError(
                f"{path}: {len(lines)} lines, but {json_path} lists {total} candidates in {len(entries)} groups")
    groups, line = [], 0
    for i, (e, n) in enumerate(zip(entries, sizes)):
        if max_groups is not None and i >= max_groups:
            break
        cands = []
        for j in range(line, line + n):
            s_parts, d_parts = split_segments(src[j], separator), split_segments(dst[j], separator)
            where_s, where_d = f"{src_path}:{j + 1}", f"{dst_path}:{j + 1}"
            _check_nonempty(s_parts[-1], where_s, "current sentence")
            _check_nonempty(d_parts[-1], where_d, "current sentence")
            cands.append(Candidate(source=s_parts[-1], target=d_parts[-1],
                                   source_context=[c for c in s_parts[:-1] if c], where=where_d,
                                   target_context=[c for c in d_parts[:-1] if c]))
        meta = {"ctx_dist": e["ctx_dist"]} if "ctx_dist" in e else {}
        groups.append(Group(cands, e["true_ind"], meta, where=f"{json_path}: entry {i}",
                            rule=OFFICIAL_RULE["voita"]))
        line += n
    return groups


def _context_lines(ctx_path, num_text_lines: int, context_lines: Optional[int]):
    """Read a context file with K lines per text line; returns (lines, K)."""
    lines = read_lines(ctx_path)
    if context_lines is None:
        if num_text_lines == 0 or len(lines) % num_text_lines:
            raise ContrastiveDataError(
                f"{ctx_path}: {len(lines)} lines is not a multiple of the {num_text_lines} text lines "
                "(expected K context lines per text line; give --context-lines K)")
        context_lines = len(lines) // num_text_lines
    if len(lines) != context_lines * num_text_lines:
        raise ContrastiveDataError(
            f"{ctx_path}: {len(lines)} lines, expected {context_lines} x {num_text_lines} text lines "
            f"= {context_lines * num_text_lines}")
    return lines, context_lines


def _text_candidates(src_path, dst_path, ctx_path, n: int, context_lines: Optional[int],
                     tgt_ctx_path=None) -> List[Candidate]:
    """Candidates from parallel ``--src``/``--dst`` (and ``--src-context``,
    ``--tgt-context``: K lines per text line, oldest first, an empty line
    where there is no sentence) files that must have ``n`` lines."""
    src, dst = read_lines(src_path), read_lines(dst_path)
    for path, lines in ((src_path, src), (dst_path, dst)):
        if len(lines) != n:
            raise ContrastiveDataError(f"{path}: {len(lines)} lines, expected {n} (one per candidate)")
    ctx, k = _context_lines(ctx_path, n, context_lines) if ctx_path else ([], 0)
    tctx, tk = _context_lines(tgt_ctx_path, n, context_lines) if tgt_ctx_path else ([], 0)
    cands = []
    for j in range(n):
        _check_nonempty(src[j], f"{src_path}:{j + 1}", "source line")
        _check_nonempty(dst[j], f"{dst_path}:{j + 1}", "target line")
        cands.append(Candidate(source=src[j].strip(), target=dst[j].strip(),
                               source_context=[c.strip() for c in ctx[j * k:(j + 1) * k] if c.strip()],
                               where=f"{dst_path}:{j + 1}",
                               target_context=[c.strip() for c in tctx[j * tk:(j + 1) * tk] if c.strip()]))
    return cands


def _ante_bucket(d) -> str:
    """ContraPro's evaluate.py: distances above 3 are one bucket '>3'."""
    return ">3" if isinstance(d, int) and d > 3 else str(d)


def read_contrapro(json_path, src_path, dst_path, ctx_path=None, context_lines: Optional[int] = None,
                   max_groups: Optional[int] = None, tgt_ctx_path=None) -> List[Group]:
    """ContraPro (Müller et al. 2018) JSON plus its extracted text files."""
    entries = read_json(json_path)
    if not isinstance(entries, list):
        raise ContrastiveDataError(f"{json_path}: expected a JSON list of examples")
    sizes = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not isinstance(e.get("errors"), list) or not e["errors"]:
            raise ContrastiveDataError(f"{json_path}: entry {i}: expected an object with a non-empty 'errors' list")
        sizes.append(1 + len(e["errors"]))
    cands = _text_candidates(src_path, dst_path, ctx_path, sum(sizes), context_lines, tgt_ctx_path)
    groups, line = [], 0
    for i, (e, n) in enumerate(zip(entries, sizes)):
        if max_groups is not None and i >= max_groups:
            break
        meta = {}
        if "ante distance" in e:
            meta["ante_distance"] = _ante_bucket(e["ante distance"])
        if "src pronoun" in e and "ref pronoun" in e:
            meta["category"] = f"{str(e['src pronoun']).lower()}:{str(e['ref pronoun']).lower()}"
        if "intrasegmental" in e:  # true, false or null, as evaluate.py's keys
            meta["intrasegmental"] = str(e["intrasegmental"])
        groups.append(Group(cands[line:line + n], 0, meta, where=f"{json_path}: entry {i}",
                            rule=OFFICIAL_RULE["contrapro"]))
        line += n
    return groups


def _bawden_pairs(data, json_path) -> List[Dict[str, Any]]:
    """Flatten a Bawden et al. JSON set into correct/incorrect pairs, in the
    order of its scripts (blocks by numeric key): ``{"src": [prev, cur],
    "correct": [prev, cur], "incorrect": [...], "meta", "block", "where"}``."""
    if not isinstance(data, dict):
        raise ContrastiveDataError(f"{json_path}: expected a JSON object keyed by example number")
    try:
        keys = sorted(data, key=int)
    except ValueError:
        raise ContrastiveDataError(f"{json_path}: example keys must be numbers") from None
    pairs = []
    for key in keys:
        block, where = data[key], f"{json_path}: example {key}"
        if not isinstance(block, dict):
            raise ContrastiveDataError(f"{where}: expected an object")
        if "examples" in block:  # lexical choice
            for j, ex in enumerate(block["examples"]):
                trg = ex.get("trg", {}) if isinstance(ex, dict) else {}
                if "src" not in ex or "correct" not in trg or "incorrect" not in trg:
                    raise ContrastiveDataError(f"{where}, examples[{j}]: needs 'src' and trg 'correct'/'incorrect'")
                pairs.append({"src": ex["src"], "correct": trg["correct"], "incorrect": trg["incorrect"],
                              "meta": {"type": str(block.get("type"))}, "block": str(key),
                              "where": f"{where}, examples[{j}]"})
        elif "trg" in block and "src" in block:  # anaphora
            for j, t in enumerate(block["trg"]):
                kind = "correct" if "correct" in t else "semi-correct"
                if kind not in t or "incorrect" not in t:
                    raise ContrastiveDataError(
                        f"{where}, trg[{j}]: needs 'correct' or 'semi-correct', and 'incorrect'")
                meta = {"kind": kind}
                if "type" in t:
                    meta["type"] = str(t["type"])
                pairs.append({"src": block["src"], "correct": t[kind], "incorrect": t["incorrect"],
                              "meta": meta, "block": str(key), "where": f"{where}, trg[{j}]"})
        else:
            raise ContrastiveDataError(f"{where}: neither an anaphora block ('src', 'trg') "
                                       "nor a lexical-choice block ('examples')")
    for p in pairs:
        for k in ("src", "correct", "incorrect"):
            if not (isinstance(p[k], list) and len(p[k]) == 2 and all(isinstance(s, str) for s in p[k])):
                raise ContrastiveDataError(f"{p['where']}: '{k}' must be [previous, current] sentences")
    return pairs


def _nonempty(*sentences: str) -> List[str]:
    return [s for s in sentences if s.strip()]


def read_bawden(json_path=None, src_path=None, dst_path=None, ctx_path=None,
                max_groups: Optional[int] = None, tgt_ctx_path=None) -> List[Group]:
    """Bawden et al. (2018) sets: from the JSON alone (source and target
    context from its [previous, current] pairs), or from the text files of
    ``json2rawtext.py`` (``--src-context X.prev.en``, ``--tgt-context
    X.prev.fr``; grouped by the JSON when given, else by consecutive line
    pairs)."""
    pairs = _bawden_pairs(read_json(json_path), json_path) if json_path else None
    rule = OFFICIAL_RULE["bawden"]
    if src_path or dst_path:
        if not (src_path and dst_path):
            raise ContrastiveDataError("--format bawden with text files needs both --src and --dst")
        n = 2 * len(pairs) if pairs is not None else len(read_lines(dst_path))
        if pairs is None and n % 2:
            raise ContrastiveDataError(f"{dst_path}: {n} lines; expected correct/incorrect line pairs")
        k = 1 if ctx_path or tgt_ctx_path else None
        cands = _text_candidates(src_path, dst_path, ctx_path, n, k, tgt_ctx_path)
        groups = [Group(cands[i:i + 2], 0, dict(pairs[i // 2]["meta"]) if pairs else {},
                        where=pairs[i // 2]["where"] if pairs else f"{dst_path}:{i + 1}", rule=rule,
                        block=pairs[i // 2]["block"] if pairs else None)
                  for i in range(0, n, 2)]
    elif pairs is not None:
        groups = []
        for p in pairs:
            prev, cur = p["src"]
            groups.append(Group([Candidate(cur, p[kind][1], _nonempty(prev), p["where"], _nonempty(p[kind][0]))
                                 for kind in ("correct", "incorrect")],
                                0, dict(p["meta"]), where=p["where"], rule=rule, block=p["block"]))
    else:
        raise ContrastiveDataError("--format bawden needs --json, or --src/--dst text files")
    return groups[:max_groups] if max_groups is not None else groups


def read_groups(args) -> List[Group]:
    fmt = args.format
    tgt_ctx = getattr(args, "tgt_context", None)
    if fmt == "voita":
        missing = [f for f in ("src", "dst", "json") if getattr(args, f) is None]
        if missing:
            raise ContrastiveDataError(f"--format voita needs {', '.join('--' + m for m in missing)}")
        return read_voita(args.src, args.dst, args.json, args.segment_separator, args.max_groups)
    if fmt == "contrapro":
        missing = [f for f in ("src", "dst", "json") if getattr(args, f) is None]
        if missing:
            raise ContrastiveDataError(f"--format contrapro needs {', '.join('--' + m for m in missing)}")
        return read_contrapro(args.json, args.src, args.dst, args.src_context, args.context_lines,
                              args.max_groups, tgt_ctx)
    return read_bawden(args.json, args.src, args.dst, args.src_context, args.max_groups, tgt_ctx)


# ---------------------------------------------------------------------------
# scores made elsewhere
# ---------------------------------------------------------------------------

def read_scores(path, groups: Sequence[Group], maximize: bool = False) -> List[np.ndarray]:
    """Per group, the scores of its candidates from a file with one score per
    candidate line, in the order of the test set's text files (the order all
    three official scripts read).  The file holds losses (lower is better, the
    official scripts' default) unless ``maximize``; returned as log-prob-like
    values, higher is better, as :func:`evaluate` takes them (negation is
    exact, so nothing is lost)."""
    lines = read_lines(path)
    total = sum(len(g.candidates) for g in groups)
    if len(lines) != total:
        raise ContrastiveDataError(f"{path}: {len(lines)} lines, but the test set has {total} candidates "
                                   f"in {len(groups)} groups (one score per candidate line)")
    values = np.empty(total, dtype=np.float64)
    for i, line in enumerate(lines):
        try:
            values[i] = float(line.strip())
        except ValueError:
            raise ContrastiveDataError(f"{path}:{i + 1}: not a number: {line.strip()[:40]!r}") from None
        if math.isnan(values[i]):
            raise ContrastiveDataError(f"{path}:{i + 1}: nan is not a score")
    if not maximize:
        values = -values
    bounds = np.cumsum([0] + [len(g.candidates) for g in groups])
    return [values[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def write_scores(path, scores: Sequence[Sequence[float]], maximize: bool = False):
    """One score per candidate line: losses (the negated log-probabilities)
    unless ``maximize``; ``repr`` keeps every bit, so :func:`read_scores`
    gives back exactly the scores the report was computed from."""
    sign = 1.0 if maximize else -1.0
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(f"{sign * float(s)!r}\n" for sc in scores for s in sc)


# ---------------------------------------------------------------------------
# accuracy
# ---------------------------------------------------------------------------

def group_credit(scores: Sequence[float], true_index: int, ties: str = "wrong",
                 tolerance: float = 0.0, rule: str = "strict"):
    """Credit of one group (higher score = better) and whether the true
    candidate tied for the best with another one: ``(credit, tied)``.

    ``ties="official"`` applies ``rule``: ``first`` (Voita's ``np.argmin``
    over losses: the first of the candidates tied for the best wins, so the
    group is right when that one is the true candidate, which also makes a
    group that lists the true translation twice right when its first copy is
    ``true_ind``) or ``strict`` (ContraPro, Bawden: the true candidate must
    beat every other one, a tie is wrong)."""
    if ties not in TIE_MODES:
        raise ValueError(f"--ties must be one of {TIE_MODES}, got {ties!r}")
    if rule not in TIE_RULES:
        raise ValueError(f"tie rule must be one of {TIE_RULES}, got {rule!r}")
    scores = np.asarray(scores, dtype=np.float64)
    true = scores[true_index]
    best = scores >= scores.max() - tolerance  # the candidates tied for the best
    tied = bool(best[true_index]) and int(best.sum()) > 1
    if ties == "official" and rule == "first":
        return float(int(np.argmax(best)) == true_index), tied
    others = np.delete(scores, true_index)
    if (others > true + tolerance).any():
        return 0.0, tied
    n_tied = int((others >= true - tolerance).sum())
    if n_tied == 0:
        return 1.0, False
    return {"official": 0.0, "wrong": 0.0, "right": 1.0, "half": 1.0 / (n_tied + 1)}[ties], True


def evaluate(groups: Sequence[Group], scores: Sequence[Sequence[float]], ties: str = "official",
             tolerance: float = 0.0) -> Dict[str, Any]:
    """Accuracy overall and per value of every ``meta`` key of the groups,
    and, when the groups belong to blocks, how many blocks are entirely
    right.  ``scores[g][c]``: score of candidate ``c`` of group ``g``, higher
    is better."""
    if len(scores) != len(groups):
        raise ValueError(f"{len(scores)} score lists for {len(groups)} groups")

    def bucket():
        return {"groups": 0, "correct": 0.0, "tied": 0}

    total = bucket()
    by: Dict[str, Dict[str, Dict]] = defaultdict(lambda: defaultdict(bucket))
    blocks: Dict[str, bool] = {}
    for g, s in zip(groups, scores):
        if len(s) != len(g.candidates):
            raise ValueError(f"{g.where}: {len(s)} scores for {len(g.candidates)} candidates")
        credit, tied = group_credit(s, g.true_index, ties, tolerance, g.rule)
        for b in [total] + [by[k][str(v)] for k, v in g.meta.items()]:
            b["groups"] += 1
            b["correct"] += credit
            b["tied"] += int(tied)
        if g.block is not None:
            blocks[g.block] = blocks.get(g.block, True) and credit == 1.0

    def finish(b):
        b["accuracy"] = b["correct"] / b["groups"] if b["groups"] else float("nan")
        return b

    def order(v):
        return (0, int(v), "") if v.lstrip("-").isdigit() else (1, 0, v)

    res = {**finish(total), "ties": ties, "tie_tolerance": tolerance,
           "by": {k: {v: finish(b) for v, b in sorted(d.items(), key=lambda kv: order(kv[0]))}
                  for k, d in by.items()}}
    if blocks:
        res["blocks"] = {"total": len(blocks), "all_correct": int(sum(blocks.values()))}
    return res


def format_results(res: Dict[str, Any]) -> str:
    def line(b):
        correct = f"{b['correct']:.2f}".rstrip("0").rstrip(".")  # fractional with --ties half
        return (f"{b['accuracy']:.4f} ({correct}/{b['groups']} groups, "
                f"{b['tied']} with the true candidate tied for best)")

    rule = (" (each suite's own script: Voita's argmin gives a tie to the first tied candidate, "
            "ContraPro and Bawden count it wrong)" if res["ties"] == "official" else "")
    out = [f"accuracy: {line(res)}; ties count as {res['ties']}{rule}"]
    for key, values in res["by"].items():
        out.append(f"by {key}:")
        width = max(len(v) for v in values)
        for v, b in values.items():
            out.append(f"  {key} {v:<{width}}  {line(b)}")
    if "blocks" in res:
        out.append(f"blocks entirely right: {res['blocks']['all_correct']}/{res['blocks']['total']}")
    return "\n".join(out)


# ---------------------------------------------------------------------------
# scoring with a model
# ---------------------------------------------------------------------------

def _last(sentences: Sequence[str], k: int) -> List[str]:
    """The ``k`` newest of ``sentences`` (oldest first), all of them when
    there are fewer, none when ``k == 0``."""
    return list(sentences[-k:]) if k > 0 else []


class ModelScorer:
    """Scores (source, context, target) triples with a fairseq model or
    ensemble by teacher forcing: summed log-probabilities of the target
    tokens (``</s>`` included), optionally divided by their number.

    ``context_size``: how many of a candidate's source context sentences
    the model gets (the newest ones); ``target_context_size``: how many of
    its target context sentences are forced as the decoder's prefix (a model
    trained with ``--concat-context --target-context``); only the current
    sentence's tokens are scored.  ``max_tokens``: cap of a batch's padded
    size, context tokens included (``batch_size`` caps the candidates)."""

    # a warning when more of the scored tokens than this are <unk>
    UNK_WARNING = 0.05

    def __init__(self, models, task, encode_source: Callable[[str], str] = None,
                 encode_target: Callable[[str], str] = None, context_size: int = 0,
                 batch_size: int = 32, length_normalize: bool = False, device: str = "cpu",
                 share_encoder: bool = True, target_context_size: int = 0,
                 max_tokens: Optional[int] = None):
        from fairseq import utils

        if batch_size < 1:
            raise ValueError(f"--batch-size must be >= 1, got {batch_size}")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"--max-tokens must be >= 1, got {max_tokens}")
        if target_context_size and not getattr(getattr(task, "cfg", None), "target_context", False):
            raise ValueError("target context needs a model trained with --task document_translation "
                             "--concat-context --target-context")
        self.models = [m.eval().to(device) for m in models]
        self.task = task
        self.encode_source = encode_source or (lambda s: s)
        self.encode_target = encode_target or (lambda s: s)
        self.context_size = context_size
        self.target_context_size = target_context_size
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.length_normalize = length_normalize
        self.device = device
        self.share_encoder = share_encoder
        self.max_positions = utils.resolve_max_positions(
            task.max_positions(), *[m.max_positions() for m in self.models])
        # per side: share of the last encode()'s tokens (EOS excluded) that are <unk>
        self.unk_rates: Dict[str, float] = {}

    def _tokens(self, dictionary, text: str) -> torch.Tensor:
        return dictionary.encode_line(text, add_if_not_exist=False, append_eos=True).long()

    def _check_length(self, tokens: torch.Tensor, limit, where: str, what: str):
        if limit is not None and len(tokens) > limit:
            raise ContrastiveDataError(f"{where}: {what} has {len(tokens)} tokens, more than the "
                                       f"model's {limit} positions")

    @staticmethod
    def item_size(item) -> int:
        """Tokens an item puts in a batch row, as fairseq's ``num_tokens``
        (the longer side) with each side's context counted: source + source
        context, target + target context."""
        src, ctx, tgt, tctx = item
        return max(len(src) + sum(len(c) for c in ctx), len(tgt) + sum(len(c) for c in tctx))

    def _warn_unk(self, items):
        """Share of <unk> per side; a model trained on subword units scored
        on words without --bpe sees mostly <unk>."""
        import torch

        for side, d, parts in (
                ("source", self.task.source_dictionary, [t for s, ctx, _, _ in items for t in [s, *ctx]]),
                ("target", self.task.target_dictionary, [t for _, _, t, tctx in items for t in [t, *tctx]])):
            tokens = torch.cat([t[:-1] for t in parts]) if parts else torch.zeros(0, dtype=torch.long)
            rate = float(tokens.eq(d.unk()).float().mean()) if len(tokens) else 0.0
            self.unk_rates[side] = rate
            if rate > self.UNK_WARNING:
                logger.warning(
                    f"{rate:.1%} of the {len(tokens)} {side} tokens scored are <unk>: give the subword "
                    "model the checkpoint was trained with (--bpe/--tokenizer as for fairseq-generate, "
                    "e.g. --bpe sentencepiece --sentencepiece-model M, or --source-bpe-model/"
                    "--target-bpe-model for one model per language)")

    def encode(self, candidates: Sequence[Candidate]):
        """Token tensors of the candidates, deduplicated: returns the unique
        ``(source, source context, target, target context)`` items and, per
        candidate, its item index."""
        import torch

        src_dict, tgt_dict = self.task.source_dictionary, self.task.target_dictionary
        max_src, max_tgt = self.max_positions if isinstance(self.max_positions, tuple) else (None, None)
        items, index, seen = [], [], {}
        for c in candidates:
            src = self._tokens(src_dict, self.encode_source(c.source))
            tgt = self._tokens(tgt_dict, self.encode_target(c.target))
            ctx = [self._tokens(src_dict, self.encode_source(s)) for s in _last(c.source_context, self.context_size)]
            tctx = [self._tokens(tgt_dict, self.encode_target(s))
                    for s in _last(c.target_context, self.target_context_size)]
            self._check_length(src, max_src, c.where, "the source")
            self._check_length(tgt, max_tgt, c.where, "the target")
            item = (src, ctx, tgt, tctx)
            if self.max_tokens is not None and self.item_size(item) > self.max_tokens:
                raise ContrastiveDataError(
                    f"{c.where}: {self.item_size(item)} tokens with its context, more than --max-tokens "
                    f"{self.max_tokens}")
            key = tuple(tuple(t.tolist()) for t in [src, *ctx, torch.tensor([-1]), tgt, torch.tensor([-2]), *tctx])
            if key not in seen:
                seen[key] = len(items)
                items.append(item)
            index.append(seen[key])
        self._warn_unk(items)
        return items, index

    def _dataset(self, items):
        from fairseq.data import LanguagePairDataset

        srcs, ctxs, tgts, tctxs = zip(*items)
        if hasattr(self.task, "build_context_dataset"):
            if self.target_context_size:
                return self.task.build_context_dataset(srcs, ctxs, tgts, model=self.models[0],
                                                       target_contexts=tctxs)
            return self.task.build_context_dataset(srcs, ctxs, tgts, model=self.models[0])
        cfg = self.task.cfg
        return LanguagePairDataset(
            list(srcs), np.array([len(s) for s in srcs]), self.task.source_dictionary,
            list(tgts), np.array([len(t) for t in tgts]), self.task.target_dictionary,
            left_pad_source=cfg.left_pad_source, left_pad_target=cfg.left_pad_target, shuffle=False)

    def _can_share_encoder(self, model) -> bool:
        from fairseq.models import FairseqEncoderDecoderModel

        return self.share_encoder and isinstance(model, FairseqEncoderDecoderModel)

    def _forward(self, model, net_input, enc_rows: Optional[torch.Tensor], enc_index: Optional[torch.Tensor]):
        """Decoder output for the batch.  With ``enc_rows`` the encoder runs
        only on those rows (one per distinct source + context) and
        ``reorder_encoder_out`` hands every candidate its source's encoding,
        as beam search does for hypotheses."""
        if enc_rows is None or not self._can_share_encoder(model):
            return model(**net_input)
        enc_input = {k: v.index_select(0, enc_rows) for k, v in net_input.items() if k != "prev_output_tokens"}
        encoder_out = model.encoder(**enc_input)
        encoder_out = model.encoder.reorder_encoder_out(encoder_out, enc_index)
        return model.decoder(net_input["prev_output_tokens"], encoder_out=encoder_out,
                             src_lengths=net_input["src_lengths"])

    def _score_batch(self, sample, enc_keys: Optional[np.ndarray] = None,
                     scored: Optional[np.ndarray] = None) -> torch.Tensor:
        """B scores of one collated batch (in the batch's order); ``enc_keys``:
        per row, an id of its encoder input (source + context); ``scored``: per
        row, how many of its last target tokens count (the current sentence
        after a forced target-context prefix; default all)."""
        import torch
        from fairseq import utils

        with torch.no_grad():
            if hasattr(self.task, "model_input"):
                sample = self.task.model_input(self.models, sample)
            sample = utils.move_to_cuda(sample) if self.device != "cpu" else sample
            target = sample["target"]  # B x T
            enc_rows = enc_index = None
            if enc_keys is not None:
                _, first, inverse = np.unique(enc_keys, return_index=True, return_inverse=True)
                if len(first) < len(enc_keys):
                    enc_rows = torch.from_numpy(first).to(target.device)
                    enc_index = torch.from_numpy(inverse.reshape(-1)).to(target.device)
            token_lprobs = []
            for model in self.models:
                net_output = self._forward(model, sample["net_input"], enc_rows, enc_index)
                lprobs = model.get_normalized_probs(net_output, log_probs=True)  # B x T x V
                token_lprobs.append(lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1).float())
            # an ensemble's probability is the mean of the models' (log of the mean, not mean of the logs)
            lp = token_lprobs[0] if len(token_lprobs) == 1 else (
                torch.logsumexp(torch.stack(token_lprobs), dim=0) - math.log(len(token_lprobs)))
            mask = target.ne(self.task.target_dictionary.pad())  # B x T
            if scored is not None:
                # right-padded targets: row b's last scored[b] real tokens are its current sentence
                lengths = mask.sum(dim=1, keepdim=True)
                positions = torch.arange(target.size(1), device=target.device).unsqueeze(0)
                mask &= positions >= lengths - torch.as_tensor(scored, device=target.device).unsqueeze(1)
            scores = (lp * mask).sum(dim=1, dtype=torch.float64)
            if self.length_normalize:
                scores = scores / mask.sum(dim=1)
            return scores.cpu()

    def score_items(self, items) -> np.ndarray:
        """Scores of unique (source, context tokens, target, target context
        tokens) items.  Items with the same source and context are batched
        together so the encoder runs once for all their candidates."""
        from fairseq.data import data_utils

        from fairseq_ctx.progress import bar

        if not items:
            return np.zeros(0)
        items = [tuple(it) + ([],) * (4 - len(it)) for it in items]  # (src, ctx, tgt) items of older callers
        if self.target_context_size and self.task.cfg.left_pad_target:
            raise ValueError("target-context scoring expects right-padded targets (--left-pad-target False)")
        dataset = self._dataset(items)
        enc_ids: Dict[Any, int] = {}
        enc_keys = np.array([enc_ids.setdefault((tuple(s.tolist()), tuple(tuple(c.tolist()) for c in ctx)),
                                                len(enc_ids)) for s, ctx, _, _ in items], dtype=np.int64)
        sizes = np.array([self.item_size(it) for it in items], dtype=np.int64)
        n_scored = np.array([len(t) for _, _, t, _ in items], dtype=np.int64)
        # similar lengths together (little padding), a source's candidates adjacent
        order = np.lexsort((np.array([len(t) for _, _, t, _ in items]), enc_keys,
                            np.array([len(s) + sum(len(c) for c in ctx) for s, ctx, _, _ in items])))
        batches = data_utils.batch_by_size(order, None, num_tokens_vec=sizes[order], max_tokens=self.max_tokens,
                                           max_sentences=self.batch_size)
        out = np.zeros(len(items))
        with bar(len(items), "contrastive scoring", unit="cand") as progress:
            for ids in batches:
                batch = dataset.collater([dataset[int(i)] for i in ids])
                rows = batch["id"].numpy()
                out[rows] = self._score_batch(batch, enc_keys[rows],
                                              n_scored[rows] if self.target_context_size else None).numpy()
                progress.update(len(ids))
        return out

    def score(self, candidates: Sequence[Candidate]) -> np.ndarray:
        """One score per candidate, in order."""
        items, index = self.encode(candidates)
        return self.score_items(items)[np.asarray(index, dtype=np.int64)]


def score_groups(scorer, groups: Sequence[Group]) -> List[np.ndarray]:
    flat = [c for g in groups for c in g.candidates]
    scores = scorer.score(flat) if flat else np.zeros(0)
    out, i = [], 0
    for g in groups:
        out.append(scores[i:i + len(g.candidates)])
        i += len(g.candidates)
    return out


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------

EXAMPLES = """examples:
  # a model on Voita et al.'s deixis set (context size and task from the checkpoint)
  fairseq-ctx-contrastive data/bin --path runs/doc/checkpoint_best.pt --format voita \\
      --src deixis_dev.src --dst deixis_dev.dst --json deixis_dev.json \\
      --bpe sentencepiece --sentencepiece-model spm.model --results deixis.json
  # scores made elsewhere (losses, one per candidate line), no model
  fairseq-ctx-contrastive --format contrapro --json contrapro.json --src contrapro.text.en \\
      --dst contrapro.text.de --scores-in scores.txt"""


def get_parser():
    """The command line; builds without importing torch or fairseq (the
    --tokenizer/--bpe names are checked by :func:`parse_args`)."""
    p = argparse.ArgumentParser(
        prog="fairseq-ctx-contrastive",
        description="Accuracy of a fairseq model on contrastive test sets (Voita et al. 2019, "
                    "ContraPro, Bawden et al. 2018), or of scores made elsewhere (--scores-in). "
                    "See docs/evaluation.md and the module docstring (python3 -m pydoc "
                    "fairseq_ctx.contrastive) for the formats.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", nargs="?", help="data-bin directory with the model's dictionaries")
    p.add_argument("--path", help="checkpoint(s), ':'-separated for an ensemble")
    p.add_argument("--format", required=True, choices=FORMATS)
    p.add_argument("--src", help="source lines, one per candidate")
    p.add_argument("--dst", help="target lines, one per candidate")
    p.add_argument("--json", help="the test set's JSON (grouping, true candidate, metadata)")
    p.add_argument("--src-context", help="contrapro/bawden: source context lines (K per candidate line)")
    p.add_argument("--tgt-context", help="contrapro/bawden: target context lines, e.g. contrapro.context.de, "
                   "anaphora.prev.fr (K per candidate line)")
    p.add_argument("--context-lines", type=int, help="contrapro: context lines per candidate line "
                   "(default: inferred from the line counts)")
    p.add_argument("--segment-separator", default="_eos", help="voita: token joining the sentences of a line")
    p.add_argument("--max-groups", type=int, help="score only the first N groups")
    g = p.add_argument_group("model and task (overrides of the checkpoint's task flags)")
    g.add_argument("--task", help="must equal the checkpoint's task (checked)")
    g.add_argument("--context-size", type=int, help="context sentences given to the model (the newest)")
    g.add_argument("--concat-context", action=argparse.BooleanOptionalAction, default=None,
                   help="glue the context to the source (document_translation)")
    g.add_argument("--source-lang")
    g.add_argument("--target-lang")
    g.add_argument("--tokenizer", metavar="NAME",
                   help=f"tokenize raw text before --bpe (default: input is tokenized); {TOKENIZER_EXAMPLES}")
    g.add_argument("--bpe", metavar="NAME", help=f"subword-split the text (default: none); {BPE_EXAMPLES}")
    g.add_argument("--source-bpe-model", help="--bpe's model file for the source side (one subword model "
                   "per language); replaces --sentencepiece-model/--bpe-codes/... there")
    g.add_argument("--target-bpe-model", help="--bpe's model file for the target side")
    g = p.add_argument_group("scoring")
    g.add_argument("--batch-size", type=int, default=32, help="candidates per forward pass")
    g.add_argument("--max-tokens", type=int, help="tokens per forward pass (padded, as fairseq's "
                   "--max-tokens), context tokens included")
    g.add_argument("--length-normalize", action="store_true",
                   help="divide a candidate's log-probability by its number of target tokens")
    g.add_argument("--ties", choices=TIE_MODES, default="official",
                   help="credit when the true candidate ties for the best score: official (default) "
                        "as each suite's script (voita: the first tied candidate wins, as np.argmin; "
                        "contrapro, bawden: wrong), or wrong/right/half for every format")
    g.add_argument("--tie-tolerance", type=float, default=0.0,
                   help="scores closer than this count as tied (default 0: exact, as the official "
                        "scripts compare the scores they are given)")
    g.add_argument("--no-share-encoder", action="store_true",
                   help="run the whole model per candidate instead of encoding each distinct "
                        "source + context once per batch")
    g.add_argument("--cpu", action="store_true", help="score on CPU even if CUDA is available")
    g = p.add_argument_group("scores made elsewhere")
    g.add_argument("--scores-in", help="evaluate these scores (one per candidate line, in the order of "
                   "the text files) instead of a model's: no DATA-BIN or --path")
    g.add_argument("--maximize", action="store_true",
                   help="--scores-in/--scores-out hold log-probabilities (higher is better) instead of "
                        "losses (lower is better, what the official scripts expect by default)")
    g = p.add_argument_group("output")
    g.add_argument("--results", help="write the results as JSON here")
    g.add_argument("--scores-out", help="write one score per candidate (input order) here: losses, "
                   "or log-probabilities with --maximize")
    return p


def parse_args(argv=None):
    """Two passes, as fairseq's own parsers: the chosen --tokenizer/--bpe are
    checked and add their options (e.g. --sentencepiece-model)."""
    parser = get_parser()
    args = parse_with_encoders(parser, argv)
    if args.scores_in is not None:
        given = [f for f, v in (("DATA-BIN", args.data), ("--path", args.path)) if v is not None]
        if given:
            parser.error(f"--scores-in evaluates scores made elsewhere; it takes no {' or '.join(given)}")
        if args.max_groups is not None:
            parser.error("--max-groups: --scores-in needs the whole set (one score per candidate line)")
    elif args.data is None or args.path is None:
        parser.error("give DATA-BIN and --path CHECKPOINT to score with a model, or --scores-in FILE")
    if args.context_size is not None and args.context_size < 0:
        parser.error(f"--context-size must be >= 0, got {args.context_size}")
    if args.max_groups is not None and args.max_groups < 1:
        parser.error(f"--max-groups must be >= 1, got {args.max_groups}")
    if args.context_lines is not None and args.context_lines < 0:
        parser.error(f"--context-lines must be >= 0, got {args.context_lines}")
    if args.batch_size < 1:
        parser.error(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.max_tokens is not None and args.max_tokens < 1:
        parser.error(f"--max-tokens must be >= 1, got {args.max_tokens}")
    if args.tie_tolerance < 0:
        parser.error(f"--tie-tolerance must be >= 0, got {args.tie_tolerance}")
    for side in ("source", "target"):
        if getattr(args, f"{side}_bpe_model") is not None and BPE_MODEL_OPTION.get(args.bpe) is None:
            parser.error(f"--{side}-bpe-model needs --bpe with one model file "
                         f"({', '.join(sorted(BPE_MODEL_OPTION))}), got --bpe {args.bpe}")
    return args


# the option holding each --bpe's model file, replaced per side by --source-bpe-model/--target-bpe-model
BPE_MODEL_OPTION = {"sentencepiece": "sentencepiece_model", "subword_nmt": "bpe_codes", "fastbpe": "bpe_codes",
                    "byte_bpe": "sentencepiece_model_path", "bert": "bpe_vocab_file"}


def build_side_encoders(args):
    """(encode_source, encode_target): the tokenizer and --bpe of
    :func:`build_encoders`, with --source-bpe-model / --target-bpe-model as
    that side's subword model when given."""
    encoders = []
    for side in ("source", "target"):
        model = getattr(args, f"{side}_bpe_model", None)
        side_args = args
        if model is not None:
            side_args = argparse.Namespace(**vars(args))
            setattr(side_args, BPE_MODEL_OPTION[args.bpe], model)
        encoders.append(build_encoders(side_args))
    return tuple(encoders)


def _task_name(state) -> str:
    if state.get("cfg") is not None:
        return state["cfg"]["task"]["_name"]
    return getattr(state["args"], "task", None)


def load(args):
    """Models and task from the checkpoint(s), with the command line's
    overrides of the task flags."""
    import fairseq_ctx

    fairseq_ctx.register()  # archs, tasks, weights-only checkpoint loading
    from fairseq import checkpoint_utils, utils

    paths = utils.split_paths(args.path)
    overrides = {"data": args.data}
    for name in ("context_size", "concat_context", "source_lang", "target_lang"):
        if getattr(args, name) is not None:
            overrides[name] = getattr(args, name)
    # read the first checkpoint once: its task is checked, then it is reused
    state = checkpoint_utils.load_checkpoint_to_cpu(paths[0], overrides)
    saved = _task_name(state)
    if args.task is not None and saved != args.task:
        raise FairseqCtxError(
            f"--task {args.task}: {paths[0]} was trained with --task {saved}; a checkpoint only "
            "loads with its own task (document_translation adds a separator to the dictionaries)")
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
        paths[:1], arg_overrides=overrides, state=state)
    if len(paths) > 1:
        more, _, _ = checkpoint_utils.load_model_ensemble_and_task(paths[1:], arg_overrides=overrides, task=task)
        models += more
    for name in ("context_size", "concat_context"):
        if getattr(args, name) is not None and not hasattr(task.cfg, name):
            raise FairseqCtxError(f"--{name.replace('_', '-')}: the checkpoint's task "
                                  f"'{saved}' has no such option")
    return models, task


def main(argv=None):
    install_excepthook()  # our errors as one line (python3 -m as well as the console script)
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
                        level=logging.INFO, stream=sys.stderr)
    args = parse_args(argv)
    groups = read_groups(args)
    if not groups:
        raise ContrastiveDataError("the test set has no groups")
    n_cands = sum(len(g.candidates) for g in groups)
    if args.scores_in is not None:
        scores = read_scores(args.scores_in, groups, maximize=args.maximize)
        res = evaluate(groups, scores, ties=args.ties, tolerance=args.tie_tolerance)
        res.update(format=args.format, scores_in=args.scores_in, maximize=args.maximize, candidates=n_cands)
        header = (f"{args.format}: {len(groups)} groups, {n_cands} candidates, scores from {args.scores_in} "
                  f"({'higher' if args.maximize else 'lower'} is better)")
    else:
        import torch

        models, task = load(args)
        context_size = getattr(task.cfg, "context_size", 0)
        target_context_size = context_size if getattr(task.cfg, "target_context", False) else 0
        if getattr(task.cfg, "context_mode", "previous") != "previous":
            logger.warning(f"the model was trained with --context-mode {task.cfg.context_mode}; the test sets "
                           "give the preceding sentences as context")
        use_cuda = torch.cuda.is_available() and not args.cpu
        encode_source, encode_target = build_side_encoders(args)
        scorer = ModelScorer(models, task, encode_source, encode_target, context_size=context_size,
                             batch_size=args.batch_size, length_normalize=args.length_normalize,
                             device="cuda" if use_cuda else "cpu", share_encoder=not args.no_share_encoder,
                             target_context_size=target_context_size, max_tokens=args.max_tokens)
        if target_context_size and not any(c.target_context for g in groups for c in g.candidates):
            logger.warning("the model takes target context but the test set gives none "
                           "(--tgt-context for contrapro/bawden text files)")
        scores = score_groups(scorer, groups)
        res = evaluate(groups, scores, ties=args.ties, tolerance=args.tie_tolerance)
        from fairseq_ctx.data.context_input import input_mode

        mode = {"concat": "concatenated to the source", "separate": "separate input",
                "none": "ignored"}[input_mode(task.cfg, models)]
        if target_context_size:
            mode += ", target context as a forced decoder prefix"
        res.update(format=args.format, path=args.path, context_size=context_size, context=mode,
                   target_context_size=target_context_size, length_normalize=args.length_normalize,
                   candidates=n_cands, unk_rates=scorer.unk_rates)
        header = (f"{args.format}: {len(groups)} groups, {n_cands} candidates, "
                  f"context {context_size} sentence(s), {mode}")
    print(header)
    print(format_results(res))
    if args.results:
        with open(args.results, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=2)
    if args.scores_out:
        write_scores(args.scores_out, scores, maximize=args.maximize)
    return res


if __name__ == "__main__":
    main()
