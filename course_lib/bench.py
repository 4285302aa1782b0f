"""``course bench``: the course's code measured against PyTorch's own, side by side.

Every ratio is ours / PyTorch's, timed in the same process on the same inputs with the two
calls alternating round by round (:func:`course_lib.efficiency.paired_medians`), so that a
machine that slows down half way slows both down. Four parts:

- ``attention``: multi-head self-attention, forward + backward, course_lib's production path
  (:class:`~course_lib.self_attention.MultiHeadAttention`, fused kernel) against
  ``torch.nn.MultiheadAttention`` with the same weights, at several lengths and widths; also the
  teaching (explicit) path's ratio and the peak memory of all three (the (B, h, T, T) weights
  the explicit path keeps for backward are the O(T²) memory the fused path avoids);
- ``transformer_step``: one training step (forward, label-smoothed loss, backward, Adam) of
  :class:`~course_lib.transformer.Transformer` against the same architecture built from
  ``torch.nn.Transformer`` (:class:`TorchTransformer`);
- ``kv_cache``: greedy decoding of N words with the KV cache against recomputing the prefix at
  every step (:func:`course_lib.efficiency.decode_timing`);
- ``lessons``: each lesson notebook's run time in the fast and the full profile.

Results go to ``results/bench.json``; ``docs/performance.md`` is generated from them
(:func:`performance_markdown`). On a CUDA machine the timing parts run on the GPU as well.
"""

from __future__ import annotations

import math
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from torch import nn

from course_lib.data.vocab import PAD_ID
from course_lib.device import bench_devices
from course_lib.efficiency import decode_timing, paired_medians, peak_memory
from course_lib.positions import SinusoidalPositions
from course_lib.profile import PROFILE_ENV, by_profile
from course_lib.reproduce import write_json
from course_lib.seeding import seed_everything
from course_lib.self_attention import MultiHeadAttention
from course_lib.syllabus import COURSE_ROOT
from course_lib.transformer import Transformer, TransformerConfig, label_smoothed_loss

PARTS = ("attention", "transformer_step", "kv_cache", "lessons")
TARGETS = {"attention_ratio_max": 1.10, "transformer_step_ratio_max": 1.10,
           "kv_cache_speedup_min_at_256": 3.0, "lesson_fast_s_max": 60.0}
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
        "batch": 4, "src_len": 32})
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
                             "batch": 2, "src_len": 6},
                   kv_repeats=1)
        return by_profile(fast=fast, full=full)


# ---------------------------------------------------------------------------------------------
def _forward_backward(module: nn.Module, x: torch.Tensor) -> Callable[[], None]:
    """A call running ``module`` as self-attention on ``x`` and back-propagating a sum."""
    def call() -> None:
        module.zero_grad(set_to_none=True)
        x.grad = None
        output = module(x, x, x, need_weights=False)[0]
        output.sum().backward()
    return call


# ---------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------
# Part 2: a Transformer training step


class TorchTransformer(nn.Module):
    """The architecture of :class:`~course_lib.transformer.Transformer` around
    ``torch.nn.Transformer``: the same scaled embeddings, sinusoidal positions, tied output
    layer and masks (source padding; causal target), so that only the layers differ.

    ``nn.Transformer`` always ends its stacks with a LayerNorm; ours does with pre-norm only,
    which is why the comparison uses pre-norm (then both have the same parameters).
    Shapes: ``src`` (B, S), ``src_lengths`` (B,), ``tgt_in`` (B, T) -> logits (B, T, V).
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        c = self.config = config
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model, padding_idx=PAD_ID)
        self.tgt_embed = nn.Embedding(c.tgt_vocab_size, c.d_model, padding_idx=PAD_ID)
        self.src_positions = SinusoidalPositions(c.d_model, c.max_len)
        self.tgt_positions = SinusoidalPositions(c.d_model, c.max_len)
        self.dropout = nn.Dropout(c.dropout)
        with warnings.catch_warnings():  # "enable_nested_tensor is True, but ...": inference only
            warnings.simplefilter("ignore", UserWarning)
            self.layers = nn.Transformer(c.d_model, c.num_heads, c.num_encoder_layers,
                                         c.num_decoder_layers, c.d_ff, c.dropout,
                                         batch_first=True, norm_first=c.norm_first)
        self.out = nn.Linear(c.d_model, c.tgt_vocab_size)
        self.out.weight = self.tgt_embed.weight

    @classmethod
    def from_ours(cls, model: Transformer) -> TorchTransformer:
        """The same function as ``model`` (pre-norm): every weight copied across, W^Q, W^K, W^V
        stacked into PyTorch's ``in_proj_weight``."""
        if not model.config.norm_first:
            raise ValueError("only a pre-norm Transformer has nn.Transformer's final norms")
        theirs = cls(model.config).to(next(model.parameters()).device)
        ours, state = model.state_dict(), theirs.state_dict()
        # (our module, theirs) for every module with a weight and a bias copied as they are
        same = [("out", "out"), ("encoder_norm", "layers.encoder.norm"),
                ("decoder_norm", "layers.decoder.norm")]
        attentions = []  # (our MultiHeadAttention, their nn.MultiheadAttention)
        sublayers = {"encoder": ("attn_sublayer", "ffn_sublayer"),
                     "decoder": ("self_sublayer", "cross_sublayer", "ffn_sublayer")}
        for stack, names in sublayers.items():
            for i in range(len(getattr(model, f"{stack}_layers"))):
                mine, their = f"{stack}_layers.{i}", f"layers.{stack}.layers.{i}"
                same += [(f"{mine}.ffn.linear{j}", f"{their}.linear{j}") for j in (1, 2)]
                same += [(f"{mine}.{name}.norm", f"{their}.norm{j}")
                         for j, name in enumerate(names, start=1)]
                attentions.append((f"{mine}.self_attn", f"{their}.self_attn"))
                if stack == "decoder":
                    attentions.append((f"{mine}.cross_attn", f"{their}.multihead_attn"))
        for kind in ("weight", "bias"):
            for mine, their in same:
                state[f"{their}.{kind}"] = ours[f"{mine}.{kind}"]
            for mine, their in attentions:
                state[f"{their}.in_proj_{kind}"] = torch.cat(
                    [ours[f"{mine}.{n}_proj.{kind}"] for n in "qkv"])  # (3D, D) or (3D,)
                state[f"{their}.out_proj.{kind}"] = ours[f"{mine}.out_proj.{kind}"]
        for embedding in ("src_embed", "tgt_embed"):
            state[f"{embedding}.weight"] = ours[f"{embedding}.weight"]
        state["out.weight"] = ours["tgt_embed.weight"]  # tied in both
        theirs.load_state_dict(state)
        return theirs

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor,
                tgt_in: torch.Tensor) -> torch.Tensor:
        scale = math.sqrt(self.config.d_model)
        x = self.dropout(self.src_positions(self.src_embed(src) * scale))  # (B, S, D)
        y = self.dropout(self.tgt_positions(self.tgt_embed(tgt_in) * scale))  # (B, T, D)
        positions = torch.arange(src.shape[1], device=src.device)  # (S,)
        padding = positions.unsqueeze(0) >= src_lengths.unsqueeze(1)  # (B, S), True = pad
        # PyTorch's convention is the opposite of ours: True = may NOT attend.
        steps = tgt_in.shape[1]
        future = torch.ones(steps, steps, dtype=torch.bool, device=src.device).triu(1)  # (T, T)
        hidden = self.layers(x, y, tgt_mask=future, src_key_padding_mask=padding,
                             memory_key_padding_mask=padding, tgt_is_causal=True)  # (B, T, D)
        return self.out(hidden)


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
    params = {name: sum(p.numel() for p in m.parameters()) for name, m in models.items()}
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


# ---------------------------------------------------------------------------------------------
# Part 3: the KV cache


def kv_cache_bench(settings: BenchSettings, device: torch.device) -> list[dict]:
    """Seconds to generate exactly N words greedily with and without the KV cache (an untrained
    model: the speed does not depend on the weights), and the speed-up uncached / cached."""
    spec = settings.kv_model
    config = replace(step_config({**spec, "tgt_len": max(settings.kv_tokens)}), dropout=0.0)
    seed_everything(settings.seed)
    model = Transformer(config).to(device).eval()
    generator = torch.Generator().manual_seed(settings.seed)
    src = _random_tokens(spec["batch"], spec["src_len"], spec["vocab"], generator, device)
    lengths = torch.full((spec["batch"],), spec["src_len"], device=device)
    rows = decode_timing(model, src, lengths, settings.kv_tokens, settings.kv_repeats)
    return [{key: row[key] for key in ("tokens", "cached_s", "uncached_s", "speedup",
                                       "same_tokens")} for row in rows]


# ---------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------
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
        result["kv_cache_speedup"] = {str(row["tokens"]): row["speedup"] for row in rows}
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


# ---------------------------------------------------------------------------------------------
# The Markdown page


def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1e3:.1f}"


def _mib(count: int | None) -> str:
    return "–" if count is None else f"{count / 2**20:.1f}"


def _verdict(ok: bool) -> str:
    return "meets the target" if ok else "**misses the target**"


def _device_sections(result: dict, heading: str) -> list[str]:
    lines = [f"## {heading}", "", f"Device: {result['device']}.", ""]
    limit = TARGETS["attention_ratio_max"]
    if result.get("attention"):
        rows = result["attention"]
        worst = max(row["ratio"] for row in rows)
        lines += [
            "### Multi-head self-attention, forward + backward",
            "",
            "Ratio = course_lib time / `torch.nn.MultiheadAttention` time, same weights, same "
            f"input, calls alternating, medians. Target: ≤ {limit:.2f} at every size; the worst "
            f"here is {worst:.3f}, which {_verdict(worst <= limit)}. Peak memory: "
            f"{rows[0]['memory_measured_by']} (see `course_lib.efficiency.peak_memory`).",
            "",
            "| length | width | batch | PyTorch ms | ours (fused) ms | ratio | explicit ms | "
            "explicit ratio | PyTorch MiB | fused MiB | explicit MiB |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for row in rows:
            lines.append(
                f"| {row['seq_len']} | {row['width']} | {row['batch']} | {_ms(row['torch_s'])} | "
                f"{_ms(row['fused_s'])} | {row['ratio']:.3f} | {_ms(row['explicit_s'])} | "
                f"{row['explicit_ratio']:.2f} | {_mib(row['torch_peak_bytes'])} | "
                f"{_mib(row['fused_peak_bytes'])} | {_mib(row['explicit_peak_bytes'])} |")
        lines.append("")
    if result.get("transformer_step"):
        step = result["transformer_step"]
        limit = TARGETS["transformer_step_ratio_max"]
        config = step["config"]
        lines += [
            "### A Transformer training step",
            "",
            f"Pre-norm, D = {config['d_model']}, {config['num_heads']} heads, "
            f"{config['layers']} + {config['layers']} layers, d_ff = {config['d_ff']}, batch "
            f"{config['batch']} × {config['src_len']} source / {config['tgt_len']} target "
            f"tokens, vocabulary {config['vocab']}; forward, label-smoothed loss, backward, Adam. "
            f"Parameters: ours {step['params']['ours']:,}, PyTorch {step['params']['torch']:,}.",
            "",
            "| PyTorch ms | ours ms | ratio | target |",
            "|---|---|---|---|",
            f"| {_ms(step['torch_s'])} | {_ms(step['ours_s'])} | {step['ratio']:.3f} | "
            f"≤ {limit:.2f}: {_verdict(step['ratio'] <= limit)} |",
            "",
        ]
    if result.get("kv_cache"):
        target = TARGETS["kv_cache_speedup_min_at_256"]
        lines += [
            "### Greedy decoding: KV cache against recomputing the prefix",
            "",
            f"Target: speed-up ≥ {target:g}× at 256 tokens.",
            "",
            "| tokens | cached s | recomputed s | speed-up | same words |",
            "|---|---|---|---|---|",
        ]
        for row in result["kv_cache"]:
            lines.append(f"| {row['tokens']} | {row['cached_s']:.3f} | {row['uncached_s']:.3f} | "
                         f"{row['speedup']:.1f}× | {'yes' if row['same_tokens'] else 'NO'} |")
        lines.append("")
    return lines


def performance_markdown(result: dict) -> str:
    """The generated ``docs/performance.md`` for a :func:`run_bench` result."""
    lines = [
        "# Performance: course_lib against PyTorch",
        "",
        "<!-- Generated by `course bench` from results/bench.json; do not edit by hand. -->",
        "",
        f"Measured {result['created']} with torch {result['machine']['torch']}, Python "
        f"{result['machine']['python']} on {result['machine']['platform']} "
        f"({result['machine']['cpus']} CPUs); the whole run took {result['wall_s']:.0f} s. "
        "Rerun with `course bench` (`course bench --help` for the parts).",
        "",
    ]
    lines += _device_sections(result, "CPU")
    if result.get("cuda"):
        lines += _device_sections(result["cuda"], "CUDA")
    else:
        lines += ["No CUDA device was present for this run; on a GPU machine `course bench` "
                  "runs the same parts there too.", ""]
    if result.get("lessons"):
        limit = TARGETS["lesson_fast_s_max"]
        lines += [
            "## Lessons",
            "",
            f"Each notebook executed top to bottom in a fresh kernel. Target: the fast profile "
            f"(`COURSE_PROFILE=fast`, what CI runs) under {limit:g} s per notebook. The full "
            "profile is what a learner runs; lessons that reuse a model trained by `course "
            "reproduce` load it from `.cache/models/` when present and train it otherwise.",
            "",
            "| lesson | fast s | full s |",
            "|---|---|---|",
        ]
        for row in result["lessons"]:
            cells = []
            for profile in ("fast", "full"):
                seconds = row.get(f"{profile}_s")
                text = "not run" if seconds is None else f"{seconds:.1f}"
                if row.get(f"{profile}_error"):
                    text += f" (failed: {row[f'{profile}_error']})"
                cells.append(text)
            lines.append(f"| {row['lesson']} | {cells[0]} | {cells[1]} |")
        lines.append("")
    return "\n".join(lines)


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
    json_path = write_json(result, out_dir / "bench.json")
    docs = Path(args.docs) if args.docs else DOCS_PAGE
    docs.parent.mkdir(parents=True, exist_ok=True)
    docs.write_text(performance_markdown(result) + "\n")
    print(f"wrote {json_path} and {docs}")
    return 0
