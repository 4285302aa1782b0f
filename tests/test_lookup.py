"""Lesson 03's lookups: soft attention as a convex combination with masks and temperature, hard
attention as an argmax, and sampling with Gumbel noise."""

import math

import pytest
import torch

from course_lib.lessons.document_qa import (
    RELATIONS,
    answer_questions,
    content_words,
    decode_answers,
    document_lookup,
    embed_text,
    make_document,
    word_vector,
)
from course_lib.lessons.kernel_regression import (
    leave_one_out_error,
    make_regression_data,
    nadaraya_watson,
    regression_function,
)
from course_lib.lessons.lookup import (
    hard_attention,
    lookup_accuracy,
    lookup_gradient_norms,
    lookup_loss,
    make_lookup_task,
    random_rotation,
    sample_hard_attention,
    soft_attention,
    train_query_map,
)
from course_lib.nn.attention import masked_softmax
from course_lib.nn.gumbel import gumbel_max_sample, gumbel_noise
from course_lib.seeding import make_generator


def random_set(batch=4, items=6, dim=5, value_dim=3, seed=0):
    g = make_generator(seed)
    return (torch.randn(batch, dim, generator=g), torch.randn(batch, items, dim, generator=g),
            torch.randn(batch, items, value_dim, generator=g))


# --- masked softmax and soft attention -----------------------------------------------------------


def test_soft_attention_matches_a_hand_computed_example():
    keys = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])  # (1, 3, 2)
    values = torch.tensor([[[1.0], [2.0], [4.0]]])  # (1, 3, 1)
    query = torch.tensor([[1.0, 0.0]])  # scores k·q = 1, 0, 1
    output, weights = soft_attention(query, keys, values)
    e = math.e
    expected = torch.tensor([[e, 1.0, e]]) / (2 * e + 1)
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(output, torch.tensor([[(e * 1 + 2 + e * 4) / (2 * e + 1)]]))
    # Temperature divides the scores: tau = 0.5 doubles them.
    _, sharper = soft_attention(query, keys, values, temperature=0.5)
    torch.testing.assert_close(sharper, torch.tensor([[e**2, 1.0, e**2]]) / (2 * e**2 + 1))


def test_soft_attention_is_a_convex_combination():
    query, keys, values = random_set(batch=8, items=9, dim=4, value_dim=3)
    output, weights = soft_attention(query, keys, values)
    assert output.shape == (8, 3) and weights.shape == (8, 9)
    assert (weights >= 0).all()
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(8))
    torch.testing.assert_close(output, torch.einsum("bn,bnv->bv", weights, values))
    assert (output <= values.amax(dim=1) + 1e-6).all()
    assert (output >= values.amin(dim=1) - 1e-6).all()


def test_masked_items_get_zero_weight_and_do_not_change_the_output():
    query, keys, values = random_set(batch=1, items=6)
    mask = torch.tensor([[True, False, True, True, False, True]])
    output, weights = soft_attention(query, keys, values, mask=mask)
    assert (weights[~mask] == 0).all()
    kept = mask[0]
    expected, _ = soft_attention(query, keys[:, kept], values[:, kept])
    torch.testing.assert_close(output, expected)
    # A masked item's value may be anything, even huge: it never leaks into the output.
    poisoned = values.clone()
    poisoned[:, ~kept] = 1e30
    torch.testing.assert_close(soft_attention(query, keys, poisoned, mask=mask)[0], expected)


def test_fully_masked_row_gives_zeros_not_nan():
    query, keys, values = random_set(batch=2, items=4)
    mask = torch.tensor([[False] * 4, [True, False, True, False]])
    for output, weights in (soft_attention(query, keys, values, mask=mask),
                            hard_attention(query, keys, values, mask=mask)):
        assert not torch.isnan(output).any() and not torch.isnan(weights).any()
        assert (weights[0] == 0).all() and (output[0] == 0).all()
        assert weights[1].sum().item() == pytest.approx(1.0)


def test_temperature_limits_are_hard_attention_and_the_mean():
    query, keys, values = random_set(batch=5, items=7)
    hard_output, hard_weights = hard_attention(query, keys, values)
    cold_output, cold_weights = soft_attention(query, keys, values, temperature=1e-4)
    torch.testing.assert_close(cold_weights, hard_weights)
    torch.testing.assert_close(cold_output, hard_output)
    hot_output, _ = soft_attention(query, keys, values, temperature=1e6)
    torch.testing.assert_close(hot_output, values.mean(dim=1), atol=1e-4, rtol=1e-4)


# --- hard attention and Gumbel-max sampling ------------------------------------------------------


def test_hard_attention_picks_the_argmax():
    query, keys, values = random_set(batch=16, items=10)
    output, weights = hard_attention(query, keys, values)
    best = [int(max(range(10), key=lambda i: float(keys[b, i] @ query[b]))) for b in range(16)]
    assert weights.argmax(dim=-1).tolist() == best
    assert ((weights == 0) | (weights == 1)).all() and (weights.sum(dim=-1) == 1).all()
    torch.testing.assert_close(output, values[torch.arange(16), best])


def test_hard_attention_respects_the_mask_and_breaks_ties_to_the_first():
    keys = torch.tensor([[[1.0, 0.0], [3.0, 0.0], [2.0, 0.0], [2.0, 0.0]]])
    values = torch.arange(4.0).reshape(1, 4, 1)
    query = torch.tensor([[1.0, 0.0]])
    assert hard_attention(query, keys, values)[1].argmax().item() == 1
    mask = torch.tensor([[True, False, True, True]])  # the best item is not allowed
    output, weights = hard_attention(query, keys, values, mask=mask)
    assert weights.tolist() == [[0.0, 0.0, 1.0, 0.0]] and output.item() == 2.0


def test_hard_attention_has_no_gradient_to_the_query_but_passes_one_to_the_values():
    query, keys, values = random_set(batch=3, items=5)
    query.requires_grad_(True)
    values.requires_grad_(True)
    output, _ = hard_attention(query, keys, values)
    output.sum().backward()
    assert query.grad is None  # argmax cut the graph
    assert values.grad.abs().sum() > 0
    query.grad = None
    soft_attention(query, keys, values)[0].sum().backward()
    assert query.grad.abs().sum() > 0


def test_gumbel_noise_has_the_gumbel_moments():
    noise = gumbel_noise((200_000,), generator=make_generator(0))
    assert noise.mean().item() == pytest.approx(0.5772, abs=0.01)  # Euler-Mascheroni constant
    assert noise.var().item() == pytest.approx(math.pi**2 / 6, abs=0.03)
    assert torch.isfinite(noise).all()


def test_gumbel_max_frequencies_match_softmax_probabilities():
    logits = torch.tensor([2.0, 1.0, 0.0, -1.0, 0.5])
    n = 40_000
    samples = gumbel_max_sample(logits.expand(n, -1), generator=make_generator(3))  # (n,)
    frequencies = torch.bincount(samples, minlength=5).float() / n
    probabilities = logits.softmax(-1)
    # Standard error sqrt(p (1 - p) / n) is at most 0.0025; allow 4 of them.
    torch.testing.assert_close(frequencies, probabilities, atol=0.01, rtol=0)


def test_sampled_hard_attention_follows_the_soft_weights_and_the_mask():
    query, keys, values = random_set(batch=1, items=5, seed=4)
    n = 30_000
    mask = torch.tensor([[True, True, False, True, True]])
    batch = (query.expand(n, -1), keys.expand(n, -1, -1), values.expand(n, -1, -1))
    output, weights = sample_hard_attention(*batch, mask=mask.expand(n, -1), temperature=2.0,
                                            generator=make_generator(5))
    assert ((weights == 0) | (weights == 1)).all() and (weights.sum(-1) == 1).all()
    assert (weights[:, 2] == 0).all()  # a masked item is never drawn
    _, soft = soft_attention(query, keys, values, mask=mask, temperature=2.0)
    torch.testing.assert_close(weights.mean(dim=0), soft[0], atol=0.015, rtol=0)
    chosen = weights.argmax(dim=-1)
    torch.testing.assert_close(output, values[0, chosen])
    # On average a draw is soft attention's output.
    soft_output, _ = soft_attention(query, keys, values, mask=mask, temperature=2.0)
    torch.testing.assert_close(output.mean(dim=0), soft_output[0], atol=0.05, rtol=0)


def test_gumbel_sampling_is_repeatable_by_seed():
    logits = torch.randn(50, 6, generator=make_generator(0))
    first = gumbel_max_sample(logits, generator=make_generator(7))
    assert torch.equal(first, gumbel_max_sample(logits, generator=make_generator(7)))
    assert not torch.equal(first, gumbel_max_sample(logits, generator=make_generator(8)))


# --- the lookup task and gradients ---------------------------------------------------------------


def test_lookup_task_is_seeded_cpu_and_consistent():
    task = make_lookup_task(32, 5, 8, value_dim=3, seed=1)
    assert task.keys.shape == (32, 5, 8) and task.values.shape == (32, 5, 3)
    assert task.queries.shape == (32, 8) and task.targets.shape == (32,)
    assert all(t.device.type == "cpu" for t in (task.keys, task.values, task.queries))
    assert task.targets.dtype == torch.int64 and len(task) == 32
    torch.testing.assert_close(task.answers[3], task.values[3, task.targets[3]])
    again = make_lookup_task(32, 5, 8, value_dim=3, seed=1)
    assert torch.equal(task.queries, again.queries) and torch.equal(task.targets, again.targets)
    assert not torch.equal(task.queries, make_lookup_task(32, 5, 8, value_dim=3, seed=2).queries)
    exact = make_lookup_task(32, 5, 8, noise=0.0, seed=1)
    torch.testing.assert_close(exact.queries, exact.keys[torch.arange(32), exact.targets])


def test_hard_and_soft_attention_solve_the_plain_task_but_not_the_rotated_one():
    task = make_lookup_task(256, 8, 16, seed=0)
    _, hard = hard_attention(task.queries, task.keys, task.values)
    output, soft = soft_attention(task.queries, task.keys, task.values, temperature=0.05)
    assert lookup_accuracy(hard, task) > 0.95 and lookup_accuracy(soft, task) > 0.95
    assert lookup_loss(output, task).item() < 0.5  # close to the answer's value
    rotated = make_lookup_task(256, 8, 16, rotate=True, seed=0)
    _, weights = hard_attention(rotated.queries, rotated.keys, rotated.values)
    assert lookup_accuracy(weights, rotated) < 0.4  # plain dot products no longer find it


def test_random_rotation_is_orthogonal():
    rotation = random_rotation(6, generator=make_generator(0))
    torch.testing.assert_close(rotation.T @ rotation, torch.eye(6), atol=1e-5, rtol=0)


def test_soft_attention_has_useful_gradients_and_hard_attention_none():
    norms = lookup_gradient_norms(make_lookup_task(128, 8, 16, seed=0), temperature=0.2)
    assert norms["soft_autograd"] > 0.1
    assert norms["soft_finite_difference"] == pytest.approx(norms["soft_autograd"], rel=1e-2)
    assert norms["hard_autograd"] == 0.0
    assert norms["hard_finite_difference"] == 0.0  # the output does not move with q at all


def test_soft_attention_learns_the_query_map_and_hard_attention_cannot():
    task = make_lookup_task(256, 8, 16, rotate=True, seed=0)
    soft_losses, weight = train_query_map(task, mode="soft", steps=50)
    assert soft_losses[-1] < soft_losses[0] / 100
    _, weights = hard_attention(task.queries @ weight.T, task.keys, task.values)
    assert lookup_accuracy(weights, task) > 0.95
    hard_losses, hard_weight = train_query_map(task, mode="hard", steps=20)
    assert len(set(hard_losses)) == 1  # not a single step changed anything
    _, start = train_query_map(task, mode="hard", steps=0)
    assert torch.equal(hard_weight, start)
    with pytest.raises(ValueError, match="mode"):
        train_query_map(task, mode="medium")


# --- Nadaraya-Watson kernel regression -----------------------------------------------------------


def test_regression_data_is_seeded_sorted_and_on_the_cpu():
    x, y = make_regression_data(40, seed=3)
    assert x.shape == y.shape == (40,) and x.device.type == "cpu"
    assert (x[1:] >= x[:-1]).all() and x.min() >= 0 and x.max() <= 5
    assert torch.equal(x, make_regression_data(40, seed=3)[0])
    clean_x, clean_y = make_regression_data(10, noise=0.0, seed=3)
    torch.testing.assert_close(clean_y, regression_function(clean_x))


def test_nadaraya_watson_fits_the_function_with_a_sensible_bandwidth():
    x, y = make_regression_data(50, noise=0.5, seed=0)
    grid = torch.linspace(0.25, 4.75, 100)
    truth = regression_function(grid)
    fit, weights = nadaraya_watson(grid, x, y, bandwidth=0.3)
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(100))
    error = (fit - truth).pow(2).mean().item()
    assert error < 0.1, f"mean squared error {error:.3f} at h = 0.3"
    spread = truth.var().item()
    assert error < spread / 10  # far better than predicting a constant
    flat, _ = nadaraya_watson(grid, x, y, bandwidth=100.0)
    assert (flat - truth).pow(2).mean().item() > 5 * error  # over-smoothed


def test_nadaraya_watson_tends_to_the_global_mean_for_a_huge_bandwidth():
    x, y = make_regression_data(30, seed=1)
    grid = torch.linspace(-1.0, 6.0, 25)
    for bandwidth in (1e4, math.inf):
        prediction, weights = nadaraya_watson(grid, x, y, bandwidth)
        torch.testing.assert_close(prediction, y.mean().expand(25), atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(weights, torch.full((25, 30), 1 / 30), atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("bandwidth", [1e-4, 1e-30])
def test_nadaraya_watson_tends_to_the_nearest_neighbour_for_a_tiny_bandwidth(bandwidth):
    x, y = make_regression_data(30, seed=1)
    grid = torch.tensor([-1.0, 0.7, 2.2, 3.91, 6.0])
    nearest = (grid.unsqueeze(1) - x.unsqueeze(0)).abs().argmin(dim=1)
    prediction, weights = nadaraya_watson(grid, x, y, bandwidth)
    assert not torch.isnan(prediction).any()
    torch.testing.assert_close(prediction, y[nearest])
    assert weights.argmax(dim=1).tolist() == nearest.tolist()
    # At the training points themselves, a tiny bandwidth reproduces the data exactly.
    torch.testing.assert_close(nadaraya_watson(x, x, y, bandwidth)[0], y)


def test_nadaraya_watson_mask_and_vector_targets():
    x = torch.tensor([0.0, 1.0, 2.0])
    y = torch.tensor([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]])  # (N, C)
    prediction, weights = nadaraya_watson(torch.tensor([1.0]), x, y, bandwidth=1.0)
    a = math.exp(-0.5)
    expected = torch.tensor([[a, 1.0, a]]) / (1 + 2 * a)
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(prediction, expected @ y)
    masked, weights = nadaraya_watson(torch.tensor([1.0]), x, y, bandwidth=1.0,
                                      mask=torch.tensor([[True, False, True]]))
    assert weights[0, 1] == 0
    torch.testing.assert_close(masked, torch.tensor([[2.0, 20.0]]))


def test_leave_one_out_prefers_a_middle_bandwidth():
    x, y = make_regression_data(50, seed=0)
    errors = {h: leave_one_out_error(x, y, h) for h in (0.02, 0.3, 5.0)}
    assert errors[0.3] < errors[0.02] and errors[0.3] < errors[5.0]
    # Leave-one-out never uses the point itself, so a tiny bandwidth cannot cheat.
    assert errors[0.02] > 0.3


# --- document -> answer lookup -------------------------------------------------------------------


def test_tokenize_makes_questions_and_facts_share_words():
    assert content_words("Where does Alice live?") == ["alice", "live"]
    assert content_words("alice lives in") == ["alice", "live"]
    assert sorted(content_words("Which colour does Bruno like?")) == sorted(
        content_words("bruno likes the colour"))


def test_word_vectors_are_unit_repeatable_and_nearly_orthogonal():
    a, b = word_vector("paris"), word_vector("oslo")
    assert a.norm().item() == pytest.approx(1.0) and torch.equal(a, word_vector("paris"))
    assert abs((a @ b).item()) < 0.3
    assert not torch.equal(a, word_vector("paris", seed=1))
    assert embed_text("the of ?").abs().sum() == 0  # no content word


def test_document_lookup_retrieves_the_right_answer_for_every_question():
    document = make_document(n_people=6, seed=0)
    assert len(document) == 6 * len(RELATIONS)
    answers, weights = answer_questions(document.questions, document)
    assert answers == document.answers
    assert weights.shape == (len(document), len(document))
    assert weights.argmax(dim=-1).tolist() == list(range(len(document)))
    assert (weights.diagonal() > 0.5).all()  # most of the weight on the one right fact
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(len(document)))


def test_document_lookup_understands_rephrased_questions_and_masks():
    document = make_document(n_people=4, relations=["home", "pet"], seed=2)
    index = document.facts.index(next(f for f in document.facts if f.startswith("chen lives")))
    answers, _ = answer_questions(["Where does Chen live?"], document)
    assert answers == [document.answers[index]]
    queries = document.embed(["where does chen live?"])
    mask = torch.ones(1, len(document), dtype=torch.bool)
    mask[0, index] = False  # hide the fact: the answer cannot come back
    output, weights = document_lookup(queries, document, mask=mask)
    assert weights[0, index] == 0 and decode_answers(output, document) != [document.answers[index]]


def test_document_is_seeded():
    first, second = make_document(seed=5), make_document(seed=5)
    assert first.facts == second.facts and torch.equal(first.keys, second.keys)
    assert first.facts != make_document(seed=6).facts
    assert first.keys.device.type == "cpu"
    with pytest.raises(ValueError, match="relations"):
        make_document(relations=["shoe size"])


# --- shapes, errors and devices ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "keys", "values", "mask", "message"),
    [
        ((2, 4), (2, 3, 4, 1), (2, 3, 5), None,
         r"keys must have shape \(B, S, d\), got \(2, 3, 4, 1\)"),
        ((2, 5), (2, 3, 4), (2, 3, 5), None, r"\(B, d\) = \(2, 4\).*got \(2, 5\)"),
        ((3, 4), (2, 3, 4), (2, 3, 5), None, r"\(B, d\) = \(2, 4\).*got \(3, 4\)"),
        ((2, 4), (2, 3, 4), (2, 7, 5), None, r"\(B, S, d_v\) = \(2, 3, d_v\).*got \(2, 7, 5\)"),
        ((2, 4), (2, 3, 4), (2, 3), None, r"\(B, S, d_v\).*got \(2, 3\)"),
        ((2, 4), (2, 3, 4), (2, 3, 5), (3, 2),
         r"mask must have shape \(B, S\) = \(2, 3\), got \(3, 2\)"),
    ],
)
@pytest.mark.parametrize("attend", [soft_attention, hard_attention, sample_hard_attention])
def test_bad_shapes_are_named(attend, query, keys, values, mask, message):
    mask = None if mask is None else torch.ones(mask, dtype=torch.bool)
    with pytest.raises(ValueError, match=message):
        attend(torch.zeros(query), torch.zeros(keys), torch.zeros(values), mask=mask)


def test_other_bad_arguments():
    query, keys, values = random_set()
    with pytest.raises(ValueError, match="temperature"):
        soft_attention(query, keys, values, temperature=0.0)
    with pytest.raises(TypeError, match="torch.bool"):
        soft_attention(query, keys, values, mask=torch.ones(4, 6))
    with pytest.raises(ValueError, match=r"logits must have shape \(B, S\), got \(6,\)"):
        gumbel_max_sample(torch.zeros(6))
    with pytest.raises(ValueError, match="bandwidth"):
        nadaraya_watson(torch.zeros(3), torch.zeros(4), torch.zeros(4), bandwidth=0.0)
    with pytest.raises(ValueError, match=r"N = 4.*got \(5,\)"):
        nadaraya_watson(torch.zeros(3), torch.zeros(4), torch.zeros(5), bandwidth=1.0)
    with pytest.raises(ValueError, match=r"\(M,\).*\(3, 1\)"):
        nadaraya_watson(torch.zeros(3, 1), torch.zeros(4), torch.zeros(4), bandwidth=1.0)
    with pytest.raises(ValueError, match=r"d = 256, got \(2, 8\)"):
        document_lookup(torch.zeros(2, 8), make_document(n_people=1))
    with pytest.raises(ValueError):
        make_lookup_task(0)
    with pytest.raises(ValueError):
        make_regression_data(10, noise=-1.0)


def test_forward_on_the_meta_device_follows_the_inputs():
    meta = torch.device("meta")
    query, keys, values = (t.to(meta) for t in random_set())
    mask = torch.ones(4, 6, dtype=torch.bool, device=meta)
    results = [
        *soft_attention(query, keys, values, mask=mask),
        *hard_attention(query, keys, values, mask=mask),
        *sample_hard_attention(query, keys, values, mask=mask, generator=make_generator(0)),
        masked_softmax(torch.zeros(4, 6, device=meta), mask),
        gumbel_max_sample(torch.zeros(4, 6, device=meta), generator=make_generator(0)),
        *nadaraya_watson(torch.zeros(3, device=meta), torch.zeros(5, device=meta),
                         torch.zeros(5, device=meta), 0.5,
                         mask=torch.ones(3, 5, dtype=torch.bool, device=meta)),
        *document_lookup(torch.zeros(2, 256, device=meta), make_document(n_people=1)),
    ]
    assert all(t.device.type == "meta" for t in results)


@pytest.mark.cuda
def test_cuda_matches_cpu():
    query, keys, values = random_set(batch=8, items=16, dim=32, value_dim=8)
    mask = torch.rand(8, 16, generator=make_generator(1)) > 0.3
    expected = soft_attention(query, keys, values, mask=mask)
    got = soft_attention(query.cuda(), keys.cuda(), values.cuda(), mask=mask.cuda())
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a.cpu(), b, rtol=1e-4, atol=1e-5)
    _, weights = sample_hard_attention(query.cuda(), keys.cuda(), values.cuda(), mask=mask.cuda(),
                                       generator=make_generator(0))
    assert weights.device.type == "cuda" and (weights.sum(-1) == 1).all()
    x, y = make_regression_data(40)
    prediction, _ = nadaraya_watson(x.cuda(), x.cuda(), y.cuda(), 0.3)
    torch.testing.assert_close(prediction.cpu(), nadaraya_watson(x, x, y, 0.3)[0])
