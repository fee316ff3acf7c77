"""``python -m tests.sigkill_after_first_checkpoint ARGS``: ``fairseq-train``
(``fairseq_cli.train``) that kills itself with SIGKILL as soon as its first
checkpoint is on disk: a crash at a known update. A kill sent from outside on
reading the "Saved checkpoint" line lands wherever training has got to by
then, which on a loaded machine can be past the update a resume test stops
at."""
import os
import signal

from fairseq import checkpoint_utils
from fairseq_cli import train

_save = checkpoint_utils.save_checkpoint


def _save_then_die(*args, **kwargs):
    _save(*args, **kwargs)  # checkpoint_N_M.pt, then its copy as checkpoint_last.pt
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    checkpoint_utils.save_checkpoint = _save_then_die
    train.cli_main()
