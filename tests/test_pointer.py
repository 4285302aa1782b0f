"""Hard attention: sampling, REINFORCE, straight-through Gumbel (course_lib.models.pointer)."""

import math

import pytest
import torch

from course_lib.lessons.estimators import (
    estimator_statistics,
    expected_loss,
    gradient_samples,
    score_gradient,
    train_pointer,
)
from course_lib.models.pointer import (
    MovingAverageBaseline,
    PointerConfig,
    PointerNet,
    pointer_accuracy,
    pointer_loss,
    pointer_task,
    reinforce_surrogate,
)
from course_lib.nn.gumbel import gumbel_noise, sample_item, straight_through_gumbel
from course_lib.seeding import make_generator
from course_lib.train.checkpoint import CheckpointError, load_checkpoint, save_checkpoint


def test_pointer_task_is_a_lookup_where_one_item_suffices():
    task = pointer_task(n=300, n_items=6, dim=12, n_classes=9, noise=0.1, seed=4)
    assert task.query.shape == (300, 12) and task.keys.shape == (300, 6, 12)
    assert task.labels.shape == (300, 6) and task.target.shape == (300,)
    rows = torch.arange(300)
    assert torch.equal(task.target, task.labels[rows, task.target_index])
    assert all(len(set(row.tolist())) == 6 for row in task.labels)  # distinct labels per row
    nearest = (task.keys - task.query.unsqueeze(1)).norm(dim=-1).argmin(-1)  # (n,)
    assert (nearest == task.target_index).float().mean() > 0.99  # the query names one item
    again = pointer_task(n=300, n_items=6, dim=12, n_classes=9, noise=0.1, seed=4)
    assert torch.equal(again.query, task.query) and torch.equal(again.labels, task.labels)
    with pytest.raises(ValueError, match="n_classes"):
        pointer_task(n_items=8, n_classes=5)


def pick_frequencies(picks, n_items):
    return torch.bincount(picks, minlength=n_items).double() / picks.numel()


def test_sampling_follows_the_softmax_and_log_prob_is_its_log():
    scores = torch.tensor([[2.0, 0.0, -1.0, 1.0]]).repeat(40_000, 1).requires_grad_(True)
    index, log_prob = sample_item(scores, make_generator(0))
    expected = torch.softmax(scores[0].detach().double(), -1)
    # 40k draws: each frequency is within ~4 standard errors (< 0.01) of its probability.
    torch.testing.assert_close(pick_frequencies(index, 4), expected, atol=0.01, rtol=0)
    torch.testing.assert_close(log_prob, torch.log_softmax(scores, -1)[torch.arange(40_000),
                                                                       index])
    log_prob.sum().backward()
    assert scores.grad.abs().sum() > 0


def test_straight_through_gumbel_is_one_hot_forward_and_soft_backward():
    scores = torch.randn(5, 7, generator=make_generator(1)).requires_grad_(True)
    mask = torch.ones(5, 7, dtype=torch.bool)
    mask[:, 0] = False
    weights = straight_through_gumbel(scores, 0.5, make_generator(2), mask)
    assert ((weights == 0) | (weights == 1)).all() and (weights.sum(-1) == 1).all()
    assert (weights[:, 0] == 0).all()  # a masked item is never picked
    upstream = torch.randn(5, 7, generator=make_generator(3))
    (grad_st,) = torch.autograd.grad((weights * upstream).sum(), scores)
    # The same noise through the plain relaxation softmax((e + g) / τ) gives the same gradient.
    noise = gumbel_noise(scores.shape, generator=make_generator(2), dtype=scores.dtype)
    relaxed = torch.softmax((scores + noise).masked_fill(~mask, torch.finfo(torch.float32).min)
                            / 0.5, -1)
    (grad_soft,) = torch.autograd.grad((relaxed * upstream).sum(), scores)
    torch.testing.assert_close(grad_st, grad_soft)
    picks = straight_through_gumbel(scores.detach()[:1].repeat(40_000, 1), 1.0,
                                    make_generator(4)).argmax(-1)
    torch.testing.assert_close(pick_frequencies(picks, 7),
                               torch.softmax(scores.detach()[0].double(), -1), atol=0.01, rtol=0)
    with pytest.raises(ValueError, match="temperature must be a finite number > 0"):
        straight_through_gumbel(scores, 0.0)


def test_reinforce_surrogate_gives_the_score_function_gradient():
    losses = torch.tensor([1.0, 3.0, 0.5]).requires_grad_(True)
    log_prob = torch.tensor([-0.5, -1.0, -2.0]).requires_grad_(True)
    surrogate = reinforce_surrogate(losses, log_prob, baseline=1.5)
    surrogate.backward()
    torch.testing.assert_close(log_prob.grad, (losses.detach() - 1.5) / 3)  # (L − b) / B
    torch.testing.assert_close(losses.grad, torch.full((3,), 1 / 3))  # L − b is held constant
    with pytest.raises(ValueError, match="the same shape"):
        reinforce_surrogate(losses, log_prob[:2])


def test_moving_average_baseline():
    baseline = MovingAverageBaseline(momentum=0.5)
    assert baseline.update(torch.tensor([2.0, 4.0])) == 3.0  # starts at the first mean
    assert baseline.update(torch.tensor([1.0])) == 2.0
    with pytest.raises(ValueError):
        MovingAverageBaseline(1.0)


@pytest.fixture(scope="module")
def fixed_point():
    """A partly trained model and a batch: gradients are compared here."""
    torch.manual_seed(0)
    model = PointerNet(PointerConfig(estimator="soft"))
    task = pointer_task(n=32, seed=7)
    exact = score_gradient(model, expected_loss(model, task))
    return model, task, exact


def test_reinforce_is_unbiased_and_the_baseline_lowers_its_variance(fixed_point):
    model, task, exact = fixed_point
    n = 3000
    plain = estimator_statistics(gradient_samples(model, task, "reinforce", n), exact)
    b = expected_loss(model, task).item()
    with_baseline = estimator_statistics(
        gradient_samples(model, task, "reinforce", n, baseline=b, seed=1), exact)
    for stats in (plain, with_baseline):  # the mean is within 4 standard errors of the truth
        assert stats["relative_bias"] < 4 * stats["relative_std"] / math.sqrt(n), stats
    assert with_baseline["variance"] < 0.5 * plain["variance"], (plain, with_baseline)


def test_gumbel_is_lower_variance_than_reinforce_and_soft_is_deterministic(fixed_point):
    model, task, exact = fixed_point
    reinforce = estimator_statistics(gradient_samples(model, task, "reinforce", 500), exact)
    gumbel = estimator_statistics(gradient_samples(model, task, "gumbel", 500), exact)
    soft = gradient_samples(model, task, "soft", 3)
    assert gumbel["variance"] < reinforce["variance"], (gumbel, reinforce)
    assert torch.equal(soft[0], soft[1]) and torch.equal(soft[0], soft[2])
    with pytest.raises(ValueError, match="at least two samples"):
        estimator_statistics(soft[:1], exact)


def test_forward_shapes_and_modes():
    task = pointer_task(n=5, seed=1)
    for estimator in ("soft", "reinforce", "gumbel"):
        model = PointerNet(PointerConfig(estimator=estimator)).train()
        logits, weights, log_prob = model(task.query, task.keys, task.labels, make_generator(0))
        assert logits.shape == (5, 16) and weights.shape == (5, 8)
        assert (log_prob is None) == (estimator != "reinforce")
        torch.testing.assert_close(weights.sum(-1), torch.ones(5))
        if estimator != "soft":
            assert ((weights == 0) | (weights == 1)).all()
        loss = pointer_loss(model, task, MovingAverageBaseline(), make_generator(0))
        loss.backward()
        assert model.W.weight.grad is not None and model.W.weight.grad.abs().sum() > 0
        model.eval()  # hard estimators pick the argmax when evaluating
        _, picked, _ = model(task.query, task.keys, task.labels)
        if estimator != "soft":
            assert torch.equal(picked.argmax(-1), model.scores(task.query, task.keys).argmax(-1))
    with pytest.raises(ValueError, match=r"expected query \(B, 16\)"):
        model(task.query[:, :3], task.keys, task.labels)
    with pytest.raises(ValueError, match="estimator must be one of"):
        PointerConfig(estimator="argmax")


def test_a_checkpoint_saved_when_the_config_was_hard_attention_config_still_loads(tmp_path):
    """PointerConfig was HardAttentionConfig: a checkpoint naming the old class (under its old
    module, course_lib.hard_attention, or its module today) loads into a PointerNet; a config
    class that never existed is refused."""
    torch.manual_seed(0)
    config = PointerConfig(dim=6, n_classes=7, estimator="gumbel")
    model = PointerNet(config).eval()
    path = save_checkpoint(tmp_path / "pointer.pt", model, config)
    payload = torch.load(path, weights_only=True)
    assert payload["config_class"] == "course_lib.models.pointer.PointerConfig"
    task = pointer_task(n=5, n_items=4, dim=6, n_classes=7, seed=3)
    for module in ("course_lib.models.pointer", "course_lib.hard_attention"):
        payload.update(model_class=f"{module}.PointerNet",
                       config_class=f"{module}.HardAttentionConfig")
        torch.save(payload, path)
        loaded, _ = load_checkpoint(path, PointerNet)
        assert loaded.config == config
        assert torch.equal(loaded(task.query, task.keys, task.labels).logits,
                           model(task.query, task.keys, task.labels).logits)
    payload["config_class"] = "course_lib.models.pointer.LookupConfig"
    torch.save(payload, path)
    with pytest.raises(CheckpointError, match=r"holds a course_lib\.models\.pointer\.LookupConfig"):
        load_checkpoint(path, PointerNet)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("estimator", ["soft", "reinforce", "gumbel"])
def test_every_estimator_learns_the_lookup(estimator, seed):
    """A learning test: held-out answers and picks (argmax) reach 95%, for several seeds."""
    run = train_pointer(estimator, steps=600, seed=seed)
    final = run.history[-1]
    assert final["accuracy"] >= 0.95 and final["pick"] >= 0.95, (estimator, final)
    assert pointer_accuracy(run.model, pointer_task(n=200, seed=99))["accuracy"] >= 0.95
