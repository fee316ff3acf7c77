"""Every architecture and variant of the plugin, and every setting of their
options that tests and scripts iterate over, in one file.

Two lists:

* :data:`VARIANTS`: the eight Base variants a user runs (the baselines and one
  or two settings per architecture). The tests' architecture contract
  (``tests/test_contract.py``), the speed benchmark (``scripts/benchmark.py``),
  the half-precision check (``scripts/precision_check.py``), the quickstart
  and the scale-out tests take their variants from here.
* :data:`OPTION_GRID` / :func:`option_grid`: every setting of each context
  architecture's options (ctxsan: context type x side x what is
  contextualised, and the ungated ablation on each side; DC: side x kernel
  size; GRET: the full model and each Table 3 ablation x routing softmax;
  ctxenc: the document task's context modes). Tests that iterate over settings (the contract's grid checks,
  warnings, hydra, half precision, fixtures, the precision hunt) pick from
  it, by a documented selector such as :func:`one_of_each`; its
  architectures (:func:`grid_archs`) are the models ``fairseq_ctx.models``
  registers (a test holds the two lists equal).

The valid choices and defaults of the options (:data:`CTXSAN_CONTEXT_TYPES`,
...) are :mod:`fairseq_ctx.model_options`'s, which the model files import,
so a grid cannot drift from what the models accept; the catalogue is for
tests and tools, and no model imports it.

A variant is an ``--arch`` with model flags and task flags (context models
read the previous sentence through the document task). ``arch`` is the Base
preset; tests build it at tiny dimensions (:data:`TINY_FLAGS`), benchmarks
at the size they are asked for. Nothing here imports torch or fairseq.
"""
import itertools
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

# the options' choices and defaults, which the models import too; the catalogue
# re-exports them for its users (tests, tools)
from fairseq_ctx.data.context_selection import CONTEXT_MODES  # --context-mode (what transformer_ctxenc reads)
from fairseq_ctx.model_options import (  # noqa: F401
    CTXSAN_ABLATIONS,
    CTXSAN_CONTEXT_TYPES,
    CTXSAN_CONTEXTUALIZE,
    CTXSAN_DEFAULTS,
    CTXSAN_SIDES,
    DC_DEFAULT_KERNEL_SIZE,
    GRET_ABLATIONS,
    GRET_DEFAULT_CAPSULES,
    GRET_ROUTING_SOFTMAX_CHOICES,
    TINY_DIMS,
)

DOC_TASK: Tuple[str, ...] = ("--task", "document_translation", "--context-size", "1")

# the tiny size (model_options.TINY_DIMS) as flags, for builds without the _tiny preset
TINY_FLAGS: Tuple[str, ...] = tuple(
    x for name in ("layers", "embed_dim", "ffn_embed_dim", "attention_heads") for side in ("encoder", "decoder")
    for x in (f"--{side}-{name.replace('_', '-')}", str(TINY_DIMS[name])))

# ---------------------------------------------------------------------------
# the grid's values of the options (their choices and defaults: model_options)

# transformer_dc (Ampomah et al. 2021): the side is the pair
# (--dc-encoder-layers, --dc-decoder-layers), and the preset that sets it
DC_SIDES: Mapping[str, Tuple[str, str, str]] = {
    "enc": ("all", "none", "transformer_dc"),  # Enc-DC, the paper's recommendation
    "dec": ("none", "all", "transformer_dc_dec"),
    "full": ("all", "all", "transformer_dc_full"),
}
# grid values of --dc-kernel-size (any f >= 1 is valid): the paper's 2, an odd
# window (asymmetric when centred) and a long one
DC_KERNEL_SIZES: Tuple[int, ...] = (2, 3, 8)

# transformer_gret (Weng et al. 2020): every subset of GRET_ABLATIONS is a row of Table 3;
# grid values of --gret-capsules besides the default: fewer capsules than the
# tests' sentences have positions (the default 32 has more)
GRET_FEW_CAPSULES = 4


@dataclass(frozen=True)
class Variant:
    """One architecture as a user runs it.

    Attributes:
        name: short label (tables, test ids, benchmark rows), unique over
            :data:`VARIANTS` and :data:`OPTION_GRID`
        arch: the ``--arch`` (Base-size preset)
        flags: model flags, for training and decoding alike (options at
            their default are left out)
        task: task flags (the document task for models that read context);
            fairseq-generate/-interactive take these too (model flags come
            from the checkpoint)
        settings: the value of each of the architecture's grid options
            (argparse dest -> value as fairseq parses it, defaults
            included), e.g. ``{"ctxsan_side": "both", ...}``
        task_settings: the same for the document task's options
            (``{"context_mode": "previous"}``)
        readouts: the readout keys (:mod:`fairseq_ctx.modules.readout`)
            that the modules of the *encoder* keep
        encoder_out: ``encoder_out`` entries beyond fairseq's, one tensor
            each (ctxenc's are there with ``return_context=True`` and a
            context)
        decoder_state: the decoder caches state of its own between decoding
            steps (beyond fairseq's attention caches)
        constant_init: name endings of parameters that start at one value
            everywhere, which hides part of the equations (ctxsan's gate
            vectors); tests of the equations give them random values
    """

    name: str
    arch: str
    flags: Tuple[str, ...] = ()
    task: Tuple[str, ...] = ()
    settings: Mapping[str, object] = field(default_factory=dict, compare=False)
    task_settings: Mapping[str, object] = field(default_factory=dict, compare=False)
    readouts: Tuple[str, ...] = ()
    encoder_out: Tuple[str, ...] = ()
    decoder_state: bool = False
    constant_init: Tuple[str, ...] = ()


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


# ---------------------------------------------------------------------------
# one constructor per architecture: a setting -> its Variant


def ctxsan(name: Optional[str] = None, **settings) -> Variant:
    """transformer_ctxsan with ``settings`` (dest -> value; unnamed ones at
    their default; the ablation :data:`CTXSAN_ABLATIONS` True or False)."""
    unknown = set(settings) - set(CTXSAN_DEFAULTS) - set(CTXSAN_ABLATIONS)
    if unknown:
        raise ValueError(f"unknown ctxsan option(s) {sorted(unknown)}")
    s = {**CTXSAN_DEFAULTS, **{a: False for a in CTXSAN_ABLATIONS}, **settings}
    flags = tuple(x for k in CTXSAN_DEFAULTS if s[k] != CTXSAN_DEFAULTS[k] for x in (_flag(k), s[k]))
    flags += tuple(_flag(a) for a in CTXSAN_ABLATIONS if s[a])
    gated = not s["ctxsan_no_gate"]
    if name is None:
        only = "" if s["ctxsan_contextualize"] == "both" else f"_{s['ctxsan_contextualize']}-only"
        name = f"ctxsan_{s['ctxsan_context']}_{s['ctxsan_side']}{only}{'' if gated else '_no-gate'}"
    read = {"query": ("q",), "key": ("k",), "both": ("q", "k")}[s["ctxsan_contextualize"]]
    return Variant(name, "transformer_ctxsan", flags, settings=s,
                   readouts=read if s["ctxsan_side"] != "decoder" and gated else (),
                   decoder_state=s["ctxsan_side"] != "encoder",
                   constant_init=("gate_h", "gate_c") if gated else ())


def dc(side: str = "enc", kernel_size: int = DC_DEFAULT_KERNEL_SIZE, name: Optional[str] = None,
       preset: bool = False) -> Variant:
    """transformer_dc on ``side`` (a key of :data:`DC_SIDES`) with kernel size
    f. ``preset``: the side's own ``--arch`` (``transformer_dc_full``, ...)
    instead of ``transformer_dc`` with both layer flags written out."""
    enc, dec, arch = DC_SIDES[side]
    flags = () if preset else ("--dc-encoder-layers", enc, "--dc-decoder-layers", dec)
    if kernel_size != DC_DEFAULT_KERNEL_SIZE:
        flags += ("--dc-kernel-size", str(kernel_size))
    return Variant(name or f"dc_{side}_f{kernel_size}", arch if preset else "transformer_dc", flags,
                   settings={"dc_encoder_layers": enc, "dc_decoder_layers": dec, "dc_kernel_size": kernel_size},
                   readouts=("alpha",) if enc != "none" else (), decoder_state=dec != "none")


def gret(ablations: Sequence[str] = (), routing_softmax: str = GRET_ROUTING_SOFTMAX_CHOICES[0],
         capsules: int = GRET_DEFAULT_CAPSULES, name: Optional[str] = None) -> Variant:
    """transformer_gret with the Table 3 ``ablations`` (dests of
    :data:`GRET_ABLATIONS`), routing softmax and capsule count."""
    ablations = [a for a in GRET_ABLATIONS if a in ablations]  # the table's order
    flags = tuple(_flag(a) for a in ablations)
    if routing_softmax != GRET_ROUTING_SOFTMAX_CHOICES[0]:
        flags += ("--gret-routing-softmax", routing_softmax)
    if capsules != GRET_DEFAULT_CAPSULES:
        flags += ("--gret-capsules", str(capsules))
    if name is None:
        name = "_".join(["gret", *(a[len("gret_"):] for a in ablations)])
        if "gret_no_capsule" not in ablations:  # no capsules: no routing
            name += f"_{routing_softmax}"
        if capsules != GRET_DEFAULT_CAPSULES:
            name += f"_k{capsules}"
    settings = {"gret_capsules": capsules, "gret_routing_softmax": routing_softmax,
                **{a: a in ablations for a in GRET_ABLATIONS}}
    # the decoder's own state is the gate's W_s s; ungated, s comes from
    # encoder_out at every step and nothing is cached
    return Variant(name, "transformer_gret", flags, settings=settings, encoder_out=("gret_global",),
                   decoder_state="gret_no_gate" not in ablations)


def ctxenc(context_mode: str = CONTEXT_MODES[0], name: Optional[str] = None) -> Variant:
    """transformer_ctxenc under the document task with ``--context-mode``."""
    task = DOC_TASK + (() if context_mode == CONTEXT_MODES[0] else ("--context-mode", context_mode))
    return Variant(name or f"ctxenc_{context_mode}", "transformer_ctxenc", task=task,
                   task_settings={"context_mode": context_mode}, readouts=("gate",),
                   encoder_out=("ctx_out", "ctx_padding_mask"))


VARIANTS: List[Variant] = [
    Variant("transformer", "transformer"),
    Variant("concat", "transformer", task=DOC_TASK + ("--concat-context",)),
    # encoder side, deep-global + deep: the paper's recommended model (Table 1)
    ctxsan(name="ctxsan"),
    # both sides: the decoder's causal prefix means and their running sums
    ctxsan(name="ctxsan_both", ctxsan_side="both"),
    dc("enc", name="dc", preset=True),  # Enc-DC
    dc("full", name="dc_full", preset=True),  # DC in every encoder and decoder layer
    gret(name="gret"),
    ctxenc(name="ctxenc"),
]
BY_NAME: Dict[str, Variant] = {v.name: v for v in VARIANTS}

# ---------------------------------------------------------------------------
# the option grid

_GRIDS: Dict[str, List[Variant]] = {
    # every --ctxsan-context x --ctxsan-side x --ctxsan-contextualize (Tables 1
    # and 3), and footnote 1's --ctxsan-no-gate on each side with the default
    # context (the sum replaces the gate alike for every context type and
    # either of Q / K)
    "transformer_ctxsan": [*(ctxsan(ctxsan_context=c, ctxsan_side=s, ctxsan_contextualize=q)
                             for c, s, q in itertools.product(CTXSAN_CONTEXT_TYPES, CTXSAN_SIDES,
                                                              CTXSAN_CONTEXTUALIZE)),
                           *(ctxsan(ctxsan_side=s, ctxsan_no_gate=True) for s in CTXSAN_SIDES)],
    # Enc-DC, Dec-DC and Full-DC (all three under --arch transformer_dc with
    # both layer flags written out) x each kernel size
    "transformer_dc": [dc(side, f) for side in DC_SIDES for f in DC_KERNEL_SIZES],
    # the full model and every row of Table 3 (each subset of the ablations),
    # with both routing softmaxes where there is routing, and the full model
    # with few capsules
    "transformer_gret": [
        *(gret(ablations, softmax)
          for n in range(len(GRET_ABLATIONS) + 1) for ablations in itertools.combinations(GRET_ABLATIONS, n)
          for softmax in (GRET_ROUTING_SOFTMAX_CHOICES if "gret_no_capsule" not in ablations
                          else GRET_ROUTING_SOFTMAX_CHOICES[:1])),
        gret(capsules=GRET_FEW_CAPSULES),
    ],
    # each --context-mode of the document task
    "transformer_ctxenc": [ctxenc(mode) for mode in CONTEXT_MODES],
}
OPTION_GRID: List[Variant] = [v for grid in _GRIDS.values() for v in grid]
GRID_BY_NAME: Dict[str, Variant] = {v.name: v for v in OPTION_GRID}

# per architecture, optionally: one training recipe (an argument file under
# configs/, whose hydra YAML fairseq_ctx.tables.hydra_configs generates) that
# tests/test_hydra.py trains through fairseq-hydra-train and fairseq-train
# alike and compares; an architecture without one is not in that check
RECIPES: Dict[str, str] = {
    "transformer_ctxsan": "ctxsan/table1/08_both_deep_global_deep.args",
    "transformer_dc": "dc/iwslt_enc_dc.args",
    "transformer_gret": "gret/table3/04_capsule_gate.args",
    "transformer_ctxenc": "voita/03_context_encoder_previous.args",
}


def option_grid(arch: str) -> List[Variant]:
    """Every grid setting of the model ``arch`` (its ``--arch`` name:
    ``transformer_ctxsan``, ``transformer_dc``, ``transformer_gret``,
    ``transformer_ctxenc``). DC's Dec-DC and Full-DC settings are in
    ``option_grid("transformer_dc")`` (``--arch transformer_dc`` with
    ``--dc-encoder-layers`` / ``--dc-decoder-layers``, which is what the
    ``transformer_dc_dec`` / ``transformer_dc_full`` presets set)."""
    if arch not in _GRIDS:
        hint = " (DC's sides are all in option_grid('transformer_dc'))" if arch.startswith("transformer_dc") else ""
        raise ValueError(f"no option grid for {arch!r}{hint}; known: {', '.join(_GRIDS)}")
    return list(_GRIDS[arch])


def grid_archs() -> List[str]:
    """The ``--arch`` names that have an option grid, in the grid's order:
    the plugin's models (``fairseq_ctx.models`` imports
    ``fairseq_ctx/models/<arch>.py`` for each, which registers it)."""
    return list(_GRIDS)


def variant(name: str) -> Variant:
    """The variant or grid setting called ``name``."""
    found = BY_NAME.get(name) or GRID_BY_NAME.get(name)
    if found is None:
        raise ValueError(f"unknown variant {name!r}; known: {', '.join([*BY_NAME, *GRID_BY_NAME])}")
    return found


def one_of_each(variants: Optional[Iterable[Variant]] = None) -> List[Variant]:
    """Few variants of ``variants`` (default: the grid) that together build
    every value of every model option (``settings``) and every ``--arch``,
    one model each: greedy, each pick the variant that adds the most values
    not yet built (ties: the first in the list), in the list's order."""
    pool = list(OPTION_GRID if variants is None else variants)
    values = lambda v: {("arch", v.arch), *((v.arch, k, str(x)) for k, x in v.settings.items())}  # noqa: E731
    todo = set().union(*map(values, pool)) if pool else set()
    picked = []
    while todo:
        best = max(pool, key=lambda v: len(values(v) & todo))  # first of the largest
        picked.append(best)
        todo -= values(best)
    return [v for v in pool if v in picked]


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


def _check_unique():
    seen = [*BY_NAME, *GRID_BY_NAME]
    dups = sorted({n for n in seen if seen.count(n) > 1})
    if dups or len(BY_NAME) != len(VARIANTS) or len(GRID_BY_NAME) != len(OPTION_GRID):
        raise AssertionError(f"variant names must be unique: {dups}")


_check_unique()
