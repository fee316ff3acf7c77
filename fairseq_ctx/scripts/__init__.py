"""Command-line tools installed with fairseq_ctx."""
