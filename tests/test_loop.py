"""train/loop.py: ``fit``, the course's one training loop (the ``Trainer`` of train/trainer.py in
one call): it learns, averages losses by batch size, clips, stops early, runs under autocast,
steps schedulers, and refuses NaN losses and bad settings."""

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from course_lib.metrics import accuracy
from course_lib.models.toy import ToyClassifier, ToyConfig, make_spirals
from course_lib.train.history import EarlyStopping, History
from course_lib.train.loop import fit, supervised_loss
from course_lib.train.schedules import cosine_decay
from course_lib.train.trainer import batch_size, epochs_for

CE = supervised_loss(nn.functional.cross_entropy)


def spiral_loaders(n=200, seed=0):
    x, y = make_spirals(n, noise=0.03, seed=seed)
    train = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True,
                       generator=torch.Generator().manual_seed(seed))
    val_x, val_y = make_spirals(100, noise=0.03, seed=seed + 1)
    val = DataLoader(TensorDataset(val_x, val_y), batch_size=256)
    return train, val, (val_x, val_y)


def val_accuracy(val_xy):
    x, y = val_xy
    return lambda model: accuracy(model(x), y)


def test_fit_learns_the_spirals():
    torch.manual_seed(0)
    train, val, val_xy = spiral_loaders()
    model = ToyClassifier(ToyConfig(hidden=64, layers=2))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    history = fit(model, optimizer, train, CE, epochs=60, val_batches=val, device="cpu",
                  metrics={"accuracy": val_accuracy(val_xy)}, progress=False)
    assert len(history) == 60
    assert history["train_loss"][-1] < 0.25 * history["train_loss"][0]
    assert history["accuracy"][-1] >= 0.95
    assert set(history.keys) >= {"epoch", "train_loss", "val_loss", "accuracy", "grad_norm",
                                 "lr", "time_s", "train_s"}
    assert not model.training  # handed back in eval mode


def test_train_loss_is_the_size_weighted_mean_of_batch_losses():
    # A model with no parameters to update (lr=0) has the same loss every epoch, which must
    # equal the loss over the whole set even though the last batch is smaller.
    x, y = make_spirals(50, seed=3)
    model = ToyClassifier(ToyConfig())
    loader = DataLoader(TensorDataset(x, y), batch_size=32)
    history = fit(model, torch.optim.SGD(model.parameters(), lr=0.0), loader, CE, epochs=1,
                  val_batches=loader, device="cpu", progress=False)
    with torch.no_grad():
        whole = nn.functional.cross_entropy(model(x), y).item()
    assert history["train_loss"][0] == pytest.approx(whole, rel=1e-5)
    assert history["val_loss"][0] == pytest.approx(whole, rel=1e-5)


def test_gradient_clipping_bounds_the_update():
    # Plain SGD with lr=1: the step equals the clipped gradient, so its norm is at most the clip.
    torch.manual_seed(0)
    x = torch.randn(16, 2) * 100  # huge inputs give huge gradients
    y = torch.randint(0, 2, (16,))
    model = ToyClassifier(ToyConfig(hidden=8, layers=1))
    before = nn.utils.parameters_to_vector(model.parameters()).clone()
    history = fit(model, torch.optim.SGD(model.parameters(), lr=1.0), [(x, y)], CE, epochs=1,
                  clip_grad_norm=0.5, device="cpu", progress=False)
    step = nn.utils.parameters_to_vector(model.parameters()) - before
    assert history["grad_norm"][0] > 0.5  # the raw gradient really was larger
    assert step.norm().item() == pytest.approx(0.5, rel=1e-4)


def test_early_stopping_stops_and_restores_the_best_weights():
    torch.manual_seed(0)
    train, val, _ = spiral_loaders(n=50)
    model = ToyClassifier(ToyConfig(hidden=16, layers=1))
    snapshots = {}

    class Snapshot:
        def on_epoch_end(self, epoch, record, model):
            snapshots[epoch] = {k: v.clone() for k, v in model.state_dict().items()}

    # A learning rate that makes validation loss bounce, so it stops improving quickly.
    optimizer = torch.optim.SGD(model.parameters(), lr=5.0)
    stopper = EarlyStopping("val_loss", mode="min", patience=2)
    history = fit(model, optimizer, train, CE, epochs=50, val_batches=val, device="cpu",
                  early_stopping=stopper, callbacks=[Snapshot()], progress=False)
    assert history.stopped_early
    assert len(history) < 50
    losses = history["val_loss"]
    best = min(range(len(losses)), key=losses.__getitem__) + 1
    assert history.best_epoch == best
    assert len(history) == best + 2  # patience epochs after the best, then stop
    for key, value in model.state_dict().items():
        assert torch.equal(value, snapshots[best][key])


def test_early_stopping_max_mode_on_a_metric():
    stopper = EarlyStopping("accuracy", mode="max", patience=1, min_delta=0.01)
    assert stopper.improved(0.5, None)
    assert stopper.improved(0.52, 0.5)
    assert not stopper.improved(0.505, 0.5)


def test_early_stopping_on_a_missing_key_is_explained():
    x, y = make_spirals(10)
    model = ToyClassifier(ToyConfig())
    with pytest.raises(ValueError, match="val_loss.*needs val_batches"):
        fit(model, torch.optim.SGD(model.parameters(), lr=0.1), [(x, y)], CE, epochs=2,
            early_stopping=EarlyStopping("val_loss"), device="cpu", progress=False)


@pytest.mark.parametrize("bad", [{"mode": "up"}, {"patience": 0}, {"min_delta": -1.0}])
def test_early_stopping_settings_are_validated(bad):
    with pytest.raises(ValueError):
        EarlyStopping(**bad)


def test_bfloat16_autocast_on_cpu_trains():
    torch.manual_seed(0)
    train, _, val_xy = spiral_loaders()
    model = ToyClassifier(ToyConfig())
    history = fit(model, torch.optim.Adam(model.parameters(), lr=1e-2), train, CE, epochs=30,
                  amp_dtype=torch.bfloat16, device="cpu", progress=False,
                  metrics={"accuracy": val_accuracy(val_xy)})
    assert history["train_loss"][-1] < history["train_loss"][0]
    assert all(p.dtype == torch.float32 for p in model.parameters())  # master weights stay fp32
    assert history["accuracy"][-1] > 0.8


def test_scheduler_steps_every_batch():
    x, y = make_spirals(20)
    model = ToyClassifier(ToyConfig())
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    history = fit(model, optimizer, [(x, y)] * 3, CE, epochs=2, scheduler=scheduler,
                  device="cpu", progress=False)
    assert history["lr"] == [pytest.approx(0.5**3), pytest.approx(0.5**6)]


def test_nan_loss_stops_with_a_clear_error():
    x, y = make_spirals(10)
    x[0, 0] = float("nan")
    model = ToyClassifier(ToyConfig())
    with pytest.raises(FloatingPointError, match="epoch 1, step 0"):
        fit(model, torch.optim.SGD(model.parameters(), lr=0.1), [(x, y)], CE, epochs=1,
            device="cpu", progress=False)


def test_loss_fn_must_return_a_scalar():
    x, y = make_spirals(10)
    model = ToyClassifier(ToyConfig())
    per_row = supervised_loss(lambda logits, t: nn.functional.cross_entropy(logits, t,
                                                                             reduction="none"))
    with pytest.raises(ValueError, match=r"scalar tensor.*\(20,\)"):
        fit(model, torch.optim.SGD(model.parameters(), lr=0.1), [(x, y)], per_row, epochs=1,
            device="cpu", progress=False)


@pytest.mark.parametrize("kwargs", [{"epochs": 0}, {"epochs": 1, "clip_grad_norm": 0.0},
                                    {"epochs": 1, "amp_dtype": torch.float64}])
def test_bad_settings_are_refused(kwargs):
    model = ToyClassifier(ToyConfig())
    with pytest.raises(ValueError):
        fit(model, torch.optim.SGD(model.parameters(), lr=0.1), [], CE, device="cpu",
            progress=False, **kwargs)


def test_empty_training_data_is_refused():
    model = ToyClassifier(ToyConfig())
    with pytest.raises(ValueError, match="no batches"):
        fit(model, torch.optim.SGD(model.parameters(), lr=0.1), [], CE, epochs=1,
            device="cpu", progress=False)


def test_fit_uses_get_device_when_none_is_given(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    x, y = make_spirals(10)
    model = ToyClassifier(ToyConfig())
    fit(model, torch.optim.SGD(model.parameters(), lr=0.1), [(x, y)], CE, epochs=1,
        progress=False)
    monkeypatch.setenv("COURSE_DEVICE", "nonsense")
    with pytest.raises(ValueError, match="nonsense"):
        fit(model, torch.optim.SGD(model.parameters(), lr=0.1), [(x, y)], CE, epochs=1,
            progress=False)


def test_history_column_access_and_frame():
    history = History([{"epoch": 1, "train_loss": 2.0}, {"epoch": 2, "train_loss": 1.0}])
    assert history["train_loss"] == [2.0, 1.0]
    with pytest.raises(KeyError, match="train_loss"):
        history["val_loss"]
    assert list(history.to_frame().index) == [1, 2]


def test_batch_size_finds_the_first_tensor():
    assert batch_size((torch.ones(5, 2), torch.ones(5))) == 5
    assert batch_size({"tokens": torch.ones(3, 7)}) == 3
    assert batch_size([[1, 2], torch.ones(4)]) == 4


@pytest.mark.cuda
def test_float16_autocast_with_grad_scaling_on_cuda():
    torch.manual_seed(0)
    train, _, val_xy = spiral_loaders()
    model = ToyClassifier(ToyConfig())
    x, y = val_xy
    history = fit(model, torch.optim.Adam(model.parameters(), lr=1e-2), train, CE, epochs=30,
                  amp_dtype=torch.float16, device="cuda", progress=False,
                  metrics={"accuracy": lambda m: accuracy(m(x.cuda()), y.cuda())})
    assert next(model.parameters()).is_cuda
    assert history["accuracy"][-1] > 0.8


def test_cosine_decay_follows_the_steps():
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.2)
    schedule = cosine_decay(optimizer, total_steps=10, final_fraction=0.1)
    seen = [optimizer.param_groups[0]["lr"]]
    for _ in range(30):
        optimizer.step()  # (no gradients: nothing moves; PyTorch wants it before the schedule)
        schedule.step()
        seen.append(optimizer.param_groups[0]["lr"])
    assert seen[0] == pytest.approx(0.2)
    # Half-way through the steps, cos(π/2) = 0: half-way between lr₀ and f·lr₀.
    assert seen[5] == pytest.approx(0.2 * (0.1 + 0.9 * 0.5))
    assert all(a > b for a, b in zip(seen[:10], seen[1:11], strict=True))
    # Spent budget: the floor, and it stays there.
    assert seen[10] == pytest.approx(0.02) and seen[30] == pytest.approx(0.02)


@pytest.mark.parametrize("kwargs", [{"total_steps": 0}, {"total_steps": 2.5},
                                    {"total_steps": 10, "final_fraction": 1.5}])
def test_cosine_decay_refuses_bad_settings(kwargs):
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1)
    with pytest.raises(ValueError, match="must"):
        cosine_decay(optimizer, **kwargs)


def test_a_step_budget_stops_mid_epoch_after_exactly_that_many_steps():
    """Two spirals of 100 points in batches of 64 are 4 batches an epoch: 10 steps end in the
    third epoch, after its second batch, and that short epoch is recorded."""
    torch.manual_seed(0)
    train, _, _ = spiral_loaders(n=100)
    assert len(train) == 4 and epochs_for(10, train) == 3
    model = ToyClassifier(ToyConfig(hidden=8))
    calls = []

    def counting_loss(model, batch):
        calls.append(1)
        return CE(model, batch)

    history = fit(model, torch.optim.SGD(model.parameters(), lr=0.1), train, counting_loss,
                  max_steps=10, device="cpu", progress=False)
    assert len(calls) == 10 and history["steps"] == [4, 8, 10] and len(history) == 3
    assert not history.stopped_by_time
    # With epochs as well, whichever ends first.
    history = fit(model, torch.optim.SGD(model.parameters(), lr=0.1), train, CE, epochs=2,
                  max_steps=10, device="cpu", progress=False)
    assert history["steps"] == [4, 8]


def test_a_step_budget_gives_the_same_model_however_slow_the_steps():
    """The same seed and step budget give bitwise the same weights whether the steps are fast
    or slowed down (as on a busy machine): the clock decides nothing."""
    import time

    def trained(delay):
        torch.manual_seed(0)
        train, _, _ = spiral_loaders()

        def loss_fn(model, batch):
            time.sleep(delay)
            return CE(model, batch)

        model = ToyClassifier(ToyConfig(hidden=16))
        history = fit(model, torch.optim.Adam(model.parameters(), lr=1e-2), train, loss_fn,
                      max_steps=9, device="cpu", progress=False)
        return history, model.state_dict()

    fast_history, fast = trained(0.0)
    slow_history, slow = trained(0.01)
    assert fast_history["train_loss"] == slow_history["train_loss"]
    for name in fast:
        assert torch.equal(fast[name], slow[name]), name


@pytest.mark.parametrize("kwargs", [{"max_steps": 0}, {"max_steps": 2.0}, {"max_steps": True},
                                    {}, {"epochs": 1, "max_time_s": 0.0}])
def test_bad_step_budgets_are_refused(kwargs):
    train, _, _ = spiral_loaders()
    with pytest.raises(ValueError, match="max_steps|epochs|max_time_s"):
        fit(ToyClassifier(ToyConfig()), torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1),
            train, CE, progress=False, device="cpu", **kwargs)


def test_the_time_safety_valve_counts_training_steps_only(monkeypatch):
    """On a fake clock, each step takes 20 ms and each epoch's metric 150 ms. Counted in wall
    time, a limit of 0.25 s would run out in the second epoch; counted in training steps it
    lasts 13 steps: six full epochs of 2 batches, and the first step of the seventh."""
    from course_lib.train import trainer

    now = [0.0]
    monkeypatch.setattr(trainer.time, "perf_counter", lambda: now[0])

    def slow_loss(model, batch):
        now[0] += 0.02
        return CE(model, batch)

    def slow_metric(model):
        now[0] += 0.15
        return 0.0

    train, _, _ = spiral_loaders(n=64)
    assert len(train) == 2
    model = ToyClassifier(ToyConfig(hidden=8))
    history = fit(model, torch.optim.SGD(model.parameters(), lr=0.1), train, slow_loss,
                  epochs=50, metrics={"slow": slow_metric}, device="cpu", progress=False,
                  max_time_s=0.25)
    assert history.stopped_by_time
    assert len(history) == 7 and history["steps"][-1] == 13
    assert history["train_s"][-1] == pytest.approx(0.26)
    assert sum(history["time_s"]) == pytest.approx(0.26 + 0.15 * 7)

