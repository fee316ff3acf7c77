"""Readers of the three contrastive suites' files (Voita et al. 2019,
ContraPro, Bawden et al. 2018) into :class:`~fairseq_ctx.evaluation.contrastive.groups.Group`
lists: one place knows each format, so scoring and accuracy do not.
Malformed input stops with one line naming the file and line (or JSON entry).
"""
import functools
import json
import re
from typing import Any, Dict, List, Optional

from fairseq_ctx import text_lines
from fairseq_ctx.evaluation.contrastive.groups import OFFICIAL_RULE, Candidate, ContrastiveDataError, Group

# lines end at "\n" only, as the binarizer counts them (fairseq_ctx.text_lines)
read_lines = functools.partial(text_lines.read_lines, error=ContrastiveDataError)


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
        meta = {key: e[key] for key in VOITA_BREAKDOWN if key in e}
        groups.append(Group(cands, e["true_ind"], meta, where=f"{json_path}: entry {i}",
                            rule=OFFICIAL_RULE["voita"]))
        line += n
    return groups


# the keys of a Voita-format JSON entry that results are broken down by:
# Voita et al.'s distance of the context that decides the item, and the
# contrast's class where a set names one (the study's balanced he/she set:
# fairseq_ctx.study.context_set writes "class": masculine or feminine)
VOITA_BREAKDOWN = ("ctx_dist", "class")


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
