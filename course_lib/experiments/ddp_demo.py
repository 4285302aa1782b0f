"""A demonstration, run under ``torchrun``: data-parallel training on PyTorch's own engine,
``DistributedDataParallel``, of a small Transformer on the copy task (``docs/distributed.md``).

Each of W processes (ranks) holds a whole copy of the model and reads its own 1/W share of every
global batch. After the backward pass DDP averages the gradients over the ranks (an all-reduce),

    g = (1/W) Σ_r g_r,

so every rank takes the same optimiser step and the copies stay identical. When every rank's
loss is a mean over equally many items (equal shares, fixed-length sequences), g is the gradient
of the mean loss over the whole global batch: the step one process would take on that batch.
The training loop is :func:`course_lib.train.loop.fit`, the one every lesson uses.

    python -m course_lib.experiments.ddp_demo --epochs 5        # one process, no torchrun
    torchrun --standalone --nproc_per_node=4 -m course_lib.experiments.ddp_demo \
        --global-batch-size 64
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

from course_lib.arguments import check_choice
from course_lib.data.batching import TranslationBatch
from course_lib.data.sequence_tasks import TASKS, sequence_task
from course_lib.device import get_device
from course_lib.models.transformer import Transformer, TransformerConfig, transformer_loss
from course_lib.seeding import seed_everything
from course_lib.tokens import SPECIALS
from course_lib.train.history import History
from course_lib.train.loop import fit

TORCHRUN_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE")
BACKENDS = ("nccl", "gloo")


@dataclass(frozen=True)
class DistributedContext:
    """Where this process stands in the job: its ``rank`` among ``world_size`` processes, its
    ``local_rank`` on this machine, and the device it trains on."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        """Rank 0, the process that writes shared results."""
        return self.rank == 0


def setup(backend: str | None = None) -> DistributedContext:
    """Join the ``torchrun`` job this process belongs to and return its context.

    Reads ``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE`` (and, inside
    ``init_process_group``, ``MASTER_ADDR``/``MASTER_PORT``) set by ``torchrun``. The device is
    :func:`course_lib.device.get_device`'s choice (``COURSE_DEVICE=cpu`` forces the CPU), with
    CUDA narrowed to GPU ``LOCAL_RANK``; ``backend`` defaults to ``nccl`` on CUDA and ``gloo``
    otherwise. Without torchrun's variables this is a single-process run: world size 1 and
    nothing initialised.
    """
    present = [name for name in TORCHRUN_VARIABLES if name in os.environ]
    if not present:
        return DistributedContext(rank=0, world_size=1, local_rank=0, device=get_device())
    missing = [name for name in TORCHRUN_VARIABLES if name not in os.environ]
    if missing:
        raise ValueError(f"{', '.join(present)} set but {', '.join(missing)} missing; launch "
                         f"with torchrun, which sets all of {', '.join(TORCHRUN_VARIABLES)}")
    rank, local_rank, world_size = (int(os.environ[name]) for name in TORCHRUN_VARIABLES)
    device = get_device()
    if device.type == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise ValueError(f"local rank {local_rank} needs GPU {local_rank}, but only "
                             f"{torch.cuda.device_count()} are visible; start at most that "
                             f"many processes per machine (--nproc_per_node)")
        device = torch.device(device.type, local_rank)
        torch.cuda.set_device(device)
    backend = backend or ("nccl" if device.type == "cuda" else "gloo")
    check_choice("backend", backend, BACKENDS)
    if backend == "nccl" and device.type != "cuda":
        raise ValueError(f"the nccl backend needs CUDA GPUs, but this process trains on "
                         f"{device}; use --backend gloo")
    if not dist.is_initialized():
        dist.init_process_group(backend, rank=rank, world_size=world_size)
    return DistributedContext(rank, world_size, local_rank, device)


def cleanup() -> None:
    """Leave the job (``destroy_process_group``); nothing to do in a single-process run."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def wrap_model(model: nn.Module, context: DistributedContext) -> nn.Module:
    """``model`` on the context's device, wrapped in ``DistributedDataParallel`` when several
    processes train together (DDP copies rank 0's weights to every rank, then averages the
    gradients in backward); the model itself when ``world_size`` is 1."""
    model = model.to(context.device)
    if context.world_size == 1:
        return model
    device_ids = [context.device.index] if context.device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids)


def per_rank_batch_size(global_batch_size: int, world_size: int) -> int:
    """The rows each rank reads per step: ``global_batch_size / world_size``, which must be a
    whole number so that every step covers exactly one global batch."""
    if global_batch_size < 1 or world_size < 1:
        raise ValueError(f"global batch size and world size must be at least 1, got "
                         f"{global_batch_size} and {world_size}")
    if global_batch_size % world_size:
        raise ValueError(f"the global batch size {global_batch_size} does not split evenly over "
                         f"{world_size} processes; use a multiple of {world_size}")
    return global_batch_size // world_size


def distributed_loader(dataset: Any, batch_size_per_rank: int, *, context: DistributedContext,
                       seed: int, shuffle: bool = True, collate_fn: Any = None) -> DataLoader:
    """This rank's share of ``dataset``: a ``DataLoader`` over a ``DistributedSampler``.

    Every epoch (``fit`` calls ``sampler.set_epoch``) the sampler draws one permutation from
    ``seed + epoch``, the same on every rank, and rank r reads its positions r, r + W, r + 2W, ...
    So step k of the W ranks together reads exactly the rows of step k of a single process with
    batch ``W · batch_size_per_rank``.

    Sampler and loader both drop the remainder (``drop_last``) so that every rank has the same
    number of equal-sized batches: DDP's gradient all-reduce needs every rank at every step (a
    rank with one batch more would wait forever for the others), and g = (1/W) Σ_r g_r gives
    each rank's mean the same weight, which is the global-batch mean only when the ranks'
    batches are equally large. Without it the sampler would even out the shares by repeating
    rows (counting them twice) and each epoch would end on a short batch.
    """
    sampler = DistributedSampler(dataset, num_replicas=context.world_size, rank=context.rank,
                                 shuffle=shuffle, seed=seed, drop_last=True)
    return DataLoader(dataset, batch_size=batch_size_per_rank, sampler=sampler, drop_last=True,
                      collate_fn=collate_fn)


def take_rows(data: TranslationBatch, rows: list[int]) -> TranslationBatch:
    """The rows ``rows`` of one big batch, as a batch (a ``collate_fn`` over row numbers).
    Shapes: (N, L) -> (len(rows), L)."""
    index = torch.as_tensor(rows, dtype=torch.long)  # (b,)
    return TranslationBatch(src=data.src[index], src_lengths=data.src_lengths[index],
                            tgt_in=data.tgt_in[index], tgt_out=data.tgt_out[index],
                            index=[data.index[row] for row in rows])


# The small Transformer of a data-parallel run: pre-norm, no dropout; the task sets its
# vocabulary and maximum length (:func:`task_model`).
SMALL_ARCHITECTURE = dict(d_model=32, num_heads=4, num_encoder_layers=1, num_decoder_layers=1,
                          d_ff=64, dropout=0.0, norm_first=True)


def task_model(n_symbols: int, seq_len: int, **architecture) -> TransformerConfig:
    """The complete config for a task of ``n_symbols`` symbols and sequences of ``seq_len``:
    the specials and the symbols on both sides, room for a sequence plus its BOS or EOS token,
    and :data:`SMALL_ARCHITECTURE` with ``architecture``'s changes."""
    vocab_size = len(SPECIALS) + n_symbols
    return TransformerConfig(vocab_size, vocab_size, **{**SMALL_ARCHITECTURE, **architecture},
                             max_len=seq_len + 1)


@dataclass
class DataParallelSettings:
    """The sequence task, the Transformer (``model``, complete: built by :func:`task_model`
    from the task when not given, and checked against it when given) and the optimiser of one
    data-parallel run.

    Sequences have one fixed length: the loss is a mean over tokens, and only when every rank
    holds equally many tokens is the average of the ranks' means the mean over the global batch.
    No dropout, so two runs differ only by floating-point rounding."""

    task: str = "copy"
    n_examples: int = 1024
    n_symbols: int = 10
    seq_len: int = 6
    model: TransformerConfig | None = None
    epochs: int = 10
    global_batch_size: int = 32
    lr: float = 3e-3
    label_smoothing: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        expected = task_model(self.n_symbols, self.seq_len)
        if self.model is None:
            self.model = expected
            return
        for name in ("src_vocab_size", "tgt_vocab_size", "max_len"):
            if getattr(self.model, name) != getattr(expected, name):
                raise ValueError(f"model.{name} must be {getattr(expected, name)} for "
                                 f"{self.n_symbols} symbols and sequences of {self.seq_len}, "
                                 f"got {getattr(self.model, name)}; build it with task_model")


def train(settings: DataParallelSettings, context: DistributedContext,
          progress: bool = True) -> tuple[History, Transformer]:
    """Train on this rank's share through :func:`course_lib.train.loop.fit` with the DDP-wrapped
    model; returns the history (global losses, the same on every rank) and the bare model."""
    check_choice("task", settings.task, TASKS)
    batch_per_rank = per_rank_batch_size(settings.global_batch_size, context.world_size)
    if settings.n_examples < settings.global_batch_size:
        raise ValueError(f"{settings.n_examples} examples do not fill one global batch of "
                         f"{settings.global_batch_size}")
    seed_everything(settings.seed)
    data = sequence_task(settings.task, n=settings.n_examples, n_symbols=settings.n_symbols,
                         min_len=settings.seq_len, max_len=settings.seq_len, seed=settings.seed)
    loader = distributed_loader(range(settings.n_examples), batch_per_rank, context=context,
                                seed=settings.seed, collate_fn=partial(take_rows, data))
    model = Transformer(settings.model)
    parallel_model = wrap_model(model, context)
    optimizer = torch.optim.Adam(parallel_model.parameters(), lr=settings.lr)
    history = fit(parallel_model, optimizer, loader, transformer_loss(settings.label_smoothing),
                  epochs=settings.epochs, device=context.device, progress=progress)
    return history, model


def save_results(out_dir: Path, settings: DataParallelSettings, context: DistributedContext,
                 history: History, model: nn.Module) -> None:
    """Rank 0 writes ``history.json`` (settings, world size, per-epoch records); every rank
    writes its final weights to ``state_rank{rank}.pt``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), out_dir / f"state_rank{context.rank}.pt")
    if context.is_main:
        result = {"settings": asdict(settings), "world_size": context.world_size,
                  "batch_size_per_rank": settings.global_batch_size // context.world_size,
                  "history": history.records}
        (out_dir / "history.json").write_text(json.dumps(result, indent=2) + "\n")


# Command-line flags: the run's own settings, then the model's (a flag may set several of the
# config's fields: --num-layers sets the encoder's and the decoder's depth).
RUN_FLAGS = {
    "task": f"sequence task, one of {', '.join(TASKS)}",
    "n_examples": "training sequences (one epoch)",
    "n_symbols": "distinct tokens in the sequences",
    "seq_len": "length of every sequence (fixed, so ranks hold equally many tokens)",
    "epochs": "passes over the data",
    "global_batch_size": "rows per optimiser step over all processes together; split evenly, "
                         "each process reads global / nproc",
    "lr": "Adam learning rate", "label_smoothing": "label smoothing ε",
    "seed": "data, shuffling and initialisation seed",
}
MODEL_FLAGS = {
    "d_model": (("d_model",), "model width"),
    "num_heads": (("num_heads",), "attention heads"),
    "num_layers": (("num_encoder_layers", "num_decoder_layers"),
                   "encoder layers and decoder layers (each)"),
    "d_ff": (("d_ff",), "feed-forward width"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m course_lib.experiments.ddp_demo",
        description="Train a small Transformer on a sequence task with DistributedDataParallel "
                    "(launch with torchrun; runs as one process without it).")
    defaults = DataParallelSettings()
    for name in RUN_FLAGS:
        default = getattr(defaults, name)
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default,
                            help=f"{RUN_FLAGS[name]} (default: {default})",
                            choices=TASKS if name == "task" else None)
    for name, (config_fields, help_text) in MODEL_FLAGS.items():
        default = getattr(defaults.model, config_fields[0])
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=default,
                            help=f"{help_text} (default: {default})")
    parser.add_argument("--backend", choices=BACKENDS, default=None,
                        help="torch.distributed backend (default: nccl on CUDA, else gloo)")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for history.json (rank 0) and state_rank<r>.pt (every rank)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    return parser


def settings_from_args(args: argparse.Namespace) -> DataParallelSettings:
    """The settings the command line asks for: run flags set the settings' fields, model flags
    the fields of its nested ``model``."""
    model = task_model(args.n_symbols, args.seq_len,
                       **{name: getattr(args, flag) for flag, (names, _) in MODEL_FLAGS.items()
                          for name in names})
    return DataParallelSettings(model=model, **{name: getattr(args, name) for name in RUN_FLAGS})


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = settings_from_args(args)
    try:
        context = setup(args.backend)
        try:
            history, model = train(settings, context, progress=not args.no_progress)
        finally:
            cleanup()
    except ValueError as error:
        print(f"course_lib.experiments.ddp_demo: {error}", file=sys.stderr)
        return 2
    if args.out is not None:
        save_results(args.out, settings, context, history, model)
    if context.is_main:
        losses = history["train_loss"]
        print(f"{context.world_size} process(es) on {context.device}: train loss "
              f"{losses[0]:.4f} -> {losses[-1]:.4f} in {len(losses)} epoch(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
