"""Every measured number in README.md is found in a committed benchmark file.

Sources. The files under ``benchmarks/`` that git tracks (``git ls-files
benchmarks``; every file there if the tree has no git metadata) whose names
end in ``.json``, ``.jsonl``, ``.md``, ``.txt``, ``.log``, ``.csv`` or
``.tsv``: records, not translations (``.hyp`` files are model output, full
of verse numbers) nor images. Nothing outside ``benchmarks/`` counts:
docs/benchmarks.md and docs/study.md are pages that describe measurements,
not their records.

Which README numbers are checked. README.md is read as a whole (a phrase
may be broken over two lines) and these parts are blanked first, keeping
line numbers:

* fenced code blocks and inline code spans (commands, flag values such as
  ``--context-size 1``, names such as ``wmt14_en_de``);
* URLs and the targets of Markdown links;
* dates (``2026-11-26``);
* citations of the papers (``Table 4``, ``Fig. 4``, ``Figs. 2-4``,
  ``Sect. 6.1``) and issue references (``#5036``);
* software versions: any number with two or more dots (``0.12.3.1``,
  ``2.13.0``) and a number right after ``Python``, ``torch``, ``fairseq``
  or ``sacreBLEU``, with ``>=``/``==``/``<=`` between them or not;
* years: a bare four-digit integer from 1990 to 2099 (``AAAI 2019``). The
  README writes every count of a thousand or more with thousands
  separators (``4,000 updates``), so a bare year-like integer is a year.

Every other number is a candidate: digits not glued to a letter, digit,
underscore or point in front (``fp16``, ``libjemalloc2`` are names), with
optional thousands separators and decimals; a unit after it is read off
(``1.4x`` is 1.4, ``8.98%`` is 8.98, ``31 s`` is 31, ``7,874,560`` is
7874560). Each candidate is exactly one of

* a setting or a fact that no measurement produces: covered by an entry of
  ``NOT_MEASUREMENTS`` (a regex over the blanked README, whitespace-
  insensitive, and the reason);
* a measurement whose record is not committed yet: covered by an entry of
  ``AWAITING_MEASUREMENT`` (regex and reason);
* a measurement: covered by an entry of ``RECORDS`` (regex and the path of
  the benchmark file that records it), and found in that file.

Why a measurement names its file instead of being looked up in all of them:
the records hold about 11,500 distinct numbers, and at the README's
precision a random number between 0 and 100 is found somewhere in them 93%
of the time as an integer, 50% with one decimal, 14% with two, so "found in
some file" would let nearly any figure through. Every entry of the three
lists must still match the README (no stale entries), and a ``RECORDS``
path must be one of the sources above.

Matching is rounding-aware: a README number written with k decimals matches
a number in the record that rounds to it at k decimals (at most half a unit
of the README's last digit away, so either tie rule): README ``28.75``
matches ``28.7512``, ``149.1`` matches ``149.08``, ``12`` matches ``11.8``.
A percentage also matches the fraction (``8.98%`` matches ``0.0898``).
Numbers in a record are read the same way (thousands separators, signs,
exponents such as ``2e-3``).
"""
import re
import subprocess
import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
BENCHMARKS = "benchmarks"
SOURCE_SUFFIXES = (".json", ".jsonl", ".md", ".txt", ".log", ".csv", ".tsv")
QUICKSTART = "benchmarks/quickstart-2026-11-28.json"
NEWCOMER = "benchmarks/newcomer-2026-11-28.json"

# (regex over the blanked README; the record that holds its numbers)
RECORDS = [
    (r"scored 13\.14 BLEU after", QUICKSTART),                # transformer: bleu
    (r"encoder 13\.39\s+\(13\.22 with", QUICKSTART),           # transformer_ctxenc: bleu, shuffled bleu
    (r"trained 15\.5 and 24\.0 minutes", QUICKSTART),         # train_minutes of both
    (r"took\s+2,616 s", NEWCOMER),                           # step 6 (the quickstart): wall_s 2615.7
    (r"the 553 test verses", "benchmarks/study-bible-context-set.json"),  # sources.test.verses
    (r"prints BLEU 28\.76 and chrF 50\.90", "benchmarks/first-model.json"),  # models.baseline.scores
    (r"28\.14 and 50\.48 for the", "benchmarks/first-model.json"),           # models.ctxenc.scores
    (r"CXMI \+0\.0423 bits", "benchmarks/first-model.json"),                # cxmi_bits.none 0.04226
    (r"Time:\s+77 s on", "benchmarks/first-model.json"),                     # wall_seconds 77
    (r"\(108 s of CPU\)", "benchmarks/first-model.json"),                     # cpu_seconds 107.7
    (r"the study: 28\.75 and 50\.88", "benchmarks/study-bible-budget.json"),  # run transformer: bleu, chrf
    (r"28\.21 and 50\.52 on the", "benchmarks/study-bible-budget.json"),     # run transformer_ctxenc: bleu, chrf
    (r"\(\+1\.45 ± 0\.57 BLEU over the plain one, \+0\.98 ± 0\.47 over", "benchmarks/study-bible-budget.json"),  # Enc-DC summary vs both
    (r"\(CXMI \+0\.036 bits a token\)", "benchmarks/study-bible-budget.json"),  # ctxenc summary: cxmi_bits mean 0.0362
    (r"BLEU \(-0\.25 ±\s+0\.26 against the plain one", "benchmarks/study-bible-budget.json"),  # ctxenc summary vs transformer
    (r"\(one seed; -0\.05 BLEU against the baseline", "benchmarks/study-bible-budget.json"),  # GRET vs its control
]

# (regex over the blanked README; why its numbers are not measurements).
# Keep it short: a number is here only if no measurement produced it.
NOT_MEASUREMENTS = [
    (r"use 1 if other jobs", "a value to give OMP_NUM_THREADS, a setting"),
    (r"same number of updates \(\s*,\s*default 840\)", "the quickstart's --updates default, a setting"),
    (r"after its 840\s+updates", "the same --updates default"),
    (r"3\+3 layers, d=128", "the study's model size, a setting"),
    (r"d = 128, 3\+3 layers", "the study's model size, a setting"),
    (r"A 30-update calibration", "the quickstart's calibration length, a setting"),
    (r"on 2 CPU cores", "the machine the quickstart was measured on, not a result"),
    (r"on 2 idle cores", "the machine the first command was measured on, not a result"),
    (r"default of 8 it can drop up to 7 sentences",
     "fairseq's batch-size multiple (8) and what it implies (8 - 1), not measured"),
    (r"\(4,000 updates", "the study's update budget, a setting"),
    (r"FFN-768", "the capacity-matched baseline's FFN width, a setting"),
    (r"\(seed 1, 4,000 updates", "the shipped model's seed and the study's update budget, settings"),
]

# (regex over the blanked README; why it cannot be checked yet): figures
# the README gives as measured whose record is not committed under
# benchmarks/. Each needs the measurement's output committed there (then
# it moves to RECORDS) or a new measurement.
AWAITING_MEASUREMENT = [
]

_NOT_NUMBERS = [
    r"```.*?```",                                   # fenced code
    r"`[^`]*`",                                     # inline code
    r"https?://\S+",                                # URLs
    r"\]\([^)]*\)",                                 # link targets
    r"\b\d{4}-\d{2}-\d{2}\b",                       # dates
    r"\b(?:Tables?|Figs?\.|Sect\.|Section|Eqs?\.)\s+\d+(?:\.\d+)*(?:\s*[-–,]\s*\d+(?:\.\d+)*)*",
    r"#\d+",                                        # issue references
    r"(?<![\w.])\d+(?:\.\d+){2,}(?![\w.])",         # versions with 2+ dots
    r"\b(?:Python|torch|fairseq|sacreBLEU)\s*(?:[<>=]=\s*)?\d+(?:\.\d+)*",
    r"(?<![\w.,])(?:199\d|20\d\d)(?![\d]|[.,]\d)",  # years
]

# a README number: not glued to a word character or a point in front;
# integer part with or without thousands separators; decimals
NUMBER = re.compile(r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\d,]*\d)")
# a number in a record: also signs and exponents
SOURCE_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")


def blank(text: str, pattern: str) -> str:
    """``text`` with every match of ``pattern`` replaced by spaces, newlines
    kept (so offsets and line numbers stay)."""
    return re.sub(pattern, lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)


def prose(text: str) -> str:
    for pattern in _NOT_NUMBERS:
        text = blank(text, pattern)
    return text


def numbers_in_prose(text: str):
    """``(line, written, start, end)`` of every candidate number in blanked
    README text; ``written`` keeps a ``%`` or ``x`` right after it, and a
    minus sign right before it that stands alone ("-0.46 BLEU", not the
    hyphen of "FFN-768" or "1-3")."""
    out = []
    for m in NUMBER.finditer(text):
        unit = re.match(r"\s*(%|x\b)?", text[m.end():]).group(1) or ""
        sign = "-" if re.search(r"(?:^|[^\w.])[-−]$", text[max(0, m.start() - 2):m.start()]) else ""
        out.append((text.count("\n", 0, m.start()) + 1, sign + m.group(0) + unit, m.start(), m.end()))
    return out


def spans(text: str, entries):
    """The spans of every match of each entry's regex, one list per entry;
    a space in the regex matches any whitespace (README lines wrap)."""
    return [[m.span() for m in re.finditer(re.sub(r"\\? ", r"\\s+", pattern), text)] for pattern, _ in entries]


def source_values(text: str):
    """Every number in a record's text, as Decimals."""
    values = set()
    for m in SOURCE_NUMBER.finditer(text):
        try:
            value = Decimal(m.group(0).replace(",", ""))
        except InvalidOperation:
            continue
        # a hex digest read as mantissa and exponent ("93e9528..."): no measurement is that large
        if value.is_finite() and abs(value.adjusted()) <= 50:
            values.add(value)
    return values


def matches(written: str, values) -> bool:
    """Whether the README number ``written`` (``"28.75"``, ``"7,874,560"``,
    ``"8.98%"``, ``"1.4x"``) is one of ``values`` at its own rounding."""
    number = re.match(r"-?[\d,]+(?:\.(\d+))?", written)
    value = Decimal(number.group(0).replace(",", ""))
    k = len(number.group(1) or "")
    targets = [(value, k)] + ([(value / 100, k + 2)] if written.endswith("%") else [])
    return any(abs(v - target) <= Decimal(1).scaleb(-places) / 2 for target, places in targets for v in values)


def source_files(repo: Path = REPO):
    """The committed (tracked) record files under benchmarks/, relative to
    the repository."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", BENCHMARKS], cwd=repo, capture_output=True,
                                check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        listed = [p.relative_to(repo).as_posix() for p in (repo / BENCHMARKS).rglob("*") if p.is_file()]
    return sorted(p for p in listed if p.endswith(SOURCE_SUFFIXES) and (repo / p).is_file())


def read_sources(repo: Path = REPO):
    """``{path: numbers}`` of every record file."""
    return {p: source_values((repo / p).read_text(encoding="utf-8", errors="replace")) for p in source_files(repo)}


def classify(readme_text: str, sources):
    """``(rows, problems)``: one row ``(line, written, kind, detail)`` per
    candidate number, kind one of ``found``, ``missing`` (not in its record),
    ``unattributed`` (in no list), ``not a measurement``, ``awaiting``; and
    the problems with the lists themselves (stale entries, records that are
    not sources)."""
    text = prose(readme_text)
    lists = {"records": (RECORDS, spans(text, RECORDS)),
             "not a measurement": (NOT_MEASUREMENTS, spans(text, NOT_MEASUREMENTS)),
             "awaiting": (AWAITING_MEASUREMENT, spans(text, AWAITING_MEASUREMENT))}
    problems = [f"{name}: '{entries[i][0]}' matches nothing in README.md"
                for name, (entries, found) in lists.items() for i, ss in enumerate(found) if not ss]
    problems += [f"records: {path} is not a committed record under benchmarks/"
                 for _, path in RECORDS if path not in sources]
    rows = []
    for line, written, start, end in numbers_in_prose(text):
        covering = {name: [entries[i][1] for i, ss in enumerate(found) if any(s <= start and end <= e for s, e in ss)]
                    for name, (entries, found) in lists.items()}
        named = [name for name, hits in covering.items() if hits]
        if len(named) > 1:
            problems.append(f"README.md:{line} {written} is in more than one list: {named}")
        if covering["not a measurement"]:
            rows.append((line, written, "not a measurement", covering["not a measurement"][0]))
        elif covering["awaiting"]:
            rows.append((line, written, "awaiting", covering["awaiting"][0]))
        elif covering["records"]:
            found = [p for p in covering["records"] if matches(written, sources.get(p, ()))]
            rows.append((line, written, "found", found[0]) if found
                        else (line, written, "missing", " or ".join(covering["records"])))
        else:
            elsewhere = [p for p, values in sources.items() if matches(written, values)]
            rows.append((line, written, "unattributed", elsewhere))
    return rows, problems


def failures(rows):
    out = []
    for line, written, kind, detail in rows:
        if kind == "missing":
            out.append(f"README.md:{line} {written}: not found in {detail}")
        elif kind == "unattributed":
            hint = f" (a number that rounds to it is in {len(detail)} of them)" if detail else ""
            out.append(f"README.md:{line} {written}: not found in a committed file under benchmarks/ named "
                       f"for it in RECORDS{hint}")
    return out


# ---------------------------------------------------------------------------
# the README
# ---------------------------------------------------------------------------

def test_sources_are_the_committed_benchmark_records_only():
    files = source_files()
    assert files, "no record files under benchmarks/"
    assert all(p.startswith(BENCHMARKS + "/") for p in files), files
    assert "docs/benchmarks.md" not in files and "README.md" not in files
    assert not any(p.endswith((".hyp", ".png")) for p in files)


def test_every_measured_readme_number_is_in_a_benchmark_file():
    rows, problems = classify(README.read_text(encoding="utf-8"), read_sources())
    assert any(kind == "found" for _, _, kind, _ in rows), "no measured README number found: extraction broken?"
    assert not problems, "\n".join(problems)
    missing = failures(rows)
    assert not missing, ("README.md numbers not found in a committed benchmark file (commit the record under "
                         "benchmarks/ and name it in RECORDS, correct the number, or list it with its reason "
                         "in NOT_MEASUREMENTS or AWAITING_MEASUREMENT):\n" + "\n".join(missing))


# ---------------------------------------------------------------------------
# the matcher and the extraction themselves
# ---------------------------------------------------------------------------

@pytest.mark.unit
def test_rounding_aware_matching():
    values = source_values('{"bleu": 28.7512, "cpu_min": 149.08, "params": 7874560, "gain": 0.0898}')
    assert matches("28.75", values) and matches("28.8", values) and matches("29", values)
    assert not matches("28.76", values) and not matches("28.7", values) and not matches("28", values)
    assert matches("149.1", values) and not matches("149.0", values) and not matches("149.2", values)
    assert matches("7,874,560", values) and matches("7874560", values) and not matches("7,874,561", values)
    assert matches("8.98%", values) and not matches("8.97%", values)
    assert matches("0.0898", values) and not matches("0.09", source_values("0.0951"))
    assert matches("1.4x", source_values("1.35")) and not matches("1.4x", source_values("1.34"))
    assert not matches("31", set())


@pytest.mark.unit
def test_record_numbers_read_as_written():
    values = source_values("lr 2e-3, 1,174 of 29,746 pairs, loss -0.5, took 31.0 s, 1.5E+2; v1.2 fp16")
    assert {Decimal("0.002"), Decimal(1174), Decimal(29746), Decimal("-0.5"), Decimal("31.0"),
            Decimal(150)} <= values
    assert Decimal(16) not in values and Decimal("1.2") not in values


@pytest.mark.unit
def test_units_and_separators_in_readme_numbers():
    text = prose("cost 1.4x the CPU time, 4.9 MB, 31 s, 8.98% better, 7,874,560 parameters, 2,000 updates\n")
    assert [w for _, w, _, _ in numbers_in_prose(text)] == ["1.4x", "4.9", "31", "8.98%", "7,874,560", "2,000"]
    # a minus that stands alone is the number's sign; a hyphen is not
    text = prose("deltas +0.60 and -0.46 BLEU (−1.06), FFN-768, seeds 1-3\n")
    assert [w for _, w, _, _ in numbers_in_prose(text)] == ["0.60", "-0.46", "-1.06", "768", "1", "3"]
    assert matches("-0.46", source_values('{"delta": -0.46}')) and not matches("-0.46", source_values("0.46"))
    assert not matches("0.46", source_values('{"delta": -0.46}'))


@pytest.mark.unit
def test_what_is_not_a_number_is_blanked():
    text = prose(
        "Python 3.11; torch 2.13.0 and torch >= 2.6; fairseq 0.12.3.1 (not 0.12.2); sacreBLEU 2\n"
        "Yang et al., AAAI 2019; Voita et al.'s\n2019 sets; measured 2026-11-26; Figs. 2-4, Fig. 4, Sect. 6.1\n"
        "Table 5; fairseq #5036; `--context-size 1`; [x](docs/v2.md); https://example.org/a1/2\n"
        "```bash\nfairseq-train --max-tokens 4096\n```\n"
        "fp16 and libjemalloc2 and wmt14 are names; `a\nb 3`\n")
    assert numbers_in_prose(text) == []
    assert text.count("\n") == 9
    assert [w for _, w, _, _ in numbers_in_prose(prose("2019 updates, 1989 and 2,019"))] == ["1989", "2,019"]


def _lists(monkeypatch, records=(), not_measurements=(), awaiting=()):
    module = sys.modules[__name__]
    monkeypatch.setattr(module, "RECORDS", list(records))
    monkeypatch.setattr(module, "NOT_MEASUREMENTS", list(not_measurements))
    monkeypatch.setattr(module, "AWAITING_MEASUREMENT", list(awaiting))


@pytest.mark.unit
def test_a_number_missing_from_its_record_fails_with_its_line(monkeypatch):
    _lists(monkeypatch, records=[(r"scored 28\.75 BLEU in 149\.1 CPU min", "benchmarks/a.json"),
                                 (r"0\.8 s an update", "benchmarks/a.json")],
           not_measurements=[(r"On 2 CPU cores", "setting")])
    readme = "# title\n\nOn 2 CPU cores the baseline scored 28.75 BLEU\nin 149.1 CPU\nmin, 0.8 s an update, 2.5x.\n"
    # 0.8 is only on a page outside benchmarks/, 2.5 is in another record but no entry names it
    sources = {"benchmarks/a.json": source_values('{"bleu": 28.7512, "cpu_min": 149.08}'),
               "benchmarks/b.json": source_values('{"ratio": 2.46}')}
    rows, problems = classify(readme, sources)
    assert problems == []
    assert [(line, w, kind) for line, w, kind, _ in rows] == [
        (3, "2", "not a measurement"), (3, "28.75", "found"), (4, "149.1", "found"), (5, "0.8", "missing"),
        (5, "2.5x", "unattributed")]
    assert failures(rows) == [
        "README.md:5 0.8: not found in benchmarks/a.json",
        "README.md:5 2.5x: not found in a committed file under benchmarks/ named for it in RECORDS "
        "(a number that rounds to it is in 1 of them)"]


@pytest.mark.unit
def test_stale_or_doubled_entries_and_foreign_records_are_problems(monkeypatch):
    _lists(monkeypatch, records=[(r"13\.1 BLEU", "docs/benchmarks.md")],
           not_measurements=[(r"default 840", "setting"), (r"13\.1", "doubled")],
           awaiting=[(r"7\.49 after 508", "not recorded")])
    rows, problems = classify("scored 13.1 BLEU (7.49 after 508)\n", {"benchmarks/a.json": {Decimal("13.14")}})
    assert [kind for _, _, kind, _ in rows] == ["not a measurement", "awaiting", "awaiting"]
    assert problems == ["not a measurement: 'default 840' matches nothing in README.md",
                        "records: docs/benchmarks.md is not a committed record under benchmarks/",
                        "README.md:1 13.1 is in more than one list: ['records', 'not a measurement']"]
