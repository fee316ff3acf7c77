"""Reproduce a paper's table: train every row, average, decode, score, analyse, print.

A table (``fairseq_ctx/tables/{ctxsan,dc,gret,voita}.py``) is data: its rows,
each a label, the descriptive cells of the paper's layout, a training config
(``configs/**.args``), the paper's numbers and, where they differ from the
table's, the dataset, the generation config and the row it is compared with.
This module does the rest, the same way for every table:

1. **train** each row with ``fairseq-train DATA-BIN <row config> <dataset
   config>`` (``configs/data/NAME.args``: the language direction), plus
   ``--save-dir``, ``--user-dir``, ``--log-format simple`` and, for GRET rows,
   ``--gret-warm-start`` with the baseline row's averaged checkpoint; a
   training that was interrupted resumes from its ``checkpoint_last.pt``;
2. **average** the last checkpoints with ``fairseq-ctx-average-checkpoints``
   and the table's averaging config (``configs/recipes/average_last5.args``
   or ``_last20``) into ``checkpoint_avg.pt``;
3. **decode** with ``fairseq-generate DATA-BIN --path checkpoint_avg.pt
   <generation config> <dataset post-processing config>``
   (``configs/data/NAME.generate.args``) ``--required-batch-size-multiple 1``;
4. **score** with :mod:`fairseq_ctx.evaluation`: detokenized sacreBLEU with
   its signature against the detokenized reference (``<data>/../raw`` or
   ``<data>/../text/<subset>.<tgt>``, as the prepare scripts write them; or
   ``--ref-dir``), every sentence id of the subset required; for En-De also
   the tokenized compound-split BLEU the papers report; then paired bootstrap
   resampling (1000 samples) of each row against its baseline row, in the
   paper's metric;
5. **analyse** where the paper has the figure: context gates (ctxsan), DC
   divergence (kernel sweep), context attention (Voita), BLEU by source
   length, bag-of-words prediction (GRET Table 5), probing (DC Table 4, with
   ``--probing-args``), written next to the table;
6. **print** the table in the paper's layout, ours beside the paper's numbers
   (parameters, BLEU, speed where the paper reports it), and write
   ``table.txt`` and ``table.json``.

Resumable: a row whose ``checkpoint_avg.pt`` and ``score.json`` exist is not
trained, decoded or scored again (a row whose training command changed since
it was trained stops with an error instead of mixing the two); an analysis
whose output exists is not re-run. Models live in
``OUT/models/<dataset>/<config>``, so tables that share a row (Table 1's
baseline in Tables 2 and 3) train it once (in smoke mode, a table with its own
smoke model size, DC Table 5, has its own ``OUT/models-<size>``).

``--smoke`` runs the same command lines on the Bible corpus (``--data``,
default ``data/bible/bin``, every dataset of the table replaced by it) with a
tiny model and a few updates, to catch a broken row on CPU in minutes: the
smoke flags below are appended after the row's own, so they win, and they
touch neither the architecture's options nor the task's. Its numbers mean
nothing.
"""
import abc
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .config import ArgsFileError, flag_value, read_arg_lines, read_args

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"
USER_DIR = REPO / "fairseq_ctx"

# ---------------------------------------------------------------------------
# datasets
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Dataset:
    """A prepared corpus: ``configs/data/<name>.args`` holds its direction
    (``--source-lang``/``--target-lang``) and ``<name>.generate.args`` its
    post-processing for fairseq-generate."""
    name: str
    bin_dir: str          # default location, relative to the repository
    title: str
    tok_bleu: bool = False  # En-De: also the tokenized compound-split BLEU (the papers' metric)

    def train_config(self) -> Path:
        return CONFIGS / "data" / f"{self.name}.args"

    def generate_config(self) -> Path:
        return CONFIGS / "data" / f"{self.name}.generate.args"

    def langs(self) -> Tuple[str, str]:
        lines = read_arg_lines(self.train_config())
        return flag_value(lines, "--source-lang"), flag_value(lines, "--target-lang")


def _iwslt(a, b, pair):
    return Dataset(f"iwslt_{a}_{b}", f"data/iwslt-{pair}/bin", f"IWSLT {a.capitalize()}->{b.capitalize()}")


DATASETS: Dict[str, Dataset] = {d.name: d for d in [
    Dataset("bible", "data/bible/bin", "Bible Es->En"),
    Dataset("wmt14_en_de", "data/wmt14-en-de/bin", "WMT14 En->De", tok_bleu=True),
    Dataset("wmt14_de_en", "data/wmt14-de-en/bin", "WMT14 De->En"),
    Dataset("wmt16_ro_en", "data/wmt16-ro-en/bin", "WMT16 Ro->En"),
    Dataset("wmt17_zh_en", "data/wmt17-zh-en/bin", "WMT17 Zh->En"),
    _iwslt("en", "vi", "en-vi"), _iwslt("vi", "en", "en-vi"),
    _iwslt("es", "en", "es-en"), _iwslt("en", "es", "es-en"),
    _iwslt("fr", "en", "fr-en"), _iwslt("en", "fr", "fr-en"),
    _iwslt("ro", "en", "ro-en"), _iwslt("en", "ro", "ro-en"),
    Dataset("opensubtitles_en_ru", "data/opensubtitles-en-ru/bin", "OpenSubtitles2018 En->Ru"),
]}

SMOKE_DATASET = "bible"

# ---------------------------------------------------------------------------
# smoke mode: appended after every row's own flags (later flags win)
# ---------------------------------------------------------------------------

SMOKE_MODEL = {"encoder_layers": 2, "decoder_layers": 2, "embed_dim": 32, "ffn_embed_dim": 64, "attention_heads": 4}
SMOKE_TRAIN = [
    "--max-update", "3", "--max-tokens", "512", "--update-freq", "1",
    "--save-interval-updates", "1", "--keep-interval-updates", "5", "--max-valid-steps", "2",
    "--num-workers", "0", "--log-interval", "1", "--cpu",
]
SMOKE_AVERAGE = ["--num-update-checkpoints", "2"]
SMOKE_GENERATE = ["--beam", "2", "--max-len-a", "0", "--max-len-b", "8", "--batch-size", "64", "--cpu"]
SMOKE_ANALYSIS_LIMIT = 64  # sentences per analysis (--limit of the analysis scripts)


def smoke_model_flags(overrides: Dict[str, int]) -> List[str]:
    m = dict(SMOKE_MODEL, **overrides)
    flags = []
    for side in ("encoder", "decoder"):
        flags += [f"--{side}-layers", str(m.get(f"{side}_layers")),
                  f"--{side}-embed-dim", str(m["embed_dim"]), f"--{side}-ffn-embed-dim", str(m["ffn_embed_dim"]),
                  f"--{side}-attention-heads", str(m["attention_heads"])]
    return flags


# ---------------------------------------------------------------------------
# tables as data
# ---------------------------------------------------------------------------


@dataclass
class Row:
    """One row of a paper's table.

    ``train``: training config relative to ``configs/`` (None with
    ``model_of``: evaluate another row's model, e.g. with shuffled context).
    ``cells``: the descriptive columns of the paper's layout. ``paper``: the
    paper's numbers (``params``, ``bleu``, ``train``, ``decode``; numbers or
    strings such as ``"+12.7M"`` or ``"Δ+0.89"``). ``baseline``: label of the
    row compared with (default: the table's baseline; ``""``: none).
    ``warm_start``: label of the row whose averaged checkpoint initialises this
    one (``--gret-warm-start``)."""
    label: str
    train: Optional[str] = None
    cells: Tuple[str, ...] = ()
    paper: Dict[str, Any] = field(default_factory=dict)
    dataset: Optional[str] = None
    generate: Optional[str] = None
    baseline: Optional[str] = None
    model_of: Optional[str] = None
    warm_start: Optional[str] = None
    average: Optional[str] = None


@dataclass
class Table:
    name: str                      # e.g. "ctxsan-table1" (also the output folder)
    title: str
    columns: Tuple[str, ...]       # headers of the descriptive cells
    rows: List[Row]
    dataset: str
    generate: str                  # generation config relative to configs/
    baseline: Optional[str] = None  # label of the default baseline row
    average: str = "recipes/average_last5.args"
    speed: Tuple[str, ...] = ()    # speeds the paper reports: "train" and/or "decode"
    speed_ref: Optional[str] = None  # row the speeds are relative to (default: baseline)
    paper_note: str = ""           # what the paper's numbers are (metric, units)
    notes: Tuple[str, ...] = ()
    analyses: Tuple[Any, ...] = ()
    smoke_model: Dict[str, int] = field(default_factory=dict)

    def row(self, label: str) -> Row:
        for r in self.rows:
            if r.label == label:
                return r
        raise KeyError(f"{self.name}: no row {label!r}")


class TableError(Exception):
    """A table definition or an output directory that cannot be used."""


# ---------------------------------------------------------------------------
# running commands
# ---------------------------------------------------------------------------


class StepFailed(Exception):
    def __init__(self, what: str, log: Optional[Path] = None):
        super().__init__(what)
        self.log = log


def _quote(cmd: Sequence[str]) -> str:
    return " ".join(shlex.quote(str(c)) for c in cmd)


def run_logged(cmd: Sequence[str], log: Path, echo_prefix: str = "") -> float:
    """Run ``cmd`` (from the repository root), appending its output to
    ``log``; return the wall time. On failure raise :class:`StepFailed` with
    the log's tail printed."""
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"{echo_prefix}+ {_quote(cmd)}", flush=True)
    start = time.time()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"+ {_quote(cmd)}\n")
        f.flush()
        proc = subprocess.run([str(c) for c in cmd], cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT)
    elapsed = time.time() - start
    if proc.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-25:]
        print("\n".join("    | " + t for t in tail), flush=True)
        raise StepFailed(f"exit status {proc.returncode} after {elapsed:.0f}s", log)
    return elapsed


# ---------------------------------------------------------------------------
# parsing logs
# ---------------------------------------------------------------------------

_PARAMS = re.compile(r"num\. shared model params: ([\d,]+)")
_UPS = re.compile(r"\bups[= ]([\d.]+)")
_TRANSLATED = re.compile(r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in ([\d.]+)s \(([\d.]+) sentences/s")


def parse_train_log(path: Path) -> Dict[str, Any]:
    """Parameters and training speed (updates/s: the median of the
    ``train_inner`` reports, else the last epoch summary) of a fairseq-train log."""
    out: Dict[str, Any] = {"params": None, "updates_per_s": None}
    if not path.exists():
        return out
    inner, summary = [], []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        m = _PARAMS.search(line)
        if m and out["params"] is None:
            out["params"] = int(m.group(1).replace(",", ""))
        m = _UPS.search(line)
        if m and float(m.group(1)) > 0:
            (inner if "train_inner" in line else summary if "| train |" in line else []).append(float(m.group(1)))
    if inner:
        inner.sort()
        out["updates_per_s"] = inner[len(inner) // 2]
    elif summary:
        out["updates_per_s"] = summary[-1]
    return out


def parse_generate_speed(path: Path) -> Optional[float]:
    m = None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        m = _TRANSLATED.search(line) or m
    return float(m.group(4)) if m else None


# ---------------------------------------------------------------------------
# the run of one table
# ---------------------------------------------------------------------------


def _slug(config: str) -> str:
    return config[:-5] if config.endswith(".args") else config


@dataclass
class RowState:
    row: Row
    dataset: Dataset
    data_cfg: Dataset         # the dataset actually used (the Bible in smoke mode)
    bin_dir: Path
    model_dir: Optional[Path] = None
    eval_dir: Optional[Path] = None
    status: str = "pending"
    error: Optional[str] = None
    log: Optional[Path] = None
    train: Dict[str, Any] = field(default_factory=dict)
    score: Optional[Dict[str, Any]] = None
    compare: Dict[str, Any] = field(default_factory=dict)

    @property
    def avg(self) -> Path:
        return self.model_dir / "checkpoint_avg.pt"

    @property
    def gen_log(self) -> Path:
        return self.eval_dir / "generate.log"


class TableRun:
    def __init__(self, table: Table, opts):
        self.t = table
        self.o = opts
        self.smoke = opts.smoke
        self.out = Path(opts.out).resolve()
        self.table_dir = self.out / table.name
        self.failures: List[Tuple[str, str, Optional[str]]] = []
        self.timings: Dict[str, float] = {}
        self.data_dirs = _parse_named(opts.data, "--data")
        self.ref_dirs = _parse_named(opts.ref_dir, "--ref-dir")
        self.states: Dict[str, RowState] = {}
        for row in table.rows:
            ds = DATASETS[row.dataset or table.dataset]
            used = DATASETS[SMOKE_DATASET] if self.smoke else ds
            bin_dir = Path(self._named(self.data_dirs, ds.name) or (REPO / used.bin_dir)).resolve()
            self.states[row.label] = RowState(row, ds, used, bin_dir)
        self._check_definition()

    # -- helpers --------------------------------------------------------------

    @staticmethod
    def _named(named: Dict[Optional[str], str], name: str) -> Optional[str]:
        return named.get(name) or named.get(None)

    def _check_definition(self):
        t = self.t
        labels = [r.label for r in t.rows]
        if len(set(labels)) != len(labels):
            raise TableError(f"{t.name}: duplicate row labels")
        for r in t.rows:
            for ref in (r.baseline, r.model_of, r.warm_start):
                if ref and ref not in labels:
                    raise TableError(f"{t.name}: row {r.label!r} names an unknown row {ref!r}")
            if (r.train is None) == (r.model_of is None):
                raise TableError(f"{t.name}: row {r.label!r} needs exactly one of train= and model_of=")
            for cfg in (r.train, r.generate or t.generate, r.average or t.average):
                if cfg and not (CONFIGS / cfg).is_file():
                    raise TableError(f"{t.name}: row {r.label!r}: no config configs/{cfg}")
            if (r.dataset or t.dataset) not in DATASETS:
                raise TableError(f"{t.name}: row {r.label!r}: unknown dataset {r.dataset or t.dataset!r}")

    def baseline_of(self, row: Row) -> Optional[str]:
        if row.baseline is not None:
            return row.baseline or None
        return None if row.label == self.t.baseline else self.t.baseline

    def model_state(self, st: RowState) -> RowState:
        return self.states[st.row.model_of] if st.row.model_of else st

    def _gen_config(self, row: Row) -> str:
        return row.generate or self.t.generate

    def _assign_dirs(self):
        models = "models"
        if self.smoke and self.t.smoke_model:  # another smoke model than the other tables': other directories
            models += "-" + "-".join(f"{k}{v}" for k, v in sorted(self.t.smoke_model.items()))
        for st in self.states.values():
            if st.row.train:
                st.model_dir = self.out / models / st.dataset.name / _slug(st.row.train)
        for st in self.states.values():
            src = self.model_state(st)
            st.model_dir = src.model_dir
            st.eval_dir = st.model_dir / "eval" / _slug(self._gen_config(st.row)).replace("/", "__")

    def fail(self, st_or_name, step: str, err: Exception, log: Optional[Path] = None):
        name = st_or_name.row.label if isinstance(st_or_name, RowState) else st_or_name
        msg = f"{step}: {err}"
        if isinstance(st_or_name, RowState):
            st_or_name.status, st_or_name.error, st_or_name.log = "failed", msg, log
        self.failures.append((name, msg, str(log) if log else None))
        print(f"[{self.t.name}] FAILED {name}: {msg}" + (f" (log: {log})" if log else ""), flush=True)

    # -- command lines --------------------------------------------------------

    def train_cmd(self, st: RowState) -> List[str]:
        row = st.row
        cmd = [sys.executable, "-m", "fairseq_cli.train", str(st.bin_dir),
               *read_args(CONFIGS / row.train), *read_args(st.data_cfg.train_config()),
               "--user-dir", str(USER_DIR), "--save-dir", str(st.model_dir / "checkpoints"),
               "--log-format", "simple"]
        if row.warm_start:
            cmd += ["--gret-warm-start", str(self.states[row.warm_start].avg)]
        if self.o.gpus:
            cmd += ["--update-freq", str(8 // self.o.gpus)]
        if self.o.cpu and not self.smoke:
            cmd += ["--cpu"]
        cmd += shlex.split(self.o.extra_train_args or "")
        if self.smoke:
            cmd += smoke_model_flags(self.t.smoke_model) + SMOKE_TRAIN
        return cmd

    def average_argv(self, st: RowState) -> List[str]:
        argv = ["--inputs", str(st.model_dir / "checkpoints"), "--output", str(st.avg),
                *read_args(CONFIGS / (st.row.average or self.t.average))]
        return argv + (SMOKE_AVERAGE if self.smoke else [])

    def generate_cmd(self, st: RowState) -> List[str]:
        cmd = [sys.executable, "-m", "fairseq_cli.generate", str(st.bin_dir), "--path", str(self.model_state(st).avg),
               *read_args(CONFIGS / self._gen_config(st.row)), *read_args(st.data_cfg.generate_config()),
               "--user-dir", str(USER_DIR), "--required-batch-size-multiple", "1"]
        if self.o.cpu and not self.smoke:
            cmd += ["--cpu"]
        cmd += shlex.split(self.o.extra_generate_args or "")
        return cmd + (SMOKE_GENERATE if self.smoke else [])

    def gen_subset(self, st: RowState) -> str:
        return flag_value(read_arg_lines(CONFIGS / self._gen_config(st.row)), "--gen-subset", "test")

    def reference(self, st: RowState) -> Path:
        subset = self.gen_subset(st)
        tgt = st.data_cfg.langs()[1]
        ref_dir = self._named(self.ref_dirs, st.dataset.name)
        candidates = [Path(ref_dir)] if ref_dir else [st.bin_dir.parent / "raw", st.bin_dir.parent / "text"]
        for d in candidates:
            if (d / f"{subset}.{tgt}").is_file():
                return d / f"{subset}.{tgt}"
        raise StepFailed(f"no reference {subset}.{tgt} in {' or '.join(str(c) for c in candidates)} "
                         "(give the directory of the detokenized references with --ref-dir)")

    # -- steps ------------------------------------------------------------------

    def train_row(self, st: RowState):
        if st.avg.exists() and not self._train_cmd_changed(st):
            print(f"[{self.t.name}] {st.row.label}: trained ({st.avg})", flush=True)
            return
        cmd = self.train_cmd(st)
        if self.o.dry_run:
            print(f"+ {_quote(cmd)}")
            print(f"+ fairseq-ctx-average-checkpoints {_quote(self.average_argv(st))}")
            return
        if st.row.warm_start:
            ws = self.states[st.row.warm_start]
            if ws.status == "failed" or not ws.avg.exists():
                raise StepFailed(f"its warm start {st.row.warm_start!r} has no averaged checkpoint")
        if st.avg.exists():
            raise StepFailed(f"{st.model_dir} was trained with other flags than its config gives now (see "
                             f"train.cmd.json); remove the directory to retrain it")
        st.model_dir.mkdir(parents=True, exist_ok=True)
        (st.model_dir / "train.cmd.json").write_text(json.dumps(cmd[1:], indent=1) + "\n")
        self.timings[f"{st.row.label}: train"] = run_logged(cmd, st.model_dir / "train.log", f"[{st.row.label}] ")
        argv = self.average_argv(st)
        print(f"[{st.row.label}] + fairseq-ctx-average-checkpoints {_quote(argv)}", flush=True)
        start = time.time()
        from fairseq_ctx.scripts.average_checkpoints import cli_main as average_main
        try:
            average_main(argv)
        except SystemExit as e:  # argparse
            raise StepFailed(f"fairseq-ctx-average-checkpoints exited with {e.code}")
        self.timings[f"{st.row.label}: average"] = time.time() - start

    def _train_cmd_changed(self, st: RowState) -> bool:
        rec = st.model_dir / "train.cmd.json"
        if not rec.exists():
            return False
        return json.loads(rec.read_text()) != self.train_cmd(st)[1:]

    def evaluate_row(self, st: RowState):
        score_path = st.eval_dir / "score.json"
        if score_path.exists() and st.avg.exists():
            st.score = json.loads(score_path.read_text())
            print(f"[{self.t.name}] {st.row.label}: scored ({score_path})", flush=True)
            return
        cmd = self.generate_cmd(st)
        if self.o.dry_run:
            print(f"+ {_quote(cmd)}")
            return
        ref = self.reference(st)
        if st.gen_log.exists():
            st.gen_log.unlink()  # an interrupted decoding starts again
        st.eval_dir.mkdir(parents=True, exist_ok=True)
        (st.eval_dir / "generate.cmd.json").write_text(json.dumps(cmd[1:], indent=1) + "\n")
        self.timings[f"{st.row.label}: generate"] = run_logged(cmd, st.gen_log, f"[{st.row.label}] ")
        st.score = score_generation(st.gen_log, ref, st.data_cfg.langs()[1] if st.dataset.tok_bleu else None)
        st.score["subset"] = self.gen_subset(st)
        score_path.write_text(json.dumps(st.score, indent=2) + "\n")
        line = f"BLEU {st.score['bleu']:.2f}" + (f", tok BLEU {st.score['tok_bleu']:.2f}"
                                                  if st.score.get("tok_bleu") is not None else "")
        print(f"[{self.t.name}] {st.row.label}: {line} on {st.score['sentences']} sentences", flush=True)

    # -- the whole table ----------------------------------------------------------

    def run(self) -> int:
        t = self.t
        self._assign_dirs()
        selected = self._selected()
        start = time.time()
        mode = "SMOKE (tiny model, a few updates, Bible corpus: the numbers mean nothing)" if self.smoke else "full"
        print(f"[{t.name}] {t.title}\n[{t.name}] mode: {mode}; output {self.out}", flush=True)
        needed = set(selected)
        for label in list(selected):
            r = t.row(label)
            needed |= {x for x in (r.model_of, r.warm_start, self.baseline_of(r)) if x}
        if not self.o.dry_run:
            missing = sorted({f"{st.dataset.name}: {st.bin_dir}" for label, st in self.states.items()
                              if label in needed and not (st.bin_dir / f"dict.{st.data_cfg.langs()[0]}.txt").is_file()})
            if missing:
                raise TableError("no binarized data (dict.SRC.txt) for " + "; ".join(missing) + ": prepare it "
                                 "(scripts/prepare-*.sh, README 'Data preparation') or pass --data [DATASET=]DIR")
        for r in t.rows:  # models first, in table order (warm starts come after their baseline)
            st = self.states[r.label]
            if r.label not in needed or not r.train:
                continue
            try:
                self.train_row(st)
                st.status = "trained"
            except (StepFailed, ArgsFileError) as e:
                self.fail(st, "train", e, getattr(e, "log", None))
            except Exception as e:  # a bug in a step must not hide the other rows
                self.fail(st, "train", e)
        for r in t.rows:
            st = self.states[r.label]
            if r.label not in needed or st.status == "failed":
                continue
            src = self.model_state(st)
            if src.status == "failed":
                self.fail(st, "evaluate", StepFailed(f"the model of {r.model_of!r} failed"))
                continue
            try:
                self.evaluate_row(st)
                st.status = "done" if st.score else st.status
            except (StepFailed, ArgsFileError) as e:
                self.fail(st, "evaluate", e, getattr(e, "log", None))
            except Exception as e:
                self.fail(st, "evaluate", e)
        if self.o.dry_run:
            return 0
        for st in self.states.values():
            src = self.model_state(st)
            if src.model_dir is not None:
                st.train = parse_train_log(src.model_dir / "train.log")
        self.compare()
        text = self.format()
        print("\n" + text, flush=True)
        self.table_dir.mkdir(parents=True, exist_ok=True)
        if not self.o.no_analyses:
            for analysis in t.analyses:
                try:
                    a_start = time.time()
                    msg = analysis.run(self)
                    self.timings[f"analysis {analysis.name}"] = time.time() - a_start
                    if msg:
                        print(msg, flush=True)
                        text += "\n\n" + msg
                except Exception as e:
                    self.fail(f"analysis {analysis.name}", "analysis", e)
        self.timings["total"] = time.time() - start
        (self.table_dir / "table.txt").write_text(text + "\n", encoding="utf-8")
        (self.table_dir / "table.json").write_text(json.dumps(self.as_json(), indent=2) + "\n", encoding="utf-8")
        print(f"\n[{t.name}] wrote {self.table_dir / 'table.txt'} and table.json; "
              f"{self.timings['total']:.0f}s", flush=True)
        if self.failures:
            print(f"[{t.name}] {len(self.failures)} failure(s):", flush=True)
            for name, msg, log in self.failures:
                print(f"  {name}: {msg}" + (f" (log: {log})" if log else ""), flush=True)
            return 1
        return 0

    def _selected(self) -> List[str]:
        if not self.o.rows:
            return [r.label for r in self.t.rows]
        chosen = []
        for spec in self.o.rows:
            if spec.isdigit() and 1 <= int(spec) <= len(self.t.rows):
                chosen.append(self.t.rows[int(spec) - 1].label)
            elif any(r.label == spec for r in self.t.rows):
                chosen.append(spec)
            else:
                raise TableError(f"--rows {spec!r}: not a row number (1-{len(self.t.rows)}) or label of {self.t.name}")
        return chosen

    # -- comparison, printing ---------------------------------------------------

    def paper_metric(self, st: RowState) -> str:
        return "tok_bleu" if st.dataset.tok_bleu else "bleu"

    def compare(self):
        """Paired bootstrap of every scored row against its baseline row, in
        the paper's metric (and detokenized BLEU)."""
        from fairseq_ctx.evaluation import compound_split_lines, paired_bootstrap, read_generate_log, read_lines

        cache: Dict[str, Any] = {}

        def load(st):
            if st.row.label not in cache:
                refs = read_lines(st.score["reference"])
                hyps = read_generate_log(st.gen_log, len(refs), "D")
                split = None
                if st.score.get("tok_bleu") is not None:
                    lang = st.score["tok_lang"]
                    split = (compound_split_lines(hyps, lang), compound_split_lines(refs, lang))
                cache[st.row.label] = (refs, hyps, split)
            return cache[st.row.label]

        for st in self.states.values():
            base_label = self.baseline_of(st.row)
            if not base_label or st.score is None:
                continue
            base = self.states[base_label]
            if base.score is None:
                continue
            if base.score["reference"] != st.score["reference"]:
                continue
            try:
                refs, hyps, split = load(st)
                _, bhyps, bsplit = load(base)
                res, sig = paired_bootstrap(bhyps, {"x": hyps}, refs, n_samples=self.o.bootstrap_samples)
                st.compare = {"baseline": base_label, "delta": res["x"].delta, "p_value": res["x"].p_value,
                              "signature": sig}
                if split is not None and bsplit is not None:
                    tres, tsig = paired_bootstrap(bsplit[0], {"x": split[0]}, split[1], tokenize="none",
                                                  smooth_method="none", n_samples=self.o.bootstrap_samples)
                    st.compare.update(tok_delta=tres["x"].delta, tok_p_value=tres["x"].p_value, tok_signature=tsig)
            except Exception as e:
                self.fail(st.row.label, "bootstrap", e)

    def _speed_ref(self) -> Optional[RowState]:
        label = self.t.speed_ref or self.t.baseline
        return self.states.get(label) if label else None

    def format(self) -> str:
        t = self.t
        ref = self._speed_ref()
        header = list(t.columns) + ["params", "(paper)"]
        for kind in ("train", "decode"):
            header += [f"{kind} (rel)"]
            if kind in t.speed:
                header += ["(paper)"]
        tok = any(st.dataset.tok_bleu for st in self.states.values())
        header += ["BLEU"] + (["tok BLEU"] if tok else []) + ["(paper)", "diff", "p"]
        rows = [header]
        base_params = {}
        for st in self.states.values():
            b = self.baseline_of(st.row)
            if b and self.states[b].train.get("params"):
                base_params[st.row.label] = self.states[b].train["params"]
        for st in self.states.values():
            r = st.row
            line = [str(c) for c in r.cells] + [""] * (len(t.columns) - len(r.cells))
            p = st.train.get("params")
            if p is None:
                line.append("-")
            else:
                cell = _millions(p)
                bp = base_params.get(r.label)
                if bp is not None and not r.model_of:
                    cell += f" ({_signed_millions(p - bp)})"
                line.append(cell)
            line.append(_paper(r.paper.get("params")))
            for kind in ("train", "decode"):
                ours = st.train.get("updates_per_s") if kind == "train" else (st.score or {}).get("sentences_per_s")
                theirs = r.paper.get(kind)
                refv = None
                if ref is not None:
                    refv = ref.train.get("updates_per_s") if kind == "train" else (ref.score or {}).get("sentences_per_s")
                line.append(f"{ours / refv:.2f}x" if ours and refv else "-")
                if kind in t.speed:
                    ref_paper = ref.row.paper.get(kind) if ref is not None else None
                    if isinstance(theirs, (int, float)) and isinstance(ref_paper, (int, float)) and ref_paper:
                        line.append(f"{theirs:g} ({theirs / ref_paper:.2f}x)")
                    else:
                        line.append(_paper(theirs))
            sc = st.score or {}
            if st.status == "failed":
                line += ["FAILED"] + (["-"] if tok else []) + [_paper(r.paper.get("bleu")), "-", "-"]
            else:
                line.append(f"{sc['bleu']:.2f}" if "bleu" in sc else "-")
                if tok:
                    line.append(f"{sc['tok_bleu']:.2f}" if sc.get("tok_bleu") is not None else "-")
                line.append(_paper(r.paper.get("bleu")))
                c = st.compare
                key = "tok_" if st.dataset.tok_bleu and "tok_delta" in c else ""
                line.append(f"{c[key + 'delta']:+.2f}" if c else "-")
                line.append(f"{c[key + 'p_value']:.3f}" if c else "-")
            rows.append(line)
        widths = [max(len(x[i]) for x in rows) for i in range(len(header))]
        text = [f"{t.title}" + ("   [SMOKE RUN: tiny models, 3 updates, Bible data; not comparable]"
                                 if self.smoke else "")]
        for i, line in enumerate(rows):
            text.append("  ".join(c.ljust(w) if j < len(t.columns) else c.rjust(w)
                                  for j, (c, w) in enumerate(zip(line, widths))))
            if i == 0:
                text.append("-" * len(text[-1]))
        text += self._footnotes(tok)
        return "\n".join(text)

    def _footnotes(self, tok: bool) -> List[str]:
        notes = []
        scored = [st for st in self.states.values() if st.score]
        sigs = sorted({st.score["signature"] for st in scored})
        if scored:
            sets = sorted({f"{st.dataset.title if not self.smoke else 'Bible (for ' + st.dataset.title + ')'} "
                           f"{st.score['subset']} ({st.score['sentences']} sentences, all scored)" for st in scored})
            notes.append("data: " + "; ".join(sets))
        notes.append("BLEU: detokenized sacreBLEU, " + ", ".join(sigs) if sigs else "BLEU: -")
        if tok:
            tsigs = sorted({st.score["tok_signature"] for st in scored if st.score.get("tok_signature")})
            notes.append("tok BLEU: tokenized BLEU with compound splitting (En-De, the papers' metric), "
                          + ", ".join(tsigs))
        ref = self._speed_ref()
        notes.append(f"params: ours (difference from the row's baseline); speeds: ours relative to "
                     f"{ref.row.label if ref else '-'} (train: updates/s, decode: sentences/s of fairseq-generate)")
        notes.append(f"diff, p: against the row's baseline in the paper's metric ({'tok BLEU' if tok else 'BLEU'} "
                     f"where given), paired bootstrap resampling ({self.o.bootstrap_samples} samples, sacreBLEU), "
                     "two-sided")
        if self.t.paper_note:
            notes.append("paper: " + self.t.paper_note)
        notes += list(self.t.notes)
        return [""] + notes

    def as_json(self) -> Dict[str, Any]:
        return {
            "table": self.t.name, "title": self.t.title, "smoke": self.smoke, "out": str(self.out),
            "rows": [{
                "label": st.row.label, "cells": list(st.row.cells), "dataset": st.dataset.name,
                "data": str(st.bin_dir), "train_config": st.row.train, "model_of": st.row.model_of,
                "generate_config": self._gen_config(st.row), "model_dir": str(st.model_dir) if st.model_dir else None,
                "status": st.status, "error": st.error, "log": str(st.log) if st.log else None,
                "params": st.train.get("params"), "updates_per_s": st.train.get("updates_per_s"),
                "score": st.score, "compare": st.compare, "paper": st.row.paper,
            } for st in self.states.values()],
            "paper_note": self.t.paper_note, "notes": list(self.t.notes),
            "failures": [{"what": n, "error": m, "log": lg} for n, m, lg in self.failures],
            "timings_s": {k: round(v, 1) for k, v in self.timings.items()},
        }




def _millions(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e6:.3f}M"


def _signed_millions(n: int) -> str:
    return ("+" if n >= 0 else "-") + _millions(abs(n))


def _paper(v) -> str:
    if v is None:
        return "n/a"
    return f"{v:g}" if isinstance(v, (int, float)) else str(v)


def _parse_named(specs: Optional[Sequence[str]], flag: str) -> Dict[Optional[str], str]:
    """``['DIR']`` -> ``{None: DIR}``; ``['wmt14_en_de=DIR']`` -> ``{'wmt14_en_de': DIR}``."""
    out: Dict[Optional[str], str] = {}
    for spec in specs or []:
        name, sep, path = spec.partition("=")
        if sep and name in DATASETS:
            out[name] = path
        elif sep and not os.path.exists(spec):
            raise TableError(f"{flag} {spec!r}: unknown dataset {name!r} (known: {', '.join(DATASETS)})")
        else:
            out[None] = spec
    return out


# ---------------------------------------------------------------------------
# scoring one decoding
# ---------------------------------------------------------------------------


def score_generation(gen_log: Path, ref: Path, tok_lang: Optional[str]) -> Dict[str, Any]:
    """Score a fairseq-generate log against the detokenized reference: every
    sentence id of the reference must have its ``D-`` line (none dropped)."""
    from fairseq_ctx.evaluation import compound_split_bleu, detok_bleu, read_generate_log, read_lines

    refs = read_lines(ref)
    hyps = read_generate_log(gen_log, len(refs), "D")
    bleu, sig = detok_bleu(hyps, refs)
    out = {"bleu": bleu, "signature": sig, "sentences": len(refs), "reference": str(ref),
           "generate_log": str(gen_log), "sentences_per_s": parse_generate_speed(gen_log),
           "tok_bleu": None, "tok_signature": None, "tok_lang": tok_lang}
    if tok_lang:
        out["tok_bleu"], out["tok_signature"] = compound_split_bleu(hyps, refs, lang=tok_lang)
    return out


# ---------------------------------------------------------------------------
# analyses
# ---------------------------------------------------------------------------


class Analysis(abc.ABC):
    """An analysis a table runs on its trained rows (subclasses below)."""
    name = "analysis"

    @abc.abstractmethod
    def run(self, tr: TableRun) -> Optional[str]:
        """Run on ``tr``'s models (writing files to its table directory) and
        return a summary printed and appended to ``table.txt``, or None."""

    @staticmethod
    def _models(tr: TableRun, labels: Sequence[str]) -> List[RowState]:
        states = [tr.model_state(tr.states[label]) for label in labels]
        missing = [s.row.label for s in states if s.model_dir is None or not s.avg.exists()]
        if missing:
            raise StepFailed(f"no averaged checkpoint for {', '.join(missing)}")
        return states

    @staticmethod
    def _call(module: str, argv: List[str]):
        """Run an analysis command's ``main(argv)`` in this process (its
        command line is printed, to run it by hand)."""
        import importlib

        print(f"+ python3 -m {module} {_quote(argv)}", flush=True)
        try:
            return importlib.import_module(module).main(argv)
        except SystemExit as e:
            if e.code not in (0, None):
                raise StepFailed(f"{module} exited with status {e.code}")


class LengthBuckets(Analysis):
    """BLEU by source length of the rows (ctxsan Fig. 5, DC Fig. 5, GRET Fig. 5)."""
    name = "length buckets"

    def __init__(self, rows: Optional[Sequence[str]] = None, edges=(10, 20, 30, 40, 50), figure: str = ""):
        self.rows, self.edges, self.figure = rows, tuple(edges), figure

    def run(self, tr):
        from fairseq_ctx.evaluation import (bleu_by_length, detok_bleu, format_length_table, plot_length_buckets,
                                            read_generate_log, read_lines, tokenized_bleu, compound_split_lines)
        labels = list(self.rows or [r.label for r in tr.t.rows])
        states = [tr.states[label] for label in labels if tr.states[label].score]
        if len(states) < 1:
            raise StepFailed("no scored rows")
        base_label = tr.t.baseline if tr.t.baseline in [s.row.label for s in states] else None
        ref = states[0].score["reference"]
        states = [s for s in states if s.score["reference"] == ref]
        refs = read_lines(ref)
        srcs = read_generate_log(states[0].gen_log, len(refs), "S")
        hyps = {s.row.label: read_generate_log(s.gen_log, len(refs), "D") for s in states}
        tok_lang = states[0].score.get("tok_lang") if states[0].score.get("tok_bleu") is not None else None
        if tok_lang:
            split_refs = compound_split_lines(refs, tok_lang)
            split = {k: compound_split_lines(v, tok_lang) for k, v in hyps.items()}
            res = bleu_by_length(srcs, split, split_refs, self.edges, score_fn=lambda h, r: tokenized_bleu(h, r)[0])
            res["metric"] = "tokenized compound-split BLEU"
        else:
            res = bleu_by_length(srcs, hyps, refs, self.edges, score_fn=lambda h, r: detok_bleu(h, r)[0])
            res["metric"] = "detokenized sacreBLEU"
        res["unit"] = "whitespace-separated source tokens after BPE removal (the S- lines of fairseq-generate)"
        tr.table_dir.mkdir(parents=True, exist_ok=True)
        (tr.table_dir / "length_buckets.json").write_text(json.dumps(res, indent=2) + "\n")
        png = tr.table_dir / "length_buckets.png"
        plot_length_buckets(res, png, baseline=base_label, title=f"{tr.t.title}: {res['metric']} by source length")
        return (f"{res['metric']} by source length ({self.figure}; {res['unit']}):\n"
                f"{format_length_table(res, base_label)}\nplot: {png}")


class CtxSanGates(Analysis):
    """Mean context gates per layer (ctxsan Figures 2 and 3)."""
    name = "ctxsan gates"

    def __init__(self, rows: Sequence[str]):
        self.rows = rows

    def run(self, tr):
        states = self._models(tr, self.rows)
        out = tr.table_dir / "gates"
        if (out / "gates.json").exists():
            return f"context gates (Figures 2-3): {out / 'gates.png'} (already there)"
        argv = [str(states[0].bin_dir), "--path", ":".join(str(s.avg) for s in states), "--gen-subset", "valid",
                "--out", str(out)]
        if tr.smoke or tr.o.cpu:
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

    def run(self, tr):
        states = self._models(tr, self.rows)
        out = tr.table_dir / "dc_divergence"
        if not (out / "dc_divergence.json").exists():
            argv = [str(states[0].bin_dir), "--path", ":".join(str(s.avg) for s in states), "--gen-subset", "valid",
                    "--out", str(out), "--user-dir", str(USER_DIR),
                    *read_args(states[0].data_cfg.train_config())]
            if tr.smoke:
                argv += ["--cpu", "--limit", str(SMOKE_ANALYSIS_LIMIT)]
            elif tr.o.cpu:
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

    def run(self, tr):
        st, = self._models(tr, [self.row])
        out = tr.table_dir / "context_attention.json"
        argv = [str(st.bin_dir), "--path", str(st.avg), "--gen-subset", "test", "--out", str(out),
                "--user-dir", str(USER_DIR), "--top-k", str(self.top_k),
                *read_args(CONFIGS / self.task_config), *read_args(st.data_cfg.train_config())]
        if tr.smoke:
            argv += ["--cpu", "--limit", str(SMOKE_ANALYSIS_LIMIT), "--min-count", "1"]
        elif tr.o.cpu:
            argv += ["--cpu"]
        if not out.exists():
            self._call("fairseq_ctx.analysis.ctxenc_context_attention", argv)
        from fairseq_ctx.analysis.ctxenc_context_attention import format_table
        return (f"words with the largest share of attention to context ({self.row}; test set; "
                f"paper: it, yours, ones, you, I, yes, ...):\n" + format_table(json.loads(out.read_text()), self.top_k))


class BowPrediction(Analysis):
    """Bag-of-words prediction from GRET's global state vs the last / average
    encoder states (GRET Table 5; fairseq_ctx/analysis/bow_prediction.py)."""
    name = "bow prediction"
    PAPER = "paper (Table 5, precision Top-200/500/1000): Last 43/52/64%, Average 49/57/69%, GRET 63/74/81%"

    def __init__(self, row: str):
        self.row = row

    def run(self, tr):
        st, = self._models(tr, [self.row])
        out = tr.table_dir / "bow_prediction"
        if not (out / "bow_prediction.json").exists():
            argv = [str(st.bin_dir), "--path", str(st.avg), "--out", str(out)]
            if tr.smoke:
                argv += ["--cpu", "--epochs", "1", "--train-limit", "256", "--topk", "10,50,100"]
            elif tr.o.cpu:
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

    def run(self, tr):
        if not tr.o.probing_args:
            return ("probing (Table 4): skipped; pass --probing-args \"--probing-dir DIR [--tokenizer moses --bpe "
                    "subword_nmt --bpe-codes CODES]\" to run fairseq_ctx.analysis.probing on "
                    + ", ".join(self.rows))
        states = self._models(tr, self.rows)
        out = tr.table_dir / "probing"
        if not (out / "probing.json").exists():
            argv = [str(states[0].bin_dir), "--path", ":".join(str(s.avg) for s in states), "--out", str(out),
                    *shlex.split(tr.o.probing_args)]
            if tr.smoke or tr.o.cpu:
                argv += ["--cpu"]
            self._call("fairseq_ctx.analysis.probing", argv)
        from fairseq_ctx.analysis.probing import format_table
        return f"probing accuracies (Table 4) of {', '.join(self.rows)}:\n" + \
            format_table(json.loads((out / "probing.json").read_text()))


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------


def get_parser(table: Table) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=f"{table.title}: train every row, average checkpoints, decode, score, analyse and print the "
                    "table beside the paper's numbers (fairseq_ctx/tables/runner.py).")
    p.add_argument("--smoke", action="store_true",
                   help="tiny models, 3 updates, beam 2, on the Bible corpus (every dataset replaced by --data): "
                        "checks that every row runs; the numbers mean nothing")
    p.add_argument("--data", action="append", metavar="[DATASET=]DIR",
                   help="binarized data: DIR for every dataset of the table, or DATASET=DIR (repeatable); default: "
                        "each dataset's prepare-script output (smoke: data/bible/bin)")
    p.add_argument("--ref-dir", action="append", metavar="[DATASET=]DIR",
                   help="directory of the detokenized references SUBSET.TGT (default: raw/ or text/ beside the "
                        "binarized data, as the prepare scripts write them)")
    p.add_argument("--out", help="models, logs and tables (default: runs/tables, smoke: runs/tables-smoke)")
    p.add_argument("--rows", nargs="+", metavar="ROW",
                   help="only these rows (numbers from 1 or labels), plus the rows they depend on")
    p.add_argument("--gpus", type=int, choices=(1, 2, 4, 8),
                   help="GPUs fairseq-train uses (it takes every visible one: set CUDA_VISIBLE_DEVICES): appends "
                        "--update-freq 8/N (the configs emulate 8 GPUs on one)")
    p.add_argument("--cpu", action="store_true", help="pass --cpu to training, decoding and analyses")
    p.add_argument("--extra-train-args", metavar="ARGS", help="appended to every fairseq-train command (e.g. '--fp16')")
    p.add_argument("--extra-generate-args", metavar="ARGS", help="appended to every fairseq-generate command")
    p.add_argument("--probing-args", metavar="ARGS", help="flags for fairseq_ctx.analysis.probing (DC Table 4)")
    p.add_argument("--bootstrap-samples", type=int, default=1000, help="paired bootstrap resamples (default 1000)")
    p.add_argument("--no-analyses", action="store_true", help="skip the analyses (plots, gates, ...)")
    p.add_argument("--dry-run", action="store_true", help="print the commands of the rows still to run; run nothing")
    return p


def main(table_or_name, argv=None) -> int:
    from . import get_table

    table = get_table(table_or_name) if isinstance(table_or_name, str) else table_or_name
    opts = get_parser(table).parse_args(argv)
    if opts.out is None:
        opts.out = str(REPO / "runs" / ("tables-smoke" if opts.smoke else "tables"))
    if opts.bootstrap_samples < 1:
        print("error: --bootstrap-samples must be positive", file=sys.stderr)
        return 2
    import logging

    for name in ("sacrebleu", "matplotlib", "PIL"):  # their INFO chatter (bootstrap progress, font search)
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        return TableRun(table, opts).run()
    except (TableError, ArgsFileError) as e:
        print(f"{table.name}: error: {e}", file=sys.stderr)
        return 2
