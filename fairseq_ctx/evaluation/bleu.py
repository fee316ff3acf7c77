"""BLEU as the papers report it, and paired bootstrap significance.

Reading hypotheses
    :func:`read_hypotheses` takes a plain text file (one hypothesis a line) or
    a ``fairseq-generate`` log, whose ``D-<id>`` lines (detokenized
    hypotheses) arrive in batch order: they are sorted by sentence id, and a
    log that lacks any id ``0 .. n_refs-1`` (or has ids beyond) is refused,
    never silently misaligned with the references.  With ``--nbest N`` the
    first ``D-`` line of each id (fairseq prints the best first) is used.

Detokenized BLEU
    :func:`detok_bleu`: sacreBLEU's ``corpus_score`` with its defaults
    (``13a`` tokenization, case-sensitive, exponential smoothing) on
    detokenized text, returned with the sacreBLEU signature.

Tokenized BLEU with compound splitting (En-De, Vaswani et al. 2017)
    :func:`compound_split_bleu` follows tensor2tensor's
    ``utils/get_ende_bleu.sh`` and fairseq's ``scripts/compound_split_bleu.sh``:
    Moses-tokenize (``tokenizer.perl -l de``, without ``-a``; here sacremoses
    with its default escaping, as ``tokenizer.perl``'s), then put compounds in
    "ATAT" format with the Perl substitution
    ``perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g'`` on hypotheses and
    references alike, then case-sensitive BLEU on whitespace tokens with no
    smoothing (``multi-bleu.perl`` / ``fairseq-score``; here sacreBLEU with
    ``tokenize='none', smooth_method='none'``, which counts n-grams of
    ``str.split()`` exactly as ``multi-bleu.perl`` does).  The substitution
    is global but its matches do not overlap, since each consumes the byte
    after the hyphen: ``a-b-c`` becomes ``a ##AT##-##AT## b-c``; it works on
    UTF-8 bytes, as Perl does (:func:`compound_split`, checked against Perl
    in the tests).  Text that is already Moses-tokenized is scored with ``lang=None``.

chrF and TER
    :func:`chrf` and :func:`ter`: sacreBLEU's own implementations with its
    defaults (chrF2: character 6-grams, beta 2, Popović 2015; TER: Snover et
    al. 2006, case-insensitive, no normalization), each with its signature;
    :func:`corpus_score` picks any of ``bleu``, ``chrf``, ``ter`` by name.

Paired bootstrap resampling (Koehn 2004)
    :func:`paired_bootstrap_metrics` resamples once and tests BLEU, chrF and
    TER together (sacreBLEU's ``--paired-bs`` with several metrics);
    :func:`paired_bootstrap` runs sacreBLEU's own implementation
    (``sacrebleu.significance.PairedTest`` with ``test_type='bs'``, a port of
    Moses' ``bootstrap-hypothesis-difference-significance.pl``): the same
    ``n_samples`` resamples of sentence indices for the baseline and each
    system, and a two-sided p-value for the observed |BLEU difference|.  One
    departure: for an observed difference of exactly zero the p-value is set
    to 1.0 (no evidence of a difference). sacreBLEU counts the resampled
    centred differences strictly above the observed one, ``(c + 1) /
    (n_samples + 1)``: with identical outputs (or two systems at BLEU 0 in
    every resample) every centred difference is 0, none is counted, and it
    returns its smallest p-value, 1/(n_samples+1); for different outputs
    that happen to score the same it returns about 0.5.
"""
import contextlib
import functools
import math
import os
import re
from dataclasses import asdict, dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from fairseq_ctx import text_lines
from fairseq_ctx.errors import FairseqCtxError

__all__ = [
    "EvaluationError", "read_lines", "is_generate_log", "read_generate_log", "read_hypotheses", "detok_bleu",
    "compound_split", "moses_tokenize", "compound_split_lines", "compound_split_bleu", "tokenized_bleu",
    "PairedResult", "paired_bootstrap", "METRICS", "sacrebleu_metric", "corpus_score", "chrf", "ter",
    "paired_bootstrap_metrics", "format_delta",
]

DEFAULT_BOOTSTRAP_SAMPLES = 1000  # sacreBLEU's default; also Ampomah et al.'s (compare-mt, 1000 resamples)
DEFAULT_SEED = 12345  # sacreBLEU's default SACREBLEU_SEED


class EvaluationError(FairseqCtxError, ValueError):
    """Input that cannot be scored as given (file, line count, sentence ids)."""


# ---------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------

# lines end at "\n" only (fairseq_ctx.text_lines); errors are EvaluationErrors
read_lines = functools.partial(text_lines.read_lines, error=EvaluationError)


_GEN_LINE = re.compile(r"^([SHDT])-(\d+)\t(.*)$")
_GEN_HYP = re.compile(r"^(\S+)(?:\t(.*))?$")  # "<score>\t<text>"; an empty text may lose its tab


def is_generate_log(lines: Sequence[str]) -> bool:
    """Whether ``lines`` (of a file) look like fairseq-generate output: any ``D-<id>\\t`` line."""
    return any(line.startswith("D-") and _GEN_LINE.match(line) for line in lines)


def _format_ids(ids: Sequence[int], limit: int = 10) -> str:
    ids = sorted(ids)
    shown = ", ".join(str(i) for i in ids[:limit])
    return shown + (f", ... ({len(ids)} in all)" if len(ids) > limit else "")


def read_generate_log(path, n: int, prefix: str = "D", lines: Optional[Sequence[str]] = None) -> List[str]:
    """Texts of the ``<prefix>-<id>`` lines of a fairseq-generate log, in id
    order: ``D`` detokenized hypotheses (default), ``H`` hypotheses before
    detokenization, ``S`` sources, ``T`` targets.  Ids must be exactly
    ``0 .. n-1``; a missing id, an id >= ``n`` or a sentence id whose source
    line appears twice (two logs concatenated) raise :class:`EvaluationError`.
    With ``--nbest`` the first hypothesis line of an id (the best) is kept."""
    if prefix not in ("S", "T", "H", "D"):
        raise ValueError(f"prefix must be one of S, T, H, D, not {prefix!r}")
    lines = read_lines(path) if lines is None else lines
    texts: Dict[int, str] = {}
    seen_sources: Dict[int, int] = {}
    for lineno, line in enumerate(lines, 1):
        m = _GEN_LINE.match(line)
        if not m:
            continue
        kind, sid, rest = m.group(1), int(m.group(2)), m.group(3)
        if kind == "S":
            if sid in seen_sources:
                raise EvaluationError(
                    f"{path}:{lineno}: sentence id {sid} appears a second time (first at line "
                    f"{seen_sources[sid]}); is this several generate logs in one file?")
            seen_sources[sid] = lineno
        if kind != prefix:
            continue
        if kind in ("H", "D"):  # "<score>\t<text>"
            h = _GEN_HYP.match(rest)
            if not h:
                raise EvaluationError(f"{path}:{lineno}: malformed {kind}- line (expected "
                                      f"'{kind}-<id>\\t<score>\\t<text>')")
            rest = h.group(2) or ""
        texts.setdefault(sid, rest)
    if not texts:
        raise EvaluationError(f"{path}: no {prefix}- lines; not a fairseq-generate log?")
    missing = sorted(set(range(n)) - set(texts))
    extra = sorted(i for i in texts if i >= n)
    if extra:
        raise EvaluationError(
            f"{path}: sentence id(s) {_format_ids(extra)} beyond the {n} reference lines; "
            "is this log from another test set?")
    if missing:
        raise EvaluationError(
            f"{path}: no {prefix}- line for sentence id(s) {_format_ids(missing)} ({len(texts)} of {n} "
            "found); was generation cut short, or run without --required-batch-size-multiple 1?")
    return [texts[i] for i in range(n)]


def read_hypotheses(path, n_refs: int, fmt: str = "auto") -> List[str]:
    """Hypotheses aligned with ``n_refs`` reference lines.

    ``fmt='genlog'``: a fairseq-generate log, ``D-`` lines sorted by id (see
    :func:`read_generate_log`); ``'text'``: one hypothesis a line, which must
    number ``n_refs``; ``'auto'`` (default): a log if any line starts with
    ``D-<id>\\t``, else text.  Raises :class:`EvaluationError` on a missing
    file, a line count mismatch or missing sentence ids."""
    if fmt not in ("auto", "genlog", "text"):
        raise ValueError(f"fmt must be auto, genlog or text, not {fmt!r}")
    lines = read_lines(path)
    if fmt == "genlog" or (fmt == "auto" and is_generate_log(lines)):
        return read_generate_log(path, n_refs, "D", lines=lines)
    if len(lines) != n_refs:
        raise EvaluationError(f"{path}: {len(lines)} lines, but the reference has {n_refs}")
    return lines


def _check_lengths(hyps: Sequence[str], refs: Sequence[str], what: str = "hypotheses"):
    if isinstance(hyps, str) or isinstance(refs, str):
        raise TypeError("hypotheses and references must be sequences of lines, not strings")
    if len(hyps) != len(refs):
        raise EvaluationError(f"{len(hyps)} {what}, but {len(refs)} references")
    if not refs:
        raise EvaluationError("no references to score against")


# ---------------------------------------------------------------------------
# BLEU
# ---------------------------------------------------------------------------

def _bleu_metric(tokenize: Optional[str] = None, smooth_method: str = "exp", trg_lang: str = ""):
    from sacrebleu.metrics import BLEU

    return BLEU(tokenize=tokenize, smooth_method=smooth_method, trg_lang=trg_lang,
                force=tokenize == "none")


# our name -> what the tables print; TER is an error rate (lower is better)
METRICS = {"bleu": "BLEU", "chrf": "chrF", "ter": "TER"}


def sacrebleu_metric(name: str, tokenize: Optional[str] = None, trg_lang: str = ""):
    """sacreBLEU's metric object for ``name`` (``bleu``, ``chrf``, ``ter``)
    with sacreBLEU's defaults; ``tokenize``/``trg_lang`` apply to BLEU."""
    if name == "bleu":
        return _bleu_metric(tokenize=tokenize, trg_lang=trg_lang)
    if name == "chrf":
        from sacrebleu.metrics import CHRF

        return CHRF()
    if name == "ter":
        from sacrebleu.metrics import TER

        return TER()
    raise EvaluationError(f"unknown metric {name!r}; expected one of {', '.join(METRICS)}")


def corpus_score(name: str, hyps: Sequence[str], refs: Sequence[str], tokenize: Optional[str] = None,
                 trg_lang: str = "") -> Tuple[float, str]:
    """``(score, signature)`` of metric ``name`` (``bleu``, ``chrf``, ``ter``)
    on ``hyps`` against one reference each, computed by sacreBLEU."""
    _check_lengths(hyps, refs)
    metric = sacrebleu_metric(name, tokenize=tokenize, trg_lang=trg_lang)
    score = metric.corpus_score(list(hyps), [list(refs)])
    return score.score, str(metric.get_signature())


def chrf(hyps: Sequence[str], refs: Sequence[str]) -> Tuple[float, str]:
    """sacreBLEU's corpus chrF2 (``nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:...``)."""
    return corpus_score("chrf", hyps, refs)


def ter(hyps: Sequence[str], refs: Sequence[str]) -> Tuple[float, str]:
    """sacreBLEU's corpus TER, in percent; lower is better."""
    return corpus_score("ter", hyps, refs)


def detok_bleu(hyps: Sequence[str], refs: Sequence[str], tokenize: Optional[str] = None,
               trg_lang: str = "") -> Tuple[float, str]:
    """Detokenized, case-sensitive corpus sacreBLEU of ``hyps`` against one
    reference each; returns ``(score, signature)``, e.g. ``(27.3,
    'nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0')``.
    ``tokenize``/``trg_lang`` are sacreBLEU's (default ``13a``; ``zh``,
    ``ja-mecab``, ... chosen by ``trg_lang`` as sacreBLEU does)."""
    _check_lengths(hyps, refs)
    metric = _bleu_metric(tokenize=tokenize, trg_lang=trg_lang)
    score = metric.corpus_score(list(hyps), [list(refs)])
    return score.score, str(metric.get_signature())


_ATAT = re.compile(rb"(\S)-(\S)")


def compound_split(line: str) -> str:
    r"""``perl -ple 's{(\S)-(\S)}{$1 ##AT##-##AT## $2}g'`` on one line:
    ``"rich-text format"`` -> ``"rich ##AT##-##AT## text format"``.

    Matched on the UTF-8 bytes, as Perl without ``-C`` does, so that the
    result is byte-identical to the script's: matches do not overlap (each
    consumes the byte after the hyphen), so ``"a-b-c"`` -> ``"a ##AT##-##AT##
    b-c"`` while ``"Rich-Text-Format"`` splits at both hyphens, and so does
    ``"ü-ö-ä"`` (``ö`` is two bytes); ``\S`` is any byte but ASCII whitespace."""
    return _ATAT.sub(rb"\1 ##AT##-##AT## \2", line.encode("utf-8")).decode("utf-8")


def moses_tokenize(lines: Sequence[str], lang: str, escape: bool = True) -> List[str]:
    """Moses tokenization with sacremoses, as ``tokenizer.perl -l LANG``
    (no ``-a``: hyphens inside words stay; XML escaping on, its default)."""
    from sacremoses import MosesTokenizer

    tok = MosesTokenizer(lang=lang)
    return [tok.tokenize(line, return_str=True, escape=escape, aggressive_dash_splits=False) for line in lines]


def compound_split_lines(lines: Sequence[str], lang: Optional[str] = None) -> List[str]:
    """Moses-tokenize ``lines`` (unless ``lang`` is None: already tokenized)
    and apply :func:`compound_split` to each."""
    if lang:
        lines = moses_tokenize(lines, lang)
    return [compound_split(line) for line in lines]


def compound_split_bleu(hyps: Sequence[str], refs: Sequence[str], lang: Optional[str] = "de"
                        ) -> Tuple[float, str]:
    """Tokenized case-sensitive BLEU with compound splitting (the Vaswani et
    al. 2017 En-De convention; see the module docstring); returns ``(score,
    description)``.  ``lang``: Moses-tokenize both sides first with this
    language (default ``de``); ``None`` for text already Moses-tokenized."""
    _check_lengths(hyps, refs)
    score, signature = tokenized_bleu(compound_split_lines(hyps, lang), compound_split_lines(refs, lang))
    pre = f"moses-{lang}" if lang else "pretokenized"
    return score, f"{signature}|pre:{pre}+compound-split"


def tokenized_bleu(hyps: Sequence[str], refs: Sequence[str]) -> Tuple[float, str]:
    """BLEU of text as it is (whitespace tokens), case-sensitive, no
    smoothing: ``multi-bleu.perl`` / ``fairseq-score``.  Use it on lines
    already through :func:`compound_split_lines` (compound splitting is not
    idempotent: ``##AT##-##AT##`` itself contains ``#-#``)."""
    _check_lengths(hyps, refs)
    metric = _bleu_metric(tokenize="none", smooth_method="none")
    score = metric.corpus_score(list(hyps), [list(refs)])
    return score.score, str(metric.get_signature())


def format_delta(delta: Optional[float]) -> str:
    """A score difference for a table: two decimals, or two significant
    digits when it is smaller than 0.005 (``+0.0031``), so that a difference
    printed as ``+0.00`` is exactly zero (and has bootstrap p = 1)."""
    if delta is None:
        return "-"
    if delta == 0 or abs(delta) >= 0.005:
        return f"{delta:+.2f}"
    return f"{delta:+.{1 - math.floor(math.log10(abs(delta)))}f}"


# ---------------------------------------------------------------------------
# paired bootstrap
# ---------------------------------------------------------------------------

@dataclass
class PairedResult:
    """One system against the baseline: its BLEU, the difference, the
    two-sided p-value and the bootstrap mean and 95% half-interval of its
    score (``mean``, ``ci``)."""
    score: float
    baseline_score: float
    delta: float
    p_value: float
    mean: float
    ci: float

    def as_dict(self):
        return asdict(self)


@contextlib.contextmanager
def _sacrebleu_seed(seed: Optional[int]):
    """sacreBLEU reads its seed from $SACREBLEU_SEED; set it for one call."""
    old = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = "None" if seed is None else str(int(seed))
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("SACREBLEU_SEED", None)
        else:
            os.environ["SACREBLEU_SEED"] = old


def paired_bootstrap(baseline: Sequence[str], systems: Mapping[str, Sequence[str]], refs: Sequence[str],
                     n_samples: int = DEFAULT_BOOTSTRAP_SAMPLES, seed: Optional[int] = DEFAULT_SEED,
                     tokenize: Optional[str] = None, smooth_method: str = "exp", trg_lang: str = ""
                     ) -> Tuple[Dict[str, PairedResult], str]:
    """Paired bootstrap resampling of each system in ``systems`` (name ->
    hypotheses) against the ``baseline`` hypotheses, with sacreBLEU's
    implementation and BLEU settings (defaults: detokenized sacreBLEU; for
    the compound-split tokenized BLEU pass :func:`compound_split_lines`
    output with ``tokenize='none', smooth_method='none'``).

    Returns ``({name: PairedResult}, signature)``; the signature records the
    resamples and the seed (``...|bs:1000|seed:12345|...``).  ``seed`` must be
    a positive integer (sacreBLEU treats 0 as "unseeded"); ``None`` draws from
    the OS.  The p-value is two-sided: small when the system differs from
    the baseline, better or worse (see ``delta``)."""
    _check_bootstrap_args(baseline, systems, refs, n_samples, seed)
    if not systems:
        return {}, ""
    metric = _bleu_metric(tokenize=tokenize, smooth_method=smooth_method, trg_lang=trg_lang)
    (results, signature), = _paired_test(baseline, systems, refs, [metric], n_samples, seed)
    return results, signature


def paired_bootstrap_metrics(baseline: Sequence[str], systems: Mapping[str, Sequence[str]], refs: Sequence[str],
                             metrics: Sequence[str] = tuple(METRICS), n_samples: int = DEFAULT_BOOTSTRAP_SAMPLES,
                             seed: Optional[int] = DEFAULT_SEED, tokenize: Optional[str] = None,
                             trg_lang: str = "") -> Tuple[Dict[str, Dict[str, PairedResult]], Dict[str, str]]:
    """Paired bootstrap of each system against ``baseline`` in every metric of
    ``metrics`` (``bleu``, ``chrf``, ``ter``) with the same resamples, as
    sacreBLEU's ``--paired-bs -m bleu chrf ter``.  Returns ``({metric: {name:
    PairedResult}}, {metric: signature})``; the rules of :func:`paired_bootstrap`
    apply (two-sided p, p = 1 for an observed difference of exactly zero).
    For TER a negative ``delta`` is an improvement."""
    _check_bootstrap_args(baseline, systems, refs, n_samples, seed)
    if not systems:
        return {m: {} for m in metrics}, {m: "" for m in metrics}
    objects = [sacrebleu_metric(m, tokenize=tokenize, trg_lang=trg_lang) for m in metrics]
    tested = _paired_test(baseline, systems, refs, objects, n_samples, seed)
    return ({m: res for m, (res, _) in zip(metrics, tested)}, {m: sig for m, (_, sig) in zip(metrics, tested)})


def _check_bootstrap_args(baseline, systems, refs, n_samples, seed):
    if seed is not None and int(seed) <= 0:
        raise EvaluationError(f"bootstrap seed must be a positive integer (sacreBLEU treats 0 as unseeded), "
                              f"not {seed}")
    if n_samples < 1:
        raise EvaluationError(f"the number of bootstrap samples must be positive, not {n_samples}")
    _check_lengths(baseline, refs, "baseline hypotheses")
    for name, hyps in systems.items():
        _check_lengths(hyps, refs, f"hypotheses of {name!r}")


def _paired_test(baseline, systems, refs, metric_objects, n_samples, seed
                 ) -> List[Tuple[Dict[str, PairedResult], str]]:
    """sacreBLEU's ``PairedTest`` (``test_type='bs'``) of ``systems`` against
    ``baseline``; one ``({name: PairedResult}, signature)`` per metric object,
    in order."""
    from sacrebleu.significance import PairedTest

    base_name = "__baseline__"
    while base_name in systems:
        base_name += "_"
    named = [(base_name, list(baseline))] + [(name, list(h)) for name, h in systems.items()]
    with _sacrebleu_seed(seed):
        test = PairedTest(named, {str(i): m for i, m in enumerate(metric_objects)}, [list(refs)],
                          test_type="bs", n_samples=n_samples)
        signatures, scores = test()
    out = []
    # sacreBLEU keys its results by the metrics' own names ("BLEU", "chrF2", "TER"), in the order given
    for key, signature in signatures.items():
        baseline_result = scores[key][0]
        results = {}
        for name, res in zip(scores["System"][1:], scores[key][1:]):
            p = 1.0 if res.score == baseline_result.score else res.p_value
            results[name] = PairedResult(score=res.score, baseline_score=baseline_result.score,
                                         delta=res.score - baseline_result.score, p_value=p,
                                         mean=float(res.mean), ci=float(res.ci))
        out.append((results, str(signature)))
    return out
