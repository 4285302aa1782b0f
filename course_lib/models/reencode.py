"""The step between one context for all steps and attention (lesson 03): read the whole source
again at every output step, with the decoder's state as an extra input.

At step t the encoder runs over x_1 … x_S with input [E[x_j]; s_{t−1}], so what it keeps of
the source can depend on what the decoder needs now; its final state is that step's context:

    h_j^(t) = GRU([E[x_j]; s_{t−1}], h_{j−1}^(t)),   c_t = h_S^(t)
    s_t = GRU([E[y_{t−1}]; c_t], s_{t−1}),          p(y_t) = softmax(W_out s_t)

Every step gets its own context, as with attention, but at the price of T whole passes over the
source: T·S + T recurrent steps per sentence (T passes of S steps, plus the decoder's T), one
after another, against S + T without attention.
Attention keeps one pass (S steps) and replaces the re-reading by S scores per output step, which
run in parallel.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from course_lib.arguments import check_lengths, check_model_tokens
from course_lib.tokens import PAD_ID


@dataclass
class ReencodeConfig:
    src_vocab_size: int
    tgt_vocab_size: int
    embed_dim: int = 128
    hidden_size: int = 256

    def __post_init__(self) -> None:
        if min(self.src_vocab_size, self.tgt_vocab_size, self.embed_dim, self.hidden_size) < 1:
            raise ValueError("vocabulary sizes, embed_dim and hidden_size must be positive")


class ReencodingSeq2Seq(nn.Module):
    """The re-encoding encoder–decoder. Shapes: ``src`` (B, S), ``src_lengths`` (B,) or None
    (no padding), ``tgt_in`` (B, T) -> logits (B, T, V)."""

    config_class = ReencodeConfig

    def __init__(self, config: ReencodeConfig) -> None:
        super().__init__()
        self.config = config
        embed, hidden = config.embed_dim, config.hidden_size
        self.src_embed = nn.Embedding(config.src_vocab_size, embed, padding_idx=PAD_ID)
        self.tgt_embed = nn.Embedding(config.tgt_vocab_size, embed, padding_idx=PAD_ID)
        self.encoder = nn.GRU(embed + hidden, hidden, batch_first=True)
        self.decoder = nn.GRUCell(embed + hidden, hidden)
        self.out = nn.Linear(hidden, config.tgt_vocab_size)

    def context(self, embedded_src: torch.Tensor, src_lengths: torch.Tensor | None,
                state: torch.Tensor) -> torch.Tensor:
        """c_t: one pass of the encoder over the source, conditioned on the decoder state
        ``state`` (B, H). ``embedded_src`` (B, S, d_e) -> (B, H). ``src_lengths`` None: no
        padding."""
        steps = embedded_src.shape[1]
        conditioned = torch.cat([embedded_src, state.unsqueeze(1).expand(-1, steps, -1)],
                                dim=-1)  # (B, S, d_e + H)
        if src_lengths is not None:  # packed, so padding is never read
            conditioned = pack_padded_sequence(conditioned, src_lengths.cpu(), batch_first=True,
                                               enforce_sorted=False)
        _, final = self.encoder(conditioned)  # (1, B, H)
        return final[0]

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor | None,
                tgt_in: torch.Tensor) -> torch.Tensor:
        check_model_tokens("src", src, self.src_embed, "the model's source vocabulary",
                           shape=("B", "S"))
        check_model_tokens("tgt_in", tgt_in, self.tgt_embed, "the model's target vocabulary")
        if tgt_in.shape[0] != src.shape[0]:
            raise ValueError(f"expected src (B, S) and tgt_in (B, T) with the same B, got "
                             f"{tuple(src.shape)} and {tuple(tgt_in.shape)}")
        if src_lengths is not None:
            src_lengths = check_lengths("src_lengths", src_lengths, src.shape[1],
                                        batch=src.shape[0], limit="the length S of src")
        embedded_src = self.src_embed(src)  # (B, S, d_e)
        embedded_tgt = self.tgt_embed(tgt_in)  # (B, T, d_e)
        state = embedded_src.new_zeros(src.shape[0], self.config.hidden_size)  # s_0 = 0
        logits = []
        for t in range(tgt_in.shape[1]):
            context = self.context(embedded_src, src_lengths, state)  # c_t: (B, H)
            state = self.decoder(torch.cat([embedded_tgt[:, t], context], dim=-1), state)
            logits.append(self.out(state))  # (B, V)
        return torch.stack(logits, dim=1)  # (B, T, V)
