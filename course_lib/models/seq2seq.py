"""RNN encoder–decoder without attention (Cho et al., 2014; Sutskever et al., 2014).

The encoder reads the source and keeps one vector, the context c = h_S (its final state). The
decoder generates the target from c alone, handed over in one of five ways (``context=``):

- ``"copy"``: c itself is the decoder's first state, s_0 = c (Sutskever et al., 2014, start the
  decoder from the encoder's final state);
- ``"init"``: c sets the first state through a layer, s_0 = tanh(W_init c + b_init);
- ``"every_step"``: c is an extra input at every step (s_0 = 0);
- ``"first_step"``: c is an extra input at the first step only, zeros in its place after;
- ``"both"``: s_0 = tanh(W_init c + b_init) and c at every step, the hand-over of Cho et al.
  (2014), who start the decoder from tanh(V' c) and feed c to every step (and to the output
  layer, which here reads s_t alone). The course's translators use this one.

Everything the decoder knows about the source must fit in c: the bottleneck lesson 03 measures.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from course_lib.arguments import (
    FLOATING,
    check_choice,
    check_lengths,
    check_model_tokens,
    check_module_input,
    check_tensor,
)
from course_lib.nn.decoding import StepFn, greedy_search
from course_lib.tokens import PAD_ID

CONTEXT_MODES = ("copy", "init", "every_step", "first_step", "both")
CELLS = ("gru", "lstm")


@dataclass
class Seq2SeqConfig:
    src_vocab_size: int
    tgt_vocab_size: int
    embed_dim: int = 128
    hidden_size: int = 256
    cell: str = "gru"
    bidirectional: bool = False
    context: str = "both"
    dropout: float = 0.0

    def __post_init__(self) -> None:
        check_choice("cell", self.cell, CELLS)
        check_choice("context", self.context, CONTEXT_MODES)
        if self.context == "copy" and self.bidirectional:
            raise ValueError(
                "context='copy' starts the decoder from the encoder's final state itself "
                "(s_0 = c), so that state must have the decoder's hidden size H; a "
                "bidirectional encoder ends in two states [h_fwd; h_bwd] of 2H numbers. Use "
                "context='init' (s_0 = tanh(W_init c + b_init)) or bidirectional=False")
        if min(self.src_vocab_size, self.tgt_vocab_size, self.embed_dim, self.hidden_size) < 1:
            raise ValueError("vocabulary sizes, embed_dim and hidden_size must be positive")


def _rnn(cell: str, input_size: int, hidden_size: int, bidirectional: bool = False) -> nn.RNNBase:
    kind = nn.GRU if cell == "gru" else nn.LSTM
    return kind(input_size, hidden_size, batch_first=True, bidirectional=bidirectional)


class Encoder(nn.Module):
    """Embeds the source and runs a GRU/LSTM over it (packed, so padding is never read).

    Returns the outputs h_1..h_S, (B, S, 2H) for a bidirectional encoder and (B, S, H) otherwise,
    and the context c (B, H): the final state, or for a bidirectional encoder
    tanh(W [h_fwd; h_bwd] + b) of the two final states.
    """

    def __init__(self, config: Seq2SeqConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.src_vocab_size, config.embed_dim, padding_idx=PAD_ID)
        self.rnn = _rnn(config.cell, config.embed_dim, config.hidden_size, config.bidirectional)
        self.dropout = nn.Dropout(config.dropout)
        self.bridge = (nn.Linear(2 * config.hidden_size, config.hidden_size)
                       if config.bidirectional else None)

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor | None = None):
        check_model_tokens("src", src, self.embed, "the model's source vocabulary",
                           shape=("B", "S"))
        if src_lengths is not None:
            src_lengths = check_lengths("src_lengths", src_lengths, src.shape[1],
                                        batch=src.shape[0], limit="the length S of src")
        embedded = self.dropout(self.embed(src))  # (B, S, d_e)
        if src_lengths is None:
            outputs, state = self.rnn(embedded)
        else:
            packed = pack_padded_sequence(embedded, src_lengths.cpu(), batch_first=True,
                                          enforce_sorted=False)
            outputs, state = self.rnn(packed)
            outputs, _ = pad_packed_sequence(outputs, batch_first=True,
                                             total_length=src.shape[1])  # (B, S, 2H) or (B, S, H)
        hidden = state[0] if isinstance(state, tuple) else state  # (directions, B, H), one layer
        if self.bridge is not None:
            both = torch.cat([hidden[0], hidden[1]], dim=-1)  # (B, 2H)
            return outputs, torch.tanh(self.bridge(both))
        return outputs, hidden[0]  # (B, H)


class Decoder(nn.Module):
    """Generates the target from the context c alone.

    Step t: s_t = RNN([E[y_{t-1}]; c_t], s_{t-1}) with c_t = c for "every_step"/"both" and for
    "first_step" at t = 1 (zeros after); s_0 = c for "copy", tanh(W_init c + b_init) for
    "init"/"both", zeros for the others; logits_t = W_out s_t + b_out. With an LSTM the memory
    cell m_0 starts at zeros in every mode.
    """

    def __init__(self, config: Seq2SeqConfig) -> None:
        super().__init__()
        self.config = config
        self.context_in_input = config.context in ("every_step", "first_step", "both")
        self.context_as_init = config.context in ("init", "both")  # through W_init
        input_size = config.embed_dim + (config.hidden_size if self.context_in_input else 0)
        self.embed = nn.Embedding(config.tgt_vocab_size, config.embed_dim, padding_idx=PAD_ID)
        self.rnn = _rnn(config.cell, input_size, config.hidden_size)
        # W_init exists only where the context sets s_0, so parameter counts hold no unused weight
        self.init = nn.Linear(config.hidden_size, config.hidden_size) \
            if self.context_as_init else None
        self.dropout = nn.Dropout(config.dropout)
        self.out = nn.Linear(config.hidden_size, config.tgt_vocab_size)

    def check_context_width(self, context: torch.Tensor) -> None:
        """c has the decoder's hidden size H (for "copy", s_0 = c needs it; the others read c
        through weights made for H numbers)."""
        hidden = self.config.hidden_size
        if context.shape[-1] != hidden:
            start = ("context='copy' starts the decoder from c itself (s_0 = c), so c"
                     if self.config.context == "copy" else "c")
            raise ValueError(f"{start} must have the decoder's hidden size H = {hidden}, got a "
                             f"context of {context.shape[-1]} numbers")

    def initial_state(self, context: torch.Tensor):
        """s_0 from the context c (B, H), as the hand-over says. Shape: (1, B, H), or a pair of
        them (state, memory cell) for an LSTM."""
        self.check_context_width(context)
        if self.config.context == "copy":
            h0 = context  # s_0 = c, no layer between
        elif self.context_as_init:
            h0 = torch.tanh(self.init(context))
        else:
            h0 = torch.zeros_like(context)
        h0 = h0.unsqueeze(0)  # (1, B, H)
        return (h0, torch.zeros_like(h0)) if self.config.cell == "lstm" else h0

    def forward(self, tokens: torch.Tensor, context: torch.Tensor, state=None, start: int = 0):
        """Teacher-forced steps; ``start`` is the index of the step ``tokens[:, 0]`` feeds (0 for
        a whole sequence, t when generating one step at a time). Shapes: ``tokens`` (B, T),
        ``context`` (B, H) -> logits (B, T, V) and the last state."""
        check_model_tokens("tokens", tokens, self.embed, "the model's target vocabulary")
        check_tensor("context", context, dtype=FLOATING, shape=(tokens.shape[0], "H"))
        self.check_context_width(context)
        check_module_input("context", context, self)
        return self._run(tokens, context, state, start)

    def _run(self, tokens: torch.Tensor, context: torch.Tensor, state=None, start: int = 0):
        """:meth:`forward` without the checks: for the ids the model generates itself."""
        if state is None:
            state = self.initial_state(context)
        inputs = self.dropout(self.embed(tokens))  # (B, T, d_e)
        if self.context_in_input:
            repeated = context.unsqueeze(1).expand(-1, tokens.shape[1], -1)  # (B, T, H)
            if self.config.context == "first_step":
                steps = torch.arange(start, start + tokens.shape[1], device=tokens.device)
                repeated = repeated * (steps == 0).to(repeated.dtype).view(1, -1, 1)  # (B, T, H)
            inputs = torch.cat([inputs, repeated], dim=-1)  # (B, T, d_e + H)
        outputs, state = self.rnn(inputs, state)  # (B, T, H)
        return self.out(self.dropout(outputs)), state


class Seq2Seq(nn.Module):
    """Encoder + decoder without attention. ``forward`` is teacher forcing; ``greedy_decode``
    generates. Shapes: ``src`` (B, S), ``src_lengths`` (B,), ``tgt_in`` (B, T) -> (B, T, V)."""

    config_class = Seq2SeqConfig

    def __init__(self, config: Seq2SeqConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor | None = None) -> torch.Tensor:
        """The context vector c of every source sentence. Shape: (B, H)."""
        return self.encoder(src, src_lengths)[1]

    def forward(self, src, src_lengths, tgt_in):
        check_model_tokens("tgt_in", tgt_in, self.decoder.embed, "the model's target vocabulary")
        logits, _ = self.decoder._run(tgt_in, self.encode(src, src_lengths))
        return logits

    @torch.no_grad()
    def greedy_decode(self, src: torch.Tensor, src_lengths: torch.Tensor | None = None,
                      max_len: int = 80) -> torch.Tensor:
        """ŷ_t = argmax_w p(y_t = w | ŷ_<t, c), from BOS until every row has produced EOS (or
        ``max_len``), by :func:`~course_lib.nn.decoding.greedy_search` on
        :meth:`decoding_step`. Returns (B, T') ids; positions after a row's EOS hold PAD."""
        step, state = self.decoding_step(self.encode(src, src_lengths))
        return greedy_search(step, state, src.shape[0], max_len, src.device).tokens

    def decoding_step(self, context: torch.Tensor) -> tuple[StepFn, tuple]:
        """The decoder's step for :mod:`course_lib.nn.decoding` and its first state: previous
        words ŷ_{t−1} (N,), state (s_{t−1}, t) -> logits z_t (N, V) of p(y_t | ŷ_<t, c) =
        softmax(z_t), state (s_t, t + 1), None. ``context`` c: (N, H)."""

        def step(previous: torch.Tensor, state: tuple):
            hidden, t = state
            logits, hidden = self.decoder._run(previous.unsqueeze(1), context, hidden,
                                               start=t)  # (N, 1) -> (N, 1, V)
            return logits[:, -1], (hidden, t + 1), None  # (N, V)

        return step, (self.decoder.initial_state(context), 0)


def sequence_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over real (non-PAD) target tokens. Shapes: (B, T, V), (B, T) -> ()."""
    if logits.shape[:2] != targets.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and targets {tuple(targets.shape)} "
                         f"disagree on (B, T)")
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),  # (B·T, V)
                                       targets.reshape(-1), ignore_index=PAD_ID)  # (B·T,)


def translation_loss(model: nn.Module, batch) -> torch.Tensor:
    """``loss_fn`` for :func:`course_lib.train.loop.fit` on TranslationBatch batches.

    Works for models that return logits and for attention models that return (logits, weights).
    """
    output = model(batch.src, batch.src_lengths, batch.tgt_in)
    logits = output[0] if isinstance(output, tuple) else output
    return sequence_loss(logits, batch.tgt_out)
