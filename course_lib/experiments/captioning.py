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
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

import torch

from course_lib.data.captions import (
    COLOURS,
    DATA_VERSION,
    DATASETS,
    DIGIT_WORDS,
    SHAPES,
    SIZES,
    CaptionBatches,
    CaptionSet,
    caption_set,
    caption_vocab,
)
from course_lib.data.vocab import Vocab
from course_lib.device import get_device
from course_lib.experiments.runs import (
    DEFAULT_SEED,
    MODEL_CACHE,
    cache_file,
    run_metadata,
    save_figure,
    train_or_load,
    write_json,
)
from course_lib.experiments.translation import max_time_s
from course_lib.metrics import bleu, localization_accuracy
from course_lib.models import count_parameters
from course_lib.models.captioner import CaptionerConfig, ShowAttendTell, captioning_loss
from course_lib.profile import by_profile
from course_lib.seeding import REPRODUCE_THREADS, fixed_threads, seed_everything
from course_lib.train.loop import EarlyStopping, History, epochs_for, fit
from course_lib.train.schedules import cosine_decay

CONTENT_WORDS = {"digits": frozenset(DIGIT_WORDS),
                 "shapes": frozenset((*SHAPES, *COLOURS, *SIZES))}
IN_CHANNELS = {"digits": 1, "shapes": 3}
CAPTION_STEPS = 4500  # 12 epochs of 12,000 images in batches of 32
SHAPE_STEPS = 6750  # 18 epochs: a shape captioner's localisation can still be rising at 12


@dataclass
class CaptioningSettings:
    """Data sizes, the captioner's architecture (``model``, whose vocabulary size and input
    channels each data set sets, :meth:`model_config`), the optimiser and the step budget.

    Both data sets train with a wide view that the decoder reads but the attention does not
    score (``model.read_convs``). The digit strips use the pool-before-norm encoder, one read
    convolution (an 18-pixel view, a whole digit), ``steps`` optimiser steps and a learning
    rate that falls along a cosine to ``final_lr_fraction`` of its start. ``by_dataset`` holds
    what the shape scenes change, applied by :meth:`for_dataset`: a longer budget
    (:data:`SHAPE_STEPS`), the plain encoder, two read convolutions (26 pixels, a whole shape:
    a size word is judged from the whole object), no gate β_t (with one, a model can close it
    for one kind of word and name that word without looking at the object), no doubly
    stochastic penalty (``regularization`` 0: the three words that name one object all need
    the same place, and the penalty pushes repeated looks elsewhere) and a constant learning
    rate. ``max_minutes`` is an optional safety valve on training time."""

    n_train: int
    n_val: int
    n_test: int
    model: CaptionerConfig
    batch_size: int = 32
    lr: float = 2e-3
    final_lr_fraction: float | None = 0.05
    steps: int = CAPTION_STEPS
    max_minutes: float | None = None
    regularization: float = 0.1
    beam_size: int = 1
    seed: int = DEFAULT_SEED
    threads: int = REPRODUCE_THREADS
    by_dataset: dict[str, dict] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.by_dataset) - set(DATASETS))
        if unknown:
            raise ValueError(f"by_dataset names unknown data sets {unknown}; available: "
                             f"{', '.join(DATASETS)}")
        names = {f.name for f in fields(self)} - {"by_dataset", "seed", "threads"}
        for name, changes in self.by_dataset.items():
            if not set(changes) <= names:
                raise ValueError(f"by_dataset[{name!r}] sets unknown settings "
                                 f"{sorted(set(changes) - names)}")

    def for_dataset(self, name: str) -> CaptioningSettings:
        """These settings with ``by_dataset[name]`` applied (and no ``by_dataset`` left)."""
        return replace(self, **self.by_dataset.get(name, {}), by_dataset={})

    @classmethod
    def for_profile(cls, seed: int = DEFAULT_SEED) -> CaptioningSettings:
        hidden = by_profile(fast=32, full=256)
        model = CaptionerConfig(0, channels=by_profile(fast=(8, 16), full=(32, 64)),
                                read_convs=1, pool_before_norm=True, embed_dim=min(64, hidden),
                                hidden_size=hidden, attention_size=hidden // 2)
        return cls(n_train=by_profile(fast=256, full=12_000),
                   n_val=by_profile(fast=64, full=500),
                   n_test=by_profile(fast=64, full=1000), model=model,
                   steps=by_profile(fast=16, full=CAPTION_STEPS), seed=seed,
                   by_dataset={"shapes": {"model": replace(model, read_convs=2, gate=False,
                                                           pool_before_norm=False),
                                          "steps": by_profile(fast=16, full=SHAPE_STEPS),
                                          "final_lr_fraction": None, "regularization": 0.0}})

    def model_config(self, name: str, vocab: Vocab) -> CaptionerConfig:
        """The architecture of ``name``'s captioner: ``model`` with that data set's vocabulary
        size and image channels."""
        return replace(self.for_dataset(name).model, vocab_size=len(vocab),
                       in_channels=IN_CHANNELS[name])


@dataclass
class CaptionData:
    """The three splits of one data set and the vocabulary built from its training captions."""

    train: CaptionSet
    val: CaptionSet
    test: CaptionSet
    vocab: Vocab = field(init=False)

    def __post_init__(self) -> None:
        self.vocab = caption_vocab([self.train])


def make_caption_data(name: str, settings: CaptioningSettings) -> CaptionData:
    seed = settings.seed
    return CaptionData(caption_set(name, settings.n_train, "train", seed),
                       caption_set(name, settings.n_val, "val", seed),
                       caption_set(name, settings.n_test, "test", seed))


def train_captioner(model: ShowAttendTell, data: CaptionData, settings: CaptioningSettings,
                    device: torch.device | str, **fit_kwargs) -> tuple[History, float]:
    """Adam with gradient clipping for ``settings.steps`` optimiser steps. With
    ``final_lr_fraction`` the learning rate decays over those steps to that fraction of its
    start (:func:`~course_lib.train.schedules.cosine_decay`); None keeps it constant. The validation
    loss is recorded every epoch, and the model ends with the weights of the epoch where it was
    lowest. Returns the history and the training time in seconds (validation excluded)."""
    train = CaptionBatches(data.train, data.vocab, settings.batch_size, seed=settings.seed)
    val = CaptionBatches(data.val, data.vocab, 256, shuffle=False)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr)
    schedule = None if settings.final_lr_fraction is None else \
        cosine_decay(optimizer, settings.steps, settings.final_lr_fraction)
    epochs = epochs_for(settings.steps, train)
    history = fit(model, optimizer, train, captioning_loss(settings.regularization),
                  max_steps=settings.steps, val_batches=val, device=device, clip_grad_norm=5.0,
                  max_time_s=max_time_s(settings.max_minutes), scheduler=schedule,
                  early_stopping=EarlyStopping("val_loss", patience=epochs, restore_best=True),
                  **fit_kwargs)
    return history, history["train_s"][-1]


@torch.no_grad()
def caption_images(model: ShowAttendTell, images: torch.Tensor, vocab: Vocab,
                   beam_size: int = 1, batch_size: int = 256, max_len: int = 30,
                   attention: str = "soft", seed: int = 0
                   ) -> tuple[list[list[str]], list[torch.Tensor]]:
    """Generated captions (lists of words) and, for each, its attention (T', L) on the CPU, one
    row per generated word (EOS excluded). ``attention`` ("soft", "argmax" or "sample", greedy
    decoding only) picks what the decoder reads; ``seed`` seeds the sampling."""
    if beam_size != 1 and attention != "soft":
        raise ValueError(f"beam search reads soft attention; got attention={attention!r} with "
                         f"beam_size={beam_size}")
    model.eval()
    generator = torch.Generator(next(model.parameters()).device).manual_seed(seed)
    device = next(model.parameters()).device
    captions, weights = [], []
    for start in range(0, len(images), batch_size):
        batch = images[start:start + batch_size].to(device)
        out = model.greedy_decode(batch, max_len, attention, generator) if beam_size == 1 \
            else model.beam_search(batch, beam_size, max_len)
        for tokens, maps in zip(out.tokens.cpu(), out.weights.cpu(), strict=True):
            words = vocab.decode(tokens)
            captions.append(words)
            weights.append(maps[:len(words)])  # (T', L)
    return captions, weights


def evaluate_captioner(model: ShowAttendTell, name: str, data: CaptionSet, vocab: Vocab,
                       beam_size: int = 1, attention: str = "soft") -> dict:
    """Exact match, BLEU-4 and localisation on ``data``, plus the captions and attention maps."""
    captions, weights = caption_images(model, data.images, vocab, beam_size,
                                       attention=attention)
    grid = model.encoder.grid_shape(*data.images.shape[2:])
    exact = sum(c == r for c, r in zip(captions, data.captions, strict=True)) / len(data)
    return {
        "exact_match": exact,
        "bleu4": bleu([" ".join(c) for c in captions], [" ".join(r) for r in data.captions]),
        "localization": _localization(weights, captions, data, grid, name),
        "captions": captions,
        "weights": weights,
        "grid": grid,
    }


def _localization(weights, captions, data: CaptionSet, grid, name: str) -> float:
    """Localisation accuracy; 0.0 when no content word was generated at all (nothing was
    localised), where the share itself is undefined."""
    if not any(w in CONTENT_WORDS[name] for caption in captions for w in caption):
        return 0.0
    return localization_accuracy(weights, captions, data.captions, data.word_boxes, grid,
                                 tuple(data.images.shape[2:]), CONTENT_WORDS[name])


@dataclass
class CaptioningRun:
    """``result`` is what ``captioning.json`` holds; the rest, keyed by data set, is for lessons."""

    result: dict
    models: dict[str, ShowAttendTell]
    histories: dict[str, History]
    data: dict[str, CaptionData]
    evaluations: dict[str, dict]

    def table(self) -> str:
        return captioning_table(self.result)


def captioner_path(name: str, settings: CaptioningSettings, cache_dir: Path = MODEL_CACHE
                   ) -> Path:
    """Where the model trained with exactly ``settings.for_dataset(name)`` is kept."""
    key = [name, asdict(settings.for_dataset(name)), DATA_VERSION]
    return cache_file(f"captioning-{name}", key, cache_dir)


def _train(name: str, data: CaptionData, settings: CaptioningSettings, device: torch.device,
           progress: bool, live_plot: bool | None) -> tuple[ShowAttendTell, dict]:
    """A captioner trained from scratch on ``settings.threads`` threads, and its record."""
    with fixed_threads(settings.threads):
        seed_everything(settings.seed)
        model = ShowAttendTell(settings.model_config(name, data.vocab))
        history, wall_s = train_captioner(model, data, settings, device, progress=progress,
                                          live_plot=live_plot)
    return model, {"history": history.records, "wall_s": wall_s,
                   "cut_short": bool(history.stopped_by_time)}


def reproduce_captioning(datasets: str | tuple[str, ...] | list[str] = DATASETS,
                         seed: int = DEFAULT_SEED, out_dir: Path | None = None,
                         settings: CaptioningSettings | None = None, progress: bool = True,
                         live_plot: bool | None = None, reuse: bool = False,
                         cache_dir: Path | None = MODEL_CACHE) -> CaptioningRun:
    """Train one captioner per data set from scratch with ``seed`` (data and initialisation)
    and measure it on the test split.

    Models are saved in ``cache_dir`` (None: not saved); ``reuse=True`` loads a model saved with
    exactly these settings instead of training it (lessons do; ``course reproduce`` never does).
    With ``out_dir``, writes ``captioning.json`` and ``captioning.png`` there, or
    ``captioning-NAME.json`` and ``captioning-NAME.png`` for a single data set given by name.
    """
    names = (datasets,) if isinstance(datasets, str) else tuple(datasets)
    unknown = [n for n in names if n not in DATASETS]
    if unknown or not names:
        raise ValueError(f"unknown data set {unknown[0] if unknown else None!r}; available: "
                         f"{', '.join(DATASETS)}")
    settings = replace(settings or CaptioningSettings.for_profile(seed), seed=seed)
    device = get_device()
    run = CaptioningRun({}, {}, {}, {}, {})
    started = time.perf_counter()
    for name in names:
        data = make_caption_data(name, settings)
        dataset_settings = settings.for_dataset(name)
        path = None if cache_dir is None else captioner_path(name, settings, cache_dir)
        model, extra = train_or_load(
            path, ShowAttendTell, device, reuse=reuse, label=name,
            train=lambda name=name, data=data, chosen=dataset_settings: _train(
                name, data, chosen, device, progress, live_plot))
        history, wall_s = History(records=extra["history"]), extra["wall_s"]
        with fixed_threads(settings.threads):
            evaluation = evaluate_captioner(model, name, data.test, data.vocab,
                                            settings.beam_size)
        run.models[name], run.histories[name], run.data[name] = model, history, data
        run.evaluations[name] = evaluation
        run.result[name] = {
            "exact_match": round(evaluation["exact_match"], 4),
            "bleu4": round(evaluation["bleu4"], 2),
            "localization": round(evaluation["localization"], 4),
            "params": count_parameters(model),
            "steps": int(history["steps"][-1]),
            "epochs": len(history),
            "best_val_loss": round(min(history["val_loss"]), 6),
            "train_s": round(wall_s, 1),
            "cut_short": bool(extra.get("cut_short", False)),
            "grid": list(evaluation["grid"]),
            "train_images": len(data.train),
            "test_images": len(data.test),
            "architecture": asdict(model.config),  # ``model`` with this data set's sizes
        }
    run.result.update({
        "wall_s": round(time.perf_counter() - started, 1),
        **run_metadata(seed, device, settings),
    })
    if out_dir is not None:
        out_dir = Path(out_dir)
        stem = f"captioning-{datasets}" if isinstance(datasets, str) else "captioning"
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
