"""``lessons/multi_head.py``: lesson 09's short multi-head forward gives the numbers and the
gradients of ``MultiHeadAttention`` (both implementations), with and without masks, for self-
and cross-attention, in eval mode and with dropout in training mode; and it rejects bad input."""

import pytest
import torch

from course_lib.lessons.multi_head import multi_head_forward
from course_lib.nn.self_attention import MultiHeadAttention, causal_mask

ATOL = 1e-6
# (B, T, S, D, h): self-attention (T = S), cross-attention (T < S and T > S), one head, h = D
SHAPES = [(2, 5, 5, 12, 3), (3, 4, 9, 16, 4), (2, 7, 3, 8, 2), (1, 6, 6, 8, 1), (2, 3, 5, 4, 4)]
IMPLEMENTATIONS = ("explicit", "fused")


def inputs(batch, queries, keys, d_model, seed=0):
    g = torch.Generator().manual_seed(seed)
    query = torch.randn(batch, queries, d_model, generator=g)
    key = torch.randn(batch, keys, d_model, generator=g)
    value = torch.randn(batch, keys, d_model, generator=g)
    lengths = torch.randint(1, keys + 1, (batch,), generator=g)
    lengths[0] = keys  # one example without padding
    key_mask = torch.arange(keys) < lengths[:, None]  # (B, S)
    return query, key, value, key_mask


def cases(queries, keys, key_mask):
    """(the layer's mask options, the same mask as one (B or 1, 1, T, S) tensor) by name."""
    causal = causal_mask(queries, keys)[None, None] if keys >= queries else None  # (1, 1, T, S)
    found = {"no mask": ({}, None), "padding": ({"key_mask": key_mask}, key_mask[:, None, None])}
    if causal is not None:
        found["causal"] = ({"causal": True}, causal)
        found["padding & causal"] = ({"key_mask": key_mask, "causal": True},
                                     key_mask[:, None, None] & causal)  # (B, 1, T, S)
    return found


def layer(d_model, heads, implementation, dropout=0.0, seed=0):
    torch.manual_seed(seed)
    return MultiHeadAttention(d_model, heads, dropout=dropout, implementation=implementation)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "B{}-T{}-S{}-D{}-h{}".format(*s))
def test_the_short_forward_equals_the_layer(shape, implementation):
    batch, queries, keys, d_model, heads = shape
    mha = layer(d_model, heads, implementation).eval()
    query, key, value, key_mask = inputs(batch, queries, keys, d_model)
    with torch.no_grad():
        for name, (options, mask) in cases(queries, keys, key_mask).items():
            expected, expected_weights = mha(query, key, value, need_weights=True, **options)
            fast, _ = mha(query, key, value, **options)  # no weights: may take the fused path
            output, weights = multi_head_forward(mha, query, key, value, mask)
            assert output.shape == (batch, queries, d_model), name
            assert weights.shape == (batch, heads, queries, keys), name
            torch.testing.assert_close(output, expected, atol=ATOL, rtol=0, msg=name)
            torch.testing.assert_close(output, fast, atol=ATOL, rtol=0, msg=name)
            torch.testing.assert_close(weights, expected_weights, atol=ATOL, rtol=0, msg=name)


def test_the_masks_change_the_output_so_the_comparison_can_fail():
    mha = layer(12, 3, "explicit").eval()
    query, key, value, key_mask = inputs(2, 5, 5, 12)
    with torch.no_grad():
        unmasked, _ = multi_head_forward(mha, query, key, value)
        for name, (options, _) in cases(5, 5, key_mask).items():
            if options:
                masked, _ = mha(query, key, value, **options)
                assert (masked - unmasked).abs().max() > 1e-3, name


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("shape", [SHAPES[0], SHAPES[1]], ids=["self", "cross"])
def test_gradients_are_the_layers(shape, implementation):
    batch, queries, keys, d_model, heads = shape
    mha = layer(d_model, heads, implementation).eval()
    query, key, value, key_mask = inputs(batch, queries, keys, d_model)
    options, mask = cases(queries, keys, key_mask)["padding & causal"]
    upstream = torch.randn(batch, queries, d_model, generator=torch.Generator().manual_seed(5))

    def gradients(forward):
        mha.zero_grad()
        tensors = [t.clone().requires_grad_() for t in (query, key, value)]
        (forward(*tensors) * upstream).sum().backward()  # a random linear loss
        return [t.grad for t in tensors] + [p.grad.clone() for p in mha.parameters()]

    theirs = gradients(lambda q, k, v: mha(q, k, v, **options)[0])
    ours = gradients(lambda q, k, v: multi_head_forward(mha, q, k, v, mask)[0])
    assert len(ours) == 3 + 8  # query, key, value; 4 weights and 4 biases
    for position, (mine, reference) in enumerate(zip(ours, theirs, strict=True)):
        assert mine.abs().max() > 0, f"gradient {position} is zero"
        torch.testing.assert_close(mine, reference, atol=1e-5, rtol=1e-5,
                                   msg=f"gradient {position}")


def test_dropout_in_training_mode_is_the_explicit_layers():
    mha = layer(16, 4, "explicit", dropout=0.3).train()
    query, key, value, key_mask = inputs(3, 4, 9, 16)
    torch.manual_seed(7)
    expected, _ = mha(query, key, value, key_mask=key_mask)
    torch.manual_seed(7)
    output, _ = multi_head_forward(mha, query, key, value, key_mask[:, None, None])
    torch.testing.assert_close(output, expected, atol=ATOL, rtol=0)
    with torch.no_grad():
        evaluated, _ = multi_head_forward(mha.eval(), query, key, value, key_mask[:, None, None])
    assert (output - evaluated).abs().max() > 1e-3  # dropout did act in training mode


def test_bad_input_is_named():
    mha = layer(12, 3, "explicit")
    query, key, value, key_mask = inputs(2, 5, 5, 12)
    with pytest.raises(ValueError, match="mask"):
        multi_head_forward(mha, query, key, value, key_mask)  # (B, S): not the scores' rank
    with pytest.raises(TypeError, match="mask"):
        multi_head_forward(mha, query, key, value, key_mask[:, None, None].float())
    with pytest.raises(ValueError, match="query"):
        multi_head_forward(mha, query[..., :8], key, value)
    with pytest.raises(ValueError, match="key and value"):
        multi_head_forward(mha, query, key, value[:, :4])
