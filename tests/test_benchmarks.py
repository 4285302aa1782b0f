"""``course bench``: the pieces are right (same functions compared, alternating timing, honest
verdicts) and the command writes the promised JSON and page. The real numbers come from running
``course bench`` on a quiet machine; here everything runs at the fast profile's tiny sizes."""

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from course_lib.course.syllabus import COURSE_ROOT
from course_lib.experiments import benchmarks
from course_lib.experiments.benchmark_report import performance_markdown
from course_lib.experiments.benchmarks import BenchSettings, step_config
from course_lib.lessons import costs as efficiency
from course_lib.models.torch_transformer import TorchTransformer
from course_lib.models.transformer import Transformer
from course_lib.timing import median_seconds, paired_medians
from tests.reproduce_cli import refusal

TINY = {"vocab": 30, "d_model": 16, "num_heads": 4, "layers": 2, "d_ff": 32, "src_len": 7,
        "tgt_len": 6}


def tiny_pair(seed=0):
    torch.manual_seed(seed)
    ours = Transformer(replace(step_config(TINY), dropout=0.0))
    return ours, TorchTransformer.from_ours(ours)


def batch(seed=1):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(4, 30, (3, 7), generator=g), torch.tensor([7, 5, 3]),
            torch.randint(4, 30, (3, 6), generator=g))


def test_the_pytorch_transformer_computes_the_same_function_with_our_weights():
    ours, theirs = tiny_pair()
    src, lengths, tgt = batch()
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())
    for mode in ("eval", "train"):  # dropout is 0: both modes must agree
        getattr(ours, mode)(), getattr(theirs, mode)()
        torch.testing.assert_close(theirs(src, lengths, tgt), ours(src, lengths, tgt),
                                   atol=1e-5, rtol=1e-5)
    # and the comparison can fail: another model's weights give other logits
    _, other = tiny_pair(seed=1)
    assert not torch.allclose(other.eval()(src, lengths, tgt), ours.eval()(src, lengths, tgt),
                              atol=1e-3)


def test_gradients_agree_too():
    ours, theirs = tiny_pair()
    src, lengths, tgt = batch()
    for model in (ours, theirs):
        model(src, lengths, tgt).square().mean().backward()
    torch.testing.assert_close(theirs.layers.encoder.layers[0].linear1.weight.grad,
                               ours.encoder_layers[0].ffn.linear1.weight.grad,
                               atol=1e-6, rtol=1e-4)
    torch.testing.assert_close(theirs.tgt_embed.weight.grad, ours.tgt_embed.weight.grad,
                               atol=1e-6, rtol=1e-4)


def test_post_norm_is_refused_with_the_reason():
    torch.manual_seed(0)
    model = Transformer(replace(step_config(TINY), norm_first=False))
    with pytest.raises(ValueError, match="pre-norm"):
        TorchTransformer.from_ours(model)


def test_paired_medians_alternate_the_calls_and_take_medians(monkeypatch):
    order = []
    clock = iter(range(1000))
    monkeypatch.setattr(efficiency.time, "perf_counter", lambda: float(next(clock)))
    result = paired_medians({"a": lambda: order.append("a"), "b": lambda: order.append("b")},
                            repeats=3, warmup=1)
    assert order == ["a", "b"] * 4
    # every call takes one tick of the fake clock
    assert result == {"a": 1.0, "b": 1.0}
    assert median_seconds(lambda: order.append("c"), repeats=2, warmup=0) == 1.0
    assert order[-2:] == ["c", "c"]
    with pytest.raises(ValueError, match="repeats >= 1"):
        paired_medians({"a": lambda: None}, repeats=0)


def test_unknown_parts_are_refused():
    with pytest.raises(ValueError, match="unknown bench parts"):
        benchmarks.run_bench(parts=("attention", "speed"))


@pytest.fixture(scope="module")
def fast_result():
    settings = BenchSettings.for_profile()
    assert settings.lengths == (16, 32), "the tests run in the fast profile"
    return benchmarks.run_bench(parts=("attention", "transformer_step", "kv_cache"),
                           settings=settings, cuda=False, log=lambda _: None)


def test_result_has_the_promised_keys(fast_result):
    assert fast_result["device"].startswith("cpu")
    assert {(r["seq_len"], r["width"]) for r in fast_result["attention"]} == {(16, 32), (32, 32)}
    for row in fast_result["attention"]:
        assert row["ratio"] == pytest.approx(row["fused_s"] / row["torch_s"])
        assert row["explicit_peak_bytes"] > 0 and row["fused_peak_bytes"] > 0
    assert fast_result["transformer_step_ratio"] > 0
    assert set(fast_result["kv_cache_speedup"]) == {"4", "8"}
    assert all(row["same_tokens"] for row in fast_result["kv_cache"])
    assert [(r["batch"], r["tokens"]) for r in fast_result["kv_cache"]] == \
        [(2, 4), (2, 8), (3, 4), (3, 8)]  # every batch size at every length
    assert fast_result["kv_cache_speedup"]["8"] == fast_result["kv_cache"][1]["speedup"]
    assert fast_result["cuda"] is None
    json.dumps(fast_result)  # JSON-able as it stands


def test_explicit_attention_keeps_the_quadratic_weights(fast_result):
    # The explicit path stores (B, h, T, T) weights for backward; doubling T at a fixed number
    # of tokens doubles T² / T per sequence: its peak must grow, the fused path's much less.
    short, long = sorted(fast_result["attention"], key=lambda r: r["seq_len"])
    assert long["explicit_peak_bytes"] > short["explicit_peak_bytes"]
    assert long["explicit_peak_bytes"] > long["fused_peak_bytes"]


def test_the_page_states_each_verdict_from_the_numbers(fast_result):
    good = json.loads(json.dumps(fast_result))
    for row in good["attention"]:
        row["ratio"] = 1.0
    good["transformer_step"]["ratio"] = 1.05
    page = performance_markdown(good)
    assert "misses the target" not in page and "No CUDA device" in page
    bad = json.loads(json.dumps(good))
    bad["attention"][1]["ratio"] = 1.2
    assert "the worst here is 1.200, which **misses the target**" in performance_markdown(bad)


def test_lesson_timing_reports_a_failing_notebook(tmp_path):
    import nbformat

    folder = tmp_path / "notebooks"
    folder.mkdir()
    cells = ["import os; print(os.environ['COURSE_PROFILE'])", "raise RuntimeError('boom')"]
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]),
                   folder / "01_broken.ipynb")
    rows = benchmarks.lessons_bench(["fast"], root=tmp_path)
    assert [r["lesson"] for r in rows] == ["01_broken"]
    assert rows[0]["full_s"] is None and rows[0]["fast_s"] > 0
    assert "boom" in rows[0]["fast_error"]


def test_command_writes_json_and_page(tmp_path):
    command = [sys.executable, "-m", "course_lib", "bench", "--parts", "kv_cache",
               "--out-dir", str(tmp_path), "--docs", str(tmp_path / "performance.md")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300,
                          cwd=COURSE_ROOT, env={**os.environ, "COURSE_PROFILE": "fast"})
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "bench.json").read_text())
    assert set(result["kv_cache_speedup"]) == {"4", "8"} and "attention" not in result
    page = (tmp_path / "performance.md").read_text()
    assert "KV cache" in page and "Generated by `course bench`" in page

def test_unknown_bench_parts_are_refused(capsys):
    assert "unknown bench parts" in refusal(["bench", "--parts", "speed"], capsys)


def kv_rows(speedups):
    """Rows of a KV-cache measurement: ``speedups`` maps (batch, tokens) to the speed-up."""
    return [{"batch": b, "tokens": t, "cached_s": 1.0, "uncached_s": x, "speedup": x,
             "same_tokens": True} for (b, t), x in speedups.items()]


def test_the_kv_reading_says_when_decoding_is_bound_by_overhead():
    from course_lib.experiments.benchmark_report import kv_cache_reading

    bound = kv_cache_reading(kv_rows({(4, 128): 1.28, (4, 512): 0.93, (1024, 512): 6.61}))
    assert bound.startswith("At batch 4 the cache is 0.9× to 1.3× as fast")
    assert "no real gain" in bound and "bound by that overhead" in bound
    assert bound.endswith("At batch 1024: 6.6× to 6.6×.")
    paying = kv_cache_reading(kv_rows({(4, 128): 2.0, (4, 512): 3.6}))
    assert "no real gain" not in paying and "batch 1024" not in paying


def test_a_part_run_alone_keeps_the_others_of_the_same_device():
    previous = {"device": "cpu: X", "attention": [1], "kv_cache": [2], "kv_cache_speedup": {},
                "lessons": [3], "cuda": None}
    now = {"device": "cpu: X", "kv_cache": [9], "kv_cache_speedup": {"4": 9.0}, "cuda": None}
    kept = benchmarks.merged(previous, now, ["kv_cache"])
    assert kept["attention"] == [1] and kept["lessons"] == [3] and kept["kv_cache"] == [9]
    assert benchmarks.merged({**previous, "device": "cpu: Y"}, now, ["kv_cache"]) == now
    assert benchmarks.merged(None, now, ["kv_cache"]) == now


def test_the_committed_gpu_measurements_are_complete_and_reach_the_page(fast_result):
    measured = benchmarks.gpu_measurements()
    assert any("H200" in m["device"] for m in measured)
    for measurement in measured:
        assert {"device", "measured", "command", "config", "rows"} <= set(measurement)
        for row in measurement["rows"]:
            assert row["speedup"] == pytest.approx(row["uncached_s"] / row["cached_s"], abs=0.01)
            assert row["same_tokens"] is True
    page = performance_markdown(fast_result, measured)
    for measurement in measured:
        assert f"### {measurement['device']}: KV cache by batch size" in page


def test_the_gpu_measurement_tool_writes_what_the_page_and_lesson_11_read(tmp_path, monkeypatch):
    """tools/kv_cache_by_batch.py, cut to 3 words per sentence, on this machine's CPU."""
    import importlib.util

    from course_lib.experiments.benchmark_report import gpu_section

    spec = importlib.util.spec_from_file_location(
        "kv_cache_by_batch", COURSE_ROOT / "tools" / "kv_cache_by_batch.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    monkeypatch.setattr(tool, "TOKENS", [3])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    tool.main(tmp_path)
    (measurement,) = benchmarks.gpu_measurements(tmp_path)
    assert [(r["batch"], r["tokens"]) for r in measurement["rows"]] == [(4, 3), (64, 3)]
    assert all(r["same_tokens"] for r in measurement["rows"])
    assert gpu_section(measurement)[0] == f"### {measurement['device']}: KV cache by batch size"


def test_the_page_checks_the_full_profile_against_three_minutes_and_twenty_in_all(fast_result):
    rows = [{"lesson": f"{i:02d}_x", "fast_s": 1.0, "full_s": 100.0} for i in range(12)]
    page = performance_markdown({**fast_result, "lessons": rows})
    assert "the slowest took 100 s and the 12 lessons 1200 s, which meets the target" in page
    rows[3]["full_s"] = 181.0
    page = performance_markdown({**fast_result, "lessons": rows})
    assert "the slowest took 181 s" in page and "**misses the target**" in page
    rows[3] = {**rows[3], "full_s": 10.0, "full_error": "NameError: x"}
    assert "(03_x failed)." in performance_markdown({**fast_result, "lessons": rows})
