#!/usr/bin/env python3
"""Reproduce the table voita-bleu (fairseq_ctx/tables/; --help for the options,
--smoke for a quick CPU run of every row on the Bible corpus)."""
import sys

from fairseq_ctx.tables.runner import main

if __name__ == "__main__":
    sys.exit(main("voita-bleu"))
