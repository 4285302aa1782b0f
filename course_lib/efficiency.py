"""Measuring and masking for efficient attention and decoding, lesson 11.

- :func:`greedy_steps` and :func:`decode_timing`: exactly N greedy decoding steps of a
  :class:`~course_lib.transformer.Transformer`, with and without the KV cache, timed per step
  and in total;
- :func:`sequence_log_prob`: ``log p(Y | X)`` of finished outputs, to compare greedy decoding
  and beam search on the quantity beam search maximises;
- :func:`peak_memory`, :func:`median_seconds` and :func:`attention_cost`: time and memory of
  explicit attention (which forms the T×S weights of every head) and fused attention
  (``torch.nn.functional.scaled_dot_product_attention``) as the length grows;
- :func:`blockwise_attention`: the online softmax at the heart of FlashAttention (Dao et al.,
  2022), in plain PyTorch: exact attention that never holds more than T × block scores;
- :func:`sdpa_backends`: which of PyTorch's SDPA kernels can run given inputs on this machine;
- :func:`window_mask` and :func:`reach`: sliding-window attention (Beltagy et al., 2020; Jiang
  et al., 2023), the descendant of Luong et al.'s (2015) local attention, and how far
  information travels through a stack of windowed layers.

Everything follows the device of its inputs; masks are boolean with True = "may attend".
"""

from __future__ import annotations

import math
import operator
import statistics
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from course_lib.data.vocab import BOS_ID, PAD_ID
from course_lib.device import synchronize
from course_lib.self_attention import causal_mask, scaled_dot_product_attention

# ---------------------------------------------------------------------------------------------
# Sliding windows
# ---------------------------------------------------------------------------------------------


def window_mask(queries: int, keys: int | None = None, half_width: int = 0, causal: bool = False,
                device: torch.device | str | None = None) -> torch.Tensor:
    """True where query i may see key j: ``|i' − j| <= half_width`` with ``i' = i + (S − T)``.

    The alignment is :func:`~course_lib.self_attention.causal_mask`'s: the last query sits at
    the last key's position (with a cache of S − T earlier tokens, query i is token i'). This is
    Luong et al.'s (2015) local window ``[p_t − D, p_t + D]`` with ``p_t = i'`` for every query
    at once. ``causal=True`` also hides the future (``j <= i'``): each token then sees itself
    and the ``half_width`` tokens before it, the sliding window of Mistral 7B with
    W = half_width (positions i − W to i; Jiang et al., 2023). Shape: (T, S).
    """
    keys = queries if keys is None else keys
    try:
        queries, keys, half_width = (operator.index(n) for n in (queries, keys, half_width))
    except TypeError:
        raise TypeError(f"queries, keys and half_width must be integers, got {queries!r}, "
                        f"{keys!r} and {half_width!r}") from None
    if queries < 1 or keys < queries:
        raise ValueError(f"a window mask needs 1 <= queries <= keys, got T = {queries} and "
                         f"S = {keys}")
    if half_width < 0:
        raise ValueError(f"half_width must be >= 0, got {half_width}")
    rows = torch.arange(queries, device=device).unsqueeze(1) + (keys - queries)  # (T, 1): i'
    cols = torch.arange(keys, device=device).unsqueeze(0)  # (1, S): j
    offset = rows - cols  # (T, S): how far key j lies behind query i
    mask = offset.abs() <= half_width
    return mask & (offset >= 0) if causal else mask  # (T, S)


def reach(mask: torch.Tensor, layers: int) -> torch.Tensor:
    """Which inputs can influence which outputs after ``layers`` attention layers with ``mask``.

    Position i of layer l reads the positions its mask allows at layer l − 1, and itself (the
    residual connection), so ``R_1 = M ∨ I`` and ``R_{l+1} = R_l · R_1`` (boolean product).
    With a causal window of half-width w, the last output reaches ``layers · w`` tokens back:
    the receptive field grows linearly with depth (Beltagy et al., 2020, section 3.1).

    Shapes: ``mask`` (T, T) bool (self-attention) -> (T, T) bool, True = input j reaches
    output i.
    """
    if mask.dtype != torch.bool or mask.dim() != 2 or mask.shape[0] != mask.shape[1]:
        raise ValueError(f"expected a square (T, T) bool mask, got {tuple(mask.shape)} "
                         f"{mask.dtype}")
    if not isinstance(layers, int) or layers < 1:
        raise ValueError(f"layers must be an int >= 1, got {layers!r}")
    eye = torch.eye(mask.shape[0], dtype=torch.bool, device=mask.device)  # (T, T)
    step = (mask | eye).float()  # (T, T): one layer, residual included
    reached = step
    for _ in range(layers - 1):
        reached = (reached @ step).clamp_max(1.0)  # (T, T) @ (T, T): one more layer
    return reached > 0


# ---------------------------------------------------------------------------------------------
# Decoding: the KV cache, timed; log-probabilities of outputs
# ---------------------------------------------------------------------------------------------


class GreedySteps(NamedTuple):
    """``tokens`` (B, N): the N words chosen, EOS ignored; ``step_s``: seconds of each step."""

    tokens: torch.Tensor
    step_s: list[float]


def greedy_steps(model, src: torch.Tensor, src_lengths: torch.Tensor | None, steps: int,
                 use_cache: bool = True) -> GreedySteps:
    """Exactly ``steps`` greedy decoding steps of a Transformer, ignoring EOS, timed one by one.

    With the cache (``use_cache=True``) step t feeds only the newest word and attends to the
    stored keys and values of the t earlier ones; without it, step t feeds the whole prefix of
    t + 1 words again. The words are those of ``Transformer.greedy_decode`` as long as no row
    has finished. The encoder runs once, before the first step, and is not timed. The model is
    put in eval mode (dropout off).

    Shapes: ``src`` (B, S), ``src_lengths`` (B,) or None -> tokens (B, steps).
    """
    max_len = model.config.max_len
    if not isinstance(steps, int) or not 1 <= steps <= max_len:
        raise ValueError(f"steps must be an int in [1, max_len = {max_len}] (positions 0 to "
                         f"{max_len - 1}), got {steps!r}")
    model.eval()
    device = src.device
    with torch.no_grad():
        memory = model.encode(src, src_lengths)
        cache = model.new_cache() if use_cache else None
        prefix = torch.full((src.shape[0], 1), BOS_ID, dtype=torch.long, device=device)  # (B, 1)
        times = []
        for _ in range(steps):
            synchronize(device)
            start = time.perf_counter()
            new_words = prefix[:, -1:] if use_cache else prefix  # (B, 1) or (B, t + 1)
            logits = model.decode(new_words, memory, cache)[:, -1]  # (B, V)
            prefix = torch.cat([prefix, logits.argmax(dim=-1, keepdim=True)], dim=1)  # (B, t+2)
            synchronize(device)
            times.append(time.perf_counter() - start)
    return GreedySteps(prefix[:, 1:], times)


def decode_timing(model, src: torch.Tensor, src_lengths: torch.Tensor | None,
                  lengths: Sequence[int], repeats: int = 3) -> list[dict[str, Any]]:
    """Seconds to generate exactly N words with and without the KV cache, for each N in
    ``lengths``: the median over ``repeats`` runs of the sum of :func:`greedy_steps`' step
    times (the two ways alternate, so both see the same machine). Each row: ``tokens`` N,
    ``cached_s``, ``uncached_s``, ``speedup`` (uncached / cached), ``same_tokens`` (both ways
    chose the same words in every run), and ``cached_step_s``, ``uncached_step_s``: the
    median seconds of each of the N steps (lists of N floats)."""
    if repeats < 1 or not lengths:
        raise ValueError(f"need repeats >= 1 and at least one length, got {repeats} and "
                         f"{list(lengths)}")
    rows = []
    for steps in lengths:
        step_s: dict[bool, list[list[float]]] = {True: [], False: []}
        same = True
        for _ in range(repeats):
            runs = {cached: greedy_steps(model, src, src_lengths, steps, cached)
                    for cached in (True, False)}
            for cached, run in runs.items():
                step_s[cached].append(run.step_s)
            same = same and torch.equal(runs[True].tokens, runs[False].tokens)
        cached_s, uncached_s = (statistics.median(sum(run) for run in step_s[c])
                                for c in (True, False))
        per_step = {c: [statistics.median(times) for times in zip(*step_s[c], strict=True)]
                    for c in (True, False)}
        rows.append({"tokens": steps, "cached_s": cached_s, "uncached_s": uncached_s,
                     "speedup": uncached_s / cached_s, "same_tokens": same,
                     "cached_step_s": per_step[True], "uncached_step_s": per_step[False]})
    return rows


def cache_report(cache) -> list[dict[str, Any]]:
    """One row per decoder layer of a :class:`~course_lib.transformer.DecoderCache`: the shapes
    (B, h, length, d_k) of the cached self-attention keys (the values have the same shape), of
    the cross-attention keys, and the bytes the layer holds (keys and values of both)."""
    rows = []
    for index, (self_cache, cross_cache) in enumerate(cache.layers):
        held = [t for c in (self_cache, cross_cache) for t in (c.k, c.v) if t is not None]
        rows.append({"layer": index,
                     "self K (= V) shape": None if self_cache.k is None
                     else tuple(self_cache.k.shape),
                     "cross K (= V) shape": None if cross_cache.k is None
                     else tuple(cross_cache.k.shape),
                     "bytes": sum(t.numel() * t.element_size() for t in held)})
    return rows


def sequence_log_prob(model, src: torch.Tensor, src_lengths: torch.Tensor | None,
                      tokens: torch.Tensor) -> torch.Tensor:
    """``log p(Y | X) = Σ_t log p(y_t | y_<t, X)`` of each row of ``tokens`` (outputs of
    ``greedy_decode`` or ``beam_search``: no BOS, EOS included, PAD after it, which is not
    scored), by one teacher-forced pass in eval mode.

    Shapes: ``src`` (B, S), ``tokens`` (B, T') -> (B,) float32.
    """
    if tokens.dim() != 2 or tokens.shape[0] != src.shape[0] or tokens.shape[1] < 1:
        raise ValueError(f"expected tokens of shape ({src.shape[0]}, T') with T' >= 1, got "
                         f"{tuple(tokens.shape)}")
    if tokens.shape[1] > model.config.max_len:
        raise ValueError(f"{tokens.shape[1]} tokens exceed the model's max_len = "
                         f"{model.config.max_len}")
    model.eval()
    bos = torch.full_like(tokens[:, :1], BOS_ID)  # (B, 1)
    tgt_in = torch.cat([bos, tokens[:, :-1]], dim=1)  # (B, T'): BOS, y_1, ..., y_{T'-1}
    with torch.no_grad():
        log_probs = torch.log_softmax(model(src, src_lengths, tgt_in).float(), dim=-1)
    picked = log_probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)  # (B, T')
    return picked.masked_fill(tokens == PAD_ID, 0.0).sum(dim=1)  # (B,)


# ---------------------------------------------------------------------------------------------
# Time and memory of attention
# ---------------------------------------------------------------------------------------------


class _LiveTensorBytes(TorchDispatchMode):
    """Adds up the bytes of every new storage an operator returns while active and subtracts
    them when the last tensor using the storage is freed; ``peak`` is the largest total."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._holders: dict[int, list[int]] = {}  # storage -> [bytes, tensors alive]

    def _release(self, key: int) -> None:
        entry = self._holders.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.live -= entry[0]
            del self._holders[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        output = func(*args, **kwargs)
        inputs = None
        for tensor in tree_flatten(output)[0]:
            if not isinstance(tensor, torch.Tensor):
                continue
            storage = tensor.untyped_storage()
            key = storage._cdata
            if key not in self._holders:
                if inputs is None:
                    inputs = {t.untyped_storage()._cdata for t in tree_flatten((args, kwargs))[0]
                              if isinstance(t, torch.Tensor)}
                if key in inputs:  # a view or an in-place result of a tensor from outside
                    continue
                self._holders[key] = [storage.nbytes(), 0]
                self.live += storage.nbytes()
                self.peak = max(self.peak, self.live)
            self._holders[key][1] += 1
            weakref.finalize(tensor, self._release, key)
        return output


def peak_memory(fn: Callable[[], Any], how: str = "tensors",
                device: torch.device | str | None = None) -> int:
    """Peak bytes that ``fn()`` adds while it runs (its result is dropped at the end).

    - ``how="tensors"`` (any device, including ``meta``): the largest total size of the tensors
      created by PyTorch operators during the call that are alive at the same moment, tracked
      operator by operator. Scratch memory a kernel allocates internally and frees before it
      returns (the tiles of a fused attention kernel) is not seen, nor are allocator caches.
    - ``how="allocator"`` (CUDA only, ``device`` a CUDA device): what the CUDA caching allocator
      reports, ``torch.cuda.max_memory_allocated`` minus the bytes allocated before the call:
      everything, kernel workspaces included.
    """
    if how == "tensors":
        tracker = _LiveTensorBytes()
        with tracker:
            result = fn()
        del result
        return tracker.peak
    if how == "allocator":
        device = torch.device(device) if device is not None else None
        if device is None or device.type != "cuda":
            raise ValueError(f"how='allocator' needs a CUDA device, got {device}")
        synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        result = fn()
        synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - before
        del result
        return peak
    raise ValueError(f"how must be 'tensors' or 'allocator', got {how!r}")


@contextmanager
def single_thread(device: torch.device | str | None = None) -> Iterator[None]:
    """Run the block with one CPU thread when ``device`` is the CPU (or None), then restore
    the thread count. Timings of many small operations on a shared CPU are far steadier on
    one thread: with several, each operation waits for the slowest, possibly descheduled,
    thread. Other devices are left alone."""
    device = torch.device(device) if device is not None else None
    threads = torch.get_num_threads()
    on_cpu = device is None or device.type == "cpu"
    if on_cpu:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if on_cpu:
            torch.set_num_threads(threads)


def paired_medians(calls: dict[str, Callable[[], Any]], repeats: int, warmup: int = 1,
                   device: torch.device | str | None = None) -> dict[str, float]:
    """Median wall-clock seconds of each call over ``repeats`` rounds after ``warmup`` untimed
    ones; every round runs each call once, in turn, so a slowdown of the machine (another
    process, a frequency drop) lands on every call alike. On a GPU ``device`` each call is
    bracketed by a synchronize (GPU work is asynchronous: without it the clock measures only
    the launch)."""
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got {repeats} and {warmup}")
    times: dict[str, list[float]] = {name: [] for name in calls}
    for round_index in range(warmup + repeats):
        for name, call in calls.items():
            synchronize(device)
            start = time.perf_counter()
            call()
            synchronize(device)
            if round_index >= warmup:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def median_seconds(fn: Callable[[], Any], repeats: int = 5, warmup: int = 1,
                   device: torch.device | str | None = None) -> float:
    """Median wall-clock seconds of ``fn()`` (:func:`paired_medians` of one call)."""
    return paired_medians({"fn": fn}, repeats, warmup, device)["fn"]


def attention_cost(lengths: Sequence[int], batch: int = 1, heads: int = 4, head_dim: int = 32,
                   device: torch.device | str | None = None, dtype: torch.dtype = torch.float32,
                   causal: bool = False, repeats: int = 3, seed: int = 0,
                   memory: str = "tensors") -> list[dict[str, Any]]:
    """Time and peak memory of one attention call (self-attention, T = S = length) done
    explicitly (:func:`~course_lib.self_attention.scaled_dot_product_attention`, which forms
    the (B, h, T, S) weights) and fused (``F.scaled_dot_product_attention``), at each length.

    Each row: ``length``, ``explicit_s``, ``fused_s`` (:func:`median_seconds`),
    ``explicit_bytes``, ``fused_bytes`` (:func:`peak_memory` with ``how=memory``) and
    ``weights_bytes``, the size of one (B, h, T, S) weight tensor for reference. ``causal``
    uses a causal mask (explicit) or ``is_causal=True`` (fused). Inputs are random, seeded.
    """
    if not lengths or min(lengths) < 1:
        raise ValueError(f"lengths must be positive, got {list(lengths)}")
    device = torch.device(device) if device is not None else None
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for length in lengths:
        shape = (batch, heads, length, head_dim)
        q, k, v = (torch.randn(shape, generator=generator).to(device=device, dtype=dtype)
                   for _ in range(3))  # (B, h, T, d_k) each
        mask = causal_mask(length, device=q.device) if causal else None  # (T, T) or None

        def explicit(q=q, k=k, v=v, mask=mask):
            return scaled_dot_product_attention(q, k, v, mask)[0]

        def fused(q=q, k=k, v=v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        with torch.no_grad():
            row = {"length": length,
                   "explicit_s": median_seconds(explicit, repeats, device=q.device),
                   "fused_s": median_seconds(fused, repeats, device=q.device),
                   "explicit_bytes": peak_memory(explicit, memory, q.device),
                   "fused_bytes": peak_memory(fused, memory, q.device),
                   "weights_bytes": batch * heads * length * length * q.element_size()}
        rows.append(row)
        del q, k, v
    return rows


def blockwise_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                        block_size: int = 64) -> torch.Tensor:
    """``softmax(Q Kᵀ / √d_k) V`` computed one block of keys at a time, with a running maximum
    ``m``, a running sum ``ℓ`` and a running output ``o`` per query (the online softmax of
    Milakov & Gimelshein, 2018, as FlashAttention uses it; Dao et al., 2022). For each block B:

        s = q K_Bᵀ / √d_k,  m' = max(m, max_j s_j),  ℓ' = e^{m − m'} ℓ + Σ_j e^{s_j − m'},
        o' = e^{m − m'} o + Σ_j e^{s_j − m'} v_j,      and at the end  output = o / ℓ.

    Exact (up to rounding), and never more than (..., T, block_size) scores alive at once.
    No mask. A teaching version: a fused kernel does this per tile in on-chip memory, over
    blocks of queries too, in one kernel launch.

    Shapes: ``query`` (..., T, d_k), ``key`` (..., S, d_k), ``value`` (..., S, d_v) ->
    (..., T, d_v).
    """
    if query.dim() < 2 or key.shape[:-2] != query.shape[:-2] or key.shape[-1] != query.shape[-1] \
            or value.shape[:-1] != key.shape[:-1]:
        raise ValueError(f"expected query (..., T, d_k), key (..., S, d_k) and value "
                         f"(..., S, d_v), got {tuple(query.shape)}, {tuple(key.shape)} and "
                         f"{tuple(value.shape)}")
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    scale = 1.0 / math.sqrt(query.shape[-1])
    running_max = torch.full((*query.shape[:-1], 1), float("-inf"), dtype=query.dtype,
                             device=query.device)  # (..., T, 1)
    running_sum = torch.zeros_like(running_max)  # (..., T, 1)
    output = torch.zeros(*query.shape[:-1], value.shape[-1], dtype=query.dtype,
                         device=query.device)  # (..., T, d_v)
    for start in range(0, key.shape[-2], block_size):
        k_block = key[..., start:start + block_size, :]  # (..., b, d_k)
        v_block = value[..., start:start + block_size, :]  # (..., b, d_v)
        scores = query @ k_block.transpose(-2, -1) * scale  # (..., T, b)
        new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))  # (..., T, 1)
        weights = torch.exp(scores - new_max)  # (..., T, b), unnormalised
        correction = torch.exp(running_max - new_max)  # (..., T, 1): rescales the old sums
        running_sum = correction * running_sum + weights.sum(dim=-1, keepdim=True)
        output = correction * output + weights @ v_block  # (..., T, d_v)
        running_max = new_max
    return output / running_sum


SDPA_BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH")


def sdpa_backends(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  causal: bool = False) -> dict[str, bool]:
    """For each of PyTorch's SDPA kernels, whether it runs these inputs on their device:
    ``F.scaled_dot_product_attention`` is called with only that kernel allowed
    (``torch.nn.attention.sdpa_kernel``); a kernel that cannot take the inputs (device, dtype,
    head size, mask) refuses. Kernels this torch build does not know are left out.
    Shapes: (B, h, T, d_k), (B, h, S, d_k), (B, h, S, d_v)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    usable = {}
    for name in SDPA_BACKENDS:
        backend = getattr(SDPBackend, name, None)
        if backend is None:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the refusal's reasons come as warnings
                with sdpa_kernel(backend), torch.no_grad():
                    F.scaled_dot_product_attention(query, key, value, is_causal=causal)
            usable[name] = True
        except RuntimeError:
            usable[name] = False
    return usable
