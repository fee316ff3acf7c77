"""Imported by the fork server of tests/cli_process.py only (never by a
test): fairseq and the modules its command-line tools import, with the
one thing those imports do to the process that a command can see before
it imports fairseq itself held back.

Importing fairseq calls ``logging.basicConfig`` (fairseq/tasks/text_to_speech.py
and frm_text_to_speech.py, at import time): in a new interpreter that happens
when the command first imports fairseq, i.e. before the logging set-up of
fairseq-generate (in its ``main``), after that of fairseq-train (at the top
of its module, "before importing any fairseq libraries"). So those calls are
recorded here instead of made, and a child replays them (cli_process._child)
at its own first ``import fairseq...``: the logging of every command ends up
as a new interpreter would set it up.
"""
import logging

BASIC_CONFIG_CALLS = []


def _record(*args, **kwargs):
    BASIC_CONFIG_CALLS.append((args, kwargs))


_real_basic_config = logging.basicConfig
logging.basicConfig = _record
try:
    import fairseq  # noqa: F401
    import fairseq.checkpoint_utils  # noqa: F401
    import fairseq.options  # noqa: F401
    import fairseq.sequence_generator  # noqa: F401
    import fairseq.sequence_scorer  # noqa: F401
    import fairseq.trainer  # noqa: F401
finally:
    logging.basicConfig = _real_basic_config
