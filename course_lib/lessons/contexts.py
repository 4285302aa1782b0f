"""Lesson 03's costs. First, what a wider context vector costs: the model of a config and the
same model with its hidden size H doubled, counted (parameters, multiply-adds of a training step)
and timed side by side. Then three ways to give the decoder what it needs from the source: one
context for all steps, a re-reading of the source at every step, and attention. For each source
length S: the recurrent steps a sentence takes one after another, the attention scores, the
parameters, and the measured time of one forward pass (untrained models, random tokens)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from course_lib.models import count_parameters
from course_lib.models.attention_seq2seq import AttentionSeq2Seq, AttentionSeq2SeqConfig
from course_lib.models.reencode import ReencodeConfig, ReencodingSeq2Seq
from course_lib.models.seq2seq import Seq2Seq, Seq2SeqConfig, sequence_loss
from course_lib.seeding import fixed_threads
from course_lib.timing import paired_medians

VOCAB = 200  # any size: the costs compared here do not depend on it


def width_costs(config: Seq2SeqConfig, factor: int = 2, batch: int = 32, source: int = 20,
                target: int = 20, repeats: int = 3) -> list[dict]:
    """The model of ``config`` (hidden size H) and the same model with hidden size ``factor``·H,
    one row each: the hidden size, all parameters, the parameters of the recurrent matrices
    W_hh (the encoder's and the decoder's, 3H × H each for a GRU), the multiply-adds of one
    training step's forward and backward pass over ``batch`` random sentence pairs of
    ``source`` and ``target`` tokens (counted exactly, by ``torch.utils.flop_counter``: the
    matrix products, which do almost all of the work; elementwise operations are not counted),
    and the median seconds of that training step (forward, backward, an Adam update) on one
    torch thread, the two models taking turns (:func:`~course_lib.timing.paired_medians`)."""
    if factor < 2:
        raise ValueError(f"factor must be an int >= 2, got {factor!r}")
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(4, config.src_vocab_size, (batch, source), generator=generator)
    tgt = torch.randint(4, config.tgt_vocab_size, (batch, target + 1), generator=generator)
    models = {size: Seq2Seq(replace(config, hidden_size=size)).train()
              for size in (config.hidden_size, factor * config.hidden_size)}
    optimizers = {size: torch.optim.Adam(model.parameters(), lr=1e-3)
                  for size, model in models.items()}

    def training_step(size: int) -> None:
        optimizers[size].zero_grad(set_to_none=True)
        logits = models[size](src, None, tgt[:, :-1])  # (B, T, V)
        sequence_loss(logits, tgt[:, 1:]).backward()
        optimizers[size].step()

    rows = []
    for size, model in models.items():
        with FlopCounterMode(display=False) as counter:
            training_step(size)
        recurrent = sum(p.numel() for name, p in model.named_parameters() if "weight_hh" in name)
        rows.append({"H": size, "parameters": count_parameters(model),
                     "recurrent matrices": recurrent,
                     "multiply-adds per step": counter.get_total_flops() // 2})
    with fixed_threads(1):
        seconds = paired_medians({size: lambda size=size: training_step(size)
                                  for size in models}, repeats)
    for row in rows:
        row["seconds per step"] = seconds[row["H"]]
    return rows


def context_models(embed_dim: int = 64, hidden_size: int = 128) -> dict[str, nn.Module]:
    """The three designs at the same sizes, untrained, in evaluation mode."""
    models = {
        "one context": Seq2Seq(Seq2SeqConfig(VOCAB, VOCAB, embed_dim, hidden_size)),
        "re-read per step": ReencodingSeq2Seq(ReencodeConfig(VOCAB, VOCAB, embed_dim,
                                                             hidden_size)),
        "attention": AttentionSeq2Seq(AttentionSeq2SeqConfig(VOCAB, VOCAB, embed_dim,
                                                             hidden_size)),
    }
    return {name: model.eval() for name, model in models.items()}


def sequential_steps(name: str, source: int, target: int) -> tuple[int, int]:
    """(recurrent steps one after another, attention scores) for one sentence pair: S + T and
    none with one context; T passes of S steps plus T decoder steps when re-reading; S + T and
    T·S scores (computed in parallel within a step) with attention."""
    if name == "re-read per step":
        return target * source + target, 0
    return source + target, target * source if name == "attention" else 0


@torch.no_grad()
def context_costs(lengths: Sequence[int], target: int = 20, batch: int = 32,
                  repeats: int = 3, embed_dim: int = 64, hidden_size: int = 128
                  ) -> list[dict]:
    """One row per (source length, design): counts from :func:`sequential_steps`, parameters
    and the median seconds of a teacher-forced forward pass over ``batch`` sentences."""
    models = context_models(embed_dim, hidden_size)
    generator = torch.Generator().manual_seed(0)
    rows = []
    for source in lengths:
        src = torch.randint(4, VOCAB, (batch, source), generator=generator)  # (B, S)
        tgt = torch.randint(4, VOCAB, (batch, target), generator=generator)  # (B, T)
        seconds = paired_medians({name: lambda m=model, s=src, y=tgt: m(s, None, y)
                                  for name, model in models.items()}, repeats)
        for name, model in models.items():
            steps, scores = sequential_steps(name, source, target)
            rows.append({"S": source, "design": name, "sequential steps": steps,
                         "scores": scores, "parameters": count_parameters(model),
                         "forward ms": 1000 * seconds[name]})
    return rows
