"""Training and evaluating translation models on the generated corpus (lessons 02-05, 10)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch import nn

from course_lib.data.batching import BatchIterator
from course_lib.data.corpus import Corpus, word_count
from course_lib.data.vocab import Vocab
from course_lib.metrics import bleu, bleu_by_length
from course_lib.seq2seq import Seq2Seq, Seq2SeqConfig, translation_loss
from course_lib.training import History, fit


@dataclass
class Vocabs:
    src: Vocab
    tgt: Vocab


def build_vocabs(corpus: Corpus) -> Vocabs:
    """Source and target vocabularies from the training split only."""
    return Vocabs(Vocab.build(p["en"] for p in corpus.train),
                  Vocab.build(p["fr"] for p in corpus.train))


@dataclass
class TrainSettings:
    batch_size: int = 128
    lr: float = 3e-3
    clip_grad_norm: float = 1.0
    max_epochs: int = 100
    budget_s: float = 300.0
    seed: int = 0


def train_translator(model: nn.Module, corpus: Corpus, vocabs: Vocabs, settings: TrainSettings,
                     device: torch.device | str, **fit_kwargs) -> tuple[History, float]:
    """Adam with gradient clipping until ``settings.budget_s`` seconds of training are spent.

    Returns the history and the wall time of training in seconds.
    """
    batches = BatchIterator(corpus.train, vocabs.src, vocabs.tgt, settings.batch_size,
                            seed=settings.seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr)
    start = time.perf_counter()
    history = fit(model, optimizer, batches, translation_loss, epochs=settings.max_epochs,
                  device=device, clip_grad_norm=settings.clip_grad_norm,
                  max_time_s=settings.budget_s, **fit_kwargs)
    return history, time.perf_counter() - start


@torch.no_grad()
def translate(model: nn.Module, pairs: list[dict], vocabs: Vocabs, batch_size: int = 256,
              max_len: int = 100) -> list[str]:
    """Greedy translations of every pair's English sentence, in order."""
    model.eval()
    device = next(model.parameters()).device
    hypotheses: list[str] = [""] * len(pairs)
    for batch in BatchIterator(pairs, vocabs.src, vocabs.tgt, batch_size, shuffle=False):
        generated = model.greedy_decode(batch.src.to(device), batch.src_lengths.to(device),
                                        max_len=max_len)
        for row, index in zip(generated.tolist(), batch.index, strict=True):
            hypotheses[index] = " ".join(vocabs.tgt.decode(row))
    return hypotheses


def evaluate_translator(model: nn.Module, pairs: list[dict], vocabs: Vocabs) -> dict:
    """Corpus BLEU and BLEU per source-length bucket (sacreBLEU's 0-100 scale)."""
    hypotheses = translate(model, pairs, vocabs)
    references = [p["fr"] for p in pairs]
    lengths = [word_count(p["en"].split()) for p in pairs]
    return {"bleu": bleu(hypotheses, references),
            "bleu_by_length": bleu_by_length(hypotheses, references, lengths),
            "hypotheses": hypotheses}


def no_attention_model(vocabs: Vocabs, hidden_size: int = 256, embed_dim: int = 128) -> Seq2Seq:
    return Seq2Seq(Seq2SeqConfig(len(vocabs.src), len(vocabs.tgt), embed_dim=embed_dim,
                                 hidden_size=hidden_size, context="both"))
