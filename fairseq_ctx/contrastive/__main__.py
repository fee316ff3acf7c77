"""``python3 -m fairseq_ctx.contrastive``: the command (see the package docstring)."""
from fairseq_ctx.contrastive.command import main

main()
