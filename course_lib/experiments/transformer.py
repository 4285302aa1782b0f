"""Training and measuring the Transformer of lesson 10: ``course reproduce transformer``.

The Transformer is trained from scratch on the corpus of lessons 02-05 (same size, same seed as
``course reproduce bottleneck``) for a fixed number of optimiser steps, and measured on the test
split as the RNN models are: BLEU overall and per source-length bucket. Three more
measurements:

- the BLEU-versus-training-time curve (test BLEU after every epoch; evaluation time excluded),
  and from it the training time at which the Transformer first reached the Bahdanau model's
  test BLEU, when ``course reproduce bottleneck`` results (or its saved models) exist;
- the time of one training step versus sequence length for a Transformer and the Bahdanau model
  of about the same number of parameters: all positions of a layer at once versus one recurrent
  step after another.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from course_lib.data.batching import BatchIterator, TranslationBatch
from course_lib.data.corpus import Corpus, CorpusConfig, load_corpus
from course_lib.data.vocab import PAD_ID
from course_lib.device import get_device, to_device
from course_lib.experiments.bottleneck import (
    BottleneckSettings,
    load_measured,
    results_table,
    translation_entry,
)
from course_lib.experiments.runs import (
    DEFAULT_SEED,
    MODEL_CACHE,
    cache_file,
    run_metadata,
    save_figure,
    train_or_load,
    write_json,
)
from course_lib.experiments.translation import (
    Vocabs,
    build_translator,
    build_vocabs,
    evaluate_translator,
    max_time_s,
)
from course_lib.models import count_parameters
from course_lib.models.seq2seq import translation_loss
from course_lib.models.transformer import Transformer, TransformerConfig, transformer_loss
from course_lib.profile import by_profile, get_profile
from course_lib.seeding import REPRODUCE_THREADS, fixed_threads, seed_everything
from course_lib.timing import paired_medians
from course_lib.train.loop import History, fit
from course_lib.train.schedules import warmup_inverse_sqrt

REFERENCE_MODELS = ("none", "bahdanau")
TRANSFORMER_STEPS = 3000  # 12 epochs of the 16,000 training pairs in batches of 64


@dataclass
class TransformerSettings:
    """The model (``model``, whose vocabulary sizes come from the corpus, :meth:`model_config`),
    the optimiser and the step budget of ``course reproduce transformer``. ``max_minutes`` is
    an optional safety valve on training time."""

    corpus_size: int
    model: TransformerConfig
    batch_size: int = 64
    lr: float = 2e-3
    warmup_steps: int = 200
    label_smoothing: float = 0.1
    steps: int = TRANSFORMER_STEPS
    max_minutes: float | None = None
    step_lengths: tuple[int, ...] = (16, 32, 64, 128)
    step_batch_size: int = 32
    seed: int = DEFAULT_SEED
    threads: int = REPRODUCE_THREADS

    @classmethod
    def for_profile(cls, seed: int = DEFAULT_SEED) -> TransformerSettings:
        layers = by_profile(fast=1, full=2)
        model = TransformerConfig(0, 0, d_model=by_profile(fast=32, full=128), num_heads=4,
                                  num_encoder_layers=layers, num_decoder_layers=layers,
                                  d_ff=by_profile(fast=64, full=512), dropout=0.1,
                                  norm_first=True)
        return cls(corpus_size=BottleneckSettings.for_profile(seed).corpus_size, model=model,
                   batch_size=by_profile(fast=32, full=64),
                   warmup_steps=by_profile(fast=10, full=200),
                   steps=by_profile(fast=20, full=TRANSFORMER_STEPS),
                   step_lengths=by_profile(fast=(8, 16), full=(16, 32, 64, 128)),
                   step_batch_size=by_profile(fast=4, full=32), seed=seed)

    def model_config(self, vocabs: Vocabs) -> TransformerConfig:
        """``model`` with the corpus's vocabulary sizes."""
        return replace(self.model, src_vocab_size=len(vocabs.src),
                       tgt_vocab_size=len(vocabs.tgt))


class BleuCurve:
    """A ``fit`` callback: test BLEU after every epoch, against the training time so far
    (``record["train_s"]``, evaluation excluded). Adds ``test_bleu`` to the epoch's record."""

    def __init__(self, pairs: list[dict], vocabs: Vocabs) -> None:
        self.pairs, self.vocabs = pairs, vocabs
        self.points: list[dict[str, float]] = []

    def on_epoch_end(self, epoch: int, record: dict[str, float], model) -> None:
        score = evaluate_translator(model, self.pairs, self.vocabs)["bleu"]
        record["test_bleu"] = score
        self.points.append({"epoch": epoch, "steps": int(record["steps"]),
                            "train_s": round(record["train_s"], 1), "bleu": round(score, 2)})


def time_to_reach(curve: list[dict[str, float]], target: float | None) -> float | None:
    """Training seconds at the first epoch end whose BLEU is at least ``target`` (None if
    never, or if there is no target)."""
    if target is None:
        return None
    return next((p["train_s"] for p in curve if p["bleu"] >= target), None)


def train_transformer(model: Transformer, corpus: Corpus, vocabs: Vocabs,
                      settings: TransformerSettings, device: torch.device | str,
                      callbacks=(), **fit_kwargs) -> History:
    """Adam (β₂ = 0.98, ε = 1e-9, as the paper) with the warm-up schedule peaking at
    ``settings.lr``, label-smoothed loss, for ``settings.steps`` optimiser steps."""
    batches = BatchIterator(corpus.train, vocabs.src, vocabs.tgt, settings.batch_size,
                            seed=settings.seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr, betas=(0.9, 0.98), eps=1e-9)
    return fit(model, optimizer, batches, transformer_loss(settings.label_smoothing),
               max_steps=settings.steps, device=device, clip_grad_norm=1.0,
               scheduler=warmup_inverse_sqrt(optimizer, settings.warmup_steps),
               max_time_s=max_time_s(settings.max_minutes), callbacks=callbacks, **fit_kwargs)


def transformer_path(corpus: Corpus, settings: TransformerSettings,
                     cache_dir: Path = MODEL_CACHE) -> Path:
    return cache_file("transformer", [corpus.config.key(), asdict(settings)], cache_dir)


def _train(corpus: Corpus, vocabs: Vocabs, settings: TransformerSettings, device: torch.device,
           progress: bool, live_plot: bool | None) -> tuple[Transformer, dict]:
    """A Transformer trained from scratch on ``settings.threads`` threads, and its record: the
    history, the BLEU curve and the test evaluation."""
    with fixed_threads(settings.threads):
        seed_everything(settings.seed)
        model = Transformer(settings.model_config(vocabs))
        curve = BleuCurve(corpus.test, vocabs)
        history = train_transformer(model, corpus, vocabs, settings, device, callbacks=[curve],
                                    progress=progress, live_plot=live_plot)
        scores = evaluate_translator(model, corpus.test, vocabs)
    return model, {"history": history.records, "curve": curve.points, "scores": scores}


def reference_results(seed: int, out_dir: Path | None, corpus: Corpus,
                      cache_dir: Path | None, device: torch.device) -> dict[str, dict]:
    """The no-attention and Bahdanau entries of ``course reproduce bottleneck`` with this seed
    and profile: from ``bottleneck.json`` or ``bottleneck-NAME.json`` in ``out_dir``, else from
    its saved models; models found in none of them are left out."""
    found: dict[str, dict] = {}
    files = [] if out_dir is None else \
        [Path(out_dir) / f"bottleneck{s}.json" for s in ("", *(f"-{n}" for n in REFERENCE_MODELS))]
    for path in (p for p in files if p.is_file()):
        saved = json.loads(path.read_text())
        if saved.get("seed") == seed and saved.get("profile") == get_profile():
            for name, entry in saved["models"].items():
                if name in REFERENCE_MODELS:
                    found.setdefault(name, entry)
    if cache_dir is not None:
        settings = BottleneckSettings.for_profile(seed)
        for name in REFERENCE_MODELS:
            if name not in found:
                measured = load_measured(name, corpus, settings, device, cache_dir)
                if measured is not None:
                    found[name] = measured[0]
    return {n: found[n] for n in REFERENCE_MODELS if n in found}


@torch.no_grad()
def cross_attention_maps(model: Transformer, pairs: list[dict], vocabs: Vocabs,
                         batch_size: int = 64) -> list[torch.Tensor]:
    """Every decoder layer's per-head cross-attention while the model reads each pair's
    reference translation (teacher forcing), as lesson 04's ``reference_attention`` does for
    the RNN models: row t is French token t (the last row EOS), column j English token j (the
    last column the source EOS). One CPU tensor per pair, in order, of shape
    (layers, h, len(fr) + 1, len(en) + 1)."""
    model.eval()
    device = next(model.parameters()).device
    found: list[torch.Tensor] = [torch.empty(0)] * len(pairs)
    for batch in BatchIterator(pairs, vocabs.src, vocabs.tgt, batch_size, shuffle=False):
        maps = model.attention_maps(batch.src.to(device), batch.src_lengths.to(device),
                                    batch.tgt_in.to(device))
        cross = torch.stack(maps.cross, dim=1).float().cpu()  # (B, layers, h, T, S)
        target_lengths = (batch.tgt_out != PAD_ID).sum(dim=1)  # (B,)
        for row, index in enumerate(batch.index):
            found[index] = cross[row, :, :, :target_lengths[row], :batch.src_lengths[row]]
    return found


def _random_batch(vocabs: Vocabs, batch: int, length: int, generator) -> TranslationBatch:
    """Random ids, every sentence ``length`` tokens on both sides (no padding)."""
    src = torch.randint(4, len(vocabs.src), (batch, length), generator=generator)
    tgt = torch.randint(4, len(vocabs.tgt), (batch, length + 1), generator=generator)
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


def step_time_by_length(vocabs: Vocabs, settings: TransformerSettings, device: torch.device,
                        repeats: int = 5) -> tuple[list[dict], dict[str, int]]:
    """Median seconds of one training step (forward, backward, Adam) at each length, for the
    Bahdanau model and a Transformer of about its size, timed in alternation so that both see
    the same machine. Returns the rows and the two parameter counts."""
    seed_everything(settings.seed)
    rnn = BottleneckSettings.for_profile(settings.seed)  # the size lessons 04 and 10 compare
    bahdanau = build_translator("bahdanau", vocabs, rnn.hidden_size, rnn.embed_dim).to(device)
    params = count_parameters(bahdanau)
    transformer = matched_transformer(vocabs, params).to(device)
    models = {"transformer": (transformer, transformer_loss(0.1)),
              "bahdanau": (bahdanau, translation_loss)}
    optimizers = {n: torch.optim.Adam(m.parameters(), 1e-4) for n, (m, _) in models.items()}
    generator = torch.Generator().manual_seed(settings.seed)
    rows = []
    for length in settings.step_lengths:
        batch = to_device(_random_batch(vocabs, settings.step_batch_size, length, generator),
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


@dataclass
class TransformerRun:
    """``result`` is what ``transformer.json`` holds; the rest is for lesson 10."""

    result: dict
    model: Transformer
    history: History
    corpus: Corpus
    vocabs: Vocabs
    hypotheses: list[str]

    def table(self) -> str:
        return transformer_table(self.result)


def reproduce_transformer(seed: int = DEFAULT_SEED, out_dir: Path | None = None,
                          settings: TransformerSettings | None = None, progress: bool = True,
                          live_plot: bool | None = None, reuse: bool = False,
                          cache_dir: Path | None = MODEL_CACHE,
                          step_times: bool = True) -> TransformerRun:
    """Train the Transformer from scratch with ``seed`` (data and initialisation), measure it
    on the test split beside the RNN models of ``course reproduce bottleneck`` where their
    results exist, and time training steps versus length (``step_times``).

    The model is saved in ``cache_dir`` (None: not saved); ``reuse=True`` loads a model saved
    with exactly these settings (lessons do; ``course reproduce`` never does). With
    ``out_dir``, writes ``transformer.json`` and ``transformer.png`` there.
    """
    settings = replace(settings or TransformerSettings.for_profile(seed), seed=seed)
    corpus = load_corpus(CorpusConfig(size=settings.corpus_size, seed=seed))
    vocabs = build_vocabs(corpus)
    device = get_device()
    path = None if cache_dir is None else transformer_path(corpus, settings, cache_dir)
    model, extra = train_or_load(
        path, Transformer, device, reuse=reuse, label="transformer",
        train=lambda: _train(corpus, vocabs, settings, device, progress, live_plot))
    history, curve, scores = History(records=extra["history"]), extra["curve"], extra["scores"]
    entry = translation_entry(scores, model, history, history["train_s"][-1])
    references = reference_results(seed, out_dir, corpus, cache_dir, device)
    bahdanau = references.get("bahdanau")
    bahdanau_bleu = None if bahdanau is None else bahdanau["bleu"]
    result = {
        "models": {"transformer": entry, **references},
        "bahdanau_bleu": bahdanau_bleu,
        "transformer_wall_s_to_bahdanau_bleu": time_to_reach(curve, bahdanau_bleu),
        "bahdanau_wall_s": None if bahdanau is None else bahdanau["wall_s"],
        "bleu_curve": curve,
    }
    if step_times:
        rows, counts = step_time_by_length(vocabs, settings, device)
        result["step_time_by_length"] = rows
        result["step_time_params"] = counts
    long, short = entry["bleu_by_length"].get("31+"), entry["bleu_by_length"].get("1-10")
    result["targets"] = {
        "bleu_at_least_95": entry["bleu"] >= 95,
        "long_at_least_0.95_of_short": None if long is None or short is None
        else long >= 0.95 * short,
    }
    result.update(run_metadata(seed, device, settings, corpus))
    run = TransformerRun(result, model, history, corpus, vocabs, scores["hypotheses"])
    if out_dir is not None:
        out_dir = Path(out_dir)
        write_json(result, out_dir / "transformer.json")
        save_figure(lambda: plot_transformer(result), out_dir / "transformer.png")
    return run


def plot_transformer(result: dict):
    """BLEU by source length beside the RNN models; test BLEU against training time; step time
    against sequence length."""
    import matplotlib.pyplot as plt

    from course_lib.viz import plot_bleu_by_length

    panels = 3 if "step_time_by_length" in result else 2
    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 3.6))
    plot_bleu_by_length({n: e["bleu_by_length"] for n, e in result["models"].items()},
                        ax=axes[0], title=f"Test BLEU by source length (seed {result['seed']})")
    curve = axes[1]
    curve.plot([p["train_s"] for p in result["bleu_curve"]],
               [p["bleu"] for p in result["bleu_curve"]], marker="o", label="transformer")
    if result["bahdanau_bleu"] is not None:
        curve.axhline(result["bahdanau_bleu"], color="grey", ls="--",
                      label=f"bahdanau after {result['bahdanau_wall_s']:.0f} s")
    curve.set_xlabel("training time (s)")
    curve.set_ylabel("test BLEU")
    curve.set_ylim(0, 100)
    curve.grid(alpha=0.3)
    curve.legend()
    if panels == 3:
        steps = axes[2]
        lengths = [r["seq_len"] for r in result["step_time_by_length"]]
        counts = result["step_time_params"]
        for name in ("transformer", "bahdanau"):
            steps.plot(lengths, [1000 * r[f"{name}_s"] for r in result["step_time_by_length"]],
                       marker="o", label=f"{name} ({counts[name] / 1e6:.2f}M)")
        steps.set_xscale("log", base=2)
        steps.set_yscale("log")
        steps.set_xlabel("sequence length (tokens)")
        steps.set_ylabel("one training step (ms)")
        steps.grid(alpha=0.3)
        steps.legend()
    fig.tight_layout()
    return fig


def transformer_table(result: dict) -> str:
    """The BLEU table of :func:`course_lib.experiments.bottleneck.results_table`, then the other
    measurements."""
    lines = [results_table(result), ""]
    reached = result["transformer_wall_s_to_bahdanau_bleu"]
    if result["bahdanau_bleu"] is None:
        lines.append("No `course reproduce bottleneck` result for this seed: run it to compare.")
    else:
        lines.append(f"Bahdanau: {result['bahdanau_bleu']:.1f} BLEU after "
                     f"{result['bahdanau_wall_s']:.0f} s; the Transformer "
                     + ("did not reach it at any epoch's end" if reached is None
                        else f"reached it after {reached:.0f} s of training") + ".")
    if "step_time_by_length" in result:
        lines += ["", "| length | transformer step (ms) | bahdanau step (ms) |", "|---|---|---|"]
        lines += [f"| {r['seq_len']} | {1000 * r['transformer_s']:.1f} | "
                  f"{1000 * r['bahdanau_s']:.1f} |" for r in result["step_time_by_length"]]
    return "\n".join(lines)
