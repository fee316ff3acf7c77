"""The context-attribution report as one HTML page a researcher can open
anywhere.

The attribution command (:mod:`fairseq_ctx.evaluation.attribution`) writes a
JSON report: for every sentence, which target tokens depend on the context
(their sensitivity with and without context over a threshold) and, for each
of those, how much every context and source token contributed to choosing it
over what the model picks without context. Lists of floats are hard to read;
this page lays each sentence out as text, so that the question "which
context words did this translation rely on?" is answered by looking:

* the context sentences (oldest first, labelled by their distance, -2, -1),
  the target context where the model takes one, the source, and the
  translation with every context-sensitive token marked
  (``<mark class="sensitive">``, with its sensitivity and its no-context
  choice in the tooltip);
* for each sensitive token, one block where the context and (fainter, since
  it is not what the question is about) source tokens are shaded by that
  token's attribution: intensity is ``|score|`` divided by the largest
  ``|score|`` over that token's context and source tokens (scales differ
  from token to token, a shared scale would leave most blocks blank), one
  hue for positive and one for negative scores, the exact score and erasure
  value in each token's tooltip, the highest-scoring context token outlined
  (class ``top``) and the erasure of each context sentence beside it (the
  drop in the contrastive score without that sentence: the check that the
  gradient's choice is one the model's output agrees with);
* a sentence with no sensitive token takes one line, so the ones that do
  stand out in a long report;
* an item of a contrastive set is headed by its breakdown values (e.g. its
  class) and the context conditions under which the model scored it right.

Subword pieces are joined back into words (sentencepiece's ``▁`` starts a
word; ``@@`` ends a non-final BPE piece) while each piece keeps its own
element, since attributions are per piece. Everything from the report is
escaped: tokens are model output and may hold any text, ``<script>``
included. The page is self-contained (inline CSS, no script, no font, image
or URL of any kind) so it can be archived with the results, mailed, or
opened on a machine without network.
"""
from __future__ import annotations

import html
import math
from pathlib import Path

DEFAULT_TITLE = "Context attribution"

# The shading hues (RGB): the tests look for them in a screenshot. Light
# enough that black text stays readable at full intensity.
POSITIVE_RGB = (255, 133, 82)
NEGATIVE_RGB = (92, 156, 255)
MARK_RGB = (255, 224, 102)

METRICS = {
    "kl": "KL divergence between the next-token distributions with and without context",
    "pcxmi": "P-CXMI: log-probability of the token with context minus without",
}
_SENSITIVITY_KEYS = (("kl_bits", "KL"), ("pcxmi_bits", "P-CXMI"))

_CSS = """
body { font-family: "DejaVu Sans", "Noto Sans", Arial, sans-serif; margin: 1.5em 2em; color: #222;
       background: #fff; line-height: 1.5; max-width: 75em; }
h1 { font-size: 1.4em; margin: 0 0 .3em; }
h2 { font-size: 1.1em; margin: 0; }
.meta { color: #555; font-size: .9em; margin: 0 0 1em; }
.legend { border: 1px solid #ccc; background: #fafafa; padding: .6em 1em; font-size: .9em; margin-bottom: 1.5em; }
.legend p { margin: .25em 0; }
.swatch { display: inline-block; width: 2.2em; height: 1em; vertical-align: middle; border: 1px solid #999; }
.item { border-top: 2px solid #ddd; padding: .8em 0; }
.item.quiet { border-top: 1px solid #eee; padding: .3em 0; color: #666; font-size: .9em; }
.item.quiet .note { font-style: italic; }
table.sent { border-collapse: collapse; margin: .4em 0; }
table.sent th { text-align: right; font-weight: normal; color: #777; padding: .15em .8em .15em 0;
                white-space: nowrap; vertical-align: top; font-size: .85em; }
table.sent td { padding: .15em .4em .15em 0; vertical-align: top; }
td.erasure { color: #555; font-size: .85em; white-space: nowrap; padding-left: 1em; }
tr.faint td.toks { opacity: .55; }
.attr { margin: .6em 0 .6em 1.5em; padding: .3em .8em; border-left: 3px solid #d0b050; }
.attr h3 { font-size: .95em; font-weight: normal; margin: .2em 0; }
.tok { border-radius: 2px; }
.tok.special, .tok.blank { color: #999; font-size: .8em; }
.tok.top { outline: 2px solid #222; outline-offset: 1px; font-weight: bold; }
mark.sensitive, .legend mark { background: MARK; padding: 0 .1em; border-bottom: 2px solid #c90; }
.num { font-variant-numeric: tabular-nums; }
""".replace("MARK", "rgb({}, {}, {})".format(*MARK_RGB))


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _num(value, digits: int = 3) -> str:
    """A number for reading (``digits`` decimals); the exact one goes in a tooltip."""
    if value is None:
        return "n/a"
    try:
        value = float(value)
    except (TypeError, ValueError):
        return str(value)
    return f"{value:.{digits}f}" if math.isfinite(value) else str(value)


def _exact(value) -> str:
    """The number as Python prints it: the shortest text that reads back as the same float."""
    if value is None:
        return "n/a"
    try:
        return repr(float(value))
    except (TypeError, ValueError):
        return str(value)


def _magnitude(value) -> float:
    try:
        value = abs(float(value))
    except (TypeError, ValueError):
        return 0.0
    return value if math.isfinite(value) else 0.0


def pieces(tokens) -> list[tuple[bool, str, str]]:
    """``(space_before, text, kind)`` per subword piece: the text shown and
    whether a word boundary comes before it. Sentencepiece marks a word's
    first piece with ``▁``; where no piece has one, the tokens are words or
    BPE pieces (``@@`` at the end of a piece joins it to the next). ``kind``
    is ``"special"`` for ``</s>``-like symbols and ``"blank"`` for a piece
    with nothing to show (a lone ``▁``), so that it still has a box to shade."""
    tokens = [str(t) for t in tokens]
    sentencepiece = any("\u2581" in t for t in tokens)
    out = []
    joined = True  # nothing before the first piece
    for token in tokens:
        kind = "piece"
        if len(token) > 2 and token.startswith("<") and token.endswith(">") and " " not in token:
            space, text, kind = True, token, "special"
        elif sentencepiece:
            space = token.startswith("\u2581")
            text = token.replace("\u2581", " ").strip(" ") if space else token.replace("\u2581", " ")
        else:
            space = not joined
            text = token[:-2] if token.endswith("@@") else token
        if not text:
            text, kind = "\u2423", "blank"  # OPEN BOX: a piece that is only a word boundary
        out.append((space and bool(out), text, kind))
        joined = not sentencepiece and kind != "special" and token.endswith("@@")
    return out


def words(tokens) -> str:
    """The pieces joined into plain text (no markup), as :func:`pieces` lays them out."""
    return "".join((" " if space else "") + text for space, text, _ in pieces(tokens))


def _shade(score, scale: float) -> str:
    """The background of one token: its colour at opacity ``|score| / scale``."""
    if scale <= 0:
        return ""
    alpha = min(1.0, _magnitude(score) / scale)
    if alpha <= 0:
        return ""
    rgb = POSITIVE_RGB if float(score) > 0 else NEGATIVE_RGB
    return "background: rgba({}, {}, {}, {:.3f})".format(*rgb, alpha)


def _tokens(tokens, scores=None, scale: float = 0.0, erasure=None, top=None, marks=None, tips=None) -> str:
    """One sentence as spans, one per piece, with optional shading
    (``scores`` over ``scale``), tooltips, the ``top`` piece and the
    ``marks`` (position -> attributes of a ``<mark class="sensitive">``)."""
    out = []
    for i, (space, text, kind) in enumerate(pieces(tokens)):
        classes = ["tok"] + ([kind] if kind != "piece" else [])
        attrs = ""
        title = []
        if tips is not None and i < len(tips) and tips[i]:
            title.append(tips[i])
        if scores is not None and i < len(scores):
            style = _shade(scores[i], scale)
            if style:
                attrs += f' style="{style}"'
            title.append(f"attribution {_exact(scores[i])}")
            if erasure is not None and i < len(erasure):
                title.append(f"erasure {_exact(erasure[i])}")
            attrs += f' data-score="{_e(_exact(scores[i]))}"'
        if top == i:
            classes.append("top")
        if title:
            attrs += f' title="{_e("; ".join(title))}"'
        span = f'<span class="{" ".join(classes)}"{attrs}>{_e(text)}</span>'
        if marks and i in marks:
            span = f'<mark class="sensitive" data-position="{i}"{marks[i]}>{span}</mark>'
        out.append((" " if space else "") + span)
    return "".join(out)


def _sentences(item: dict, side: str) -> list[dict]:
    return [s for s in (item.get(side) or []) if isinstance(s, dict)]


def _labels(n: int, what: str) -> list[str]:
    """Context sentences are oldest first: label them by distance (-n .. -1)."""
    return [f"{what} {i - n}" for i in range(n)]


def _sensitivity_tip(item: dict, position: int, contrast: bool = True) -> str:
    sens = item.get("sensitivity") or {}
    parts = []
    for key, name in _SENSITIVITY_KEYS:
        values = sens.get(key) or []
        if position < len(values):
            parts.append(f"{name} {_num(values[position])} bits")
    alt = sens.get("no_context_argmax") or []
    if contrast and position < len(alt) and alt[position] is not None:
        parts.append(f"without context: {words([alt[position]]).strip()}")
    return "; ".join(parts)


def _attribution(item: dict, attr: dict) -> str:
    position = attr.get("position")
    token = attr.get("token")
    if token is None:
        target = (item.get("target") or {}).get("tokens") or []
        token = target[position] if isinstance(position, int) and 0 <= position < len(target) else "?"
    contrast = attr.get("contrast")
    ctx_scores = attr.get("context") or []
    tctx_scores = attr.get("target_context") or []
    src_scores = attr.get("source") or []
    # one scale per attribution: its largest |score| over context and source
    scale = max([_magnitude(s) for row in list(ctx_scores) + list(tctx_scores) for s in (row or [])]
                + [_magnitude(s) for s in src_scores] + [0.0])
    erasure = attr.get("erasure") or {}
    top = attr.get("top") or {}

    head = [f"<b>{_e(words([token]).strip())}</b> (target position {_e(position)})"]
    head.append(f"without context: <b>{_e(words([contrast]).strip())}</b>" if contrast is not None
                else "same choice without context")
    tip = _sensitivity_tip(item, position, contrast=False) if isinstance(position, int) else ""
    if tip:
        head.append(_e(tip))
    head.append(f'scale: max |score| = <span class="num">{_e(_num(scale, 4))}</span>')

    rows = []
    for side, label_word, scores in (("context", "context", ctx_scores),
                                      ("target_context", "target context", tctx_scores)):
        sentences = _sentences(item, side)
        labels = _labels(len(sentences), label_word)
        token_erasure = erasure.get(side) or []
        sentence_erasure = erasure.get("sentences" if side == "context" else "target_sentences") or []
        for k, sentence in enumerate(sentences):
            row_scores = scores[k] if k < len(scores) else None
            row_erasure = token_erasure[k] if k < len(token_erasure) else None
            is_top = (top.get("token") if top.get("side", "context") == side and top.get("sentence", 0) == k
                      else None)
            cells = _tokens(sentence.get("tokens") or [], row_scores, scale, row_erasure, is_top)
            drop = (f'erasure of the sentence: <span class="num" title="{_e(_exact(sentence_erasure[k]))}">'
                    f"{_e(_num(sentence_erasure[k]))}</span>" if k < len(sentence_erasure) else "")
            rows.append(f'<tr class="{side.replace("_", "-")}"><th>{_e(labels[k])}</th>'
                        f'<td class="toks">{cells}</td><td class="erasure">{drop}</td></tr>')
    source = item.get("source") or {}
    src_top = top.get("token") if top.get("side") == "source" else None
    rows.append(f'<tr class="source faint"><th>source</th><td class="toks">'
                f"{_tokens(source.get('tokens') or [], src_scores, scale, None, src_top)}</td><td></td></tr>")
    anchor = f"i{_e(item.get('id'))}-p{_e(position)}"
    return (f'<div class="attr" id="{anchor}"><h3>{" &middot; ".join(head)}</h3>'
            f'<table class="sent">{"".join(rows)}</table></div>')


def _heading(item: dict) -> str:
    """``#id``, then for an item of a contrastive set its breakdown values
    and the conditions under which the model scored it right."""
    parts = [f"#{_e(item.get('id'))}"]
    meta = item.get("meta")
    if isinstance(meta, dict):
        parts += [_e(f"{key} {value}") for key, value in meta.items()]
    right = item.get("scored_right")
    if isinstance(right, dict):
        conditions = [str(c) for c, ok in right.items() if ok]
        parts.append(f"scored right with {_e(', '.join(conditions))} context" if conditions
                     else "scored wrong under every context condition")
    return " &middot; ".join(parts)


def _item(item: dict) -> str:
    source = item.get("source") or {}
    target = item.get("target") or {}
    sensitive = [p for p in (item.get("sensitive") or []) if isinstance(p, int)]
    ident = _e(item.get("id"))
    if not sensitive:
        return (f'<div class="item quiet" id="i{ident}"><b>{_heading(item)}</b> '
                f"{_tokens(source.get('tokens') or [])} &rarr; {_tokens(target.get('tokens') or [])} "
                f'<span class="note">&mdash; no context-sensitive token</span></div>')
    ctx, tctx = _sentences(item, "context"), _sentences(item, "target_context")
    rows = []
    for side, sentences, label in (("context", ctx, "context"), ("target-context", tctx, "target context")):
        for lab, sentence in zip(_labels(len(sentences), label), sentences):
            rows.append(f'<tr class="{side}"><th>{_e(lab)}</th>'
                        f"<td>{_tokens(sentence.get('tokens') or [])}</td></tr>")
    if not ctx and not tctx:
        rows.append('<tr class="context"><th>context</th><td><i>(none)</i></td></tr>')
    rows.append(f"<tr class=\"source\"><th>source</th><td>{_tokens(source.get('tokens') or [])}</td></tr>")
    target_tokens = target.get("tokens") or []
    tips = [_sensitivity_tip(item, i) for i in range(len(target_tokens))]
    marks = {p: f' title="{_e(tips[p])}"' if p < len(tips) and tips[p] else "" for p in sensitive}
    # the sensitive tokens carry their tooltip on the mark; the others on the piece
    piece_tips = [None if i in marks else tip for i, tip in enumerate(tips)]
    rows.append(f'<tr class="target"><th>translation</th>'
                f"<td>{_tokens(target_tokens, marks=marks, tips=piece_tips)}</td></tr>")
    blocks = [_attribution(item, a) for a in (item.get("attributions") or [])
              if isinstance(a, dict)]
    return (f'<div class="item" id="i{ident}"><h2>{_heading(item)}</h2><table class="sent">{"".join(rows)}</table>'
            f'{"".join(blocks)}</div>')


def _legend(report: dict) -> str:
    metric = str(report.get("metric", "kl"))
    threshold = report.get("threshold") or {}
    described = METRICS.get(metric.lower(), metric)
    swatch = 'style="background: rgb({}, {}, {})"'
    return (
        '<div class="legend">'
        f"<p><b>Sensitive tokens</b> (<mark>marked</mark>): target tokens whose "
        f"{_e(described)} exceeds <span class=\"num\">{_e(_num(threshold.get('value')))}</span> bits "
        f"(metric <code>{_e(metric)}</code>, threshold mean + {_e(_num(threshold.get('std'), 2))} standard "
        "deviations). Hover a token for its values.</p>"
        f"<p><b>Attribution</b> ({_e(report.get('method', 'n/a'))}): for each sensitive token, the context and "
        "(fainter) source tokens are shaded by how much they push the model to this token rather than its "
        f'no-context choice: <span class="swatch" {swatch.format(*POSITIVE_RGB)}></span> towards it, '
        f'<span class="swatch" {swatch.format(*NEGATIVE_RGB)}></span> away from it, intensity |score| over '
        "the largest |score| of that token (each row has its own scale). The outlined token is the "
        "highest-scoring context token.</p>"
        "<p><b>Erasure</b>: the drop in the contrastive score when a context token (in its tooltip) or a "
        "whole context sentence (right) is removed; large where the model's output agrees with the "
        "attribution.</p></div>")


def render(report: dict, title: str = DEFAULT_TITLE) -> str:
    """The report as one self-contained HTML5 document (see the module docstring)."""
    items = [i for i in (report.get("items") or []) if isinstance(i, dict)]
    n_sensitive = sum(1 for i in items if i.get("sensitive"))
    meta = [f"checkpoint <code>{_e(report.get('path', 'n/a'))}</code>",
            f"context: {_e(report.get('context', 'n/a'))}, size {_e(report.get('context_size', 'n/a'))}",
            f"translation analysed: {_e(report.get('translation', 'n/a'))}",
            f"{len(items)} sentences, {n_sensitive} with context-sensitive tokens"]
    body = "".join(_item(i) for i in items)
    return ("<!DOCTYPE html>\n"
            '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
            f"<h1>{_e(title)}</h1>\n<p class=\"meta\">{' &middot; '.join(meta)}</p>\n"
            f"{_legend(report)}\n{body}\n</body>\n</html>\n")


def write(report: dict, path, title: str = DEFAULT_TITLE) -> Path:
    """:func:`render` into ``path`` (UTF-8); returns the path."""
    path = Path(path)
    path.write_text(render(report, title), encoding="utf-8")
    return path
