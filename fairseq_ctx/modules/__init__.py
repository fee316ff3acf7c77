"""Layers and attention modules used by the fairseq_ctx architectures."""
