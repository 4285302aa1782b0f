"""Scaled dot-product and multi-head attention (Vaswani et al., 2017), lessons 08-11.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V                                   (eq. 1)
    MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O,
        head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

Two implementations give the same numbers:

- ``"explicit"``: :func:`scaled_dot_product_attention`, written out for teaching. It forms the
  (T, S) weight matrix of every head, so memory grows as T·S.
- ``"fused"``: :func:`fused_attention`, which calls
  ``torch.nn.functional.scaled_dot_product_attention``; on a GPU that dispatches to fused
  (flash / memory-efficient) kernels that never store the weights.

Masks are boolean with True = "may attend", as everywhere in the course, with the rank of the
scores (..., T, S): size-1 dimensions broadcast, missing ones do not (a (T, S) causal mask over
(B, h, T, S) scores is ``causal_mask(T)[None, None]``). A query with no key to attend to gets an
all-zero output and all-zero weights, never NaN.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from course_lib.arguments import (
    BOOL,
    FLOATING,
    check_choice,
    check_int,
    check_mask,
    check_module_input,
    check_qkv,
    check_tensor,
    shape_of,
)
from course_lib.nn.attention import masked_softmax

IMPLEMENTATIONS = ("explicit", "fused")


def scaled_dot_product_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                 mask: torch.Tensor | None = None, dropout: float = 0.0,
                                 training: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax(Q Kᵀ / √d_k) V``, written out. Returns the output and the weights.

    Dividing by √d_k keeps the scores' variance at one when the entries of q and k have unit
    variance (a dot product of d_k such products has variance d_k), so the softmax does not
    start out saturated. ``dropout`` (when ``training``) drops weights after the softmax.

    Shapes: ``query`` (..., T, d_k), ``key`` (..., S, d_k), ``value`` (..., S, d_v), ``mask``
    (..., T, S), each dimension equal to the scores' or 1 -> output (..., T, d_v), weights
    (..., T, S).
    """
    check_qkv(query, key, value, mask)
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])  # (..., T, S)
    weights = masked_softmax(scores, mask)
    dropped = F.dropout(weights, dropout, training) if dropout > 0 else weights
    return dropped @ value, weights  # (..., T, S) @ (..., S, d_v) -> (..., T, d_v)


def fused_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    mask: torch.Tensor | None = None, causal: bool = False, dropout: float = 0.0,
                    training: bool = False) -> torch.Tensor:
    """The same output through ``torch.nn.functional.scaled_dot_product_attention``.

    ``causal=True`` (only with T = S and no ``mask``) lets the kernel skip the upper triangle
    without building a mask. Shapes as :func:`scaled_dot_product_attention`; returns the output
    only: fused kernels never form the weights.
    """
    check_qkv(query, key, value, mask)
    if causal and (mask is not None or query.shape[-2] != key.shape[-2]):
        raise ValueError("causal=True needs T = S and no other mask; pass causal_mask(T, S) "
                         "combined with the other mask instead")
    output = F.scaled_dot_product_attention(query, key, value, attn_mask=mask,
                                            dropout_p=dropout if training else 0.0,
                                            is_causal=causal)
    if mask is not None:
        # A query with no allowed key: zero, whatever the kernel returns (some give NaN).
        output = output.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return output


def causal_mask(queries: int, keys: int | None = None,
                device: torch.device | str | None = None) -> torch.Tensor:
    """True where query t may see key j: ``j <= t + (S - T)`` (t and j counting from 0).

    The last query sits at the last key's position, so with a cache of S - T earlier tokens the
    T new queries see every cached key and the new keys up to their own. Shape: (T, S); pass it
    as ``causal_mask(T, S)[None]`` over (B, T, S) scores, ``[None, None]`` over (B, h, T, S).
    """
    queries = check_int("queries", queries, minimum=0)
    keys = queries if keys is None else check_int("keys", keys, minimum=0)
    if keys < queries:
        raise ValueError(f"a causal mask needs at least as many keys as queries, got T = "
                         f"{queries} and S = {keys}")
    rows = torch.arange(queries, device=device).unsqueeze(1)  # (T, 1)
    cols = torch.arange(keys, device=device).unsqueeze(0)  # (1, S)
    return cols <= rows + (keys - queries)  # (T, S)


class KVCache:
    """The projected keys and values a layer has seen, kept across decoding steps.

    ``static=False`` (self-attention): every call appends the new tokens' keys and values.
    ``static=True`` (cross-attention over the encoder output): filled on the first call and
    reused after. Shapes: ``k``, ``v`` (B, h, S, d_k).
    """

    def __init__(self, static: bool = False) -> None:
        self.static = static
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.shape[2]

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.k is None or self.static:
            self.k, self.v = k, v
        else:
            self.k = torch.cat([self.k, k], dim=2)  # (B, h, S_old + T, d_k)
            self.v = torch.cat([self.v, v], dim=2)
        return self.k, self.v

    def reorder(self, rows: torch.Tensor) -> None:
        """Keep the cached rows ``rows`` (B',) in that order (beam search)."""
        if self.k is not None:
            self.k, self.v = self.k[rows], self.v[rows]


class MultiHeadAttention(nn.Module):
    """``Concat(head_1, …, head_h) W^O`` with ``head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)``.

    The h heads are one (D, D) projection each for Q, K and V, cut into h slices of
    d_k = D / h numbers: a reshape, not h separate layers.

    ``forward(query, key=None, value=None)`` (key and value default to the query:
    self-attention). Masks, True = may attend: ``key_mask`` (B, S) marks real (non-padding)
    keys; ``attn_mask`` (B, T, S) or (B, h, T, S), where B and h may be 1 (a (T, S) mask shared
    by every sentence is ``attn_mask[None]``); ``causal=True`` adds
    :func:`causal_mask`. ``need_weights=True`` also returns the per-head weights (B, h, T, S),
    computed explicitly. ``cache`` (:class:`KVCache`) holds the keys and values of earlier
    decoding steps.

    Shapes: ``query`` (B, T, D), ``key``/``value`` (B, S, D) -> (B, T, D).
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 implementation: str = "fused") -> None:
        super().__init__()
        if d_model < 1 or num_heads < 1 or d_model % num_heads:
            raise ValueError(f"d_model must be a positive multiple of num_heads, got d_model = "
                             f"{d_model} and num_heads = {num_heads}")
        check_choice("implementation", implementation, IMPLEMENTATIONS)
        self.d_model, self.num_heads = d_model, num_heads
        self.head_dim = d_model // num_heads
        self.dropout = dropout
        self.implementation = implementation
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    @classmethod
    def from_torch(cls, torch_mha: nn.MultiheadAttention,
                   implementation: str = "fused") -> MultiHeadAttention:
        """A copy of a ``torch.nn.MultiheadAttention`` (batch_first, equal q/k/v sizes).

        PyTorch stacks the stored weights (W^Q)ᵀ, (W^K)ᵀ, (W^V)ᵀ (``nn.Linear`` keeps the
        transpose of a right-multiplied matrix) in one ``in_proj_weight`` (3D, D); we keep
        three."""
        if not torch_mha._qkv_same_embed_dim or torch_mha.bias_k is not None:
            raise ValueError("only MultiheadAttention with kdim = vdim = embed_dim and no "
                             "add_bias_kv can be copied")
        bias = torch_mha.in_proj_bias is not None
        ours = cls(torch_mha.embed_dim, torch_mha.num_heads, torch_mha.dropout, bias,
                   implementation)
        with torch.no_grad():
            for proj, weight in zip((ours.q_proj, ours.k_proj, ours.v_proj),
                                    torch_mha.in_proj_weight.chunk(3), strict=True):
                proj.weight.copy_(weight)
            ours.out_proj.weight.copy_(torch_mha.out_proj.weight)
            if bias:
                for proj, b in zip((ours.q_proj, ours.k_proj, ours.v_proj),
                                   torch_mha.in_proj_bias.chunk(3), strict=True):
                    proj.bias.copy_(b)
                ours.out_proj.bias.copy_(torch_mha.out_proj.bias)
        return ours.to(torch_mha.in_proj_weight.device)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, h, T, d_k)."""
        batch, length, _ = x.shape
        heads = x.view(batch, length, self.num_heads, self.head_dim)  # (B, T, h, d_k)
        return heads.transpose(1, 2)  # (B, T, h, d_k) -> (B, h, T, d_k)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, h, T, d_k) -> (B, T, D): the concatenation of the heads."""
        batch, _, length, _ = x.shape
        # (B, h, T, d_k) -> (B, T, h, d_k) -> (B, T, D)
        return x.transpose(1, 2).reshape(batch, length, self.d_model)

    def _check_inputs(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
        """``query`` (B, T, D), ``key`` and ``value`` (B, S, D), like the layer's parameters."""
        for name, x in (("query", query), ("key", key), ("value", value)):
            check_tensor(name, x, dtype=FLOATING)
            check_module_input(name, x, self)
            if x.dim() != 3 or x.shape[-1] != self.d_model or x.shape[0] != query.shape[0]:
                raise ValueError(f"expected {name} of shape (B, length, {self.d_model}) with B = "
                                 f"{query.shape[0] if query.dim() else '?'}, got {shape_of(x)}")
        if key.shape[1] != value.shape[1]:
            raise ValueError(f"key and value must have the same length, got {shape_of(key)} and "
                             f"{shape_of(value)}")

    def _keys_and_values(self, key: torch.Tensor, value: torch.Tensor, cache: KVCache | None
                         ) -> tuple[torch.Tensor, torch.Tensor]:
        """``K W^K`` and ``V W^V`` split into heads, (B, h, S, d_k) each, with the cache's.

        A filled static cache (cross-attention) already holds the encoder output's keys and
        values, projected at the first step; any other cache appends the new ones to those of
        the earlier steps, so S counts them all."""
        if cache is not None and cache.static and cache.k is not None:
            return cache.k, cache.v
        k = self.split_heads(self.k_proj(key))  # (B, S_new, D) -> (B, h, S_new, d_k)
        v = self.split_heads(self.v_proj(value))  # (B, S_new, D) -> (B, h, S_new, d_k)
        return (k, v) if cache is None else cache.update(k, v)  # (B, h, S, d_k)

    def _mask(self, q: torch.Tensor, k: torch.Tensor, key_mask: torch.Tensor | None,
              attn_mask: torch.Tensor | None, causal: bool, cache: KVCache | None,
              explicit: bool) -> tuple[torch.Tensor | None, bool]:
        """``key_mask & attn_mask & causal_mask`` as one boolean (B or 1, h or 1, T, S), or None
        when nothing is masked; and whether the fused kernel applies the causal mask itself.

        One new query after a cache sees every key, so it needs no causal mask. A plain causal
        mask over T = S on the fused path is left to the kernel (``is_causal``), which skips the
        upper triangle. Shapes: ``q`` (B, h, T, d_k), ``k`` (B, h, S, d_k)."""
        batch, queries, keys = q.shape[0], q.shape[2], k.shape[2]
        causal = causal and not (queries == 1 and cache is not None)
        if causal and not explicit and key_mask is None and attn_mask is None \
                and queries == keys:
            return None, True
        mask = None
        if key_mask is not None:
            check_tensor("key_mask", key_mask, dtype=BOOL, shape=(batch, keys), device=q.device)
            mask = key_mask[:, None, None, :]  # (B, S) -> (B, 1, 1, S)
        if attn_mask is not None:
            # (B, T, S) or (B, h, T, S); B and h may be 1 (shared by every sentence or head).
            four = isinstance(attn_mask, torch.Tensor) and attn_mask.dim() == 4
            full = (batch, self.num_heads, queries, keys) if four else (batch, queries, keys)
            check_mask("attn_mask", attn_mask, full, device=q.device,
                       what="(B, h, T, S)" if four else "(B, T, S) or (B, h, T, S)")
            # (B, T, S) -> (B, 1, T, S): the same for every head
            extra = attn_mask.unsqueeze(1) if attn_mask.dim() == 3 else attn_mask
            mask = extra if mask is None else mask & extra
        if causal:
            extra = causal_mask(queries, keys, q.device)[None, None]  # (T, S) -> (1, 1, T, S)
            mask = extra if mask is None else mask & extra
        return mask, False

    def forward(self, query: torch.Tensor, key: torch.Tensor | None = None,
                value: torch.Tensor | None = None, *, key_mask: torch.Tensor | None = None,
                attn_mask: torch.Tensor | None = None, causal: bool = False,
                need_weights: bool = False, cache: KVCache | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``Concat(head_1, …, head_h) W^O``: project, split, attend, merge, project. Returns
        the output (B, T, D) and, with ``need_weights``, the weights (B, h, T, S), else None."""
        key = query if key is None else key
        value = key if value is None else value
        self._check_inputs(query, key, value)
        # 1. Project and 2. split: one (D, D) map per role, cut into h heads of d_k numbers.
        q = self.split_heads(self.q_proj(query))  # (B, T, D) -> (B, h, T, d_k)
        k, v = self._keys_and_values(key, value, cache)  # (B, h, S, d_k) each
        # 3. Attend: softmax(Q_i K_iᵀ / √d_k) V_i for every head at once.
        explicit = need_weights or self.implementation == "explicit"
        mask, kernel_causal = self._mask(q, k, key_mask, attn_mask, causal, cache, explicit)
        dropout = self.dropout if self.training else 0.0
        if explicit:
            heads, weights = scaled_dot_product_attention(q, k, v, mask, dropout, self.training)
        else:  # the fused kernel never forms the weights
            heads = fused_attention(q, k, v, mask, causal=kernel_causal, dropout=dropout,
                                    training=self.training)
            weights = None
        # 4. Merge: the concatenation of the heads; 5. project: W^O mixes them.
        output = self.out_proj(self.merge_heads(heads))  # (B, h, T, d_k) -> (B, T, D)
        return output, weights if need_weights else None
