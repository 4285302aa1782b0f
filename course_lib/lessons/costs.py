"""Lesson 11's cost measurements of decoding and attention.

- :func:`greedy_steps` and :func:`decode_timing`: exactly N greedy decoding steps of a
  :class:`~course_lib.models.transformer.Transformer`, with and without the KV cache, timed per
  step and in total;
- :func:`sequence_log_prob`: ``log p(Y | X)`` of finished outputs, to compare greedy decoding
  and beam search on the quantity beam search maximises;
- :func:`attention_cost`: time and peak memory of explicit attention (which forms the T×S
  weights of every head) and fused attention
  (``torch.nn.functional.scaled_dot_product_attention``) as the length grows;
- :func:`sdpa_backends`: which of PyTorch's SDPA kernels can run given inputs on this machine.

The timers and the memory tracker are :mod:`course_lib.timing`; sliding windows and blockwise
attention are :mod:`course_lib.nn.efficient`.
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from course_lib.device import synchronize
from course_lib.nn.decoding import greedy_search
from course_lib.nn.self_attention import causal_mask, scaled_dot_product_attention
from course_lib.timing import median_seconds, peak_memory
from course_lib.tokens import BOS_ID, PAD_ID

# Decoding: the KV cache, timed; log-probabilities of outputs


class GreedySteps(NamedTuple):
    """``tokens`` (B, N): the N words chosen, EOS ignored; ``step_s``: seconds of each step."""

    tokens: torch.Tensor
    step_s: list[float]


def greedy_steps(model, src: torch.Tensor, src_lengths: torch.Tensor | None, steps: int,
                 use_cache: bool = True) -> GreedySteps:
    """Exactly ``steps`` greedy decoding steps of a Transformer, ignoring EOS, timed one by one.

    With the cache (``use_cache=True``) step t feeds only the newest word and attends to the
    stored keys and values of the t earlier ones; without it, step t feeds the whole prefix of
    t + 1 words again. The decoder is :func:`~course_lib.nn.decoding.greedy_search` on the
    model's ``decoding_step``, as in ``Transformer.greedy_decode``, with ``stop_at_eos=False``:
    the words are the same as long as no row has finished. Each step's time is that of the
    model's step (the argmax of its V logits is left out). The encoder runs once, before the
    first step, and is not timed. The model is put in eval mode (dropout off).

    Shapes: ``src`` (B, S), ``src_lengths`` (B,) or None -> tokens (B, steps).
    """
    max_len = model.config.max_len
    if not isinstance(steps, int) or not 1 <= steps <= max_len:
        raise ValueError(f"steps must be an int in [1, max_len = {max_len}] (positions 0 to "
                         f"{max_len - 1}), got {steps!r}")
    model.eval()
    device = src.device
    times: list[float] = []
    with torch.no_grad():
        step, state = model.decoding_step(model.encode(src, src_lengths), use_cache)

        def timed(previous: torch.Tensor, state: Any):
            synchronize(device)
            start = time.perf_counter()
            output = step(previous, state)
            synchronize(device)
            times.append(time.perf_counter() - start)
            return output

        result = greedy_search(timed, state, src.shape[0], steps, device, stop_at_eos=False)
    return GreedySteps(result.tokens, times)


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
    """One row per decoder layer of a
    :class:`~course_lib.models.transformer.DecoderCache`: the shapes
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


# Time and memory of attention


def attention_cost(lengths: Sequence[int], batch: int = 1, heads: int = 4, head_dim: int = 32,
                   device: torch.device | str | None = None, dtype: torch.dtype = torch.float32,
                   causal: bool = False, repeats: int = 3, seed: int = 0,
                   memory: str = "tensors") -> list[dict[str, Any]]:
    """Time and peak memory of one attention call (self-attention, T = S = length) done
    explicitly (:func:`~course_lib.nn.self_attention.scaled_dot_product_attention`, which forms
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
        mask = causal_mask(length, device=q.device)[None, None] if causal else None  # (1, 1, T, T)

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
