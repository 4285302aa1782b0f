"""``docs/performance.md``, generated from the results of ``course bench``."""

from __future__ import annotations

# What each part of course bench must show; the report marks every row against them.
TARGETS = {"attention_ratio_max": 1.10, "transformer_step_ratio_max": 1.10,
           "kv_cache_speedup_min_at_256": 3.0, "lesson_fast_s_max": 60.0,
           "lesson_full_s_max": 180.0, "lessons_full_total_s_max": 1200.0}


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
            f"{rows[0]['memory_measured_by']} (see `course_lib.timing.peak_memory`).",
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
            f"Target: speed-up ≥ {target:g}× at 256 tokens. {kv_cache_reading(result['kv_cache'])}",
            "",
            *_kv_table(result["kv_cache"]),
        ]
    return lines


def _kv_table(rows: list[dict]) -> list[str]:
    lines = ["| batch | tokens | cached s | recomputed s | speed-up | same words |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row.get('batch', '–')} | {row['tokens']} | {row['cached_s']:.3f} | "
                     f"{row['uncached_s']:.3f} | {row['speedup']:.1f}× | "
                     f"{'yes' if row['same_tokens'] else 'NO'} |")
    return lines + [""]


def kv_cache_reading(rows: list[dict]) -> str:
    """What a KV-cache measurement says, in words computed from its rows: the speed-up at the
    smallest and the largest batch, and whether decoding was bound by each step's fixed cost."""
    by_batch: dict[int, list[float]] = {}
    for row in rows:
        by_batch.setdefault(row.get("batch", 0), []).append(row["speedup"])
    smallest, largest = min(by_batch), max(by_batch)
    low = by_batch[smallest]
    text = (f"At batch {smallest} the cache is {min(low):.1f}× to {max(low):.1f}× as fast as "
            f"recomputing the prefix")
    if max(low) < 1.5:
        text += (": no real gain. A greedy step costs about the same fixed amount (Python and, "
                 "on a GPU, the launch of every kernel) whether it reads the cache or recomputes "
                 "the prefix, so at this batch decoding is bound by that overhead, not by "
                 "arithmetic")
    if largest != smallest:
        high = by_batch[largest]
        text += f". At batch {largest}: {min(high):.1f}× to {max(high):.1f}×"
    return text + "."


def gpu_section(measurement: dict) -> list[str]:
    """A committed measurement of the KV cache on a GPU (``results/gpu/*.json``)."""
    config = ", ".join(f"{key} = {value}" for key, value in measurement["config"].items())
    return [
        f"### {measurement['device']}: KV cache by batch size",
        "",
        f"Measured {measurement['measured']} with `{measurement['command']}`; {config}. "
        f"{kv_cache_reading(measurement['rows'])}",
        "",
        *_kv_table(measurement["rows"]),
    ]


def _full_profile_verdict(rows: list[dict]) -> str:
    """The full-profile targets, each lesson and all of them together, against the rows."""
    times = [row["full_s"] for row in rows if row.get("full_s") is not None]
    if not times:
        return ""
    each, total = TARGETS["lesson_full_s_max"], TARGETS["lessons_full_total_s_max"]
    slowest, together = max(times), sum(times)
    failed = [row["lesson"] for row in rows if row.get("full_error")]
    ok = slowest <= each and together <= total and not failed
    text = (f"Target for the full profile: at most {each:g} s per lesson and {total:g} s for "
            f"all together; here the slowest took {slowest:.0f} s and the {len(times)} lessons "
            f"{together:.0f} s, which {_verdict(ok)}")
    return text + (f" ({', '.join(failed)} failed)." if failed else ".")


def performance_markdown(result: dict, gpu_measurements: list[dict] = ()) -> str:
    """The generated ``docs/performance.md`` for a :func:`run_bench` result, with the committed
    GPU measurements (``results/gpu/*.json``) after it."""
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
    if gpu_measurements:
        lines += ["## Measured on GPUs", "", "Committed measurements in `results/gpu/`, made "
                  "where a GPU was lent.", ""]
        for measurement in gpu_measurements:
            lines += gpu_section(measurement)
    if result.get("lessons"):
        limit = TARGETS["lesson_fast_s_max"]
        lines += [
            "## Lessons",
            "",
            f"Each notebook executed top to bottom in a fresh kernel. Target: the fast profile "
            f"(`COURSE_PROFILE=fast`, what CI runs) under {limit:g} s per notebook. The full "
            "profile is what a learner runs: the lessons load the reference models that ship "
            "in `reference-models/` and train only small models live; a run on a fresh clone "
            "(an empty `.cache/`) also generates the corpus and the image sets first. "
            f"{_full_profile_verdict(result['lessons'])}",
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
