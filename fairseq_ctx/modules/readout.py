"""Reading internal values (gates, attention weights) out of a model, for the
analyses: one convention for every architecture.

A module with values to read out inherits :class:`Readout` (a mixin for
``nn.Module``) and declares them in ``readout_shapes``. While its
``keep_readout`` flag is on, each forward replaces ``last_readout`` with
those values of that forward, detached; while the flag is off (the default:
training, validation, decoding) nothing is computed or copied for the readout
(the DC module computes no attention probabilities, no gate is kept).

The modules (``readout_shapes`` in each class):

* ``ContextAwareSelfAttention`` (transformer_ctxsan, both sides): the gates
  lambda_Q, lambda_K of Eq. 6 as ``{"q": T x B, "k": T x B}``, only those of
  the contextualised Q / K (``--ctxsan-contextualize``); empty for a layer
  without context (layer 1 with the deep context) and without gates
  (``--ctxsan-no-gate``).
* ``DualContextualModule`` (transformer_dc, encoder and decoder DC layers):
  the FI attention probabilities ``{"alpha": B x 2 x H x T x S}``
  ([alpha_l, alpha_g], Eq. 10-13).
* ``CtxEncGatedEncoderLayer`` (transformer_ctxenc, the last source-encoder
  layer): the gate ``{"gate": T x B x C}``, g of c = g * c_s + (1 - g) * c_c.

:func:`reading` switches the flag on for every such module of a model (or
of any submodule, e.g. ``model.encoder``) and, on leaving the block, off
again, dropping the stored tensors so that no memory is held::

    with reading(model.encoder) as modules:       # {qualified name: module}
        model.encoder(src_tokens, src_lengths)
        alphas = [m.last_readout["alpha"] for m in modules.values()]

A readout lives on its module, never in ``encoder_out``: it is in the batch
order of the forward that made it, so beam search has nothing to reorder
(``reorder_encoder_out`` does not see it), and a later forward (say, the
decoder's next incremental step, whose readout covers that step only)
replaces it. Read it right after the forward of interest.

Not a readout: ``return_context=True`` of the transformer_ctxenc encoder puts
the context encoder's output *states* and mask in ``encoder_out``. They are
an output of the encoder (like ``encoder_states``), follow the beams with the
rest of it and are asked for per call; a readout is a value inside a module
(a gate, attention weights) that no output carries.
"""
from __future__ import annotations  # torch only for type hints: importing this stays cheap

from contextlib import contextmanager
from types import MappingProxyType
from typing import TYPE_CHECKING, Dict, Iterator, Mapping

if TYPE_CHECKING:
    from torch import Tensor, nn


class Readout(object):
    """Mixin for an ``nn.Module`` with values to read out (see the module
    docstring). Subclasses set ``readout_shapes`` (key -> shape, e.g.
    ``"T x B"``; the tests take the batch dimension from it) and call
    :meth:`record_readout` in their forward only when ``keep_readout`` is on,
    so that the values are neither computed nor copied otherwise.

    Neither attribute is a parameter or buffer: the state_dict (the
    checkpoint format) is unchanged.
    """

    readout_shapes: Mapping[str, str] = MappingProxyType({})
    keep_readout: bool = False  # class default; reading() sets it per module
    # the values of the last forward while keep_readout was on; the class
    # default is an empty read-only mapping, an instance gets its own dict
    last_readout: Mapping[str, Tensor] = MappingProxyType({})

    def record_readout(self, **values: Tensor) -> None:
        """Replace ``last_readout`` by ``values``, detached (no autograd graph kept)."""
        self.last_readout = {k: v.detach() for k, v in values.items()}


def readout_modules(model: nn.Module) -> Dict[str, Readout]:
    """Every :class:`Readout` module of ``model`` (``model`` itself included)
    by qualified name, in ``named_modules`` order (encoder before decoder,
    bottom layer first)."""
    return {name: m for name, m in model.named_modules() if isinstance(m, Readout)}


@contextmanager
def reading(model: nn.Module) -> Iterator[Dict[str, Readout]]:
    """Switch the readout of every :class:`Readout` module of ``model`` on
    for the block; yields them (:func:`readout_modules`). On exit each
    module's flag returns to what it was and the modules switched off drop
    their ``last_readout`` (a nested ``reading`` leaves the modules of an
    enclosing one switched on)."""
    modules = readout_modules(model)
    before = {name: m.keep_readout for name, m in modules.items()}
    for m in modules.values():
        m.keep_readout = True
        m.last_readout = {}
    try:
        yield modules
    finally:
        for name, m in modules.items():
            m.keep_readout = before[name]
            if not before[name]:
                m.last_readout = {}
