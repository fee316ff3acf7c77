"""Token layout of document context (``<sep>`` is the task's separator
symbol, ``</s>`` EOS)::

    context (separate):  c_1 <sep> c_2 <sep> ... c_k </s>      empty: </s>
    concatenated source: c_1 <sep> ... c_k <sep> s_1 ... s_m </s>   empty: source

With target context (``--concat-context --target-context``, the 2-to-2
concatenation of Tiedemann and Scherrer 2017) the target is glued the same
way to the previous target sentences::

    concatenated target: t_1 <sep> ... t_k <sep> y_1 ... y_n </s>       empty: target
    forced prefix (decoding with previous translations): t_1 <sep> ... t_k <sep>

Each ``c_j`` is a context sentence without its EOS.  An empty context is a
lone ``</s>`` (fairseq's encoding of an empty line), so a context encoder
always has a key to attend to.  Context longer than its cap loses its
*oldest* tokens; a concatenated source is cut from the left in the same way
so the current sentence itself always survives.  A cut never leaves a
separator first (one that would separate nothing): it is dropped too.
:func:`split_concatenated` undoes the glue on a padded batch.

Token tensors (1-D, ``long``) in, token tensors out: which sentences are
the context is :mod:`fairseq_ctx.data.context_selection`'s question.
"""
from typing import List, Optional, Sequence

import torch
from fairseq.data import data_utils


def _strip_eos(tokens: torch.Tensor, eos: int) -> torch.Tensor:
    return tokens[:-1] if len(tokens) > 0 and tokens[-1] == eos else tokens


def _drop_leading_sep(tokens: torch.Tensor, sep: int, keep: int = 1) -> torch.Tensor:
    """A cut that lands just after a sentence (or after an empty one) leaves
    ``<sep>`` first, separating nothing: drop the leading separators, but
    never the last ``keep`` tokens (the current source when concatenated)."""
    not_sep = tokens.ne(sep)
    lead = int(not_sep.int().argmax()) if bool(not_sep.any()) else len(tokens)
    return tokens[min(lead, max(len(tokens) - keep, 0)):]


def build_context_tokens(context: Sequence[torch.Tensor], eos: int, sep: int,
                         max_tokens: Optional[int] = None) -> torch.Tensor:
    """Join context sentences (oldest first) into one context sequence for a
    context encoder: ``c_1 <sep> ... c_k </s>``; ``[</s>]`` when empty."""
    parts: List[torch.Tensor] = []
    for j, sent in enumerate(context):
        if j > 0:
            parts.append(torch.tensor([sep], dtype=torch.long))
        parts.append(_strip_eos(sent.long(), eos))
    parts.append(torch.tensor([eos], dtype=torch.long))
    out = torch.cat(parts)
    if max_tokens is not None and len(out) > max_tokens:
        out = _drop_leading_sep(out[len(out) - max_tokens:], sep)
    return out


def concat_context_source(context: Sequence[torch.Tensor], source: torch.Tensor, eos: int,
                          sep: int, max_tokens: Optional[int] = None) -> torch.Tensor:
    """Glue context sentences to the source: ``c_1 <sep> ... c_k <sep> source``
    (the paper's concatenation baseline); the source alone when empty.  Cut
    from the left to ``max_tokens`` (never into a source that fits)."""
    if len(context) == 0:
        return source
    parts: List[torch.Tensor] = []
    for sent in context:
        parts.append(_strip_eos(sent.long(), eos))
        parts.append(torch.tensor([sep], dtype=torch.long))
    parts.append(source.long())
    out = torch.cat(parts)
    if max_tokens is not None and len(out) > max_tokens:
        out = _drop_leading_sep(out[len(out) - max(max_tokens, len(source)):], sep, keep=len(source))
    return out


def glue_context(context: torch.Tensor, source: torch.Tensor, eos: int, sep: int) -> torch.Tensor:
    """A separate context (:func:`build_context_tokens`, cut already) glued
    to the source as :func:`concat_context_source` glues, ``c_1 <sep> ...
    c_k <sep> source``, for a batch that carries the source only;
    :func:`split_concatenated` gives the context back as it was."""
    body = _strip_eos(context.long(), eos)
    if len(body) == 0:
        return source
    return torch.cat([body, body.new_tensor([sep]), source.long()])


def target_prefix(previous: Sequence[torch.Tensor], eos: int, sep: int,
                  max_tokens: Optional[int] = None) -> torch.Tensor:
    """The forced decoder prefix of a 2-to-2 model: ``t_1 <sep> ... t_k <sep>``
    (each previous target sentence without its EOS, oldest first), i.e. the
    glued training target (:func:`concat_context_source`) without the current
    sentence; empty without previous sentences.  Longer than ``max_tokens``:
    its oldest tokens are dropped (and a separator left first)."""
    if len(previous) == 0 or (max_tokens is not None and max_tokens <= 0):
        return torch.zeros(0, dtype=torch.long)
    parts: List[torch.Tensor] = []
    for sent in previous:
        parts.append(_strip_eos(sent.long(), eos))
        parts.append(torch.tensor([sep], dtype=torch.long))
    out = torch.cat(parts)
    if max_tokens is not None and len(out) > max_tokens:
        out = _drop_leading_sep(out[len(out) - max_tokens:], sep, keep=0)
    return out



def split_concatenated(src_tokens: torch.Tensor, pad: int, eos: int, sep: int,
                       left_pad: bool = True):
    """Inverse of :func:`concat_context_source` on a padded batch ``B x T``:
    everything after the last ``<sep>`` of a row is its source, everything
    before it its context (re-terminated with ``</s>``; ``[</s>]`` if the row
    has no ``<sep>``).  Returns ``(src_tokens, src_lengths, ctx_tokens,
    ctx_lengths)``, padded on the same side as the input, on its device (split
    on the host: the rows' cuts are read one by one)."""
    device = src_tokens.device
    sources, contexts = [], []
    for row in src_tokens.cpu():
        row = row[row.ne(pad)]
        seps = row.eq(sep).nonzero()
        cut = int(seps[-1]) if len(seps) else -1
        sources.append(row[cut + 1:])
        ctx = row[:max(cut, 0)]
        contexts.append(torch.cat([ctx, row.new_tensor([eos])]))

    def collate(tokens):
        return (data_utils.collate_tokens(tokens, pad, eos, left_pad=left_pad).to(device),
                torch.tensor([len(t) for t in tokens], dtype=torch.long, device=device))

    src, src_lengths = collate(sources)
    ctx, ctx_lengths = collate(contexts)
    return src, src_lengths, ctx, ctx_lengths
