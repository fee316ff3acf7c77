"""``python3 -m fairseq_ctx.evaluation.contrastive``: the command (see the package docstring)."""
from fairseq_ctx.evaluation.contrastive.command import main

main()
