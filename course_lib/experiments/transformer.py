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
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from course_lib.data.batching import BatchIterator
from course_lib.data.corpus import Corpus, CorpusConfig, load_corpus
from course_lib.device import get_device
from course_lib.experiments.registry import Experiment
from course_lib.experiments.runs import (
    DEFAULT_SEED,
    MODEL_CACHE,
    RunOptions,
    TrainSettings,
    cache_file,
    load_saved,
    run_metadata,
    save_figure,
    train_or_load,
    write_json,
)
from course_lib.experiments.shipped import reference_loader
from course_lib.experiments.step_time import step_time_by_length
from course_lib.experiments.targets import Target, bleu_of, constant, times
from course_lib.experiments.translation import (
    BottleneckSettings,
    Vocabs,
    build_vocabs,
    checkpoint_path,
    corpus_size,
    evaluate_translator,
    results_table,
    translation_entry,
    translation_metrics,
    translator_class,
)
from course_lib.models.transformer import Transformer, TransformerConfig, transformer_loss
from course_lib.profile import by_profile, get_profile
from course_lib.seeding import REPRODUCE_THREADS, fixed_threads, seed_everything
from course_lib.tokens import PAD_ID
from course_lib.train.history import History
from course_lib.train.loop import fit

REFERENCE_MODELS = ("none", "bahdanau")
TRANSFORMER_STEPS = 3000  # 12 epochs of the 16,000 training pairs in batches of 64


def transformer_steps() -> int:
    """Optimiser steps of the Transformer in the active profile."""
    return by_profile(fast=20, full=TRANSFORMER_STEPS)


@dataclass(frozen=True)
class TransformerSettings:
    """Everything that decides the Transformer of ``course reproduce transformer``: the seed
    (the corpus, the initialisation and the batch order all come from it), the corpus size (the
    bottleneck experiment's), the model's complete config (vocabulary sizes from the corpus),
    its training (``train``: Adam with the paper's warm-up schedule), the label smoothing, the
    lengths the step timing measures, and the torch threads."""

    seed: int
    corpus_size: int
    model: TransformerConfig
    train: TrainSettings
    label_smoothing: float = 0.1
    step_lengths: tuple[int, ...] = (16, 32, 64, 128)
    step_batch_size: int = 32
    threads: int = REPRODUCE_THREADS

    @property
    def corpus(self) -> CorpusConfig:
        return CorpusConfig(size=self.corpus_size, seed=self.seed)

    @classmethod
    def build(cls, seed: int = DEFAULT_SEED, vocabs: Vocabs | None = None, *,
              steps: int | None = None, max_minutes: float | None = None,
              threads: int = REPRODUCE_THREADS) -> TransformerSettings:
        """The settings with ``seed`` in the active profile; ``vocabs`` (from the corpus of
        that seed, built when not given) set the model's vocabulary sizes."""
        size = corpus_size()
        vocabs = vocabs or build_vocabs(load_corpus(CorpusConfig(size=size, seed=seed)))
        layers = by_profile(fast=1, full=2)
        model = TransformerConfig(len(vocabs.src), len(vocabs.tgt),
                                  d_model=by_profile(fast=32, full=128), num_heads=4,
                                  num_encoder_layers=layers, num_decoder_layers=layers,
                                  d_ff=by_profile(fast=64, full=512), dropout=0.1,
                                  norm_first=True)
        train = TrainSettings(batch_size=by_profile(fast=32, full=64), lr=2e-3,
                              clip_grad_norm=1.0, steps=steps or transformer_steps(),
                              final_lr_fraction=None, warmup_steps=by_profile(fast=10, full=200),
                              max_minutes=max_minutes)
        return cls(seed, size, model, train,
                   step_lengths=by_profile(fast=(8, 16), full=(16, 32, 64, 128)),
                   step_batch_size=by_profile(fast=4, full=32), threads=threads)


class BleuCurve:
    """A ``fit`` callback: test BLEU after every epoch, against the training time so far
    (``record["train_s"]``, evaluation excluded). Adds ``test_bleu`` to the epoch's record."""

    def __init__(self, pairs: list[dict], vocabs: Vocabs) -> None:
        self.pairs, self.vocabs = pairs, vocabs
        self.points: list[dict[str, float]] = []

    def on_epoch_end(self, epoch: int, record: dict[str, float], model) -> None:
        record["test_bleu"] = evaluate_translator(model, self.pairs, self.vocabs)["bleu"]
        self.points.append(self.point(record))

    def on_resume(self, history: History) -> None:
        """A resumed run's curve starts with the epochs recorded before the interrupt."""
        self.points = [self.point(record) for record in history.records]

    @staticmethod
    def point(record: dict[str, float]) -> dict[str, float]:
        return {"epoch": record["epoch"], "steps": int(record["steps"]),
                "train_s": round(record["train_s"], 1), "bleu": round(record["test_bleu"], 2)}


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
    ``settings.train.lr``, label-smoothed loss, for ``settings.train.steps`` optimiser steps."""
    training = settings.train
    batches = BatchIterator(corpus.train, vocabs.src, vocabs.tgt, training.batch_size,
                            seed=settings.seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=training.lr, betas=(0.9, 0.98), eps=1e-9)
    return fit(model, optimizer, batches, transformer_loss(settings.label_smoothing),
               max_steps=training.steps, device=device, clip_grad_norm=training.clip_grad_norm,
               scheduler=training.scheduler(optimizer), max_time_s=training.max_time_s,
               callbacks=callbacks, **fit_kwargs)


def transformer_path(settings: TransformerSettings, cache_dir: Path = MODEL_CACHE) -> Path:
    """Where the Transformer trained with exactly these settings is kept."""
    return cache_file("transformer", [settings.corpus.key(), asdict(settings)], cache_dir)


def _train(corpus: Corpus, vocabs: Vocabs, settings: TransformerSettings, device: torch.device,
           options: RunOptions, resume_path: Path | None = None) -> tuple[Transformer, dict]:
    """A Transformer trained from scratch on ``settings.threads`` threads, and its record: the
    history, the BLEU curve and the test evaluation."""
    with fixed_threads(settings.threads):
        seed_everything(settings.seed)
        model = Transformer(settings.model)
        curve = BleuCurve(corpus.test, vocabs)
        history = train_transformer(model, corpus, vocabs, settings, device, callbacks=[curve],
                                    progress=options.progress, live_plot=options.live_plot,
                                    resume_path=resume_path)
        scores = evaluate_translator(model, corpus.test, vocabs)
    return model, {"history": history.records, "curve": curve.points, "scores": scores}


def reference_results(seed: int, out_dir: Path | None, vocabs: Vocabs,
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
        for name in REFERENCE_MODELS:
            if name not in found:
                settings = BottleneckSettings.build(name, seed, vocabs)
                saved = load_saved(checkpoint_path(name, settings, cache_dir),
                                   translator_class(name), device)
                if saved is not None:
                    found[name] = {**saved[1]["entry"], "settings": asdict(settings)}
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


@dataclass
class TransformerRun:
    """``result`` is what ``transformer.json`` holds; the rest is for lesson 10."""

    result: dict
    model: Transformer
    settings: TransformerSettings
    history: History
    corpus: Corpus
    vocabs: Vocabs
    hypotheses: list[str]

    def table(self) -> str:
        return transformer_table(self.result)


def reproduce_transformer(models: str | tuple[str, ...] = "transformer",
                          seed: int = DEFAULT_SEED, out_dir: Path | None = None, *,
                          options: RunOptions | None = None, step_times: bool = True,
                          **switches) -> TransformerRun:
    """Train the Transformer (the experiment's one model, ``models``) from scratch with
    ``seed`` (corpus, initialisation and batch order), measure it on the test split beside the
    RNN models of ``course reproduce bottleneck`` where their results exist, and time training
    steps versus length (``step_times``).

    ``options`` are the run's switches (:class:`~course_lib.experiments.runs.RunOptions`: step
    budget, safety valve, threads, progress, live plot, model cache, reuse, shipped models), and
    each of them may be given as a keyword instead (``reuse=True``); every other setting is
    :meth:`TransformerSettings.build`'s. With ``out_dir``, writes ``transformer.json`` and
    ``transformer.png`` there; the model's record holds its settings.
    """
    options = RunOptions.of(options, **switches)
    if tuple([models] if isinstance(models, str) else models) != ("transformer",):
        raise ValueError(f"unknown model {models!r}; available: transformer")
    corpus = load_corpus(CorpusConfig(size=corpus_size(), seed=seed))
    vocabs = build_vocabs(corpus)
    settings = TransformerSettings.build(seed, vocabs, steps=options.steps,
                                         max_minutes=options.max_minutes,
                                         threads=options.torch_threads)
    device = get_device()
    path = None if options.cache_dir is None else transformer_path(settings, options.cache_dir)
    model, extra = train_or_load(
        path, Transformer, device, reuse=options.reuse, label="transformer",
        train=lambda resume: _train(corpus, vocabs, settings, device, options, resume),
        reference=reference_loader("transformer", "transformer", settings, Transformer, device)
        if options.use_shipped else None)
    history, curve, scores = History(records=extra["history"]), extra["curve"], extra["scores"]
    entry = {**translation_entry(scores, model, history, history["train_s"][-1]),
             "settings": asdict(settings)}
    result = _comparison(entry, curve, reference_results(seed, out_dir, vocabs,
                                                         options.cache_dir, device))
    if step_times:
        rows, counts = step_time_by_length(vocabs, settings.seed, settings.step_lengths,
                                           settings.step_batch_size, device)
        result["step_time_by_length"] = rows
        result["step_time_params"] = counts
    result.update(run_metadata(seed, device, settings.threads, corpus))
    run = TransformerRun(result, model, settings, history, corpus, vocabs, scores["hypotheses"])
    if out_dir is not None:
        out_dir, stem = Path(out_dir), EXPERIMENT.result_stem(("transformer",))
        write_json(result, out_dir / f"{stem}.json")
        save_figure(lambda: plot_transformer(result), out_dir / f"{stem}.png")
    return run


def _comparison(entry: dict, curve: list[dict], references: dict[str, dict]) -> dict:
    """The result's records (the Transformer's, then the RNN models' it is compared with), the
    Bahdanau model's BLEU and training time, and when the Transformer first reached that BLEU."""
    bahdanau = references.get("bahdanau")
    bahdanau_bleu = None if bahdanau is None else bahdanau["bleu"]
    return {
        "models": {"transformer": entry, **references},
        "bahdanau_bleu": bahdanau_bleu,
        "transformer_wall_s_to_bahdanau_bleu": time_to_reach(curve, bahdanau_bleu),
        "bahdanau_wall_s": None if bahdanau is None else bahdanau["wall_s"],
        "bleu_curve": curve,
    }


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
    """The BLEU table of :func:`course_lib.experiments.translation.results_table`, then the
    other measurements."""
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


EXPERIMENT = Experiment(
    name="transformer",
    summary="retrain the Transformer of lesson 10, write results/seed-N/transformer.json",
    models=("transformer",),
    settings=lambda name, seed: TransformerSettings.build(seed),
    steps=lambda name: transformer_steps(),
    reproduce=reproduce_transformer,
    # Seconds of one training step on one torch thread of the reference machine, and of the
    # evaluation after training (the BLEU curve and the step timing included).
    step_seconds={"transformer": 0.28},
    evaluation_seconds=150.0,
    metrics=translation_metrics,
    targets=(
        Target("Transformer: BLEU overall", bleu_of("transformer", "transformer"),
               constant(95.0), "≥ 95"),
        Target("Transformer: BLEU on 31+ words", bleu_of("transformer", "transformer", "31+"),
               times(0.95, bleu_of("transformer", "transformer", "1-10")),
               "≥ 0.95 × its 1-10"),
    ),
    # The RNN records beside the Transformer's repeat the bottleneck experiment's.
    records=lambda result: {name: record for name, record in result.get("models", {}).items()
                            if name == "transformer"},
    after=("bottleneck",),
    family="translation",
    headline={"transformer": "Transformer"},
    checkpoint=lambda name, settings, cache_dir: transformer_path(settings, cache_dir),
)
