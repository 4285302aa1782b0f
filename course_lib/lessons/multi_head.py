"""Multi-head attention as a short forward pass: lesson 09.

:func:`multi_head_forward` runs a :class:`~course_lib.nn.self_attention.MultiHeadAttention`
layer's own weights through the five steps of the equation (Vaswani et al., 2017, section 3.2.2)
and nothing else: project, split into heads, attend, merge, project. The layer's ``forward`` adds
the KV cache and the fused kernel (lesson 11) and builds its masks from ``key_mask``,
``attn_mask`` and ``causal``; here the caller passes one mask.
"""

from __future__ import annotations

import torch

from course_lib.nn.self_attention import MultiHeadAttention, scaled_dot_product_attention


def multi_head_forward(mha: MultiHeadAttention, query: torch.Tensor, key: torch.Tensor,
                       value: torch.Tensor, mask: torch.Tensor | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """``MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O`` with the weights of ``mha``,

        head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V) = softmax(Q W_i^Q (K W_i^K)ᵀ / √d_k) V W_i^V,

    W_i^Q, W_i^K, W_i^V the columns i·d_k … (i+1)·d_k - 1 of ``mha``'s (D, D) projections
    (biases included), d_k = D / h. ``mask`` is boolean, True = may attend, with the rank of the
    scores (B, h, T, S), each dimension equal or 1: padding (B, 1, 1, S), causal (1, 1, T, S).
    Dropout on the weights as the layer's (only in training mode).

    Shapes: ``query`` (B, T, D), ``key`` and ``value`` (B, S, D) -> output (B, T, D), weights
    (B, h, T, S).
    """
    mha._check_inputs(query, key, value)
    batch, queries, keys = query.shape[0], query.shape[1], key.shape[1]
    h, d_k = mha.num_heads, mha.head_dim
    # 1. Project: one (D, D) map per role gives the queries, keys and values of every head.
    q, k, v = mha.q_proj(query), mha.k_proj(key), mha.v_proj(value)  # (B, T or S, D)
    # 2. Split: cut D into h slices of d_k and move the heads beside the batch.
    q = q.view(batch, queries, h, d_k).transpose(1, 2)  # (B, T, h, d_k) -> (B, h, T, d_k)
    k = k.view(batch, keys, h, d_k).transpose(1, 2)  # (B, S, h, d_k) -> (B, h, S, d_k)
    v = v.view(batch, keys, h, d_k).transpose(1, 2)  # (B, S, h, d_k) -> (B, h, S, d_k)
    # 3. Attend: every head at once, softmax(Q_i K_iᵀ / √d_k) V_i.
    heads, weights = scaled_dot_product_attention(q, k, v, mask, mha.dropout,
                                                  mha.training)  # (B, h, T, d_k), (B, h, T, S)
    # 4. Merge: the concatenation of the heads, back to one row of D numbers per query.
    merged = heads.transpose(1, 2).reshape(batch, queries, h * d_k)  # (B, T, h, d_k) -> (B, T, D)
    # 5. Project: W^O mixes the heads.
    return mha.out_proj(merged), weights  # (B, T, D), (B, h, T, S)
