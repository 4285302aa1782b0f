"""Score functions, masked softmax, context vectors and local windows (course_lib.nn.attention)."""

import pytest
import torch

from course_lib.nn.attention import (
    AdditiveScore,
    ConcatScore,
    DotScore,
    GeneralScore,
    attention_context,
    local_attention,
    make_score,
    masked_softmax,
    padding_mask,
)
from course_lib.seeding import make_generator


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=make_generator(seed))


# --- masked softmax --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_masked_softmax_rows_sum_to_one_masked_items_are_zero_and_no_nan(dtype):
    g = make_generator(1)
    scores = (10 * torch.randn(5, 7, generator=g)).to(dtype)
    mask = torch.rand(5, 7, generator=g) > 0.5
    mask[0] = False  # a fully masked row
    mask[1] = True  # nothing masked
    mask[2:, 0] = True
    weights = masked_softmax(scores, mask)
    assert weights.dtype == dtype and not torch.isnan(weights).any()
    assert (weights[~mask] == 0).all()  # exactly zero, not just small
    assert (weights[0] == 0).all()  # fully masked: zero weights instead of NaN
    torch.testing.assert_close(weights[1:].float().sum(dim=-1), torch.ones(4),
                               atol=1e-2 if dtype != torch.float32 else 1e-6, rtol=0)
    allowed = weights[2:][mask[2:]].float()
    expected = torch.cat([scores[r][mask[r]].float().softmax(-1) for r in range(2, 5)])
    torch.testing.assert_close(allowed, expected, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_masked_softmax_survives_extreme_scores_in_half_precision(dtype):
    scores = torch.tensor([[6e4, -6e4, 0.0], [-6e4, -6e4, -6e4]]).to(dtype)
    mask = torch.tensor([[True, True, False], [True, True, True]])
    weights = masked_softmax(scores, mask)
    assert torch.isfinite(weights).all()
    torch.testing.assert_close(weights.float().sum(-1), torch.ones(2), atol=1e-2, rtol=0)


def test_masked_softmax_gradients_are_finite_for_fully_masked_rows():
    scores = randn(3, 4).requires_grad_(True)
    mask = torch.tensor([[True] * 4, [False] * 4, [True, False, True, False]])
    masked_softmax(scores, mask).pow(2).sum().backward()
    assert torch.isfinite(scores.grad).all() and (scores.grad[1] == 0).all()


def test_masked_softmax_rejects_bad_masks():
    with pytest.raises(TypeError, match="torch.bool"):
        masked_softmax(torch.zeros(2, 3), torch.ones(2, 3))
    with pytest.raises(ValueError, match=r"mask must have shape \(2, 3\), got \(2, 4\); each "
                                         r"dimension must equal the scores' or be 1"):
        masked_softmax(torch.zeros(2, 3), torch.ones(2, 4, dtype=torch.bool))


def test_padding_mask_marks_the_real_positions():
    mask = padding_mask(torch.tensor([1, 3, 0]), 3)
    assert mask.tolist() == [[True, False, False], [True, True, True], [False, False, False]]


# --- score functions -----------------------------------------------------------------------


def test_dot_score_is_the_inner_product():
    query, keys = randn(2, 5), randn(2, 4, 5, seed=1)
    expected = torch.einsum("bd,bsd->bs", query, keys)
    torch.testing.assert_close(DotScore(5).score(query, keys), expected)


def test_general_score_is_the_bilinear_form():
    score = GeneralScore(5, 3)
    query, keys = randn(2, 5), randn(2, 4, 3, seed=1)
    W = score.W.weight  # (d_q, d_k)
    expected = torch.stack([torch.stack([query[b] @ W @ keys[b, j] for j in range(4)])
                            for b in range(2)])
    torch.testing.assert_close(score.score(query, keys), expected)


def test_additive_score_matches_the_equation_term_by_term():
    score = AdditiveScore(5, 3, attention_size=7)
    query, keys = randn(2, 5), randn(2, 4, 3, seed=1)
    W, U, b, v = score.W.weight, score.U.weight, score.U.bias, score.v.weight[0]
    expected = torch.stack([torch.stack([v @ torch.tanh(W @ query[b_] + U @ keys[b_, j] + b)
                                         for j in range(4)]) for b_ in range(2)])
    torch.testing.assert_close(score.score(query, keys), expected)


def test_concat_score_is_one_matrix_over_the_concatenation_and_equals_additive():
    concat = ConcatScore(5, 3, attention_size=7)
    query, keys = randn(2, 5), randn(2, 4, 3, seed=1)
    pairs = torch.cat([query.unsqueeze(1).expand(-1, 4, -1), keys], dim=-1)  # (B, S, 8)
    literal = concat.v(torch.tanh(concat.W_a(pairs))).squeeze(-1)  # vᵀ tanh(W_a [s; h])
    torch.testing.assert_close(concat.score(query, keys), literal)
    additive = AdditiveScore(5, 3, attention_size=7)
    with torch.no_grad():
        additive.W.weight.copy_(concat.W_a.weight[:, :5])
        additive.U.weight.copy_(concat.W_a.weight[:, 5:])
        additive.U.bias.copy_(concat.W_a.bias)
        additive.v.weight.copy_(concat.v.weight)
    torch.testing.assert_close(additive.score(query, keys), literal)


def test_subclassed_scores_keep_their_parameter_names_and_sizes():
    """General and concat scores build on their parents' ``__init__``; a checkpoint's keys
    (``W``; ``W_a``, ``v``) and the sizes stay the same."""
    general, concat = GeneralScore(5, 3, scaled=True), ConcatScore(5, 3, attention_size=7)
    assert (general.query_size, general.key_size, general.scaled) == (5, 3, True)
    assert {k: tuple(v.shape) for k, v in general.state_dict().items()} == {"W.weight": (5, 3)}
    assert (concat.query_size, concat.key_size) == (5, 3)
    assert {k: tuple(v.shape) for k, v in concat.state_dict().items()} == {
        "W_a.weight": (7, 8), "W_a.bias": (7,), "v.weight": (1, 7)}
    assert {k: tuple(v.shape) for k, v in ConcatScore(5, 3).state_dict().items()}["v.weight"] \
        == (1, 5)  # d_a defaults to d_q


@pytest.mark.parametrize("name", ["dot", "general"])
def test_scaled_scores_divide_by_the_root_of_the_query_size(name):
    plain, scaled = make_score(name, 6, 6), make_score(name, 6, 6, scaled=True)
    scaled.load_state_dict(plain.state_dict())
    query, keys = randn(2, 3, 6), randn(2, 4, 6, seed=1)
    torch.testing.assert_close(scaled.score(query, keys), plain.score(query, keys) / 6 ** 0.5)


def test_scaling_keeps_dot_scores_of_random_unit_vectors_at_unit_spread():
    # Var(sᵀh) = D for independent standard normal s and h; the 1/√D factor makes it 1.
    for size in (16, 256):
        query, keys = randn(64, size), randn(64, 50, size, seed=1)
        plain_std = DotScore(size).score(query, keys).std().item()
        scaled_std = DotScore(size, scaled=True).score(query, keys).std().item()
        assert abs(plain_std / size ** 0.5 - 1) < 0.1 and abs(scaled_std - 1) < 0.1


@pytest.mark.parametrize("name", ["additive", "concat"])
def test_only_dot_and_general_scores_can_be_scaled(name):
    with pytest.raises(ValueError, match=f"only the dot and general scores can be scaled, got "
                                         f"score='{name}'"):
        make_score(name, 4, 4, scaled=True)


@pytest.mark.parametrize("name", ["additive", "dot", "general", "concat"])
def test_all_steps_at_once_equal_one_step_at_a_time(name):
    score = make_score(name, 6, 6)
    queries, keys = randn(2, 3, 6), randn(2, 4, 6, seed=1)
    prepared = score.prepare(keys)
    together = score(queries, prepared)  # (B, T, S)
    assert together.shape == (2, 3, 4)
    for t in range(3):
        torch.testing.assert_close(together[:, t], score(queries[:, t], prepared))


@pytest.mark.parametrize("name", ["additive", "dot", "general", "concat"])
def test_scores_pass_gradients_to_queries_keys_and_parameters(name):
    score = make_score(name, 6, 6)
    query, keys = randn(2, 6).requires_grad_(True), randn(2, 4, 6, seed=1).requires_grad_(True)
    score.score(query, keys).sum().backward()
    grads = [query.grad, keys.grad] + [p.grad for p in score.parameters()]
    assert all(g is not None and g.abs().sum() > 0 for g in grads)


def test_scores_reject_mismatched_shapes_with_a_clear_message():
    with pytest.raises(ValueError, match="equal query and key sizes, got 4 and 6"):
        DotScore(4, 6)
    score = GeneralScore(4, 6)
    with pytest.raises(ValueError, match=r"expected keys \(B, S, 6\), got \(2, 3, 5\)"):
        score.prepare(randn(2, 3, 5))
    with pytest.raises(ValueError, match=r"d_q = 4, got \(2, 5\)"):
        score(randn(2, 5), score.prepare(randn(2, 3, 6)))
    with pytest.raises(ValueError, match="score must be one of"):
        make_score("cosine", 4, 4)


# --- context vectors -----------------------------------------------------------------------


def test_context_is_the_weighted_average_of_the_values():
    weights = masked_softmax(randn(2, 3, 4), padding_mask(torch.tensor([4, 2]), 4).unsqueeze(1))
    values = randn(2, 4, 5, seed=1)
    context = attention_context(weights, values)
    expected = torch.einsum("bts,bsd->btd", weights, values)
    torch.testing.assert_close(context, expected)
    torch.testing.assert_close(attention_context(weights[:, 0], values), expected[:, 0])
    # Padding never leaks in: changing padded values changes nothing.
    changed = values.clone()
    changed[1, 2:] = 1e6
    torch.testing.assert_close(attention_context(weights, changed)[1], context[1])
    with pytest.raises(ValueError, match=r"got \(2, 3\) and \(2, 4, 5\)"):
        attention_context(randn(2, 3), values)


# --- local attention -----------------------------------------------------------------------


@pytest.mark.parametrize("gaussian", [False, True])
def test_local_attention_is_zero_outside_the_window_and_at_padding(gaussian):
    scores = randn(3, 20)
    center = torch.tensor([2.0, 9.4, 15.0])
    mask = padding_mask(torch.tensor([20, 20, 12]), 20)
    weights = local_attention(scores, center, half_width=3, mask=mask, gaussian=gaussian)
    positions = torch.arange(20).float()
    outside = (positions.unsqueeze(0) - center.unsqueeze(1)).abs() > 3
    assert (weights[outside] == 0).all() and (weights[~mask] == 0).all()
    assert (weights[~outside & mask] > 0).all()
    sums = weights.sum(-1)
    if gaussian:  # softmax inside the window, times a Gaussian <= 1: sums to at most one
        assert (sums[:2] < 1).all() and (sums[:2] > 0.3).all()
        assert (sums[2] == 0)  # window [12, 18] lies entirely in the padding: zeros, not NaN
    else:
        torch.testing.assert_close(sums[:2], torch.ones(2))


def test_local_p_gaussian_matches_luong_equation_and_passes_gradient_to_the_centre():
    scores = randn(1, 9)
    center = torch.tensor([4.3], requires_grad=True)
    weights = local_attention(scores, center, half_width=2, gaussian=True)
    window = torch.tensor([3, 4, 5, 6])  # |j - 4.3| <= 2
    align = scores[0, window].softmax(-1)
    sigma = 2 / 2
    expected = align * torch.exp(-(window.float() - 4.3) ** 2 / (2 * sigma**2))
    torch.testing.assert_close(weights[0, window], expected)
    weights.sum().backward()
    assert center.grad is not None and center.grad.abs() > 0
