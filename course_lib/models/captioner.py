"""Show, Attend and Tell (Xu et al., 2015): a CNN grid encoder and an LSTM decoder with soft
attention over image locations.

The encoder turns an image into a grid of feature vectors, one per location,
``h = {h_1, …, h_L}`` of shape (B, L = H'·W', C) (Xu et al.'s annotations a_i). At every output
step the decoder scores each location against its previous state s_{t−1} and reads a gated
weighted average of the features (the notation of docs/notation.md; Xu et al. write α_ti for the
weights, ẑ_t for the context and h_t, c_t for the LSTM's state and memory cell):

    e_tj = vᵀ tanh(W s_{t−1} + U k_j + b)              (additive score, course_lib.nn.attention)
    a_t  = softmax_j(e_tj),     c_t = β_t · Σ_j a_tj h_j,     β_t = σ(w_βᵀ s_{t−1} + b_β)
    (s_t, m_t) = LSTM([E[y_{t−1}]; c_t], (s_{t−1}, m_{t−1}))       (m_t: the memory cell)
    p(y_t) ∝ exp(W_out(E[y_{t−1}] + W_out^s s_t + W_out^c c_t))    ("deep output", eq. 7)

with the key k_j the first ``key_size`` channels of h_j (all of them by default),
``s_0 = tanh(f_s(mean_j h_j))`` and ``m_0 = tanh(f_m(mean_j h_j))``. The loss adds the
doubly stochastic regularisation ``λ Σ_j (1 − Σ_t a_tj)²`` (eq. 14; here averaged over the
locations), which asks every location to receive about one unit of attention over the caption.

``forward`` returns a :class:`CaptionOutput` with the weights of every step; ``greedy_decode`` and
``beam_search`` return them for every generated word.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from course_lib.arguments import (
    BOOL,
    FLOATING,
    check_choice,
    check_model_tokens,
    check_module_input,
    check_tensor,
)
from course_lib.nn.attention import AdditiveScore, attention_context, masked_softmax
from course_lib.nn.decoding import StepFn, beam_search, greedy_search
from course_lib.tokens import BOS_ID, PAD_ID


@dataclass
class CaptionerConfig:
    """The Show-Attend-Tell captioner's architecture.

    ``channels``: one 3×3 conv (+ BatchNorm + ReLU) per entry; the convs numbered in
    ``pool_after`` are followed by a 2×2 max-pool, so the grid is (H_img / 2^P, W_img / 2^P) with
    P = ``len(pool_after)``. With the default, conv-pool-conv-pool, each cell sees 10×10 pixels
    (its receptive field).
    ``coords`` appends each cell's x and y in [−1, 1] to its feature vector (the CoordConv idea,
    Liu et al., 2018), so that the attention score can tell locations apart by where they are,
    not only by what they show.
    ``pool_before_norm`` moves each max-pool between its conv and the BatchNorm, which then (with
    the ReLU) runs on a quarter of the values. Pooling commutes with the ReLU but not with a
    BatchNorm of negative scale, so this is a different (cheaper) network, not a reordering.
    ``read_convs`` more 3×3 convs (+ BatchNorm + ReLU) on the grid give every cell a wider view
    (10 + 8·``read_convs`` pixels), appended to its features for the context the decoder *reads*
    but not to the keys the attention *scores*: where to look is decided on the local features,
    what is seen there on the wide ones.
    ``vocab_size`` 0 stands for "not known yet" (settings that nest this config before the data
    exist); a model needs the real size."""

    vocab_size: int
    in_channels: int = 1
    channels: tuple[int, ...] = (32, 64)
    pool_after: tuple[int, ...] = (0, 1)
    coords: bool = True
    embed_dim: int = 64
    hidden_size: int = 256
    attention_size: int = 128
    gate: bool = True
    dropout: float = 0.0
    read_convs: int = 0
    pool_before_norm: bool = False

    def __post_init__(self) -> None:
        self.channels = tuple(int(c) for c in self.channels)
        if not self.channels or min(self.channels) < 1:
            raise ValueError(f"channels must be a non-empty tuple of positive ints, got "
                             f"{self.channels}")
        self.pool_after = tuple(int(i) for i in self.pool_after)
        if len(set(self.pool_after)) != len(self.pool_after) \
                or not all(0 <= i < len(self.channels) for i in self.pool_after):
            raise ValueError(f"pool_after must list distinct conv indices in [0, "
                             f"{len(self.channels)}), got {self.pool_after}")
        if int(self.read_convs) != self.read_convs or self.read_convs < 0:
            raise ValueError(f"read_convs must be a non-negative int, got {self.read_convs}")
        self.read_convs = int(self.read_convs)
        if self.vocab_size != 0 and self.vocab_size < 5:
            raise ValueError(f"vocab_size must count the 4 special tokens and at least one "
                             f"word, got {self.vocab_size}")


class CNNEncoder(nn.Module):
    """Images to a grid of feature vectors.

    Shapes: ``images`` (B, C_in, H_img, W_img) -> features h_j (B, L, C) with L = H'·W',
    (H', W') = (H_img, W_img) // 2^len(pool_after) (see :meth:`grid_shape`). The first ``key_size``
    channels of each cell are the local features (``channels[-1]``) and, with ``coords``, its x
    and y; with ``read_convs``, ``channels[-1]`` wide-view features follow, so
    C = ``feature_size`` = ``key_size`` (+ ``channels[-1]``).
    """

    def __init__(self, config: CaptionerConfig) -> None:
        super().__init__()
        self.config = config
        layers: list[nn.Module] = []
        width = config.in_channels
        for stage, out in enumerate(config.channels):
            pool = [nn.MaxPool2d(2)] if stage in config.pool_after else []
            norm = [nn.BatchNorm2d(out), nn.ReLU()]
            layers += [nn.Conv2d(width, out, 3, padding=1, bias=False),
                       *(pool + norm if config.pool_before_norm else norm + pool)]
            width = out
        # Convolution weights stored channels-last (NHWC): the same convolutions, in the memory
        # layout that oneDNN's CPU convolution kernels run fastest on.
        self.layers = nn.Sequential(*layers).to(memory_format=torch.channels_last)
        wide: list[nn.Module] = []
        for _ in range(config.read_convs):
            wide += [nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width),
                     nn.ReLU()]
        self.read = nn.Sequential(*wide).to(memory_format=torch.channels_last) if wide else None
        self.key_size = width + (2 if config.coords else 0)
        self.feature_size = self.key_size + (width if wide else 0)

    def grid_shape(self, height: int, width: int) -> tuple[int, int]:
        """(H', W') of the feature grid of an (H_img, W_img) image."""
        for _ in self.config.pool_after:
            height, width = height // 2, width // 2
        return height, width

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        check_tensor("images", images, dtype=FLOATING)
        check_module_input("images", images, self)
        if images.dim() != 4 or images.shape[1] != self.config.in_channels:
            raise ValueError(f"expected images (B, {self.config.in_channels}, H, W), got "
                             f"{tuple(images.shape)}")
        if min(self.grid_shape(*images.shape[2:])) < 1:
            raise ValueError(f"images of size {tuple(images.shape[2:])} are too small for "
                             f"{len(self.config.pool_after)} 2×2 poolings")
        local = self.layers(images)  # (B, C, H', W')
        parts = [local]
        if self.config.coords:
            batch, _, rows, cols = local.shape
            ys = torch.linspace(-1, 1, rows, device=local.device, dtype=local.dtype)
            xs = torch.linspace(-1, 1, cols, device=local.device, dtype=local.dtype)
            grid_y, grid_x = torch.meshgrid(ys, xs, indexing="ij")  # (H', W') each
            parts.append(torch.stack([grid_x, grid_y]).expand(batch, -1, -1, -1))  # (B, 2, H', W')
        if self.read is not None:
            parts.append(self.read(local))  # (B, C, H', W')
        grid = torch.cat(parts, dim=1) if len(parts) > 1 else local  # (B, feature_size, H', W')
        return grid.flatten(2).transpose(1, 2)  # (B, C, L) -> (B, L, C)


class CaptionOutput(NamedTuple):
    """Shapes: ``logits`` (B, T, V), ``weights`` a_tj (B, T, L), ``gates`` β_t (B, T)."""

    logits: torch.Tensor
    weights: torch.Tensor
    gates: torch.Tensor


class Generated(NamedTuple):
    """Shapes: ``tokens`` (B, T') ending in EOS then PAD, ``weights`` (B, T', L) (zero after
    EOS), ``scores`` (B,) the sum of log-probabilities of each caption."""

    tokens: torch.Tensor
    weights: torch.Tensor
    scores: torch.Tensor


def next_word_log_probs(logits: torch.Tensor) -> torch.Tensor:
    """log p(y_t) for decoding: PAD and BOS are never generated. Shapes: (..., V) -> (..., V)."""
    log_probs = F.log_softmax(logits.float(), dim=-1)
    log_probs[..., PAD_ID] = float("-inf")
    log_probs[..., BOS_ID] = float("-inf")
    return log_probs


ATTENTION_MODES = ("soft", "argmax", "sample")


class AttentionLSTMDecoder(nn.Module):
    """The decoder of Show, Attend and Tell: one :meth:`step` per word (equations above)."""

    def __init__(self, config: CaptionerConfig, feature_size: int,
                 key_size: int | None = None) -> None:
        """``feature_size``: C of the features h_j read into the context c_t; ``key_size``
        (default C): how many of their first channels, the keys k_j, the attention scores
        (U k_j)."""
        super().__init__()
        hidden, embed = config.hidden_size, config.embed_dim
        self.config = config
        self.key_size = feature_size if key_size is None else key_size
        if not 1 <= self.key_size <= feature_size:
            raise ValueError(f"key_size must lie in [1, feature_size = {feature_size}], got "
                             f"{self.key_size}")
        self.embedding = nn.Embedding(config.vocab_size, embed, padding_idx=PAD_ID)
        self.init_h = nn.Linear(feature_size, hidden)  # f_s
        self.init_c = nn.Linear(feature_size, hidden)  # f_m
        self.score = AdditiveScore(hidden, self.key_size, config.attention_size)
        self.gate = nn.Linear(hidden, 1) if config.gate else None  # w_β, b_β
        self.cell = nn.LSTMCell(embed + feature_size, hidden)
        self.out_h = nn.Linear(hidden, embed)  # W_out^s
        self.out_z = nn.Linear(feature_size, embed, bias=False)  # W_out^c
        self.out = nn.Linear(embed, config.vocab_size)  # W_out, b_out
        self.dropout = nn.Dropout(config.dropout)

    def initial_state(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean = features.mean(dim=1)  # (B, C)
        return torch.tanh(self.init_h(mean)), torch.tanh(self.init_c(mean))

    def step(self, previous: torch.Tensor, state, features: torch.Tensor,
             prepared: torch.Tensor, attention: str = "soft",
             generator: torch.Generator | None = None):
        """Shapes: ``previous`` y_{t−1} (B,), ``state`` (s_{t−1}, m_{t−1}) (B, H) each,
        features (B, L, C) -> logits (B, V), new state (s_t, m_t), a_t (B, L), β_t (B,).

        ``attention`` says what the context c_t reads: ``"soft"`` the a_t-weighted average (what
        the model is trained with); ``"argmax"`` or ``"sample"`` one location, the most probable
        or one drawn from a_t (hard attention at test time; a_t is returned either way).
        """
        check_choice("attention", attention, ATTENTION_MODES)
        h, _ = state  # s_{t−1}; the memory cell m_{t−1} only enters the LSTM
        weights = masked_softmax(self.score(h, prepared))  # (B, L)
        read = weights
        if attention != "soft":
            chosen = weights.argmax(-1) if attention == "argmax" \
                else torch.multinomial(weights.float(), 1, generator=generator).squeeze(-1)
            read = F.one_hot(chosen, weights.shape[-1]).to(weights.dtype)  # (B, L)
        context = attention_context(read, features)  # (B, C)
        gate = torch.sigmoid(self.gate(h)).squeeze(-1) if self.gate is not None \
            else h.new_ones(h.shape[0])  # (B,)
        context = gate.unsqueeze(-1) * context
        embedded = self.embedding(previous)  # E[y_{t−1}]: (B, d_e)
        state = self.cell(torch.cat([embedded, context], dim=-1), state)
        logits = self.out(self.dropout(embedded + self.out_h(state[0]) + self.out_z(context)))
        return logits, state, weights, gate


class ShowAttendTell(nn.Module):
    """CNN encoder + attention LSTM decoder. ``forward(images, tgt_in)`` runs teacher forcing."""

    config_class = CaptionerConfig

    def __init__(self, config: CaptionerConfig) -> None:
        if config.vocab_size == 0:
            raise ValueError("CaptionerConfig.vocab_size is 0 (not known yet): set it to the "
                             "vocabulary's size before building the model")
        super().__init__()
        self.config = config
        self.encoder = CNNEncoder(config)
        self.decoder = AttentionLSTMDecoder(config, self.encoder.feature_size,
                                            self.encoder.key_size)

    def encode(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Features h_j (B, L, C) and the score's key-side part U k_j + b, (B, L, d_a),
        computed on the keys k_j, the first ``key_size`` channels of h_j."""
        features = self.encoder(images)
        keys = features[..., :self.decoder.key_size]  # (B, L, key_size)
        return features, self.decoder.score.prepare(keys)

    def forward(self, images: torch.Tensor, tgt_in: torch.Tensor) -> CaptionOutput:
        """Shapes: ``images`` (B, C_in, H_img, W_img), ``tgt_in`` (B, T) = BOS + caption."""
        check_tensor("images", images, dtype=FLOATING, ndim=4)
        check_model_tokens("tgt_in", tgt_in, self.decoder.embedding)
        if tgt_in.shape[0] != images.shape[0]:
            raise ValueError(f"expected tgt_in of shape ({images.shape[0]}, T), got "
                             f"{tuple(tgt_in.shape)}")
        features, prepared = self.encode(images)
        state = self.decoder.initial_state(features)
        logits, weights, gates = [], [], []
        for t in range(tgt_in.shape[1]):
            step_logits, state, step_weights, gate = self.decoder.step(tgt_in[:, t], state,
                                                                       features, prepared)
            logits.append(step_logits)
            weights.append(step_weights)
            gates.append(gate)
        return CaptionOutput(torch.stack(logits, 1), torch.stack(weights, 1),
                             torch.stack(gates, 1))  # (B, T, V), (B, T, L), (B, T)

    @torch.no_grad()
    def greedy_decode(self, images: torch.Tensor, max_len: int = 30, attention: str = "soft",
                      generator: torch.Generator | None = None) -> Generated:
        """The most probable word at every step, until every caption has ended or ``max_len``.
        ``attention="argmax"`` or ``"sample"`` reads one location per step instead of the soft
        average (see :meth:`AttentionLSTMDecoder.step`).

        Shapes: ``images`` (B, C_in, H_img, W_img) -> tokens (B, T'), weights (B, T', L),
        scores (B,). :func:`~course_lib.nn.decoding.greedy_search` on :meth:`decoding_step`.
        """
        step, state = self.decoding_step(*self.encode(images), attention, generator)
        best = greedy_search(step, state, images.shape[0], max_len, images.device)
        return Generated(best.tokens, best.extras, best.scores)

    @torch.no_grad()
    def beam_search(self, images: torch.Tensor, beam_size: int = 3, max_len: int = 30
                    ) -> Generated:
        """Keep the ``beam_size`` most probable partial captions of every image; return the
        most probable finished one (sum of log-probabilities; beam size 1 is greedy decoding).

        Shapes: ``images`` (B, C_in, H_img, W_img) -> tokens (B, T'), weights (B, T', L),
        scores (B,).
        """
        features, prepared = self.encode(images)
        K = beam_size
        features = features.repeat_interleave(K, dim=0)  # (B·K, L, C)
        prepared = prepared.repeat_interleave(K, dim=0)  # (B·K, L, d_a)
        step, state = self.decoding_step(features, prepared)

        def reorder(state, rows):
            return state[0][rows], state[1][rows]

        best = beam_search(step, state, reorder, images.shape[0], beam_size, max_len,
                           features.device)
        return Generated(best.tokens, best.extras, best.scores)

    def decoding_step(self, features: torch.Tensor, prepared: torch.Tensor,
                      attention: str = "soft", generator: torch.Generator | None = None
                      ) -> tuple[StepFn, tuple[torch.Tensor, torch.Tensor]]:
        """The decoder's step for :mod:`course_lib.nn.decoding` and its first state (s_0, m_0),
        from :meth:`encode`'s N rows: previous words y_{t−1} (N,), state (s_{t−1}, m_{t−1})
        -> log p(y_t) (N, V) (:func:`next_word_log_probs`), (s_t, m_t), a_t (N, L).
        ``attention`` and ``generator``: what the context reads
        (:meth:`AttentionLSTMDecoder.step`)."""

        def step(previous: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]):
            logits, state, weights, _ = self.decoder.step(previous, state, features, prepared,
                                                          attention, generator)
            return next_word_log_probs(logits), state, weights  # (N, V), _, (N, L)

        return step, self.decoder.initial_state(features)


def doubly_stochastic_penalty(weights: torch.Tensor, step_mask: torch.Tensor) -> torch.Tensor:
    """``(1/L) Σ_j (1 − Σ_t a_tj)²`` per image, summing t over real steps only.

    Xu et al. (eq. 14) sum over the L locations; the mean keeps the term's size (and so the
    right λ) independent of the grid size. Since ``Σ_j Σ_t a_tj = T``, the smallest possible
    value, reached by spreading attention evenly, is ``(1 − T/L)²``: when the caption has far
    fewer words than the image has locations, the term cannot reach zero.

    Shapes: ``weights`` a_tj (B, T, L), ``step_mask`` (B, T) bool -> (B,).
    """
    check_tensor("weights", weights, dtype=FLOATING)
    check_tensor("step_mask", step_mask, dtype=BOOL)
    if weights.dim() != 3 or step_mask.shape != weights.shape[:2]:
        raise ValueError(f"expected weights (B, T, L) and step_mask (B, T), got "
                         f"{tuple(weights.shape)} and {tuple(step_mask.shape)}")
    received = (weights * step_mask.unsqueeze(-1)).sum(dim=1)  # (B, L)
    return ((1.0 - received) ** 2).mean(dim=-1)


def captioning_loss(regularization: float = 1.0):
    """``loss_fn(model, batch)`` for :func:`course_lib.train.loop.fit`: mean cross-entropy per word
    plus ``regularization`` (λ) times the mean doubly stochastic penalty per image."""
    if regularization < 0:
        raise ValueError(f"the regularisation weight must be >= 0, got {regularization}")

    def loss_fn(model: ShowAttendTell, batch) -> torch.Tensor:
        output = model(batch.images, batch.tgt_in)
        cross_entropy = F.cross_entropy(output.logits.flatten(0, 1),  # (B·T, V)
                                        batch.tgt_out.flatten(), ignore_index=PAD_ID)
        if regularization == 0:
            return cross_entropy
        penalty = doubly_stochastic_penalty(output.weights, batch.tgt_out != PAD_ID)
        return cross_entropy + regularization * penalty.mean()

    return loss_fn
