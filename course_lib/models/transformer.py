"""The encoder-decoder Transformer (Vaswani et al., 2017), lessons 10-11.

Encoder block:  x <- x + SelfAttn(x);      x <- x + FFN(x)
Decoder block:  y <- y + CausalSelfAttn(y); y <- y + CrossAttn(y, memory); y <- y + FFN(y)

with ``FFN(x) = W_2 max(0, W_1 x + b_1) + b_2`` in column form (W_1 of shape (d_ff, D), W_2 of
shape (D, d_ff): the weights of ``linear1`` and ``linear2``; the paper writes the row form
``max(0, x W_1 + b_1) W_2 + b_2`` with the transposes), dropout on every sub-layer output, and
LayerNorm placed after each residual sum (``norm_first=False``, the paper's post-norm:
``x <- LN(x + f(x))``) or before each sub-layer (pre-norm: ``x <- x + f(LN(x))``, with a final
LayerNorm on each stack). Token embeddings are multiplied by √D before positions are added, and
the output projection shares the target embedding's weights (section 3.4).

Decoding: :meth:`Transformer.decoding_step` is the model's step, shared by greedy search
(:func:`course_lib.nn.decoding.greedy_search`) and beam search
(:func:`course_lib.nn.decoding.beam_search`); with a
:class:`~course_lib.nn.self_attention.KVCache` per attention layer each new word costs one query
against stored keys and values instead of recomputing the whole prefix.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from course_lib.arguments import (
    check_choice,
    check_lengths,
    check_model_tokens,
    check_positive_int,
)
from course_lib.nn.attention import padding_mask
from course_lib.nn.decoding import StepFn, beam_search, greedy_search, log_softmax_step
from course_lib.nn.positions import POSITIONS
from course_lib.nn.self_attention import IMPLEMENTATIONS, KVCache, MultiHeadAttention
from course_lib.tokens import PAD_ID


@dataclass
class TransformerConfig:
    """Vocabulary sizes and the architecture; the defaults are the paper's base model. Vocabulary
    sizes of 0 stand for "not known yet" (settings that nest this config before the data exist);
    a model needs the real sizes."""

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512
    num_heads: int = 8
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1
    norm_first: bool = False
    positions: str = "sinusoidal"
    max_len: int = 256
    tie_output: bool = True
    attention: str = "fused"

    def __post_init__(self) -> None:
        check_choice("positions", self.positions, POSITIONS)
        check_choice("attention", self.attention, IMPLEMENTATIONS)
        if min(self.d_model, self.num_heads, self.d_ff, self.max_len) < 1 \
                or min(self.src_vocab_size, self.tgt_vocab_size, self.num_encoder_layers,
                       self.num_decoder_layers) < 0:
            raise ValueError("sizes must be positive and layer counts non-negative")
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of num_heads "
                             f"({self.num_heads})")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")

    @classmethod
    def base(cls, src_vocab_size: int, tgt_vocab_size: int) -> TransformerConfig:
        """Table 3's base model: N = 6, D = 512, d_ff = 2048, h = 8, dropout 0.1, post-norm."""
        return cls(src_vocab_size, tgt_vocab_size)


class FeedForward(nn.Module):
    """``FFN(x) = W_2 max(0, W_1 x + b_1) + b_2`` at every position, x a column vector: W_1
    (d_ff, D) and W_2 (D, d_ff) are ``linear1.weight`` and ``linear2.weight``. Shapes: (B, T, D)
    -> same.

    Layer names follow ``torch.nn.TransformerEncoderLayer`` (``linear1``, ``linear2``)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.dropout(F.relu(self.linear1(x))))


class ResidualSublayer(nn.Module):
    """One sub-layer ``f`` (a function of a (B, T, D) tensor to another) with its residual
    connection, dropout and LayerNorm: post-norm ``LN(x + drop(f(x)))`` or pre-norm
    ``x + drop(f(LN(x)))``."""

    def __init__(self, d_model: int, dropout: float, norm_first: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor,
                sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


@dataclass
class AttentionMaps:
    """Per-layer, per-head weights of one teacher-forced pass; each list has one tensor per
    layer, appended by the blocks as they attend. Shapes: encoder (B, h, S, S), decoder self
    (B, h, T, T), cross (B, h, T, S)."""

    encoder: list[torch.Tensor] = field(default_factory=list)
    decoder: list[torch.Tensor] = field(default_factory=list)
    cross: list[torch.Tensor] = field(default_factory=list)


def attend(attention: MultiHeadAttention, x: torch.Tensor, record: list | None,
           **options) -> torch.Tensor:
    """``attention(x, **options)``'s output (B, T, D); with ``record`` (a list), its per-head
    weights (B, h, T, S), computed explicitly (``need_weights=True``), are appended to it."""
    output, weights = attention(x, need_weights=record is not None, **options)
    if record is not None:
        record.append(weights)
    return output


class EncoderBlock(nn.Module):
    """``x <- Sub(x, SelfAttn)``, ``x <- Sub(x, FFN)``, each ``Sub`` a
    :class:`ResidualSublayer`: self-attention over the source, then the feed-forward network.
    ``key_mask`` (B, S) marks the real tokens; with ``maps``, the self-attention weights
    (B, h, S, S) are appended to ``maps.encoder``. Shapes: (B, S, D) -> (B, S, D)."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        c = config
        self.self_attn = MultiHeadAttention(c.d_model, c.num_heads, c.dropout,
                                            implementation=c.attention)
        self.ffn = FeedForward(c.d_model, c.d_ff, c.dropout)
        self.attn_sublayer = ResidualSublayer(c.d_model, c.dropout, c.norm_first)
        self.ffn_sublayer = ResidualSublayer(c.d_model, c.dropout, c.norm_first)

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor | None = None,
                maps: AttentionMaps | None = None) -> torch.Tensor:
        record = None if maps is None else maps.encoder
        x = self.attn_sublayer(x, lambda h: attend(self.self_attn, h, record, key_mask=key_mask))
        return self.ffn_sublayer(x, self.ffn)


class DecoderBlock(nn.Module):
    """``y <- Sub(y, CausalSelfAttn)``, ``y <- Sub(y, CrossAttn(·, memory))``,
    ``y <- Sub(y, FFN)``: causal self-attention, cross-attention over the encoder output,
    feed-forward.

    Shapes: ``y`` (B, T, D), ``memory`` (B, S, D), ``memory_mask`` (B, S) -> (B, T, D). With
    ``maps``, the self- and cross-attention weights (B, h, T, T'), (B, h, T, S) are appended to
    ``maps.decoder`` and ``maps.cross``. ``caches`` (self, cross) hold earlier steps' keys and
    values when decoding step by step.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        c = config
        self.self_attn = MultiHeadAttention(c.d_model, c.num_heads, c.dropout,
                                            implementation=c.attention)
        self.cross_attn = MultiHeadAttention(c.d_model, c.num_heads, c.dropout,
                                             implementation=c.attention)
        self.ffn = FeedForward(c.d_model, c.d_ff, c.dropout)
        self.self_sublayer = ResidualSublayer(c.d_model, c.dropout, c.norm_first)
        self.cross_sublayer = ResidualSublayer(c.d_model, c.dropout, c.norm_first)
        self.ffn_sublayer = ResidualSublayer(c.d_model, c.dropout, c.norm_first)

    def forward(self, y: torch.Tensor, memory: torch.Tensor,
                memory_mask: torch.Tensor | None = None, maps: AttentionMaps | None = None,
                caches: tuple[KVCache, KVCache] | None = None) -> torch.Tensor:
        self_cache, cross_cache = caches if caches is not None else (None, None)
        self_record, cross_record = (None, None) if maps is None else (maps.decoder, maps.cross)
        y = self.self_sublayer(y, lambda h: attend(self.self_attn, h, self_record, causal=True,
                                                   cache=self_cache))
        y = self.cross_sublayer(y, lambda h: attend(self.cross_attn, h, cross_record, key=memory,
                                                    key_mask=memory_mask, cache=cross_cache))
        return self.ffn_sublayer(y, self.ffn)


class Memory(NamedTuple):
    """The encoder's output. Shapes: ``states`` (B, S, D), ``mask`` (B, S), True = real token."""

    states: torch.Tensor
    mask: torch.Tensor


@dataclass
class DecoderCache:
    """A (self, cross) :class:`KVCache` pair per decoder layer and the number of words
    decoded so far (the next word's position)."""

    layers: list[tuple[KVCache, KVCache]]
    length: int = 0

    def reorder(self, rows: torch.Tensor) -> DecoderCache:
        for self_cache, cross_cache in self.layers:
            self_cache.reorder(rows)
            cross_cache.reorder(rows)
        return self


class Transformer(nn.Module):
    """Encoder-decoder Transformer. ``forward`` is teacher forcing; ``greedy_decode`` and
    ``beam_search`` generate. Shapes: ``src`` (B, S), ``src_lengths`` (B,) or None (then PAD
    ids mark padding), ``tgt_in`` (B, T) -> logits (B, T, V)."""

    config_class = TransformerConfig

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        if min(config.src_vocab_size, config.tgt_vocab_size) < 1:
            raise ValueError("TransformerConfig's vocabulary sizes are 0 (not known yet): set "
                             "them to the vocabularies' sizes before building the model")
        c = self.config = config
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model, padding_idx=PAD_ID)
        self.tgt_embed = nn.Embedding(c.tgt_vocab_size, c.d_model, padding_idx=PAD_ID)
        for embedding in (self.src_embed, self.tgt_embed):
            nn.init.normal_(embedding.weight, std=c.d_model ** -0.5)
            embedding.weight.data[PAD_ID].zero_()
        self.src_positions = POSITIONS[c.positions](c.d_model, c.max_len)
        self.tgt_positions = POSITIONS[c.positions](c.d_model, c.max_len)
        self.dropout = nn.Dropout(c.dropout)
        self.encoder_layers = nn.ModuleList(EncoderBlock(c) for _ in range(c.num_encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderBlock(c) for _ in range(c.num_decoder_layers))
        self.encoder_norm = nn.LayerNorm(c.d_model) if c.norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(c.d_model) if c.norm_first else nn.Identity()
        self.out = nn.Linear(c.d_model, c.tgt_vocab_size)
        if c.tie_output:
            self.out.weight = self.tgt_embed.weight

    def _embed(self, tokens: torch.Tensor, embedding: nn.Embedding, positions: nn.Module,
               offset: int = 0) -> torch.Tensor:
        scaled = embedding(tokens) * math.sqrt(self.config.d_model)  # (B, T, D)
        return self.dropout(positions(scaled, offset))

    def embed_source(self, src: torch.Tensor) -> torch.Tensor:
        """The encoder's input, ``√D · E[src] + PE``. Shapes: (B, S) -> (B, S, D)."""
        return self._embed(src, self.src_embed, self.src_positions)

    def embed_target(self, tgt: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """The decoder's input for target positions ``offset`` onwards. (B, T) -> (B, T, D)."""
        return self._embed(tgt, self.tgt_embed, self.tgt_positions, offset)

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor | None = None,
               maps: AttentionMaps | None = None) -> Memory:
        """Run the encoder stack. Shapes: ``src`` (B, S) -> Memory((B, S, D), (B, S)); the
        ``src_lengths`` (B,) lie in [1, S]."""
        check_model_tokens("src", src, self.src_embed, "the model's source vocabulary",
                           shape=("B", "S"))
        if src_lengths is None:
            mask = src != PAD_ID  # (B, S)
        else:
            src_lengths = check_lengths("src_lengths", src_lengths, src.shape[1],
                                        batch=src.shape[0], limit="the length S of src")
            mask = padding_mask(src_lengths.to(src.device), src.shape[1])  # (B, S)
        x = self.embed_source(src)
        for layer in self.encoder_layers:
            x = layer(x, mask, maps)
        return Memory(self.encoder_norm(x), mask)

    def decode(self, tgt_in: torch.Tensor, memory: Memory, cache: DecoderCache | None = None,
               maps: AttentionMaps | None = None) -> torch.Tensor:
        """Logits for every target position. With ``cache``, ``tgt_in`` holds only the new
        words, placed after the ``cache.length`` words already decoded. Shapes: ``tgt_in``
        (B, T) -> (B, T, V)."""
        check_model_tokens("tgt_in", tgt_in, self.tgt_embed, "the model's target vocabulary")
        if tgt_in.shape[0] != memory.states.shape[0]:
            raise ValueError(f"expected tgt_in of shape (B, T) with B = "
                             f"{memory.states.shape[0]}, got {tuple(tgt_in.shape)}")
        return self._decode(tgt_in, memory, cache, maps)

    def _decode(self, tgt_in: torch.Tensor, memory: Memory, cache: DecoderCache | None = None,
                maps: AttentionMaps | None = None) -> torch.Tensor:
        """:meth:`decode` without the checks: for the ids the model generates itself."""
        offset = 0 if cache is None else cache.length
        y = self.embed_target(tgt_in, offset)
        for index, layer in enumerate(self.decoder_layers):
            caches = None if cache is None else cache.layers[index]
            y = layer(y, memory.states, memory.mask, maps, caches)
        if cache is not None:
            cache.length += tgt_in.shape[1]
        return self.out(self.decoder_norm(y))

    def new_cache(self) -> DecoderCache:
        return DecoderCache([(KVCache(), KVCache(static=True)) for _ in self.decoder_layers])

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor | None,
                tgt_in: torch.Tensor) -> torch.Tensor:
        return self.decode(tgt_in, self.encode(src, src_lengths))

    @torch.no_grad()
    def attention_maps(self, src: torch.Tensor, src_lengths: torch.Tensor | None,
                       tgt_in: torch.Tensor) -> AttentionMaps:
        """Every layer's per-head weights while reading ``tgt_in`` (teacher forcing)."""
        maps = AttentionMaps()
        self.decode(tgt_in, self.encode(src, src_lengths, maps), maps=maps)
        return maps

    @torch.no_grad()
    def greedy_decode(self, src: torch.Tensor, src_lengths: torch.Tensor | None = None,
                      max_len: int = 100, use_cache: bool = True) -> torch.Tensor:
        """y_t = argmax_w p(w | y_<t, x) from BOS until every row has produced EOS (or
        ``max_len``). ``use_cache=False`` recomputes the whole prefix at every step (same
        output, slower). Returns (B, T') ids; positions after a row's EOS hold PAD.
        :func:`~course_lib.nn.decoding.greedy_search` on :meth:`decoding_step`'s logits."""
        max_len = check_positive_int("max_len", max_len)
        step, state = self.decoding_step(self.encode(src, src_lengths), use_cache)
        return greedy_search(step, state, src.shape[0], max_len, src.device).tokens

    def decoding_step(self, memory: Memory, use_cache: bool = True) -> tuple[StepFn, Any]:
        """The decoder's step for :mod:`course_lib.nn.decoding` and its first state, on the
        N rows of ``memory``: previous words y_{t−1} (N,), state -> logits z_t (N, V) of
        p(y_t | y_<t, x) = softmax(z_t), new state, None. With ``use_cache`` the state is a
        :class:`DecoderCache` and the step feeds the newest word alone; without, it is the
        prefix (N, t) and the step feeds all t + 1 words again (same logits, more work)."""

        def step(previous: torch.Tensor, state):
            if use_cache:
                logits = self._decode(previous.unsqueeze(1), memory, state)  # (N, 1, V)
                return logits[:, -1], state, None
            prefix = torch.cat([state, previous.unsqueeze(1)], dim=1)  # (N, t + 1)
            return self._decode(prefix, memory)[:, -1], prefix, None  # (N, V)

        rows = memory.mask.shape[0]
        empty = torch.zeros(rows, 0, dtype=torch.long, device=memory.mask.device)  # (N, 0)
        return step, (self.new_cache() if use_cache else empty)

    @torch.no_grad()
    def beam_search(self, src: torch.Tensor, src_lengths: torch.Tensor | None = None,
                    beam_size: int = 4, max_len: int = 100, alpha: float = 0.0) -> torch.Tensor:
        """The best of ``beam_size`` hypotheses per sentence, decoded with the KV cache and
        ranked by ``log p(y | x) / lp(y)`` (:func:`course_lib.nn.decoding.length_normalised`).
        Returns (B, T') ids with PAD after EOS, as :meth:`greedy_decode`."""
        memory = self.encode(src, src_lengths)
        memory = Memory(memory.states.repeat_interleave(beam_size, dim=0),  # (B·n_beam, S, D)
                        memory.mask.repeat_interleave(beam_size, dim=0))  # (B·n_beam, S)
        step, cache = self.decoding_step(memory)
        result = beam_search(log_softmax_step(step), cache, DecoderCache.reorder, src.shape[0],
                             beam_size, max_len, src.device, alpha)
        return result.tokens


def label_smoothed_loss(logits: torch.Tensor, targets: torch.Tensor,
                        smoothing: float = 0.1) -> torch.Tensor:
    """Cross-entropy against the smoothed target p* = (1 - ε_ls) one_hot(y) + ε_ls / V, with
    ε_ls = ``smoothing`` (Szegedy et al., 2016; ε_ls = 0.1 in the Transformer paper), written out:

        loss_t = (1 - ε_ls)(-log p(y_t)) + ε_ls · mean_w(-log p(w)),

    averaged over the non-PAD targets. Equal to ``F.cross_entropy(..., label_smoothing=ε_ls,
    ignore_index=PAD_ID)``. Shapes: (B, T, V), (B, T) -> ()."""
    if logits.shape[:2] != targets.shape or logits.dim() != 3:
        raise ValueError(f"expected logits (B, T, V) and targets (B, T), got "
                         f"{tuple(logits.shape)} and {tuple(targets.shape)}")
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
    log_probs = torch.log_softmax(logits.float(), dim=-1)  # (B, T, V)
    real = targets != PAD_ID  # (B, T)
    if not bool(real.any()):
        raise ValueError("every target is PAD: the loss is undefined")
    nll = -log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T)
    uniform = -log_probs.mean(dim=-1)  # (B, T)
    per_token = (1.0 - smoothing) * nll + smoothing * uniform
    return per_token[real].mean()


def transformer_loss(smoothing: float = 0.1):
    """``loss_fn`` for :func:`course_lib.train.loop.fit` on TranslationBatch batches."""

    def loss_fn(model: Transformer, batch) -> torch.Tensor:
        return label_smoothed_loss(model(batch.src, batch.src_lengths, batch.tgt_in),
                                   batch.tgt_out, smoothing)

    return loss_fn
