"""Architectures registered by fairseq_ctx (one module each)."""
