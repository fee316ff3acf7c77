"""The choices and defaults of the architectures' own options, written once:
the model and module files import them (and the option catalogue of
:mod:`fairseq_ctx.architectures`, which tests and tools iterate over, is
built from them), so what a model accepts and what the grid tries cannot
drift apart.

Nothing here imports torch, fairseq or numpy, so the catalogue and the
command-line tools read it for free.  The document task's own option
(``--context-mode``) belongs to the context rule,
:data:`fairseq_ctx.data.context_selection.CONTEXT_MODES`.
"""
from typing import Mapping, Tuple

# transformer_ctxsan (Yang et al. 2019): --ctxsan-context, --ctxsan-side, --ctxsan-contextualize
CTXSAN_CONTEXT_TYPES: Tuple[str, ...] = ("global", "deep", "deep-global", "deep-global+deep")
CTXSAN_SIDES: Tuple[str, ...] = ("encoder", "decoder", "both")
CTXSAN_CONTEXTUALIZE: Tuple[str, ...] = ("query", "key", "both")
# the paper's best setting (Table 1): both context vectors, encoder side, queries and keys
CTXSAN_DEFAULTS: Mapping[str, str] = {
    "ctxsan_context": "deep-global+deep", "ctxsan_side": "encoder", "ctxsan_contextualize": "both"}
# the ablation of footnote 1 ("without {lambda_Q, lambda_K}"): --ctxsan-no-gate
CTXSAN_ABLATIONS: Tuple[str, ...] = ("ctxsan_no_gate",)

# transformer_dc (Ampomah et al. 2021): --dc-kernel-size f (any f >= 1 is valid)
DC_DEFAULT_KERNEL_SIZE = 2  # the paper's f (Sect. 5.2 / 7.2)

# transformer_gret (Weng et al. 2020): --gret-routing-softmax (the first is the
# paper's, over capsules), --gret-capsules K, and Table 3's ablation switches
GRET_ROUTING_SOFTMAX_CHOICES: Tuple[str, ...] = ("capsules", "positions")
GRET_DEFAULT_CAPSULES = 32
GRET_ABLATIONS: Tuple[str, ...] = ("gret_no_capsule", "gret_no_aggregation", "gret_no_gate")

# the test-suite size of every ``<arch>_tiny`` preset: 2+2 layers, d=16, ffn 32,
# 2 heads (two updates take about a second on one CPU core)
TINY_DIMS: Mapping[str, int] = {"embed_dim": 16, "ffn_embed_dim": 32, "layers": 2, "attention_heads": 2}
