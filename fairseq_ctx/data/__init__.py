"""Datasets for fairseq_ctx (corpus preparation is the torch-free package fairseq_ctx_prep)."""
