"""transformer_ctxenc: the context-aware Transformer of Voita et al., ACL 2018
("Context-Aware Neural Machine Translation Learns Anaphora Resolution").

Encoder (N = ``--encoder-layers``)::

    source  --embed--> layers 1..N-1 (shared) --> gated layer N ----------> decoder
                                                     ^ attention + gate
    context --embed--> layers 1..N-1 (shared) --> own layer N (ctx_layer) -+

* The first N-1 layers and the embeddings are shared by the source and the
  context encoder; the context encoder has its own last layer
  (``encoder.ctx_layer``).
* The source encoder's last layer (``CtxEncGatedEncoderLayer``) adds an
  attention from the source states to the context encoder's output and mixes
  it with the self-attention output through an element-wise sigmoid gate
  g = sigma(W_g [c_s; c_c] + b_g), c = g * c_s + (1 - g) * c_c.
* The decoder is fairseq's, unchanged.

Speed: columns that are padding in every context row are dropped; when the
contexts of a batch have similar lengths, source and context go through the
shared layers as one batch (2B rows, padded to the longer of the two);
otherwise the source runs alone and the contexts run in a few groups of
similar length (a batch is sorted by *source* length, so its contexts vary:
on the Bible corpus 58% of a collated context tensor is padding).  The
encoder runs once per sentence: beam search only reorders its output, so a
decoding step costs the same as in a plain transformer.  The context
encoder's output ``ctx_out`` and mask ``ctx_padding_mask``, which the decoder
never reads, are in ``encoder_out`` only when asked for
(``return_context=True``, for analyses); beam search does not ask, so they are
not copied at every beam step (``reorder_encoder_out`` reorders them when
present, like every other entry).  The context itself costs about one more
encoder pass, which bounds the training speed at roughly 0.75x a plain
transformer of the same size (measured speeds: ``docs/benchmarks.md``).
Decoding with ``--reuse-sentence-states`` (document task; the model sets
up its cache in fairseq's ``prepare_for_inference_`` hook) saves most of
it: every sentence goes through the shared layers once per run, as a
source or as a context, whichever comes first, and its states are reused
for the other (:mod:`fairseq_ctx.modules.ctxenc_state_cache`); a context
then costs only the context encoder's own last layer.

The gate g of the last layer is not in ``encoder_out``: the analyses read it
from that layer by the readout convention of every architecture
(:mod:`fairseq_ctx.modules.readout`): inside ``with reading(model):``,
``encoder.layers[-1].last_readout["gate"]`` (T x B x C) is g of the last
forward.

The context comes from ``--task document_translation`` as ``ctx_tokens``
(B x T_ctx) / ``ctx_lengths``.  Without it (e.g. ``--task translation``)
every sentence gets the empty context (a lone ``</s>``), as at a document start.

Parameter growth over ``transformer`` (Base: d=512, ffn 2048, 8 heads):
own context layer 3,152,384 + context attention 1,050,624 + gate 524,800
= +4,727,808 (+ 2d: a LayerNorm of d with ``--encoder-normalize-before``);
tested in ``tests/test_ctxenc.py``.  The paper gives no count.

Presets: ``transformer_ctxenc`` (Base), ``transformer_ctxenc_big``
(``transformer_wmt_en_de_big``), ``transformer_ctxenc_iwslt_de_en`` (small),
``transformer_ctxenc_tiny`` (tests).
"""
import contextlib
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import torch
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import TransformerConfig, TransformerDecoderBase, TransformerEncoderBase, TransformerModel
from fairseq.models.transformer.transformer_legacy import (
    base_architecture,
    transformer_iwslt_de_en,
    transformer_wmt_en_de_big,
)
from fairseq.modules import LayerNorm
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase
from torch import Tensor

from fairseq_ctx.errors import ConfigError
from fairseq_ctx.modules.ctxenc_gated_layer import CtxEncGatedEncoderLayer
from fairseq_ctx.modules.ctxenc_state_cache import SharedStateCache
from fairseq_ctx.modules.future_mask import BoolFutureMask
from fairseq_ctx.models.checks import check_attention_dims, check_every_layer_runs, check_no_xformers
from fairseq_ctx.models.layer_wrapping import wrap_layer
from fairseq_ctx.models.model_config import (
    TransformerFlatConfig,
    add_args_from_dataclass,
    architecture_args,
    register_base_architecture,
)
from fairseq_ctx.models.presets import tiny_dims

# batch source and context through the shared layers together when the
# padded joint batch has at most this many times the real (padded) tokens
JOINT_BATCH_MAX_WASTE = 1.25
# split the context batch into length groups when real tokens fill less than
# this share of it; at most this many groups, of at least this many rows
CONTEXT_MIN_FILL = 0.8
MAX_CONTEXT_CHUNKS = 4
MIN_CHUNK_ROWS = 8


@contextlib.contextmanager
def contexts_in_one_pass():
    """Inside the block no batch's contexts are encoded in length groups (a
    fill threshold of 0 is always reached). The groups save the padding's
    FLOPs at the cost of more, smaller calls, which may be slower where an
    update is launch-bound (a GPU); this switch is for the measurements of
    that trade (scripts/speed_diagnosis.py, scripts/update_ops.py), and the
    model gets no flag for it until a GPU has measured it."""
    global CONTEXT_MIN_FILL
    before = CONTEXT_MIN_FILL
    CONTEXT_MIN_FILL = 0.0
    try:
        yield
    finally:
        CONTEXT_MIN_FILL = before


def validate_ctxenc_args(args):
    """Raise :class:`~fairseq_ctx.errors.ConfigError` (a ValueError) naming the
    flag for values the model cannot build."""
    check_every_layer_runs(args, ["encoder"], "transformer_ctxenc",
                           "source and context run through the same shared layers, and the last one is gated")
    check_attention_dims(args)
    check_no_xformers(args, "transformer_ctxenc", {"encoder": "the context attention of its last encoder layer"})


class CtxEncEncoder(TransformerEncoderBase):
    """Source encoder + context encoder with shared lower layers (see module
    docstring).  ``self.layers[-1]`` is the gated source layer,
    ``self.ctx_layer`` the context encoder's own last layer."""

    def __init__(self, cfg, dictionary, embed_tokens, return_fc=False):
        if return_fc:
            # fairseq's layers would return (x, fc_result) pairs, which forward does not unpack
            raise ValueError("transformer_ctxenc: return_fc (each layer's feed-forward output) is not supported")
        self._layers_built = 0
        super().__init__(cfg, dictionary, embed_tokens, return_fc=return_fc)
        self.ctx_layer = self._plain_layer(cfg)
        # --reuse-sentence-states: the shared-layer states of the sentences
        # encoded so far in this run (modules/ctxenc_state_cache.py)
        self.state_cache: Optional[SharedStateCache] = None
        self.ctx_layer_norm = LayerNorm(embed_tokens.embedding_dim) if cfg.encoder.normalize_before else None
        self.eos = dictionary.eos()

    def build_encoder_layer(self, cfg):
        # called once per layer, in order, from TransformerEncoderBase.__init__:
        # the source encoder's last layer is the gated one (context attention and gate)
        self._layers_built += 1
        if self._layers_built == cfg.encoder.layers:
            # runs once a forward, checkpointed as the others so that one rule holds for the encoder
            return wrap_layer(CtxEncGatedEncoderLayer(cfg), cfg, reentrant=False)
        return self._plain_layer(cfg)

    def _plain_layer(self, cfg):
        # fairseq's layer as TransformerEncoderBase.build_encoder_layer builds it,
        # checkpointed without reentrance: the shared layers (and the context
        # encoder's own, once per length chunk) run more than once a forward
        # (models/layer_wrapping.py)
        return wrap_layer(TransformerEncoderLayerBase(cfg, return_fc=self.return_fc), cfg, reentrant=False)

    def _embed(self, tokens: Tensor, has_pads: Optional[bool] = None):
        """Embedded tokens with padding zeroed, T x B x C, and the padding
        mask (None when there is no padding, like upstream). ``has_pads``:
        whether ``tokens`` hold padding, where the caller knows (else read
        from the device)."""
        mask = tokens.eq(self.padding_idx)
        x, embed = self.forward_embedding(tokens)
        if has_pads is None:
            has_pads = bool(mask.any())
        if has_pads:
            x = x * (1 - mask.unsqueeze(-1).type_as(x))
        return x.transpose(0, 1), embed, (mask if has_pads else None), mask

    def _shared(self, x: Tensor, mask: Optional[Tensor], states: Optional[List[Tensor]] = None):
        for layer in self.layers[:-1]:
            x = layer(x, encoder_padding_mask=mask)
            if states is not None:
                states.append(x)
        return x

    @staticmethod
    def _pad_right(tokens: Tensor, length: int, pad: int) -> Tensor:
        if tokens.size(1) == length:
            return tokens
        return torch.cat([tokens, tokens.new_full((tokens.size(0), length - tokens.size(1)), pad)], dim=1)

    def forward(
        self,
        src_tokens: Tensor,
        src_lengths: Optional[Tensor] = None,
        ctx_tokens: Optional[Tensor] = None,
        ctx_lengths: Optional[Tensor] = None,
        return_all_hiddens: bool = False,
        token_embeddings: Optional[Tensor] = None,
        return_context: bool = False,
    ):
        """Mirrors fairseq's ``TransformerEncoderBase.forward_scriptable``
        (embedding with padding zeroed, the layers, the final layer norm, the
        same output dict), with the context encoder added and the last layer
        gated; three paths through the shared layers (cached states, one
        joint source+context batch, separate passes).  With the gated
        layer's addition switched off it returns upstream's output
        (``tests/test_ctxenc.py``).  Unlike upstream, ``fc_results`` stays
        empty (upstream lists one ``None`` per layer with
        ``return_all_hiddens``; ``return_fc`` is never used here).

        Args:
            src_tokens: B x T source tokens; src_lengths: B
            ctx_tokens: B x T_ctx context tokens (None: empty context);
                ctx_lengths: B (unused, kept for the net_input interface)
            return_context: also return the context encoder's output and mask
                (not read by the decoder; left out by default so that beam
                search does not reorder them at every step).  These are the
                context encoder's *states*, part of the encoder's output like
                ``encoder_states``, and reordered with it; the gate g of the
                last layer is a value inside that layer, read out like every
                other architecture's gates and attention weights
                (:mod:`fairseq_ctx.modules.readout`), not returned here.

        Returns: upstream's encoder_out dict plus ``ctx_out`` (T_ctx' x B x C)
        and ``ctx_padding_mask`` (B x T_ctx'), empty unless ``return_context``;
        T_ctx' <= T_ctx: columns that are padding in every row are dropped.
        """
        if token_embeddings is not None:
            raise ValueError("transformer_ctxenc does not take precomputed token_embeddings")
        bsz, src_len = src_tokens.shape
        if ctx_tokens is None:
            ctx_tokens = src_tokens.new_full((bsz, 1), self.eos)
        src_mask = src_tokens.eq(self.padding_idx)
        ctx_pad = ctx_tokens.eq(self.padding_idx)
        # a row of padding only would make the context attention undefined:
        # it gets </s> in its last column
        empty = ctx_pad.all(dim=1)
        ctx_pad[:, -1] &= ~empty
        # columns that are padding in every row are dropped (collated batches
        # are padded to the longest context of the whole batch)
        real_cols = ~ctx_pad.all(dim=0)
        ctx_real = (~ctx_pad).sum(dim=1)
        # what the shapes and paths depend on, read from the device at once
        # (each read is a device sync on a GPU): five flags (the last two:
        # no padding after context / before it, i.e. padded on the left /
        # right only), each row's context length, which columns hold context
        facts = torch.cat([torch.stack([empty.any(), src_mask.any(), (ctx_real < real_cols.sum()).any(),
                                        ~(ctx_pad[:, 1:] & ~ctx_pad[:, :-1]).any(),
                                        ~(~ctx_pad[:, 1:] & ctx_pad[:, :-1]).any()]),
                           ctx_real, real_cols]).tolist()
        (any_empty, src_has_pads, ctx_has_pads, left_padded, right_padded), lengths, columns = \
            facts[:5], facts[5:5 + bsz], facts[5 + bsz:]
        if any_empty:
            ctx_tokens = ctx_tokens.clone()
            ctx_tokens[:, -1].masked_fill_(empty, self.eos)
        if not all(columns):
            kept = [i for i, real in enumerate(columns) if real]
            # padded on one side (as collated): the columns kept are one run, a
            # view; else their indices, in order, found on the device (a copy
            # of ``kept`` from pageable host memory would wait for the device)
            cut = slice(kept[0], kept[-1] + 1) if kept[-1] - kept[0] + 1 == len(kept) else \
                torch.argsort((~real_cols).to(torch.uint8), stable=True)[:len(kept)]
            ctx_tokens, ctx_pad = ctx_tokens[:, cut], ctx_pad[:, cut]
        src_mask_or_none = src_mask if src_has_pads else None
        ctx_mask_or_none = ctx_pad if ctx_has_pads else None
        ctx_len = ctx_tokens.size(1)
        longest = max(src_len, ctx_len)
        encoder_states: List[Tensor] = []
        cache = self.state_cache if not (self.training or torch.is_grad_enabled()) else None
        chunks = None if cache is not None and not return_all_hiddens else \
            self._context_chunks(ctx_pad, lengths, ctx_real)

        if cache is not None and not return_all_hiddens:
            # each sentence through the shared layers once per run, whether it
            # comes first as a source or as a context (the layers see it alone)
            encoder_embedding = self.embed_scale * self.embed_tokens(src_tokens)  # as forward_embedding's
            x_src = self._shared_states(cache, src_tokens, ~src_mask)
            x_ctx = self._context_top(self._shared_states(cache, ctx_tokens, ~ctx_pad), ctx_mask_or_none)
        elif chunks is None and 2 * longest <= JOINT_BATCH_MAX_WASTE * (src_len + ctx_len):
            # right-padding to a common length changes no real position:
            # positions count non-padding tokens and padding is masked
            tokens = torch.cat([self._pad_right(src_tokens, longest, self.padding_idx),
                                self._pad_right(ctx_tokens, longest, self.padding_idx)], dim=0)
            x, embed, mask, _ = self._embed(tokens, src_has_pads or ctx_has_pads or src_len != ctx_len)
            if return_all_hiddens:
                encoder_states.append(x[:src_len, :bsz])
            states: Optional[List[Tensor]] = [] if return_all_hiddens else None
            x = self._shared(x, mask, states)
            if states is not None:
                encoder_states.extend(s[:src_len, :bsz] for s in states)
            x_src = x[:src_len, :bsz]
            x_ctx = self._context_top(x[:ctx_len, bsz:], ctx_mask_or_none)
            encoder_embedding = embed[:bsz, :src_len]
        else:
            x_src, encoder_embedding, _, _ = self._embed(src_tokens, src_has_pads)
            if return_all_hiddens:
                encoder_states.append(x_src)
            x_src = self._shared(x_src, src_mask_or_none, encoder_states if return_all_hiddens else None)
            if chunks is None:
                x_ctx = self._encode_context(ctx_tokens, ctx_has_pads)
            else:
                # rows are independent, so each chunk of similar-length contexts
                # runs at its own width; states go back to their (row, column)
                x_ctx = x_src.new_zeros(ctx_len, bsz, x_src.size(-1))
                for rows, longest_row, shortest in chunks:
                    if left_padded or right_padded:
                        # padded on one side: the chunk's context is its longest row's columns
                        cols = slice(ctx_len - longest_row, ctx_len) if left_padded else slice(0, longest_row)
                        x_ctx[cols, rows] = self._encode_context(ctx_tokens[rows, cols], shortest < longest_row)
                    else:
                        cols = (~ctx_pad[rows].all(dim=0)).nonzero().squeeze(1)  # a read of the device
                        x_ctx[cols.unsqueeze(1), rows.unsqueeze(0)] = self._encode_context(
                            ctx_tokens[rows][:, cols], shortest < cols.numel())

        ctx_mask = ctx_pad
        x = self.layers[-1](x_src, src_mask_or_none, ctx=x_ctx, ctx_padding_mask=ctx_mask_or_none)
        if return_all_hiddens:
            encoder_states.append(x)
        if self.layer_norm is not None:
            x = self.layer_norm(x)

        return {
            "encoder_out": [x],  # T x B x C
            "encoder_padding_mask": [src_mask],  # B x T
            "encoder_embedding": [encoder_embedding],  # B x T x C
            "encoder_states": encoder_states,  # List[T x B x C]
            "fc_results": [],
            "src_tokens": [],
            "src_lengths": [src_tokens.ne(self.padding_idx).sum(dim=1, dtype=torch.int32).reshape(-1, 1)],
            "ctx_out": [x_ctx] if return_context else [],  # T_ctx x B x C
            "ctx_padding_mask": [ctx_mask] if return_context else [],  # B x T_ctx
        }

    def _context_top(self, x: Tensor, mask: Optional[Tensor]) -> Tensor:
        """The context encoder's own last layer (and final norm) on
        shared-layer states; ``mask``: the context's padding mask, None
        without padding."""
        x = self.ctx_layer(x, encoder_padding_mask=mask)
        if self.ctx_layer_norm is not None:
            x = self.ctx_layer_norm(x)
        return x

    def _shared_states(self, cache: SharedStateCache, tokens: Tensor, real: Tensor) -> Tensor:
        """The shared layers' output for ``tokens`` (B x T; ``real`` True at
        non-padding) as T x B x C, zeros at padding: each row from ``cache``
        where its sentence went through them before in this run, the others
        computed together (and kept)."""
        keys = cache.keys(tokens, real)
        states = [cache.get(key) for key in keys]
        missing = [i for i, s in enumerate(states) if s is None]
        if missing:
            rows = torch.tensor(missing, device=tokens.device)
            sub, sub_real = tokens[rows], real[rows]
            cols = sub_real.any(dim=0)
            sub, sub_real = sub[:, cols], sub_real[:, cols]
            x, _, mask, _ = self._embed(sub)
            fresh = self._shared(x, mask)  # T' x b x C
            for i, row in zip(missing, fresh.transpose(0, 1)[sub_real].split(sub_real.sum(dim=1).tolist())):
                states[i] = row
                cache.put(keys[i], row)
        return cache.assemble(states, real)

    def train(self, mode: bool = True):
        if getattr(self, "state_cache", None) is not None:
            self.state_cache.clear()  # the states were computed with other weights
        return super().train(mode)

    def _apply(self, fn, *args, **kwargs):
        if getattr(self, "state_cache", None) is not None:
            self.state_cache.clear()  # .to()/.half() change the parameters
        return super()._apply(fn, *args, **kwargs)

    def _load_from_state_dict(self, *args, **kwargs):
        if getattr(self, "state_cache", None) is not None:
            self.state_cache.clear()
        return super()._load_from_state_dict(*args, **kwargs)

    def _encode_context(self, tokens: Tensor, has_pads: Optional[bool] = None) -> Tensor:
        """Context encoder: B x T_ctx tokens -> T_ctx x B x C."""
        x, _, mask, _ = self._embed(tokens, has_pads)
        return self._context_top(self._shared(x, mask), mask)

    @staticmethod
    def _context_chunks(ctx_pad: Tensor, lengths: Optional[List[int]] = None, ctx_real: Optional[Tensor] = None
                        ) -> Optional[List[Tuple[Tensor, int, int]]]:
        """Row groups of similar context length, each with the longest and
        the shortest context length among its rows, or None for one pass.

        A batch is sorted by *source* length, so its contexts have all sorts
        of lengths and padding would be most of the context tensor (58% on
        the Bible corpus with --max-tokens 4096).  When real tokens fill less
        than CONTEXT_MIN_FILL of it, rows are sorted by context length and cut
        into the fewest equal-count groups (at most MAX_CONTEXT_CHUNKS) that
        reach that fill. ``lengths``: each row's context length, where the
        caller has read them, and ``ctx_real`` the same on the device (the
        rule is worked out on the host; the rows are sorted on the device,
        where they are used)."""
        bsz, width = ctx_pad.shape
        if ctx_real is None:
            ctx_real = (~ctx_pad).sum(dim=1)
        if lengths is None:
            lengths = ctx_real.tolist()
        real = sum(lengths)
        if bsz < 2 * MIN_CHUNK_ROWS or real >= CONTEXT_MIN_FILL * bsz * width:
            return None
        ordered = sorted(lengths, reverse=True)
        starts: List[int] = []
        for k in range(2, min(MAX_CONTEXT_CHUNKS, bsz // MIN_CHUNK_ROWS) + 1):
            q, r = divmod(bsz, k)  # torch.tensor_split's cut: the first r groups one row longer
            starts = [i * q + min(i, r) for i in range(k + 1)]
            padded = sum((b - a) * ordered[a] for a, b in zip(starts, starts[1:]))
            if real >= CONTEXT_MIN_FILL * padded:
                break
        # the device's order has the same lengths at each position as
        # ``ordered`` (ties may be ordered otherwise, which changes no length)
        order = ctx_real.sort(descending=True)[1]
        return [(order[a:b], ordered[a], ordered[b - 1]) for a, b in zip(starts, starts[1:])]

    @torch.jit.export
    def reorder_encoder_out(self, encoder_out: Dict[str, List[Tensor]], new_order):
        """Upstream reordering plus the context encoder's output and mask."""
        new = super().reorder_encoder_out(encoder_out, new_order)
        new["ctx_out"] = [t.index_select(1, new_order) for t in encoder_out.get("ctx_out", [])]
        new["ctx_padding_mask"] = [t.index_select(0, new_order) for t in encoder_out.get("ctx_padding_mask", [])]
        return new


class CtxEncDecoder(BoolFutureMask, TransformerDecoderBase):
    """fairseq's Transformer decoder (the paper's decoder is unchanged) with a
    boolean future mask (:mod:`fairseq_ctx.modules.future_mask`); same
    parameters, so checkpoints are unaffected."""


@dataclass
class TransformerCtxEncConfig(TransformerFlatConfig):
    """``transformer_ctxenc``'s flags: fairseq's Transformer's (the context
    encoder has no flags of its own; the context comes from the task)."""


@register_model("transformer_ctxenc", dataclass=TransformerCtxEncConfig)
class TransformerCtxEncModel(TransformerModel):
    """Voita et al. (2018) context-aware Transformer; see the module docstring."""

    # read by --task document_translation: batches carry ctx_tokens/ctx_lengths
    accepts_context = True

    @classmethod
    def add_args(cls, parser):
        add_args_from_dataclass(parser, TransformerCtxEncConfig)

    @classmethod
    def build_model(cls, args, task):
        args = architecture_args(args, "transformer_ctxenc")
        validate_ctxenc_args(args)
        return super().build_model(args, task)

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        return CtxEncEncoder(TransformerConfig.from_namespace(args), src_dict, embed_tokens)

    def prepare_for_inference_(self, cfg):
        """fairseq's hook before a decoding run (fairseq-generate,
        -interactive, the hub): with the document task's
        ``--reuse-sentence-states`` the encoder gets a cache of shared-layer
        states for the run (:mod:`fairseq_ctx.modules.ctxenc_state_cache`).
        Refused with ``--retain-dropout``: a cached state would carry the
        dropout masks of the forward that computed it into every later one."""
        reuse = getattr(getattr(cfg, "task", None), "reuse_sentence_states", False)
        if reuse and getattr(getattr(cfg, "generation", None), "retain_dropout", False):
            raise ConfigError("--reuse-sentence-states reuses each sentence's encoder states for the whole run, and "
                              "--retain-dropout needs new dropout masks in every forward: use one of the two")
        super().prepare_for_inference_(cfg)
        if reuse and self.encoder.state_cache is None:
            self.encoder.state_cache = SharedStateCache()

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        # what TransformerModel.build_decoder builds, with the mixin
        cfg = TransformerConfig.from_namespace(args)
        return CtxEncDecoder(cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention)

    def forward(
        self,
        src_tokens,
        src_lengths,
        prev_output_tokens,
        ctx_tokens: Optional[Tensor] = None,
        ctx_lengths: Optional[Tensor] = None,
        return_all_hiddens: bool = True,
        features_only: bool = False,
        alignment_layer: Optional[int] = None,
        alignment_heads: Optional[int] = None,
    ):
        """Mirrors ``TransformerModelBase.forward`` with the context passed to the encoder."""
        encoder_out = self.encoder(src_tokens, src_lengths=src_lengths, ctx_tokens=ctx_tokens,
                                   ctx_lengths=ctx_lengths, return_all_hiddens=return_all_hiddens)
        return self.decoder(
            prev_output_tokens,
            encoder_out=encoder_out,
            features_only=features_only,
            alignment_layer=alignment_layer,
            alignment_heads=alignment_heads,
            src_lengths=src_lengths,
            return_all_hiddens=return_all_hiddens,
        )


@register_base_architecture("transformer_ctxenc")
def transformer_ctxenc(args):
    """Transformer-Base dimensions (the paper's setting)."""
    base_architecture(args)


@register_model_architecture("transformer_ctxenc", "transformer_ctxenc_big")
def transformer_ctxenc_big(args):
    transformer_wmt_en_de_big(args)
    transformer_ctxenc(args)


@register_model_architecture("transformer_ctxenc", "transformer_ctxenc_iwslt_de_en")
def transformer_ctxenc_iwslt_de_en(args):
    """Small preset (fairseq's transformer_iwslt_de_en: d 512, ffn 1024, 4 heads)."""
    transformer_iwslt_de_en(args)
    transformer_ctxenc(args)


@register_model_architecture("transformer_ctxenc", "transformer_ctxenc_tiny")
def transformer_ctxenc_tiny(args):
    """Tiny preset for tests: 2+2 layers, dim 16, ffn 32, 2 heads."""
    tiny_dims(args)
    transformer_ctxenc(args)
