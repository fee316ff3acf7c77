"""Tasks registered by fairseq_ctx."""
