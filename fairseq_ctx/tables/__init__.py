"""The papers' tables as data, and one runner for all of them.

* :mod:`.config`: argument files (``configs/**/*.args``: one flag a line,
  ``#`` comments, ``@include``); ``python3 -m fairseq_ctx.tables.config FILE``
  or ``scripts/ctx-args FILE`` prints the flags.
* :mod:`.runner`: train, average, decode, score, analyse and print a table
  (``--smoke`` for a quick CPU run of every row on the Bible corpus).
* :mod:`.ctxsan`, :mod:`.dc`, :mod:`.gret`, :mod:`.voita`: the tables' rows,
  configs and the papers' numbers. ``scripts/tables/<name>.py`` runs one.
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
    for t in all_tables():
        if t.name == name:
            return t
    raise KeyError(f"no table {name!r}; known: {', '.join(t.name for t in all_tables())}")
