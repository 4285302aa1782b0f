"""Attention that costs less than T × S: sliding windows and blockwise (online-softmax) attention.

- :func:`window_mask` and :func:`reach`: sliding-window attention (Beltagy et al., 2020; Jiang
  et al., 2023), the descendant of Luong et al.'s (2015) local attention, and how far
  information travels through a stack of windowed layers;
- :func:`blockwise_attention`: the online softmax at the heart of FlashAttention (Dao et al.,
  2022), in plain PyTorch: exact attention that never holds more than T × block scores.

Masks are boolean with True = "may attend"; everything follows the device of its inputs.
"""

from __future__ import annotations

import math
import operator

import torch

from course_lib.arguments import BOOL, check_int, check_qkv, check_tensor


def window_mask(queries: int, keys: int | None = None, half_width: int = 0, causal: bool = False,
                device: torch.device | str | None = None) -> torch.Tensor:
    """True where query t may see key j: ``|t' − j| <= r`` with ``t' = t + (S − T)`` and the
    half-width ``r = half_width`` (t and j counting from 0).

    The alignment is :func:`~course_lib.nn.self_attention.causal_mask`'s: the last query sits at
    the last key's position (with a cache of S − T earlier tokens, query t is token t'). This is
    Luong et al.'s (2015) local window ``[p_t − r, p_t + r]`` with ``p_t = t'`` for every query
    at once. ``causal=True`` also hides the future (``j <= t'``): each token then sees itself
    and the ``r`` tokens before it, the sliding window of Mistral 7B with r = 4096 (positions
    t' − r to t'; Jiang et al., 2023). Shape: (T, S).
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
    rows = torch.arange(queries, device=device).unsqueeze(1) + (keys - queries)  # (T, 1): t'
    cols = torch.arange(keys, device=device).unsqueeze(0)  # (1, S): j
    offset = rows - cols  # (T, S): how far key j lies behind query t
    mask = offset.abs() <= half_width
    return mask & (offset >= 0) if causal else mask  # (T, S)


def reach(mask: torch.Tensor, layers: int) -> torch.Tensor:
    """Which inputs can influence which outputs after ``layers`` attention layers with ``mask``.

    Position t of layer l reads the positions its mask allows at layer l − 1, and itself (the
    residual connection), so ``R_1 = M ∨ I`` (M the mask) and ``R_{l+1} = R_l · R_1`` (boolean
    product). With a causal window of half-width r, the last output reaches ``N · r`` tokens back
    after N = ``layers`` layers: the receptive field grows linearly with depth (Beltagy et al.,
    2020, section 3.1).

    Shapes: ``mask`` (T, T) bool (self-attention) -> (T, T) bool, True = input j reaches
    output t.
    """
    check_tensor("mask", mask, dtype=BOOL, ndim=2)
    if mask.shape[0] != mask.shape[1]:
        raise ValueError(f"mask must be a square (T, T) self-attention mask, got "
                         f"{tuple(mask.shape)}")
    layers = check_int("layers", layers, minimum=1)
    eye = torch.eye(mask.shape[0], dtype=torch.bool, device=mask.device)  # (T, T)
    step = (mask | eye).float()  # (T, T): one layer, residual included
    reached = step
    for _ in range(layers - 1):
        reached = (reached @ step).clamp_max(1.0)  # (T, T) @ (T, T): one more layer
    return reached > 0


def blockwise_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                        block_size: int = 64) -> torch.Tensor:
    """``softmax(Q Kᵀ / √d_k) V`` computed one block of keys at a time, with a running maximum
    ``m``, a running sum ``ℓ`` and a running output ``o`` per query (the online softmax of
    Milakov & Gimelshein, 2018, as FlashAttention uses it; Dao et al., 2022). For each block of
    keys K_β, with scores e_j:

        e = q K_βᵀ / √d_k,  m' = max(m, max_j e_j),  ℓ' = exp(m − m') ℓ + Σ_j exp(e_j − m'),
        o' = exp(m − m') o + Σ_j exp(e_j − m') v_j,      and at the end  output = o / ℓ.

    Exact (up to rounding), and never more than (..., T, block_size) scores alive at once.
    No mask. A teaching version: a fused kernel does this per tile in on-chip memory, over
    blocks of queries too, in one kernel launch.

    Shapes: ``query`` (..., T, d_k), ``key`` (..., S, d_k), ``value`` (..., S, d_v) ->
    (..., T, d_v).
    """
    check_qkv(query, key, value)
    block_size = check_int("block_size", block_size, minimum=1)
    scale = 1.0 / math.sqrt(query.shape[-1])
    running_max = torch.full((*query.shape[:-1], 1), float("-inf"), dtype=query.dtype,
                             device=query.device)  # (..., T, 1)
    running_sum = torch.zeros_like(running_max)  # (..., T, 1)
    output = torch.zeros(*query.shape[:-1], value.shape[-1], dtype=query.dtype,
                         device=query.device)  # (..., T, d_v)
    for start in range(0, key.shape[-2], block_size):
        k_block = key[..., start:start + block_size, :]  # (..., block, d_k)
        v_block = value[..., start:start + block_size, :]  # (..., block, d_v)
        scores = query @ k_block.transpose(-2, -1) * scale  # (..., T, block)
        new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))  # (..., T, 1)
        weights = torch.exp(scores - new_max)  # (..., T, block), unnormalised
        correction = torch.exp(running_max - new_max)  # (..., T, 1): rescales the old sums
        running_sum = correction * running_sum + weights.sum(dim=-1, keepdim=True)
        output = correction * output + weights @ v_block  # (..., T, d_v)
        running_max = new_max
    return output / running_sum
