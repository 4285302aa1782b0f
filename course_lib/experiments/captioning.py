"""Training and measuring the captioners of lesson 07: ``course reproduce captioning``.

For each data set (digit strips, shape scenes) a
:class:`~course_lib.models.captioner.ShowAttendTell`
model is trained from scratch on generated images for a fixed number of optimiser steps, then
captions the test split. Three numbers per data set:

- ``exact_match``: share of test images whose generated caption equals the reference word for
  word;
- ``bleu4``: corpus BLEU-4 of the generated captions (0-100);
- ``localization``: share of generated content words (digits; sizes, colours and shapes) whose
  attention peak falls inside the box of the object they name
  (:func:`course_lib.metrics.localization_accuracy`).
"""

from __future__ import annotations

import textwrap
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from course_lib.data.captions import (
    DATA_VERSION,
    DATASETS,
    CaptionBatches,
    CaptionSet,
    caption_set,
    caption_vocab,
)
from course_lib.data.vocab import Vocab
from course_lib.device import get_device
from course_lib.experiments.caption_metrics import CONTENT_WORDS, evaluate_captioner
from course_lib.experiments.registry import Experiment
from course_lib.experiments.runs import (
    DEFAULT_SEED,
    MODEL_CACHE,
    RunOptions,
    TrainSettings,
    cache_file,
    run_metadata,
    save_figure,
    train_or_load,
    write_json,
)
from course_lib.experiments.shipped import reference_loader
from course_lib.experiments.targets import Target, constant, record_value
from course_lib.models import count_parameters
from course_lib.models.captioner import CaptionerConfig, ShowAttendTell, captioning_loss
from course_lib.profile import by_profile
from course_lib.seeding import REPRODUCE_THREADS, fixed_threads, seed_everything
from course_lib.train.history import EarlyStopping, History
from course_lib.train.loop import fit
from course_lib.train.trainer import epochs_for

IN_CHANNELS = {"digits": 1, "shapes": 3}
CAPTION_STEPS = 4500  # 12 epochs of 12,000 images in batches of 32
SHAPE_STEPS = 6750  # 18 epochs: a shape captioner's localisation can still be rising at 12


def caption_steps(name: str) -> int:
    """Optimiser steps of ``name``'s captioner in the active profile."""
    return by_profile(fast=16, full=SHAPE_STEPS if name == "shapes" else CAPTION_STEPS)


@dataclass(frozen=True)
class CaptioningSettings:
    """Everything that decides one data set's captioner: the seed (the images, the
    initialisation and the batch order all come from it), the data sizes, the model's complete
    config (``model``: vocabulary size and image channels from the data set), its training
    (``train``), the weight of the attention penalty, the beam that evaluates it and the torch
    threads.

    :meth:`build` gives both data sets a wide view that the decoder reads but the attention
    does not score (``model.read_convs``). The digit strips use the pool-before-norm encoder,
    one read convolution (an 18-pixel view, a whole digit), :data:`CAPTION_STEPS` and a
    learning rate that falls along a cosine to ``train.final_lr_fraction`` of its start. The shape
    scenes train for longer (:data:`SHAPE_STEPS`) with the plain encoder, two read
    convolutions (26 pixels, a whole shape: a size word is judged from the whole object), no
    gate β_t and no doubly stochastic penalty (``regularization`` 0), and a constant learning
    rate. Leaving out the gate and the penalty is an argument, not a measurement: a gate lets a
    model close it for one kind of word and name that word without looking at the object, and
    the three words that name one object all need the same place, which the penalty pushes
    apart; no gated or penalised shape captioner has been trained to compare."""

    seed: int
    n_train: int
    n_val: int
    n_test: int
    model: CaptionerConfig
    train: TrainSettings
    regularization: float = 0.1
    beam_size: int = 1
    threads: int = REPRODUCE_THREADS

    @classmethod
    def build(cls, name: str, seed: int = DEFAULT_SEED, vocab: Vocab | None = None, *,
              steps: int | None = None, max_minutes: float | None = None,
              threads: int = REPRODUCE_THREADS) -> CaptioningSettings:
        """The settings of ``name``'s captioner with ``seed`` in the active profile; ``vocab``
        (from that seed's training captions, built when not given) sets the vocabulary size."""
        if name not in DATASETS:
            raise ValueError(f"unknown data set {name!r}; available: {', '.join(DATASETS)}")
        n_train, n_val, n_test = caption_sizes()
        vocab = vocab or caption_vocab([caption_set(name, n_train, "train", seed)])
        hidden = by_profile(fast=32, full=256)
        model = CaptionerConfig(len(vocab), in_channels=IN_CHANNELS[name],
                                channels=by_profile(fast=(8, 16), full=(32, 64)), read_convs=1,
                                pool_before_norm=True, embed_dim=min(64, hidden),
                                hidden_size=hidden, attention_size=hidden // 2)
        train = TrainSettings(batch_size=32, lr=2e-3, clip_grad_norm=5.0,
                              steps=steps or caption_steps(name), max_minutes=max_minutes)
        regularization = 0.1
        if name == "shapes":
            model = replace(model, read_convs=2, gate=False, pool_before_norm=False)
            train, regularization = replace(train, final_lr_fraction=None), 0.0
        return cls(seed, n_train, n_val, n_test, model, train, regularization=regularization,
                   threads=threads)


@dataclass
class CaptionData:
    """The three splits of one data set and the vocabulary built from its training captions."""

    train: CaptionSet
    val: CaptionSet
    test: CaptionSet
    vocab: Vocab = field(init=False)

    def __post_init__(self) -> None:
        self.vocab = caption_vocab([self.train])


def caption_sizes() -> tuple[int, int, int]:
    """Images in the training, validation and test splits, in the active profile."""
    return (by_profile(fast=256, full=12_000), by_profile(fast=64, full=500),
            by_profile(fast=64, full=1000))


def caption_data(name: str, seed: int = DEFAULT_SEED) -> CaptionData:
    """The three splits of data set ``name`` that the experiment trains on with ``seed``."""
    sizes = caption_sizes()
    return CaptionData(*(caption_set(name, n, split, seed)
                         for n, split in zip(sizes, ("train", "val", "test"), strict=True)))


def train_captioner(model: ShowAttendTell, data: CaptionData, settings: CaptioningSettings,
                    device: torch.device | str, **fit_kwargs) -> tuple[History, float]:
    """Adam with gradient clipping for ``settings.train.steps`` optimiser steps, the rate
    following ``settings.train``'s schedule (:meth:`TrainSettings.scheduler`). The validation
    loss is recorded every epoch, and the model ends with the weights of the epoch where it was
    lowest. Returns the history and the training time in seconds (validation excluded)."""
    training = settings.train
    train = CaptionBatches(data.train, data.vocab, training.batch_size, seed=settings.seed)
    val = CaptionBatches(data.val, data.vocab, 256, shuffle=False)
    optimizer = torch.optim.Adam(model.parameters(), lr=training.lr)
    epochs = epochs_for(training.steps, train)
    history = fit(model, optimizer, train, captioning_loss(settings.regularization),
                  max_steps=training.steps, val_batches=val, device=device,
                  clip_grad_norm=training.clip_grad_norm, max_time_s=training.max_time_s,
                  scheduler=training.scheduler(optimizer),
                  early_stopping=EarlyStopping("val_loss", patience=epochs, restore_best=True),
                  **fit_kwargs)
    return history, history["train_s"][-1]


@dataclass
class CaptioningRun:
    """``result`` is what ``captioning.json`` holds; the rest, keyed by data set, is for lessons."""

    result: dict
    models: dict[str, ShowAttendTell]
    settings: dict[str, CaptioningSettings]
    histories: dict[str, History]
    data: dict[str, CaptionData]
    evaluations: dict[str, dict]

    def table(self) -> str:
        return captioning_table(self.result)


def captioner_path(name: str, settings: CaptioningSettings, cache_dir: Path = MODEL_CACHE
                   ) -> Path:
    """Where ``name``'s captioner trained with exactly ``settings`` is kept."""
    return cache_file(f"captioning-{name}", [name, asdict(settings), DATA_VERSION], cache_dir)


def _train(data: CaptionData, settings: CaptioningSettings, device: torch.device,
           options: RunOptions, resume_path: Path | None = None
           ) -> tuple[ShowAttendTell, dict]:
    """A captioner trained from scratch on ``settings.threads`` threads, and its record."""
    with fixed_threads(settings.threads):
        seed_everything(settings.seed)
        model = ShowAttendTell(settings.model)
        history, wall_s = train_captioner(model, data, settings, device,
                                          progress=options.progress,
                                          live_plot=options.live_plot, resume_path=resume_path)
    return model, {"history": history.records, "wall_s": wall_s,
                   "cut_short": bool(history.stopped_by_time)}


def _caption_record(model: ShowAttendTell, settings: CaptioningSettings, data: CaptionData,
                    evaluation: dict, history: History, extra: dict) -> dict:
    """One data set's JSON record: the three metrics, size, budget and its settings."""
    return {
        "exact_match": round(evaluation["exact_match"], 4),
        "bleu4": round(evaluation["bleu4"], 2),
        "localization": round(evaluation["localization"], 4),
        "params": count_parameters(model),
        "steps": int(history["steps"][-1]),
        "epochs": len(history),
        "best_val_loss": round(min(history["val_loss"]), 6),
        "train_s": round(extra["wall_s"], 1),
        "cut_short": bool(extra.get("cut_short", False)),
        "grid": list(evaluation["grid"]),
        "train_images": len(data.train),
        "test_images": len(data.test),
        "settings": asdict(settings),
    }


def reproduce_captioning(datasets: str | tuple[str, ...] | list[str] = DATASETS,
                         seed: int = DEFAULT_SEED, out_dir: Path | None = None, *,
                         options: RunOptions | None = None, **switches) -> CaptioningRun:
    """Train one captioner per data set from scratch with ``seed`` (images, initialisation and
    batch order) and measure it on the test split.

    ``options`` are the run's switches (:class:`~course_lib.experiments.runs.RunOptions`: step
    budget, safety valve, threads, progress, live plot, model cache, reuse, shipped models), and
    each of them may be given as a keyword instead (``reuse=True``); every other setting is the
    data set's (:meth:`CaptioningSettings.build`). With ``out_dir``, writes ``captioning.json``
    and ``captioning.png`` there, or ``captioning-NAME.json`` and ``captioning-NAME.png`` for a
    single data set (:meth:`Experiment.result_stem`). Each data set's record holds its settings.
    """
    options = RunOptions.of(options, **switches)
    names = (datasets,) if isinstance(datasets, str) else tuple(datasets)
    unknown = [n for n in names if n not in DATASETS]
    if unknown or not names:
        raise ValueError(f"unknown data set {unknown[0] if unknown else None!r}; available: "
                         f"{', '.join(DATASETS)}")
    device = get_device()
    run = CaptioningRun({}, {}, {}, {}, {}, {})
    started = time.perf_counter()
    for name in names:
        data = caption_data(name, seed)
        settings = CaptioningSettings.build(name, seed, data.vocab, steps=options.steps,
                                            max_minutes=options.max_minutes,
                                            threads=options.torch_threads)
        path = None if options.cache_dir is None else \
            captioner_path(name, settings, options.cache_dir)
        model, extra = train_or_load(
            path, ShowAttendTell, device, reuse=options.reuse, label=name,
            train=lambda resume, data=data, settings=settings: _train(
                data, settings, device, options, resume),
            reference=reference_loader("captioning", name, settings, ShowAttendTell, device)
            if options.use_shipped else None)
        history = History(records=extra["history"])
        with fixed_threads(options.torch_threads):
            evaluation = evaluate_captioner(model, name, data.test, data.vocab,
                                            settings.beam_size)
        run.models[name], run.settings[name], run.histories[name] = model, settings, history
        run.data[name], run.evaluations[name] = data, evaluation
        run.result[name] = _caption_record(model, settings, data, evaluation, history, extra)
    run.result.update({"wall_s": round(time.perf_counter() - started, 1),
                       **run_metadata(seed, device, options.torch_threads)})
    if out_dir is not None:
        out_dir, stem = Path(out_dir), EXPERIMENT.result_stem(names)
        write_json(run.result, out_dir / f"{stem}.json")
        save_figure(lambda: plot_captioning(run), out_dir / f"{stem}.png")
    return run


METRICS = (("exact_match", "exact match"), ("bleu4", "BLEU-4 / 100"),
           ("localization", "localisation"))


def plot_captioning(run: CaptioningRun):
    """Bars of the three measurements per data set, and one test image per data set with the
    attention peak of every generated word."""
    import matplotlib.pyplot as plt

    names = [n for n in DATASETS if n in run.models]
    fig, axes = plt.subplots(1, 1 + len(names), figsize=(4.5 + 4.5 * len(names), 3.6),
                             gridspec_kw={"width_ratios": [1] + [1.4] * len(names)})
    bars = axes[0]
    width = 0.8 / len(METRICS)
    for k, (key, label) in enumerate(METRICS):
        values = [run.result[n][key] / (100 if key == "bleu4" else 1) for n in names]
        positions = [i + (k - 1) * width for i in range(len(names))]
        bars.bar(positions, values, width, label=label)
    bars.set_xticks(range(len(names)), names)
    bars.set_ylim(0, 1.05)
    bars.set_title(f"test set (seed {run.result['seed']})")
    bars.legend(fontsize=8, loc="lower left")
    bars.grid(axis="y", alpha=0.3)
    for ax, name in zip(axes[1:], names, strict=True):
        image = run.data[name].test.images[0]
        words = run.evaluations[name]["captions"][0]
        maps = run.evaluations[name]["weights"][0]  # (T', L)
        rows, cols = run.evaluations[name]["grid"]
        picture = image[0] if image.shape[0] == 1 else image.permute(1, 2, 0)  # (H, W[, 3])
        height, width_px = image.shape[1:]
        ax.imshow(picture.clamp(0, 1), cmap="gray" if image.shape[0] == 1 else None)
        for t, word in enumerate(words):
            if word not in CONTENT_WORDS[name]:
                continue
            row, col = divmod(int(maps[t].argmax()), cols)
            x, y = (col + 0.5) * width_px / cols, (row + 0.5) * height / rows
            ax.plot(x, y, "o", color="lime", ms=4)
            ax.annotate(word, (x, y), color="yellow", fontsize=7, xytext=(2, 2),
                        textcoords="offset points")
        ax.set_title(textwrap.fill(" ".join(words), 60), fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    return fig


def captioning_table(result: dict) -> str:
    """A Markdown table of a captioning result: the three metrics, size, optimiser steps,
    epochs and training time per data set."""
    header = ["data set", "exact match", "BLEU-4", "localisation", "params", "steps", "epochs",
              "train s"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name in DATASETS:
        if name in result:
            e = result[name]
            lines.append(f"| {name} | {e['exact_match']:.3f} | {e['bleu4']:.1f} | "
                         f"{e['localization']:.3f} | {e['params']:,} | {e['steps']:,} | "
                         f"{e['epochs']} | {e['train_s']:.0f} |")
    return "\n".join(lines)


def caption_records(result: dict) -> dict[str, dict]:
    """The data sets' records of a captioning result (its other keys are run metadata)."""
    return {name: value for name, value in result.items()
            if isinstance(value, dict) and "exact_match" in value}


def caption_metrics(name: str, record: dict) -> list[tuple[str, float | None]]:
    """The rows a captioner's record gives the results page."""
    return [(f"{name}: {label}", record[key]) for key, label in
            (("exact_match", "exact match"), ("bleu4", "BLEU-4"), ("localization", "localisation"))]


def _caption_target(label: str, name: str, key: str, bound: float) -> Target:
    return Target(label, record_value("captioning", name, key), constant(bound), f"≥ {bound:.2f}")


EXPERIMENT = Experiment(
    name="captioning",
    summary="retrain both captioners of lesson 07, write results/seed-N/captioning.json",
    models=DATASETS,
    settings=lambda name, seed: CaptioningSettings.build(name, seed),
    steps=caption_steps,
    reproduce=reproduce_captioning,
    # Seconds of one training step on one torch thread of the reference machine, and of the
    # evaluation after training.
    step_seconds={"digits": 0.17, "shapes": 0.2},
    evaluation_seconds=15.0,
    metrics=caption_metrics,
    targets=(_caption_target("digit strips: exact match", "digits", "exact_match", 0.95),
             _caption_target("digit strips: localisation", "digits", "localization", 0.95),
             _caption_target("shape scenes: exact match", "shapes", "exact_match", 0.80),
             _caption_target("shape scenes: localisation", "shapes", "localization", 0.80)),
    records=caption_records,
    budget=lambda name, record: (f"captioner ({name})", record["steps"], record["epochs"],
                                 record["train_s"]),
    model_option="dataset",
    checkpoint=captioner_path,
)
