"""The papers' tables as data, and one runner for all of them.

``python3 -m fairseq_ctx.tables TABLE [--smoke] [--rows ...]`` (console
script ``fairseq-ctx-table``) reproduces one table; docs/tables.md describes
it. By concern:

* :mod:`.config`: argument files (``configs/**/*.args``: one flag a line,
  ``#`` comments, ``@include``); ``scripts/ctx-args FILE`` prints the flags.
* :mod:`.hydra_configs`: ``configs/hydra/*.yaml`` for ``fairseq-hydra-train``,
  generated from the training configs (``python3 -m
  fairseq_ctx.tables.hydra_configs``; docs/hydra.md).
* :mod:`.definition`: a table and its rows as data; :mod:`.ctxsan`,
  :mod:`.dc`, :mod:`.gret`, :mod:`.voita`: the tables' rows, configs and the
  papers' numbers.
* :mod:`.datasets`: the prepared corpora and the repository root.
* :mod:`.running`: train, average, decode, score (``--smoke`` for a quick CPU
  run of every row on the Bible corpus); :mod:`.analyses`: the figures'
  analyses; :mod:`.reporting`: the printed table and ``table.json``.

Nothing here imports torch or fairseq at import time.
"""

TABLE_MODULES = ("ctxsan", "dc", "gret", "voita")


def all_tables():
    """Every table, in the order of ``TABLE_MODULES``."""
    import importlib

    out = []
    for name in TABLE_MODULES:
        out.extend(importlib.import_module(f"{__name__}.{name}").TABLES)
    return out


def get_table(name: str):
    for table in all_tables():
        if table.name == name:
            return table
    raise KeyError(f"no table {name!r}; known: {', '.join(table.name for table in all_tables())}")
