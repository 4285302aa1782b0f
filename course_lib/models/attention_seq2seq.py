"""Encoder–decoders with attention: Bahdanau et al. (2015) and Luong et al. (2015).

Both read the source with a bidirectional RNN whose two directions have ``hidden_size / 2`` units
each, so every annotation ``h_j = [h→_j; h←_j]`` has ``hidden_size`` (H) numbers, the size of the
decoder state s_t (which the dot score needs). At every output step the decoder computes a fresh
context ``c_t = Σ_j a_tj h_j``; the two families differ in when and how (symbols as in
``docs/notation.md``; E[y] is the embedding of word y, d_e = ``embed_dim`` its size):

Bahdanau (additive; the query is the *previous* state):
    a_t = softmax_j(vᵀ tanh(W s_{t−1} + U h_j + b)),   c_t = Σ_j a_tj h_j
    s_t = RNN([E[y_{t−1}]; c_t], s_{t−1}),   p(y_t) = softmax(W_out [s_t; c_t; E[y_{t−1}]] + b_out)

Luong (the query is the *current* state; input feeding passes s̃_{t−1} on):
    s_t = RNN([E[y_{t−1}]; s̃_{t−1}], s_{t−1}),     a_t = align(s_t, h_j) (dot, general, concat)
    c_t = Σ_j a_tj h_j,   s̃_t = tanh(W_c [c_t; s_t]),   p(y_t) = softmax(W_out s̃_t + b_out)
    local-m: window [p_t − r, p_t + r] with p_t = t (at most S_b − 1);  local-p:
    p_t = (S_b − 1)·sigmoid(v_pᵀ tanh(W_p s_t + b_p)), window [p_t − r, p_t + r] with a Gaussian
    weighting of standard deviation r / 2 (r = ``window``; steps and positions count from 0; see
    :func:`course_lib.nn.attention.local_attention`).
    ``scaled=True`` divides dot and general scores by √d_k, d_k = H (not in Luong et al.; see
    lesson 05 for why the course's Luong models use it).

``forward`` returns ``(logits, weights)``: the attention weights of every step, (B, T, S).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from course_lib.arguments import (
    check_choice,
    check_lengths,
    check_model_tokens,
)
from course_lib.models.seq2seq import CELLS, Encoder, Seq2SeqConfig
from course_lib.nn.attention import (
    SCALABLE_SCORES,
    attention_context,
    local_attention,
    make_score,
    masked_softmax,
)
from course_lib.nn.decoding import StepFn, greedy_search
from course_lib.tokens import PAD_ID

ATTENTIONS = ("bahdanau", "luong")
LUONG_SCORES = ("dot", "general", "concat")
LOCAL_MODES = (None, "m", "p")


@dataclass
class AttentionSeq2SeqConfig:
    src_vocab_size: int
    tgt_vocab_size: int
    embed_dim: int = 128
    hidden_size: int = 256
    cell: str = "gru"
    attention: str = "bahdanau"
    score: str = "additive"
    local: str | None = None
    window: int = 10
    input_feeding: bool = True
    scaled: bool = False
    dropout: float = 0.0

    def __post_init__(self) -> None:
        check_choice("attention", self.attention, ATTENTIONS)
        check_choice("cell", self.cell, CELLS)
        if self.attention == "bahdanau" and (self.score != "additive" or self.local):
            raise ValueError("Bahdanau attention uses the additive score and no local window; "
                             f"got score={self.score!r}, local={self.local!r}")
        if self.attention == "luong" and self.score not in LUONG_SCORES:
            raise ValueError(f"Luong attention scores are {LUONG_SCORES}, got {self.score!r}")
        if self.scaled and self.score not in SCALABLE_SCORES:
            raise ValueError(f"scaled=True divides dot or general scores by sqrt(d_k); got "
                             f"score={self.score!r}")
        if self.local not in LOCAL_MODES:
            raise ValueError(f"local must be None, 'm' or 'p', got {self.local!r}")
        if self.hidden_size < 2 or self.hidden_size % 2:
            raise ValueError(f"hidden_size must be even (half per encoder direction), got "
                             f"{self.hidden_size}")
        if self.window < 0:
            raise ValueError(f"window r must be >= 0, got {self.window}")


def _make_cell(kind: str, input_size: int, hidden_size: int) -> nn.RNNCellBase:
    return (nn.GRUCell if kind == "gru" else nn.LSTMCell)(input_size, hidden_size)


def _hidden(state):
    """The decoder state s of a GRU state ``s`` or an LSTM state ``(s, m)`` (PyTorch's (h, c))."""
    return state[0] if isinstance(state, tuple) else state


@dataclass
class EncodedSource:
    """What every decoder step reads. Shapes: ``annotations`` (B, S, H), ``prepared`` the score's
    key-side part (B, S, ·), ``mask`` (B, S) bool, ``lengths`` (B,)."""

    annotations: torch.Tensor
    prepared: torch.Tensor
    mask: torch.Tensor
    lengths: torch.Tensor


class BahdanauDecoder(nn.Module):
    """One step: attend with s_{t−1}, then update the state with [E[y_{t−1}]; c_t]."""

    def __init__(self, config: AttentionSeq2SeqConfig) -> None:
        super().__init__()
        hidden, embed = config.hidden_size, config.embed_dim
        self.score = make_score("additive", hidden, hidden)
        self.cell = _make_cell(config.cell, embed + hidden, hidden)
        self.feature_size = 2 * hidden + embed

    def initial_state(self, start: torch.Tensor):
        return (start, torch.zeros_like(start)) if isinstance(self.cell, nn.LSTMCell) else start

    def step(self, embedded: torch.Tensor, state, source: EncodedSource, t: int):
        """Shapes: ``embedded`` E[y_{t−1}] (B, d_e) -> features [s_t; c_t; E[y_{t−1}]]
        (B, 2H + d_e), new state, weights (B, S)."""
        weights = masked_softmax(self.score(_hidden(state), source.prepared), source.mask)
        context = attention_context(weights, source.annotations)  # (B, H)
        state = self.cell(torch.cat([embedded, context], dim=-1), state)
        features = torch.cat([_hidden(state), context, embedded], dim=-1)  # (B, 2H + d_e)
        return features, state, weights


class LuongDecoder(nn.Module):
    """One step: update the state, attend with s_t, then s̃_t = tanh(W_c [c_t; s_t])."""

    def __init__(self, config: AttentionSeq2SeqConfig) -> None:
        super().__init__()
        hidden, embed = config.hidden_size, config.embed_dim
        self.config = config
        self.score = make_score(config.score, hidden, hidden, scaled=config.scaled)
        self.cell = _make_cell(config.cell, embed + (hidden if config.input_feeding else 0),
                               hidden)
        self.combine = nn.Linear(2 * hidden, hidden, bias=False)  # W_c
        if config.local == "p":
            self.position = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh(),
                                          nn.Linear(hidden, 1, bias=False))  # W_p, b_p; v_p
        self.feature_size = hidden

    def initial_state(self, start: torch.Tensor):
        rnn_state = (start, torch.zeros_like(start)) if isinstance(self.cell, nn.LSTMCell) \
            else start
        return rnn_state, torch.zeros_like(start)  # (RNN state, s̃_0 = 0)

    def attend(self, query: torch.Tensor, source: EncodedSource, t: int) -> torch.Tensor:
        """Global, local-m or local-p weights for the query s_t. Shapes: (B, H) -> (B, S)."""
        scores = self.score(query, source.prepared)  # (B, S)
        if self.config.local is None:
            return masked_softmax(scores, source.mask)
        last = (source.lengths - 1).to(scores.dtype)  # (B,)
        if self.config.local == "m":
            center = torch.full_like(last, float(t)).minimum(last)  # p_t = t, (B,)
            return local_attention(scores, center, self.config.window, source.mask)
        center = last * torch.sigmoid(self.position(query).squeeze(-1))  # p_t, (B,)
        return local_attention(scores, center, self.config.window, source.mask, gaussian=True)

    def step(self, embedded: torch.Tensor, state, source: EncodedSource, t: int):
        """Shapes: ``embedded`` E[y_{t−1}] (B, d_e) -> features s̃_t (B, H), new state, weights
        (B, S)."""
        rnn_state, previous_attentional = state
        inputs = (torch.cat([embedded, previous_attentional], dim=-1)
                  if self.config.input_feeding else embedded)
        rnn_state = self.cell(inputs, rnn_state)
        query = _hidden(rnn_state)  # s_t, (B, H)
        weights = self.attend(query, source, t)
        context = attention_context(weights, source.annotations)  # (B, H)
        attentional = torch.tanh(self.combine(torch.cat([context, query], dim=-1)))  # s̃_t
        return attentional, (rnn_state, attentional), weights


class AttentionSeq2Seq(nn.Module):
    """Bidirectional encoder + Bahdanau or Luong decoder.

    Shapes: ``src`` (B, S), ``src_lengths`` (B,), ``tgt_in`` (B, T) -> logits (B, T, V) and
    attention weights (B, T, S).
    """

    config_class = AttentionSeq2SeqConfig

    def __init__(self, config: AttentionSeq2SeqConfig) -> None:
        super().__init__()
        self.config = config
        half = config.hidden_size // 2
        self.encoder = Encoder(Seq2SeqConfig(config.src_vocab_size, config.tgt_vocab_size,
                                             config.embed_dim, half, config.cell,
                                             bidirectional=True, dropout=config.dropout))
        self.init = nn.Linear(half, config.hidden_size)  # s_0 = tanh(W_init c)
        self.embed = nn.Embedding(config.tgt_vocab_size, config.embed_dim, padding_idx=PAD_ID)
        decoder_class = BahdanauDecoder if config.attention == "bahdanau" else LuongDecoder
        self.decoder = decoder_class(config)
        self.dropout = nn.Dropout(config.dropout)
        self.out = nn.Linear(self.decoder.feature_size, config.tgt_vocab_size)

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor | None = None):
        """Annotations and the decoder's first state. Shapes: (B, S) -> EncodedSource, state."""
        if src_lengths is not None and not isinstance(src_lengths, torch.Tensor):
            src_lengths = check_lengths("src_lengths", src_lengths, None)
        annotations, context = self.encoder(src, src_lengths)  # (B, S, H), (B, H / 2)
        mask = src != PAD_ID  # (B, S)
        lengths = mask.sum(dim=1) if src_lengths is None else src_lengths.to(src.device)  # (B,)
        source = EncodedSource(annotations, self.decoder.score.prepare(annotations), mask,
                               lengths)
        return source, self.decoder.initial_state(torch.tanh(self.init(context)))

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor | None, tgt_in: torch.Tensor):
        """Teacher forcing: step t reads y_{t−1} = ``tgt_in[:, t]``."""
        check_model_tokens("tgt_in", tgt_in, self.embed, "the model's target vocabulary")
        if tgt_in.shape[0] != src.shape[0]:
            raise ValueError(f"expected tgt_in of shape ({src.shape[0]}, T), got "
                             f"{tuple(tgt_in.shape)}")
        source, state = self.encode(src, src_lengths)
        embedded = self.dropout(self.embed(tgt_in))  # (B, T, d_e)
        features, weights = [], []
        for t in range(tgt_in.shape[1]):
            feature, state, weight = self.decoder.step(embedded[:, t], state, source, t)
            features.append(feature)
            weights.append(weight)
        features = torch.stack(features, dim=1)  # (B, T, F)
        return self.out(self.dropout(features)), torch.stack(weights, dim=1)  # (B, T, V), (B,T,S)

    @torch.no_grad()
    def greedy_decode(self, src: torch.Tensor, src_lengths: torch.Tensor | None = None,
                      max_len: int = 80, return_attention: bool = False):
        """y_t = argmax p(y | y_<t, x) until every row has produced EOS (or ``max_len``).

        Returns ids (B, T') with PAD after each row's EOS, and with ``return_attention`` also the
        weights (B, T', S) (zero rows after EOS): :func:`~course_lib.nn.decoding.greedy_search`
        on :meth:`decoding_step`.
        """
        step, state = self.decoding_step(*self.encode(src, src_lengths))
        result = greedy_search(step, state, src.shape[0], max_len, src.device)
        return (result.tokens, result.extras) if return_attention else result.tokens

    def decoding_step(self, source: EncodedSource, state) -> tuple[StepFn, tuple]:
        """The decoder's step for :mod:`course_lib.nn.decoding` and its first state, from
        :meth:`encode`'s output: previous words y_{t−1} (N,), state (decoder state, t) ->
        logits z_t (N, V) of p(y_t | y_<t, x) = softmax(z_t), (new state, t + 1), weights a_t
        (N, S)."""

        def step(previous: torch.Tensor, state: tuple):
            decoder_state, t = state
            feature, decoder_state, weight = self.decoder.step(self.embed(previous),
                                                               decoder_state, source, t)
            return self.out(feature), (decoder_state, t + 1), weight  # (N, V), _, (N, S)

        return step, (state, 0)
