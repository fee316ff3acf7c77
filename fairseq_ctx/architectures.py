"""Every architecture and variant of the plugin, in one list.

The tests' architecture contract (``tests/test_contract.py``), the speed
benchmark (``scripts/benchmark.py``), the half-precision check
(``scripts/precision_check.py``), the quickstart and the scale-out tests
all take their variants from here, so adding an architecture is: one model
file, one entry here, one test file of its equations.

A variant is an ``--arch`` with model flags and task flags (context models
read the previous sentence through the document task). ``arch`` is the Base
preset; tests build it at tiny dimensions (:data:`TINY_FLAGS`), benchmarks
at the size they are asked for. Nothing here imports torch or fairseq.
"""
from dataclasses import dataclass
from typing import Dict, Iterable, List, Sequence, Tuple

DOC_TASK: Tuple[str, ...] = ("--task", "document_translation", "--context-size", "1")

# 2+2 layers, d=16: two updates take about a second on one CPU core.
TINY_FLAGS: Tuple[str, ...] = (
    "--encoder-layers", "2", "--decoder-layers", "2",
    "--encoder-embed-dim", "16", "--decoder-embed-dim", "16",
    "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32",
    "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
)


@dataclass(frozen=True)
class Variant:
    """One architecture as a user runs it.

    Attributes:
        name: short label (tables, test ids, benchmark rows)
        arch: the ``--arch`` (Base-size preset)
        flags: model flags, for training and decoding alike
        task: task flags (the document task for models that read context);
            fairseq-generate/-interactive take these too (model flags come
            from the checkpoint)
        context: the model reads the neighbouring sentence (source context)
    """

    name: str
    arch: str
    flags: Tuple[str, ...] = ()
    task: Tuple[str, ...] = ()
    context: bool = False

    @property
    def all_flags(self) -> List[str]:
        """``--arch``, model and task flags: what fairseq-train needs."""
        return ["--arch", self.arch, *self.flags, *self.task]


VARIANTS: List[Variant] = [
    Variant("transformer", "transformer"),
    Variant("concat", "transformer", task=DOC_TASK + ("--concat-context",), context=True),
    # encoder side, deep-global + deep: the paper's recommended model (Table 1)
    Variant("ctxsan", "transformer_ctxsan"),
    # both sides: the decoder's causal prefix means and their running sums
    Variant("ctxsan_both", "transformer_ctxsan", ("--ctxsan-side", "both")),
    Variant("dc", "transformer_dc"),  # Enc-DC
    Variant("dc_full", "transformer_dc_full"),  # DC in every encoder and decoder layer
    Variant("gret", "transformer_gret"),
    Variant("ctxenc", "transformer_ctxenc", task=DOC_TASK, context=True),
]
BY_NAME: Dict[str, Variant] = {v.name: v for v in VARIANTS}


def select(names: Iterable[str] = ()) -> List[Variant]:
    """The variants called ``names`` (all when empty), in the list's order
    of ``names``; an unknown name is one clear error listing the known ones."""
    names = list(names)
    if not names:
        return list(VARIANTS)
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise ValueError(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
    return [BY_NAME[n] for n in names]


def names(variants: Sequence[Variant] = VARIANTS) -> List[str]:
    return [v.name for v in variants]
