"""``course bench``: the course's code measured against PyTorch's own, side by side.

Every ratio is ours / PyTorch's, timed in the same process on the same inputs with the two
calls alternating round by round (:func:`course_lib.timing.paired_medians`), so that a
machine that slows down half way slows both down. Four parts:

- ``attention``: multi-head self-attention, forward + backward, course_lib's production path
  (:class:`~course_lib.nn.self_attention.MultiHeadAttention`, fused kernel) against
  ``torch.nn.MultiheadAttention`` with the same weights, at several lengths and widths; also the
  teaching (explicit) path's ratio and the peak memory of all three (the (B, h, T, T) weights
  the explicit path keeps for backward are the O(T²) memory the fused path avoids);
- ``transformer_step``: one training step (forward, label-smoothed loss, backward, Adam) of
  :class:`~course_lib.models.transformer.Transformer` against the same architecture built from
  ``torch.nn.Transformer`` (:class:`TorchTransformer`);
- ``kv_cache``: greedy decoding of N words with the KV cache against recomputing the prefix at
  every step (:func:`course_lib.lessons.costs.decode_timing`), at several batch sizes: where a
  step is bound by its fixed cost (a GPU's kernel launches) rather than by arithmetic, the cache
  saves little, and only a larger batch shows its speed-up;
- ``lessons``: each lesson notebook's run time in the fast and the full profile.

Results go to ``results/bench.json``; ``docs/performance.md`` is generated from them
(:func:`performance_markdown`). On a CUDA machine the timing parts run on the GPU as well.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from torch import nn

from course_lib.device import bench_devices
from course_lib.experiments.benchmark_report import TARGETS, performance_markdown
from course_lib.experiments.runs import write_json
from course_lib.lessons.costs import decode_timing
from course_lib.models import count_parameters
from course_lib.models.torch_transformer import TorchTransformer
from course_lib.models.transformer import Transformer, TransformerConfig, label_smoothed_loss
from course_lib.nn.self_attention import MultiHeadAttention
from course_lib.paths import COURSE_ROOT
from course_lib.profile import PROFILE_ENV, by_profile
from course_lib.seeding import seed_everything
from course_lib.timing import paired_medians, peak_memory
from course_lib.tokens import PAD_ID

PARTS = ("attention", "transformer_step", "kv_cache", "lessons")
DOCS_PAGE = COURSE_ROOT / "docs" / "performance.md"


@dataclass(frozen=True)
class BenchSettings:
    """Sizes of every part; :meth:`for_profile` gives the real ones or tiny ones for tests."""

    lengths: tuple[int, ...] = (128, 256, 512, 1024, 2048)
    widths: tuple[int, ...] = (256, 512)
    heads: int = 8
    tokens_per_batch: int = 4096  # batch = tokens_per_batch // length, at least 1
    repeats: int = 7
    step: dict = field(default_factory=lambda: {
        "vocab": 1000, "d_model": 128, "num_heads": 4, "layers": 2, "d_ff": 512,
        "batch": 64, "src_len": 32, "tgt_len": 32, "norm_first": True})
    step_repeats: int = 15
    kv_tokens: tuple[int, ...] = (128, 256, 512)
    kv_model: dict = field(default_factory=lambda: {
        "vocab": 1000, "d_model": 256, "num_heads": 4, "layers": 2, "d_ff": 1024,
        "src_len": 32})
    kv_batches: tuple[int, ...] = (4,)  # sentences decoded at once, on a CPU
    kv_batches_cuda: tuple[int, ...] = (4, 64, 256, 1024)  # and on a GPU, where it matters
    kv_repeats: int = 3
    seed: int = 0

    @classmethod
    def for_profile(cls) -> BenchSettings:
        full = cls()
        fast = cls(lengths=(16, 32), widths=(32,), heads=4, tokens_per_batch=64, repeats=2,
                   step={**full.step, "vocab": 50, "d_model": 32, "d_ff": 64, "batch": 4,
                         "src_len": 8, "tgt_len": 8},
                   step_repeats=2, kv_tokens=(4, 8),
                   kv_model={**full.kv_model, "vocab": 50, "d_model": 32, "d_ff": 64,
                             "src_len": 6},
                   kv_batches=(2, 3), kv_batches_cuda=(2, 8), kv_repeats=1)
        return by_profile(fast=fast, full=full)


def _forward_backward(module: nn.Module, x: torch.Tensor) -> Callable[[], None]:
    """A call running ``module`` as self-attention on ``x`` and back-propagating a sum."""
    def call() -> None:
        module.zero_grad(set_to_none=True)
        x.grad = None
        output = module(x, x, x, need_weights=False)[0]
        output.sum().backward()
    return call


# Part 1: attention


def attention_bench(settings: BenchSettings, device: torch.device) -> list[dict]:
    """One row per (length, width): seconds of forward + backward of self-attention for
    PyTorch's ``nn.MultiheadAttention``, our fused path and our explicit path, the ratios
    ours / PyTorch's, and the peak bytes of each (``tensors`` on CPU, the allocator on CUDA)."""
    rows = []
    memory_how = "allocator" if device.type == "cuda" else "tensors"
    for width in settings.widths:
        for length in settings.lengths:
            seed_everything(settings.seed)
            batch = max(1, settings.tokens_per_batch // length)
            reference = nn.MultiheadAttention(width, settings.heads, batch_first=True).to(device)
            ours = MultiHeadAttention.from_torch(reference, "fused")
            explicit = MultiHeadAttention.from_torch(reference, "explicit")
            x = torch.randn(batch, length, width, device=device, requires_grad=True)
            calls = {"torch": _forward_backward(reference, x), "fused": _forward_backward(ours, x),
                     "explicit": _forward_backward(explicit, x)}
            seconds = paired_medians(calls, settings.repeats, device=device)
            memory = {name: peak_memory(call, memory_how, device) for name, call in calls.items()}
            rows.append({
                "seq_len": length, "width": width, "heads": settings.heads, "batch": batch,
                "torch_s": seconds["torch"], "fused_s": seconds["fused"],
                "explicit_s": seconds["explicit"],
                "ratio": seconds["fused"] / seconds["torch"],
                "explicit_ratio": seconds["explicit"] / seconds["torch"],
                "torch_peak_bytes": memory["torch"], "fused_peak_bytes": memory["fused"],
                "explicit_peak_bytes": memory["explicit"], "memory_measured_by": memory_how,
            })
            del reference, ours, explicit, x, calls
    return rows


# Part 2: a Transformer training step (against models.torch_transformer.TorchTransformer)


def step_config(spec: dict) -> TransformerConfig:
    return TransformerConfig(spec["vocab"], spec["vocab"], d_model=spec["d_model"],
                             num_heads=spec["num_heads"], num_encoder_layers=spec["layers"],
                             num_decoder_layers=spec["layers"], d_ff=spec["d_ff"], dropout=0.1,
                             norm_first=spec.get("norm_first", True),
                             max_len=max(spec.get("src_len", 1), spec.get("tgt_len", 1)) + 1)


def _random_tokens(batch: int, length: int, vocab: int, generator: torch.Generator,
                   device: torch.device) -> torch.Tensor:
    first = PAD_ID + 4  # past the special tokens
    return torch.randint(first, vocab, (batch, length), generator=generator).to(device)


def transformer_step_bench(settings: BenchSettings, device: torch.device) -> dict:
    """Median seconds of one training step (zero_grad, forward, label-smoothed loss (ε = 0.1),
    backward, Adam) for our Transformer and :class:`TorchTransformer` of the same config, on
    the same batch (source lengths vary, so the padding masks are real); ratio ours / PyTorch."""
    spec = settings.step
    config = step_config(spec)
    seed_everything(settings.seed)
    models = {"ours": Transformer(config).to(device), "torch": TorchTransformer(config).to(device)}
    params = {name: count_parameters(m) for name, m in models.items()}
    generator = torch.Generator().manual_seed(settings.seed)
    src = _random_tokens(spec["batch"], spec["src_len"], spec["vocab"], generator, device)
    lengths = torch.randint(spec["src_len"] // 2, spec["src_len"] + 1, (spec["batch"],),
                            generator=generator).to(device)
    tgt = _random_tokens(spec["batch"], spec["tgt_len"] + 1, spec["vocab"], generator, device)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]  # (B, T) each

    def step(model: nn.Module, optimizer: torch.optim.Optimizer) -> Callable[[], None]:
        def call() -> None:
            model.train()
            optimizer.zero_grad(set_to_none=True)
            label_smoothed_loss(model(src, lengths, tgt_in), tgt_out, 0.1).backward()
            optimizer.step()
        return call

    calls = {name: step(m, torch.optim.Adam(m.parameters(), 1e-4)) for name, m in models.items()}
    seconds = paired_medians(calls, settings.step_repeats, warmup=2, device=device)
    return {"config": {**spec, "dropout": 0.1}, "params": params,
            "ours_s": seconds["ours"], "torch_s": seconds["torch"],
            "ratio": seconds["ours"] / seconds["torch"]}


# Part 3: the KV cache


def kv_cache_bench(settings: BenchSettings, device: torch.device) -> list[dict]:
    """Seconds to generate exactly N words greedily with and without the KV cache (an untrained
    model: the speed does not depend on the weights), and the speed-up uncached / cached, for
    each batch size of the device (``kv_batches``, or ``kv_batches_cuda`` on a GPU)."""
    spec = settings.kv_model
    config = replace(step_config({**spec, "tgt_len": max(settings.kv_tokens)}), dropout=0.0)
    seed_everything(settings.seed)
    model = Transformer(config).to(device).eval()
    batches = settings.kv_batches_cuda if device.type == "cuda" else settings.kv_batches
    found = []
    for batch in batches:
        generator = torch.Generator().manual_seed(settings.seed + batch)
        src = _random_tokens(batch, spec["src_len"], spec["vocab"], generator, device)
        lengths = torch.full((batch,), spec["src_len"], device=device)
        rows = decode_timing(model, src, lengths, settings.kv_tokens, settings.kv_repeats)
        found += [{"batch": batch, **{key: row[key] for key in (
            "tokens", "cached_s", "uncached_s", "speedup", "same_tokens")}} for row in rows]
    return found


# Part 4: the lessons


def lesson_notebooks(root: Path = COURSE_ROOT) -> list[Path]:
    return sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def time_notebook(path: Path, profile: str, timeout_s: int = 1800) -> dict:
    """Execute one notebook top to bottom in a fresh kernel under ``COURSE_PROFILE=profile``;
    seconds from kernel start to the last cell, and the first error if any."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    environment = {**os.environ, PROFILE_ENV: profile, "MPLBACKEND": "Agg"}
    client = NotebookClient(nb, timeout=timeout_s, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    error = None
    try:
        client.execute(env=environment)
    except Exception as failure:  # noqa: BLE001 - a failing lesson is a result, not a crash
        error = f"{type(failure).__name__}: {str(failure).strip().splitlines()[-1][:200]}" \
            if str(failure).strip() else type(failure).__name__
    return {"seconds": time.perf_counter() - start, "error": error}


def lessons_bench(profiles: Sequence[str], root: Path = COURSE_ROOT,
                  only: Sequence[str] | None = None) -> list[dict]:
    """One row per lesson: ``fast_s`` / ``full_s`` (None when that profile was not run) and
    the error of a run that failed."""
    rows = []
    for path in lesson_notebooks(root):
        if only and not any(path.stem.startswith(prefix) for prefix in only):
            continue
        row: dict[str, Any] = {"lesson": path.stem, "fast_s": None, "full_s": None}
        for profile in profiles:
            timed = time_notebook(path, profile)
            row[f"{profile}_s"] = round(timed["seconds"], 1)
            if timed["error"]:
                row[f"{profile}_error"] = timed["error"]
        rows.append(row)
    return rows


# The whole run


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"cpu: {model}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads"


def device_bench(settings: BenchSettings, device: torch.device, parts: Sequence[str],
                 log: Callable[[str], None] = print) -> dict:
    """The timing parts on one device."""
    result: dict[str, Any] = {"device": describe_device(device)}
    if "attention" in parts:
        log(f"[{device}] attention: {len(settings.lengths) * len(settings.widths)} sizes")
        result["attention"] = attention_bench(settings, device)
    if "transformer_step" in parts:
        log(f"[{device}] Transformer training step")
        step = transformer_step_bench(settings, device)
        result["transformer_step"] = step
        result["transformer_step_ratio"] = step["ratio"]
    if "kv_cache" in parts:
        log(f"[{device}] KV cache at {list(settings.kv_tokens)} tokens")
        rows = kv_cache_bench(settings, device)
        result["kv_cache"] = rows
        smallest = min(row["batch"] for row in rows)
        result["kv_cache_speedup"] = {str(row["tokens"]): row["speedup"] for row in rows
                                      if row["batch"] == smallest}
    return result


def run_bench(parts: Sequence[str] = PARTS, settings: BenchSettings | None = None,
              lesson_profiles: Sequence[str] = ("fast", "full"),
              lessons: Sequence[str] | None = None, cuda: bool | None = None,
              log: Callable[[str], None] = print) -> dict:
    """Run the benchmarks; the CPU's results are the top-level keys, a GPU's go under
    ``"cuda"`` (``cuda=None``: when one is available; never an error without one)."""
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise ValueError(f"unknown bench parts {unknown}; choose from {list(PARTS)}")
    settings = settings or BenchSettings.for_profile()
    started = time.perf_counter()
    cpu, *gpus = bench_devices(cuda)
    result = device_bench(settings, cpu, parts, log)
    result["created"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    result["machine"] = {"python": platform.python_version(), "torch": torch.__version__,
                         "platform": platform.platform(), "cpus": os.cpu_count()}
    result["settings"] = asdict(settings)
    result["targets"] = TARGETS
    result["cuda"] = device_bench(settings, gpus[0], parts, log) if gpus else None
    if "lessons" in parts:
        log(f"lessons, profiles {list(lesson_profiles)}")
        result["lessons"] = lessons_bench(lesson_profiles, only=lessons)
    result["wall_s"] = round(time.perf_counter() - started, 1)
    return result


# The Markdown page


PART_KEYS = {"attention": ("attention",),
             "transformer_step": ("transformer_step", "transformer_step_ratio"),
             "kv_cache": ("kv_cache", "kv_cache_speedup"), "lessons": ("lessons",)}
GPU_RESULTS = COURSE_ROOT / "results" / "gpu"


def read_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def merged(previous: dict | None, result: dict, parts: Sequence[str]) -> dict:
    """``result`` with the parts it did not run taken from ``previous``, an earlier run on the
    same device (so that running one part keeps the page's others); else ``result`` alone."""
    if not previous or previous.get("device") != result.get("device"):
        return result
    kept = dict(result)
    for part in set(PARTS) - set(parts):
        for key in PART_KEYS[part]:
            if key in previous:
                kept[key] = previous[key]
        if part != "lessons" and previous.get("cuda") and result.get("cuda"):
            kept["cuda"] = {**result["cuda"], **{k: previous["cuda"][k] for k in PART_KEYS[part]
                                                 if k in previous["cuda"]}}
    return kept


def gpu_measurements(folder: Path = GPU_RESULTS) -> list[dict]:
    """The committed GPU measurements, ``results/gpu/*.json``, in name order."""
    return [json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))]


def bench_cli(args) -> int:
    parts = tuple(args.parts.split(",")) if args.parts else PARTS
    profiles = tuple(p for p in args.lesson_profiles.split(",") if p)
    for profile in profiles:
        if profile not in ("fast", "full"):
            print(f"course bench: unknown profile {profile!r}; use fast, full or both",
                  file=sys.stderr)
            return 2
    try:
        result = run_bench(parts, lesson_profiles=profiles, lessons=args.lessons or None)
    except ValueError as error:
        print(f"course bench: {error}", file=sys.stderr)
        return 2
    out_dir = Path(args.out_dir) if args.out_dir else COURSE_ROOT / "results"
    result = merged(read_json(out_dir / "bench.json"), result, parts)
    json_path = write_json(result, out_dir / "bench.json")
    docs = Path(args.docs) if args.docs else DOCS_PAGE
    docs.parent.mkdir(parents=True, exist_ok=True)
    docs.write_text(performance_markdown(result, gpu_measurements()) + "\n")
    print(f"wrote {json_path} and {docs}")
    return 0
