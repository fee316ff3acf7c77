"""A paper's table as data: its rows (label, descriptive cells, training
config, the paper's numbers, and where they differ from the table's, the
dataset, generation config and the row compared with) and the analyses that
run on them. ``fairseq_ctx/tables/{ctxsan,dc,gret,voita}.py`` define the
tables; ``running`` runs them.
"""
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple


# How each paper computed its BLEU: key -> (our column holding that flavour,
# the recipe). A table names one per dataset (Table.bleu); the runner prints it
# beside detokenized sacreBLEU, which every row gets with its signature.
BLEU_FLAVOURS: Dict[str, Tuple[str, str]] = {
    "nist": ("BLEU", "NIST BLEU: mteval-v13a.pl, case-sensitive, on detokenized text; sacreBLEU's default 13a "
                     "tokenizer reproduces mteval-v13a, so the BLEU (sacreBLEU) column is this flavour"),
    "sacrebleu": ("BLEU", "sacreBLEU, case-sensitive, on detokenized text: the BLEU column"),
    "compound-split": ("tok BLEU", "tokenized BLEU with compound splitting: Moses tokenizer.perl -l TGT on hypothesis "
                                   "and reference, every a-b written a ##AT##-##AT## b, multi-bleu.perl (Vaswani et "
                                   "al.'s En-De convention): the tok BLEU column"),
    "multi-bleu": ("tok BLEU", "multi-bleu.perl, case-sensitive, on Moses-tokenized text (tokenizer.perl -l TGT on "
                               "hypothesis and reference, no compound splitting): the tok BLEU column"),
    "unstated": ("BLEU", "the paper names no BLEU script or tokenization; compared with the BLEU (sacreBLEU) column"),
}


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
    # dataset name (or "*" for every other) -> key of BLEU_FLAVOURS: how the paper scored it
    bleu: Dict[str, str] = field(default_factory=lambda: {"*": "unstated"})
    # False where the paper gives its batch size without a GPU count (DC, GRET):
    # the configs take the number as written, --batch-reading 8gpu multiplies by 8
    gpus_stated: bool = True

    def bleu_flavour(self, dataset: str) -> str:
        return self.bleu.get(dataset, self.bleu.get("*", "unstated"))

    def row(self, label: str) -> Row:
        for row in self.rows:
            if row.label == label:
                return row
        raise KeyError(f"{self.name}: no row {label!r}")


class TableError(Exception):
    """A table definition or an output directory that cannot be used."""


# ---------------------------------------------------------------------------
# running commands


def check_definition(table: Table, configs: Path, dataset_names) -> None:
    """Every row reference, config file and dataset of ``table`` exists."""
    labels = [row.label for row in table.rows]
    if len(set(labels)) != len(labels):
        raise TableError(f"{table.name}: duplicate row labels")
    for dataset, flavour in table.bleu.items():
        if flavour not in BLEU_FLAVOURS:
            raise TableError(f"{table.name}: BLEU flavour {flavour!r} of {dataset} is none of {', '.join(BLEU_FLAVOURS)}")
    for row in table.rows:
        for ref in (row.baseline, row.model_of, row.warm_start):
            if ref and ref not in labels:
                raise TableError(f"{table.name}: row {row.label!r} names an unknown row {ref!r}")
        if (row.train is None) == (row.model_of is None):
            raise TableError(f"{table.name}: row {row.label!r} needs exactly one of train= and model_of=")
        for cfg in (row.train, row.generate or table.generate, row.average or table.average):
            if cfg and not (configs / cfg).is_file():
                raise TableError(f"{table.name}: row {row.label!r}: no config configs/{cfg}")
        if (row.dataset or table.dataset) not in dataset_names:
            raise TableError(f"{table.name}: row {row.label!r}: unknown dataset {row.dataset or table.dataset!r}")
