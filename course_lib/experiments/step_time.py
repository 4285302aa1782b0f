"""One training step of a Transformer and of the Bahdanau model of about the same size,
timed against sequence length (lesson 10, ``course reproduce transformer``): all positions of a
layer at once versus one recurrent step after another."""

from __future__ import annotations

from collections.abc import Callable

import torch

from course_lib.data.batching import TranslationBatch
from course_lib.device import to_device
from course_lib.experiments.translation import BottleneckSettings, Vocabs, translator_from_config
from course_lib.models import count_parameters
from course_lib.models.seq2seq import translation_loss
from course_lib.models.transformer import Transformer, TransformerConfig, transformer_loss
from course_lib.seeding import seed_everything
from course_lib.timing import paired_medians
from course_lib.tokens import SPECIALS


def _random_batch(vocabs: Vocabs, batch: int, length: int, generator) -> TranslationBatch:
    """Random ids of ordinary words (no special token), every sentence ``length`` tokens on
    both sides (no padding)."""
    first = len(SPECIALS)  # the special tokens take ids 0 .. len(SPECIALS) - 1
    src = torch.randint(first, len(vocabs.src), (batch, length), generator=generator)
    tgt = torch.randint(first, len(vocabs.tgt), (batch, length + 1), generator=generator)
    return TranslationBatch(src, torch.full((batch,), length), tgt[:, :-1], tgt[:, 1:],
                            list(range(batch)))


def matched_transformer(vocabs: Vocabs, params: int, num_layers: int = 2,
                        num_heads: int = 4) -> Transformer:
    """A Transformer (d_ff = 4 D, dropout 0.1) whose width D, a multiple of 2·num_heads, gives
    the parameter count nearest ``params``."""
    def build(d_model):
        return Transformer(TransformerConfig(len(vocabs.src), len(vocabs.tgt), d_model,
                                             num_heads, num_layers, num_layers, 4 * d_model))

    def count(d_model):
        with torch.device("meta"):  # shapes only: no memory, no initialisation
            return count_parameters(build(d_model))

    widths = range(2 * num_heads, 1025, 2 * num_heads)
    return build(min(widths, key=lambda d: abs(count(d) - params)))


def step_time_by_length(vocabs: Vocabs, seed: int, lengths: tuple[int, ...], batch_size: int,
                        device: torch.device,
                        repeats: int = 5) -> tuple[list[dict], dict[str, int]]:
    """Median seconds of one training step (forward, backward, Adam) at each length, for the
    Bahdanau model and a Transformer of about its size, timed in alternation so that both see
    the same machine. Returns the rows and the two parameter counts."""
    seed_everything(seed)
    rnn = BottleneckSettings.build("bahdanau", seed, vocabs)  # lessons 04 and 10's size
    bahdanau = translator_from_config(rnn.model).to(device)
    params = count_parameters(bahdanau)
    transformer = matched_transformer(vocabs, params).to(device)
    models = {"transformer": (transformer, transformer_loss(0.1)),
              "bahdanau": (bahdanau, translation_loss)}
    optimizers = {n: torch.optim.Adam(m.parameters(), 1e-4) for n, (m, _) in models.items()}
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for length in lengths:
        batch = to_device(_random_batch(vocabs, batch_size, length, generator),
                          device)

        def training_step(name: str, batch: TranslationBatch) -> Callable[[], None]:
            model, loss_fn = models[name]

            def call() -> None:
                model.train()
                optimizers[name].zero_grad(set_to_none=True)
                loss_fn(model, batch).backward()
                optimizers[name].step()
            return call

        seconds = paired_medians({name: training_step(name, batch) for name in models}, repeats,
                                 device=device)  # one warm-up round, dropped
        rows.append({"seq_len": length,
                     **{f"{n}_s": round(t, 5) for n, t in seconds.items()}})
    counts = {n: count_parameters(m) for n, (m, _) in models.items()}
    return rows, counts
