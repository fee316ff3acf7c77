"""Running a table: train every row, average, decode, score, analyse, print.

A table (``fairseq_ctx/tables/{ctxsan,dc,gret,voita}.py``, ``definition``) is data: its rows,
each a label, the descriptive cells of the paper's layout, a training config
(``configs/**.args``), the paper's numbers and, where they differ from the
table's, the dataset, the generation config and the row it is compared with.
This module does the rest, the same way for every table (``reporting`` prints
it, ``analyses`` holds the figures' analyses, ``__main__`` the command line):

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
import json
import shlex
import subprocess
import sys
import time
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .config import ArgsFileError, flag_value, read_arg_lines, read_args
from .datasets import DATASETS, SMOKE_DATASET, Dataset, find_root, parse_named
from .definition import BLEU_FLAVOURS, Row, Table, TableError, check_definition
from . import reporting
from ..allocator import child_env
from .. import progress

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


# batch readings and the size of an epoch
# ---------------------------------------------------------------------------

# --batch-reading: "as-written" takes a paper's batch size as the whole batch
# of one update; "8gpu" as the batch of each of 8 GPUs, for the tables whose
# paper gives no GPU count (Table.gpus_stated False: DC, GRET)
BATCH_READINGS = ("as-written", "8gpu")


def _idx_sizes(path: Path) -> Optional[List[int]]:
    """Sentence lengths (tokens incl. </s>) of a fairseq mmap ``.idx`` file,
    read as fairseq's MMapIndexedDataset.Index writes it (9-byte magic,
    version <Q, dtype <B, count <Q, doc count <Q, then int32 sizes), so that
    planning a run imports neither torch nor numpy."""
    import struct
    from array import array
    try:
        with open(path, "rb") as f:
            header = f.read(34)
            if len(header) < 34 or header[:9] != b"MMIDIDX\x00\x00":
                return None
            n = struct.unpack("<Q", header[18:26])[0]
            sizes = array("i")
            sizes.frombytes(f.read(4 * n))
    except (OSError, ValueError):
        return None
    if len(sizes) != n:
        return None
    if sys.byteorder != "little":
        sizes.byteswap()
    return sizes.tolist()


def train_split_size(bin_dir: Path, src: str, tgt: str) -> Optional[Tuple[int, int]]:
    """(sentence pairs, tokens as --max-tokens counts them: the sum over
    pairs of max(source, target) length) of the binarized train split, or
    None when it is not there."""
    for a, b in ((src, tgt), (tgt, src)):
        s = _idx_sizes(bin_dir / f"train.{a}-{b}.{src}.idx")
        t = _idx_sizes(bin_dir / f"train.{a}-{b}.{tgt}.idx")
        if s is not None and t is not None and len(s) == len(t):
            return len(s), sum(max(x, y) for x, y in zip(s, t))
    return None


# ---------------------------------------------------------------------------
# running commands
# ---------------------------------------------------------------------------


class StepFailed(Exception):
    def __init__(self, what: str, log: Optional[Path] = None):
        super().__init__(what)
        self.log = log


def quote_command(cmd: Sequence[str]) -> str:
    return " ".join(shlex.quote(str(c)) for c in cmd)


def run_logged(cmd: Sequence[str], log: Path, cwd: Path, echo_prefix: str = "") -> float:
    """Run ``cmd`` from ``cwd`` (the repository root), appending its output to
    ``log``; return the wall time. On failure raise :class:`StepFailed` with
    the log's tail printed."""
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"{echo_prefix}+ {quote_command(cmd)}", flush=True)
    start = time.time()
    env = child_env()  # unbuffered, jemalloc where installed: as the quickstart's and the study's children
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"+ {quote_command(cmd)}\n")
        f.flush()
        proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT)
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
    """One run of one table with the command line's options ``opts``."""

    def __init__(self, table: Table, opts):
        self.table = table
        self.opts = opts
        self.smoke = opts.smoke
        self.root = Path(opts.root).resolve() if getattr(opts, "root", None) else find_root()
        self.configs = self.root / "configs"
        self.user_dir = self.root / "fairseq_ctx"
        self.out = Path(opts.out or self.root / "runs" / ("tables-smoke" if opts.smoke else "tables")).resolve()
        self.table_dir = self.out / table.name
        self.failures: List[Tuple[str, str, Optional[str]]] = []
        self.timings: Dict[str, float] = {}
        self.data_dirs = parse_named(opts.data, "--data")
        self.ref_dirs = parse_named(opts.ref_dir, "--ref-dir")
        self.states: Dict[str, RowState] = {}
        for row in table.rows:
            dataset = DATASETS[row.dataset or table.dataset]
            used = DATASETS[SMOKE_DATASET] if self.smoke else dataset
            bin_dir = Path(self._named(self.data_dirs, dataset.name) or (self.root / used.bin_dir)).resolve()
            self.states[row.label] = RowState(row, dataset, used, bin_dir)
        check_definition(table, self.configs, DATASETS)
        self.batch_reading = getattr(opts, "batch_reading", None) or "as-written"
        for st in self.states.values():   # a GPU count the batch cannot be split over stops here, in one line
            if st.row.train:
                self.update_freq(st)

    # -- helpers --------------------------------------------------------------

    @staticmethod
    def _named(named: Dict[Optional[str], str], name: str) -> Optional[str]:
        return named.get(name) or named.get(None)

    def baseline_of(self, row: Row) -> Optional[str]:
        if row.baseline is not None:
            return row.baseline or None
        return None if row.label == self.table.baseline else self.table.baseline

    def model_state(self, st: RowState) -> RowState:
        return self.states[st.row.model_of] if st.row.model_of else st

    def gen_config(self, row: Row) -> str:
        return row.generate or self.table.generate

    def _assign_dirs(self):
        models = "models"
        if self.smoke and self.table.smoke_model:  # another smoke model than the other tables': other directories
            models += "-" + "-".join(f"{k}{v}" for k, v in sorted(self.table.smoke_model.items()))
        for st in self.states.values():
            if st.row.train:
                st.model_dir = self.out / models / st.dataset.name / _slug(st.row.train)
        for st in self.states.values():
            src = self.model_state(st)
            st.model_dir = src.model_dir
            st.eval_dir = st.model_dir / "eval" / _slug(self.gen_config(st.row)).replace("/", "__")

    def fail(self, st_or_name, step: str, err: Exception, log: Optional[Path] = None):
        name = st_or_name.row.label if isinstance(st_or_name, RowState) else st_or_name
        msg = f"{step}: {err}"
        if isinstance(st_or_name, RowState):
            st_or_name.status, st_or_name.error, st_or_name.log = "failed", msg, log
        self.failures.append((name, msg, str(log) if log else None))
        print(f"[{self.table.name}] FAILED {name}: {msg}" + (f" (log: {log})" if log else ""), flush=True)

    # -- batch, updates, BLEU flavour ----------------------------------------------

    def gpus_per_paper_batch(self) -> int:
        """GPUs the paper's batch is spread over in the chosen reading."""
        return 8 if self.batch_reading == "8gpu" and not self.table.gpus_stated else 1

    def update_freq(self, st: RowState) -> Optional[int]:
        """The --update-freq appended to the row's training command (None:
        the config's own): the config's value (the GPUs it emulates on one)
        times the reading's GPUs, over the GPUs used (--gpus)."""
        config_uf = int(flag_value(read_arg_lines(self.configs / st.row.train), "--update-freq", "1"))
        emulated = config_uf * self.gpus_per_paper_batch()
        gpus = self.opts.gpus or 1
        if emulated % gpus:
            raise TableError(
                f"--gpus {gpus}: row {st.row.label!r} ({st.row.train}) makes one update of {emulated} GPU "
                f"batch(es) in the {self.batch_reading} reading, which {gpus} GPUs cannot share; "
                + ("use --batch-reading 8gpu (each GPU the paper's batch, the opt-in reading) or one GPU"
                   if not self.table.gpus_stated and self.batch_reading == "as-written" else "use fewer GPUs"))
        if self.opts.gpus or emulated != config_uf:
            return emulated // gpus
        return None

    def flavour(self, st: RowState) -> str:
        return self.table.bleu_flavour(st.dataset.name)

    def tok_kind(self, st: RowState) -> Optional[str]:
        """The tokenized BLEU the paper used ("compound-split", "multi-bleu"), if any."""
        f = self.flavour(st)
        return f if f in ("compound-split", "multi-bleu") else None

    def plan(self, st: RowState) -> str:
        """One line: data, batch, updates, the epochs they imply, BLEU flavour."""
        parts = [f"data {st.data_cfg.title} ({st.bin_dir})"]
        if st.row.train:
            cmd = self.train_cmd(st)
            eff = {tok: cmd[i + 1] for i, tok in enumerate(cmd[:-1]) if tok.startswith("--")}
            uf, gpus = int(eff.get("--update-freq", "1")), self.opts.gpus or 1
            updates = int(eff.get("--max-update", "0"))
            if "--batch-size" in eff and "--max-tokens" not in eff:
                unit, per = "sentences", int(eff["--batch-size"])
            else:
                unit, per = "tokens", int(eff.get("--max-tokens", "0"))
            total = per * uf * gpus
            reading = ("GPUs as the paper states them or follows Vaswani et al." if self.table.gpus_stated
                       else f"--batch-reading {self.batch_reading}")
            parts.append(f"batch {per} {unit} x update-freq {uf} x {gpus} GPU = {total} {unit} per update "
                         f"({reading})")
            size = train_split_size(st.bin_dir, *st.data_cfg.langs(self.configs))
            if not updates:
                parts.append("no --max-update")
            elif size is None:
                parts.append(f"{updates} updates (epochs: no binarized train split at {st.bin_dir})")
            elif unit == "sentences":
                parts.append(f"{updates} updates = {updates * total / size[0]:.3g} epochs of {size[0]} pairs")
            else:  # padding fills part of every batch: an upper bound
                parts.append(f"{updates} updates = at most {updates * total / size[1]:.3g} epochs of {size[0]} "
                             f"pairs ({size[1]} tokens, the longer side of each pair)")
        flav = self.flavour(st)
        parts.append(f"paper's BLEU: {flav} (our {BLEU_FLAVOURS[flav][0]} column), sacreBLEU beside it")
        return "; ".join(parts)

    # -- command lines --------------------------------------------------------

    def train_cmd(self, st: RowState) -> List[str]:
        row = st.row
        cmd = [sys.executable, "-m", "fairseq_cli.train", str(st.bin_dir),
               *read_args(self.configs / row.train), *read_args(st.data_cfg.train_config(self.configs)),
               "--user-dir", str(self.user_dir), "--save-dir", str(st.model_dir / "checkpoints"),
               "--log-format", "simple"]
        if row.warm_start:
            cmd += ["--gret-warm-start", str(self.states[row.warm_start].avg)]
        uf = self.update_freq(st)
        if uf is not None:
            cmd += ["--update-freq", str(uf)]
        if self.opts.cpu and not self.smoke:
            cmd += ["--cpu"]
        cmd += shlex.split(self.opts.extra_train_args or "")
        if self.smoke:
            cmd += smoke_model_flags(self.table.smoke_model) + SMOKE_TRAIN
        return cmd

    def average_argv(self, st: RowState) -> List[str]:
        argv = ["--inputs", str(st.model_dir / "checkpoints"), "--output", str(st.avg),
                *read_args(self.configs / (st.row.average or self.table.average))]
        return argv + (SMOKE_AVERAGE if self.smoke else [])

    def generate_cmd(self, st: RowState) -> List[str]:
        cmd = [sys.executable, "-m", "fairseq_cli.generate", str(st.bin_dir), "--path", str(self.model_state(st).avg),
               *read_args(self.configs / self.gen_config(st.row)), *read_args(st.data_cfg.generate_config(self.configs)),
               "--user-dir", str(self.user_dir), "--required-batch-size-multiple", "1"]
        if self.opts.cpu and not self.smoke:
            cmd += ["--cpu"]
        cmd += shlex.split(self.opts.extra_generate_args or "")
        return cmd + (SMOKE_GENERATE if self.smoke else [])

    def gen_subset(self, st: RowState) -> str:
        return flag_value(read_arg_lines(self.configs / self.gen_config(st.row)), "--gen-subset", "test")

    def reference(self, st: RowState) -> Path:
        subset = self.gen_subset(st)
        tgt = st.data_cfg.langs(self.configs)[1]
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
            print(f"[{self.table.name}] {st.row.label}: trained ({st.avg})", flush=True)
            return
        cmd = self.train_cmd(st)
        if self.opts.dry_run:
            print(f"+ {quote_command(cmd)}")
            print(f"+ fairseq-ctx-average-checkpoints {quote_command(self.average_argv(st))}")
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
        self.timings[f"{st.row.label}: train"] = run_logged(cmd, st.model_dir / "train.log", self.root, f"[{st.row.label}] ")
        argv = self.average_argv(st)
        print(f"[{st.row.label}] + fairseq-ctx-average-checkpoints {quote_command(argv)}", flush=True)
        start = time.time()
        from fairseq_ctx.average_checkpoints import cli_main as average_main
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
            print(f"[{self.table.name}] {st.row.label}: scored ({score_path})", flush=True)
            return
        cmd = self.generate_cmd(st)
        if self.opts.dry_run:
            print(f"+ {quote_command(cmd)}")
            return
        ref = self.reference(st)
        if st.gen_log.exists():
            st.gen_log.unlink()  # an interrupted decoding starts again
        st.eval_dir.mkdir(parents=True, exist_ok=True)
        (st.eval_dir / "generate.cmd.json").write_text(json.dumps(cmd[1:], indent=1) + "\n")
        self.timings[f"{st.row.label}: generate"] = run_logged(cmd, st.gen_log, self.root, f"[{st.row.label}] ")
        tok = self.tok_kind(st)
        st.score = score_generation(st.gen_log, ref, st.data_cfg.langs(self.configs)[1] if tok else None, tok)
        st.score["subset"] = self.gen_subset(st)
        score_path.write_text(json.dumps(st.score, indent=2) + "\n")
        line = f"BLEU {st.score['bleu']:.2f}" + (f", tok BLEU {st.score['tok_bleu']:.2f}"
                                                  if st.score.get("tok_bleu") is not None else "")
        print(f"[{self.table.name}] {st.row.label}: {line} on {st.score['sentences']} sentences", flush=True)

    # -- the whole table ----------------------------------------------------------

    def run(self) -> int:
        table = self.table
        self._assign_dirs()
        selected = self._selected()
        start = time.time()
        mode = "SMOKE (tiny model, a few updates, Bible corpus: the numbers mean nothing)" if self.smoke else "full"
        print(f"[{table.name}] {table.title}\n[{table.name}] mode: {mode}; output {self.out}", flush=True)
        needed = self.needed_rows(selected)
        for row in table.rows:
            if row.label in needed:
                print(f"[{table.name}] {row.label}: {self.plan(self.states[row.label])}", flush=True)
        if not self.opts.dry_run:
            missing = sorted({f"{st.dataset.name}: {st.bin_dir}" for label, st in self.states.items()
                              if label in needed and not (st.bin_dir / f"dict.{st.data_cfg.langs(self.configs)[0]}.txt").is_file()})
            if missing:
                raise TableError("no binarized data (dict.SRC.txt) for " + "; ".join(missing) + ": prepare it "
                                 "(scripts/prepare-*.sh, README 'Data preparation') or pass --data [DATASET=]DIR")
            # the references too, before any training (they are read only when a row is scored)
            for label, st in self.states.items():
                if label in needed:
                    try:
                        self.reference(st)
                    except StepFailed as e:
                        raise TableError(f"{st.dataset.name}: {e}") from None
        n_steps = sum(1 for row in table.rows if row.label in needed) \
            + sum(1 for row in table.rows if row.label in needed and row.train)
        # a bar over the train and evaluate steps when stdout is a terminal
        with progress.step_bar(n_steps, f"[{table.name}]", unit="step") as bar:
            self._train_and_evaluate(needed, bar)
        if self.opts.dry_run:
            return 0
        for st in self.states.values():
            src = self.model_state(st)
            if src.model_dir is not None:
                st.train = parse_train_log(src.model_dir / "train.log")
        self.compare()
        text = reporting.format_table(self)
        print("\n" + text, flush=True)
        self.table_dir.mkdir(parents=True, exist_ok=True)
        if not self.opts.no_analyses:
            for analysis in table.analyses:
                absent = [label for label in analysis.rows_needed(table) if self.states[label].status != "done"]
                if absent:
                    print(f"[{table.name}] analysis {analysis.name} skipped: no results for "
                          f"{', '.join(absent)} in this run (--rows)", flush=True)
                    continue
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
        (self.table_dir / "table.json").write_text(json.dumps(reporting.as_json(self), indent=2) + "\n", encoding="utf-8")
        print(f"\n[{table.name}] wrote {self.table_dir / 'table.txt'} and table.json; "
              f"{self.timings['total']:.0f}s", flush=True)
        if self.failures:
            print(f"[{table.name}] {len(self.failures)} failure(s):", flush=True)
            for name, msg, log in self.failures:
                print(f"  {name}: {msg}" + (f" (log: {log})" if log else ""), flush=True)
            return 1
        return 0

    def _train_and_evaluate(self, needed: set, bar) -> None:
        table = self.table
        for row in table.rows:  # models first, in table order (warm starts come after their baseline)
            st = self.states[row.label]
            if row.label not in needed or not row.train:
                continue
            bar.set_postfix_str(f"train {row.label}", refresh=True)
            try:
                self.train_row(st)
                st.status = "trained"
            except (StepFailed, ArgsFileError) as e:
                self.fail(st, "train", e, getattr(e, "log", None))
            except Exception as e:  # a bug in a step must not hide the other rows
                self.fail(st, "train", e)
            bar.update()
        for row in table.rows:
            st = self.states[row.label]
            if row.label not in needed:
                self.load_earlier_score(st)
                continue
            bar.set_postfix_str(f"evaluate {row.label}", refresh=True)
            self._evaluate(st)
            bar.update()

    def _evaluate(self, st: RowState) -> None:
        if st.status == "failed":
            return
        src = self.model_state(st)
        if src.status == "failed":
            self.fail(st, "evaluate", StepFailed(f"the model of {st.row.model_of!r} failed"))
            return
        try:
            self.evaluate_row(st)
            st.status = "done" if st.score else st.status
        except (StepFailed, ArgsFileError) as e:
            self.fail(st, "evaluate", e, getattr(e, "log", None))
        except Exception as e:
            self.fail(st, "evaluate", e)

    def _selected(self) -> List[str]:
        if not self.opts.rows:
            return [row.label for row in self.table.rows]
        chosen = []
        for spec in self.opts.rows:
            if spec.isdigit() and 1 <= int(spec) <= len(self.table.rows):
                chosen.append(self.table.rows[int(spec) - 1].label)
            elif any(row.label == spec for row in self.table.rows):
                chosen.append(spec)
            else:
                raise TableError(f"--rows {spec!r}: not a row number (1-{len(self.table.rows)}) or label of "
                                 f"{self.table.name}")
        return chosen

    def needed_rows(self, selected: Sequence[str]) -> set:
        """The selected rows and the rows whose models they need (the model
        they are decoded with, their warm start); baselines are compared with
        only when their results exist (``load_earlier_score``)."""
        needed, todo = set(), list(selected)
        while todo:
            label = todo.pop()
            if label not in needed:
                needed.add(label)
                row = self.table.row(label)
                todo += [dep for dep in (row.model_of, row.warm_start) if dep]
        return needed

    def load_earlier_score(self, st: RowState) -> None:
        """A row left out by ``--rows``: its score from an earlier run, if any
        (so the rows that were run are still compared with their baseline)."""
        score_path = st.eval_dir / "score.json"
        if score_path.exists() and self.model_state(st).avg.exists():
            st.score = json.loads(score_path.read_text())
            st.status = "done"
            print(f"[{self.table.name}] {st.row.label}: not in --rows; its earlier score is used ({score_path})",
                  flush=True)

    # -- comparison ---------------------------------------------------------------

    def paper_metric(self, st: RowState) -> str:
        return "tok_bleu" if self.tok_kind(st) else "bleu"

    def compare(self):
        """Paired bootstrap of every scored row against its baseline row, in
        the paper's metric (and detokenized BLEU)."""
        from fairseq_ctx.evaluation import paired_bootstrap, read_generate_log, read_lines

        cache: Dict[str, Any] = {}

        def load(st):
            if st.row.label not in cache:
                refs = read_lines(st.score["reference"])
                hyps = read_generate_log(st.gen_log, len(refs), "D")
                split = None
                if st.score.get("tok_bleu") is not None:
                    split = (tokenize_for(st.score, hyps), tokenize_for(st.score, refs))
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
                res, sig = paired_bootstrap(bhyps, {"x": hyps}, refs, n_samples=self.opts.bootstrap_samples)
                st.compare = {"baseline": base_label, "delta": res["x"].delta, "p_value": res["x"].p_value,
                              "signature": sig}
                if split is not None and bsplit is not None:
                    tres, tsig = paired_bootstrap(bsplit[0], {"x": split[0]}, split[1], tokenize="none",
                                                  smooth_method="none", n_samples=self.opts.bootstrap_samples)
                    st.compare.update(tok_delta=tres["x"].delta, tok_p_value=tres["x"].p_value, tok_signature=tsig)
            except Exception as e:
                self.fail(st.row.label, "bootstrap", e)

    def speed_ref(self) -> Optional[RowState]:
        label = self.table.speed_ref or self.table.baseline
        return self.states.get(label) if label else None


# scoring one decoding
# ---------------------------------------------------------------------------


def tokenize_for(score: Dict[str, Any], lines: Sequence[str]) -> List[str]:
    """``lines`` as the paper's tokenized BLEU of ``score`` sees them:
    Moses-tokenized, and compound-split for "compound-split" (also the kind
    of a score.json written before the kind was recorded)."""
    from fairseq_ctx.evaluation import compound_split_lines
    from fairseq_ctx.evaluation.bleu import moses_tokenize
    if score.get("tok_kind") == "multi-bleu":
        return moses_tokenize(lines, score["tok_lang"])
    return compound_split_lines(lines, score["tok_lang"])


def score_generation(gen_log: Path, ref: Path, tok_lang: Optional[str],
                     tok_kind: Optional[str] = "compound-split") -> Dict[str, Any]:
    """Score a fairseq-generate log against the detokenized reference: every
    sentence id of the reference must have its ``D-`` line (none dropped).
    With ``tok_lang``, also the paper's tokenized BLEU of kind ``tok_kind``:
    "compound-split", or "multi-bleu" (Moses-tokenized, nothing split)."""
    from fairseq_ctx.evaluation import compound_split_bleu, detok_bleu, read_generate_log, read_lines
    from fairseq_ctx.evaluation.bleu import moses_tokenize, tokenized_bleu

    refs = read_lines(ref)
    hyps = read_generate_log(gen_log, len(refs), "D")
    bleu, sig = detok_bleu(hyps, refs)
    out = {"bleu": bleu, "signature": sig, "sentences": len(refs), "reference": str(ref),
           "generate_log": str(gen_log), "sentences_per_s": parse_generate_speed(gen_log),
           "tok_bleu": None, "tok_signature": None, "tok_lang": tok_lang, "tok_kind": tok_kind if tok_lang else None}
    if tok_lang and tok_kind == "multi-bleu":
        score, sig = tokenized_bleu(moses_tokenize(hyps, tok_lang), moses_tokenize(refs, tok_lang))
        out["tok_bleu"], out["tok_signature"] = score, f"{sig}|pre:moses-{tok_lang}"
    elif tok_lang:
        out["tok_bleu"], out["tok_signature"] = compound_split_bleu(hyps, refs, lang=tok_lang)
    return out


