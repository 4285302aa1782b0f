"""Scaled dot-product and multi-head attention: against PyTorch, the two paths against each
other, masks, the KV cache, and bad input."""

import math

import pytest
import torch
from torch import nn

from course_lib.nn.self_attention import (
    KVCache,
    MultiHeadAttention,
    causal_mask,
    fused_attention,
    scaled_dot_product_attention,
)

ATOL = 1e-5


def qkv(batch=2, heads=3, queries=5, keys=7, d_k=8, d_v=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, heads, queries, d_k, generator=g),
            torch.randn(batch, heads, keys, d_k, generator=g),
            torch.randn(batch, heads, keys, d_v, generator=g))


def random_mask(shape, seed=1):
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(shape, generator=g) > 0.4
    mask[..., 0] = True  # every query may attend somewhere
    return mask


def test_explicit_attention_is_the_equation():
    q, k, v = qkv()
    output, weights = scaled_dot_product_attention(q, k, v)
    expected_weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    torch.testing.assert_close(weights, expected_weights)
    torch.testing.assert_close(output, expected_weights @ v)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5))


@pytest.mark.parametrize("mask_shape", [None, (1, 1, 5, 7), (2, 1, 5, 7), (2, 3, 5, 7),
                                        (2, 1, 1, 7)])
def test_explicit_and_fused_agree_with_torch(mask_shape):
    q, k, v = qkv()
    mask = None if mask_shape is None else random_mask(mask_shape)
    reference = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    explicit, weights = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(explicit, reference, atol=ATOL, rtol=1e-5)
    torch.testing.assert_close(fused_attention(q, k, v, mask), reference, atol=ATOL, rtol=1e-5)
    if mask is not None:
        assert bool((weights.masked_select(~mask.expand_as(weights)) == 0).all())


def test_a_query_with_nothing_to_attend_to_gets_zeros_not_nan():
    q, k, v = qkv()
    mask = random_mask((2, 3, 5, 7))
    mask[0, 1, 2] = False
    explicit, weights = scaled_dot_product_attention(q, k, v, mask)
    fused = fused_attention(q, k, v, mask)
    for output in (explicit, fused):
        assert not output.isnan().any()
        assert bool((output[0, 1, 2] == 0).all())
    assert bool((weights[0, 1, 2] == 0).all())


def test_causal_mask_shape_and_bottom_right_alignment():
    assert torch.equal(causal_mask(3), torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]]).bool())
    # Two new queries after three cached keys: they sit at positions 3 and 4.
    assert torch.equal(causal_mask(2, 5), torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]).bool())
    with pytest.raises(ValueError, match="at least as many keys"):
        causal_mask(4, 2)


def test_bad_shapes_and_masks_name_what_was_expected():
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"\(\.\.\., T, d_k\)"):
        scaled_dot_product_attention(q, k[..., :4], v)
    with pytest.raises(ValueError, match=r"mask must have shape \(\.\.\., T, S\) = "
                                         r"\(2, 3, 5, 7\), got \(1, 1, 5, 6\)"):
        scaled_dot_product_attention(q, k, v, torch.ones(1, 1, 5, 6, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"the rank of the scores.*mask\[None, None\]"):
        scaled_dot_product_attention(q, k, v, torch.ones(5, 7, dtype=torch.bool))
    with pytest.raises(TypeError, match="torch.bool"):
        fused_attention(q, k, v, torch.ones(5, 7))
    with pytest.raises(ValueError, match="causal=True needs"):
        fused_attention(q, k, v, causal=True)


def copied_pair(d_model=16, heads=4, bias=True, implementation="fused", seed=0):
    torch.manual_seed(seed)
    theirs = nn.MultiheadAttention(d_model, heads, bias=bias, batch_first=True)
    with torch.no_grad():  # non-zero biases, so that a bias copied wrong would show
        for name, p in theirs.named_parameters():
            if "bias" in name:
                p.normal_()
    return MultiHeadAttention.from_torch(theirs, implementation).eval(), theirs.eval()


def test_a_mask_shared_by_every_head_or_sentence_broadcasts():
    ours, _ = copied_pair()
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(8))
    mask = random_mask((2, 5, 5))
    expected, _ = ours(x, attn_mask=mask)
    for shared in (mask.unsqueeze(1), mask.unsqueeze(1).expand(2, 4, 5, 5)):  # (B, 1 or h, T, S)
        torch.testing.assert_close(ours(x, attn_mask=shared)[0], expected)
    one = random_mask((1, 1, 5, 5))
    torch.testing.assert_close(ours(x, attn_mask=one)[0], ours(x, attn_mask=one[0])[0])


@pytest.mark.parametrize("implementation", ["explicit", "fused"])
@pytest.mark.parametrize("bias", [True, False])
def test_multi_head_attention_matches_torch_with_copied_weights(implementation, bias):
    ours, theirs = copied_pair(bias=bias, implementation=implementation)
    g = torch.Generator().manual_seed(3)
    query, memory = torch.randn(2, 5, 16, generator=g), torch.randn(2, 7, 16, generator=g)
    key_mask = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])
    attn_mask = random_mask((5, 7))
    out, weights = ours(query, memory, memory, key_mask=key_mask, attn_mask=attn_mask[None],
                        need_weights=True)
    ref, ref_weights = theirs(query, memory, memory, key_padding_mask=~key_mask,
                              attn_mask=~attn_mask, need_weights=True,
                              average_attn_weights=False)
    torch.testing.assert_close(out, ref, atol=ATOL, rtol=1e-5)
    torch.testing.assert_close(weights, ref_weights, atol=ATOL, rtol=1e-5)
    # Without weights the fused path runs; same numbers.
    out_only, none = ours(query, memory, memory, key_mask=key_mask, attn_mask=attn_mask[None])
    assert none is None
    torch.testing.assert_close(out_only, ref, atol=ATOL, rtol=1e-5)


@pytest.mark.parametrize("implementation", ["explicit", "fused"])
def test_forward_is_the_five_steps_written_out(implementation):
    """Project, split, attend, merge, project (lesson 09), by hand with the layer's weights."""
    ours, _ = copied_pair(implementation=implementation)
    g = torch.Generator().manual_seed(9)
    query, memory = torch.randn(2, 5, 16, generator=g), torch.randn(2, 7, 16, generator=g)
    key_mask = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])

    def split(x):  # (B, L, D) -> (B, L, h, d_k) -> (B, h, L, d_k)
        return x.view(2, -1, 4, 4).transpose(1, 2)

    q, k, v = split(ours.q_proj(query)), split(ours.k_proj(memory)), split(ours.v_proj(memory))
    scores = (q @ k.transpose(-2, -1) / math.sqrt(4)).masked_fill(
        ~key_mask[:, None, None, :], float("-inf"))  # (B, h, T, S)
    heads = torch.softmax(scores, dim=-1) @ v  # (B, h, T, d_k)
    expected = ours.out_proj(heads.transpose(1, 2).reshape(2, 5, 16))  # (B, T, D)
    output, _ = ours(query, memory, key_mask=key_mask)
    torch.testing.assert_close(output, expected, atol=ATOL, rtol=1e-5)
    unmasked, _ = ours(query, memory)
    assert (unmasked - expected).abs().max() > 1e-3  # the mask matters: the check can fail


def test_both_implementations_give_the_same_gradients():
    layers = [copied_pair(implementation=impl)[0] for impl in ("explicit", "fused")]
    g = torch.Generator().manual_seed(10)
    x, upstream = torch.randn(2, 6, 16, generator=g), torch.randn(2, 6, 16, generator=g)
    key_mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    found = []
    for layer in layers:
        inputs = x.clone().requires_grad_()
        output, _ = layer(inputs, key_mask=key_mask, causal=True)
        (output * upstream).sum().backward()  # a random linear loss
        found.append([inputs.grad] + [p.grad for p in layer.parameters()])
    assert len(found[0]) == 1 + 8  # the input; 4 weights and 4 biases
    for position, (explicit, fused) in enumerate(zip(*found, strict=True)):
        assert explicit.abs().max() > 0, f"gradient {position} is zero"
        torch.testing.assert_close(fused, explicit, atol=ATOL, rtol=1e-5,
                                   msg=f"gradient {position}")


def test_causal_self_attention_matches_torch_and_both_paths():
    ours, theirs = copied_pair()
    x = torch.randn(3, 6, 16, generator=torch.Generator().manual_seed(4))
    ref, _ = theirs(x, x, x, attn_mask=nn.Transformer.generate_square_subsequent_mask(6),
                    need_weights=False)
    fused, _ = ours(x, causal=True)  # handed to the kernel as is_causal
    explicit, weights = ours(x, causal=True, need_weights=True)
    torch.testing.assert_close(fused, ref, atol=ATOL, rtol=1e-5)
    torch.testing.assert_close(explicit, ref, atol=ATOL, rtol=1e-5)
    assert bool((weights.triu(diagonal=1) == 0).all())


def test_heads_are_a_reshape_of_one_projection():
    ours, _ = copied_pair()
    x = torch.randn(2, 5, 16)
    heads = ours.split_heads(ours.q_proj(x))
    assert heads.shape == (2, 4, 5, 4)
    # Head i is columns 4i..4i+3 of the one projection.
    torch.testing.assert_close(heads[:, 1], ours.q_proj(x)[..., 4:8])
    torch.testing.assert_close(ours.merge_heads(heads), ours.q_proj(x))


def test_no_future_leakage_under_the_causal_mask():
    ours, _ = copied_pair()
    x = torch.randn(1, 8, 16, generator=torch.Generator().manual_seed(5))
    before, _ = ours(x, causal=True)
    changed = x.clone()
    changed[:, 5] += 10.0  # change token 5
    after, _ = ours(changed, causal=True)
    torch.testing.assert_close(after[:, :5], before[:, :5], atol=0, rtol=0)
    assert not torch.allclose(after[:, 5:], before[:, 5:])


def test_self_attention_without_positions_is_permutation_equivariant():
    ours, _ = copied_pair()
    x = torch.randn(2, 6, 16, generator=torch.Generator().manual_seed(6))
    permutation = torch.tensor([3, 0, 5, 1, 4, 2])
    out, _ = ours(x)
    out_permuted, _ = ours(x[:, permutation])
    torch.testing.assert_close(out_permuted, out[:, permutation], atol=ATOL, rtol=1e-5)


@pytest.mark.parametrize("implementation", ["explicit", "fused"])
def test_kv_cache_step_by_step_equals_the_full_causal_pass(implementation):
    ours, _ = copied_pair(implementation=implementation)
    x = torch.randn(2, 6, 16, generator=torch.Generator().manual_seed(7))
    full, _ = ours(x, causal=True)
    cache = KVCache()
    first, _ = ours(x[:, :2], causal=True, cache=cache)  # a prompt of two tokens
    steps = [first] + [ours(x[:, t:t + 1], causal=True, cache=cache)[0] for t in range(2, 6)]
    assert len(cache) == 6
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=ATOL, rtol=1e-5)


def test_static_cache_projects_the_memory_once():
    ours, _ = copied_pair()
    memory = torch.randn(2, 7, 16)
    cache = KVCache(static=True)
    ours(torch.randn(2, 1, 16), memory, cache=cache)
    stored = cache.k
    ours(torch.randn(2, 1, 16), memory, cache=cache)
    assert cache.k is stored and len(cache) == 7


def test_multi_head_attention_rejects_bad_input():
    with pytest.raises(ValueError, match="multiple of num_heads"):
        MultiHeadAttention(10, 4)
    with pytest.raises(ValueError, match="implementation"):
        MultiHeadAttention(8, 2, implementation="flash")
    ours, _ = copied_pair()
    with pytest.raises(ValueError, match=r"query of shape \(B, length, 16\)"):
        ours(torch.randn(2, 5, 8))
    with pytest.raises(ValueError, match=r"key_mask must have shape \(2, 5\)"):
        ours(torch.randn(2, 5, 16), key_mask=torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"attn_mask must have shape \(B, T, S\) or "
                                         r"\(B, h, T, S\) = \(2, 5, 5\).*got \(5, 4\)"):
        ours(torch.randn(2, 5, 16), attn_mask=torch.ones(5, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"\(B, h, T, S\) = \(2, 4, 5, 5\), got "
                                         r"\(2, 3, 5, 5\)"):
        ours(torch.randn(2, 5, 16), attn_mask=torch.ones(2, 3, 5, 5, dtype=torch.bool))
    with pytest.raises(TypeError, match="torch.bool"):
        ours(torch.randn(2, 5, 16), attn_mask=torch.ones(5, 5))
