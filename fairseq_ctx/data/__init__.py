"""Datasets and corpus preparation for fairseq_ctx."""
