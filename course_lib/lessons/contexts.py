"""Lesson 03's comparison of three ways to give the decoder what it needs from the source: one
context for all steps, a re-reading of the source at every step, and attention. For each source
length S: the recurrent steps a sentence takes one after another, the attention scores, the
parameters, and the measured time of one forward pass (untrained models, random tokens)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from course_lib.models import count_parameters
from course_lib.models.attention_seq2seq import AttentionSeq2Seq, AttentionSeq2SeqConfig
from course_lib.models.reencode import ReencodeConfig, ReencodingSeq2Seq
from course_lib.models.seq2seq import Seq2Seq, Seq2SeqConfig
from course_lib.timing import paired_medians

VOCAB = 200  # any size: the costs compared here do not depend on it


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
