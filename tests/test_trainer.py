"""train/trainer.py: ``Trainer`` and ``TrainOptions``, the loop ``fit`` runs: built from its
options and run, it trains the model ``fit`` trains, bit for bit; its options are frozen and
checked when built; its state (steps, history, callbacks) is readable during and after a run.
The loop's behaviour itself (losses, clipping, early stopping, budgets) is tested through
``fit`` in test_loop.py, and resuming in test_resume.py."""

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from course_lib.models.toy import ToyClassifier, ToyConfig, make_spirals
from course_lib.train.history import EarlyStopping
from course_lib.train.loop import fit, supervised_loss
from course_lib.train.trainer import Trainer, TrainOptions, epochs_for

CE = supervised_loss(nn.functional.cross_entropy)


def loaders(seed=0):
    x, y = make_spirals(100, noise=0.03, seed=seed)
    train = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True,
                       generator=torch.Generator().manual_seed(seed))
    return train, DataLoader(TensorDataset(x, y), batch_size=256)


def test_fit_is_a_trainer_built_from_its_options_and_run():
    """``fit(...)`` and ``Trainer(..., TrainOptions(...)).run()`` train the same model, bit for
    bit, and record the same history."""

    def trained(one_call):
        torch.manual_seed(0)
        train, val = loaders()
        model = ToyClassifier(ToyConfig(hidden=16))
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        if one_call:
            history = fit(model, optimizer, train, CE, max_steps=10, val_batches=val,
                          clip_grad_norm=1.0, device="cpu", progress=False)
        else:
            options = TrainOptions(max_steps=10, clip_grad_norm=1.0, device="cpu",
                                   progress=False)
            trainer = Trainer(model, optimizer, train, CE, options, val_batches=val)
            history = trainer.run()
            assert trainer.steps == 10 and trainer.epochs == epochs_for(10, train)
            assert trainer.history is history and not model.training
        return [{k: v for k, v in r.items() if k not in ("time_s", "train_s")}
                for r in history.records], model.state_dict()

    (records_a, state_a), (records_b, state_b) = trained(True), trained(False)
    assert records_a == records_b
    assert all(torch.equal(state_a[name], state_b[name]) for name in state_a)


def test_the_callbacks_see_every_step_and_every_epoch():
    torch.manual_seed(0)
    train, _ = loaders()
    seen = []

    class Recorder:
        def on_step_end(self, step, loss):
            seen.append(("step", step))

        def on_epoch_end(self, epoch, record, model):
            seen.append(("epoch", epoch, record["steps"]))

    options = TrainOptions(epochs=2, device="cpu", progress=False, live_plot=False)
    trainer = Trainer(ToyClassifier(ToyConfig(hidden=8)),
                      torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1), train, CE,
                      options, callbacks=[Recorder()])
    trainer.run()
    assert len(train) == 4  # two spirals of 100 points in batches of 64
    assert seen == [*(("step", s) for s in (1, 2, 3, 4)), ("epoch", 1, 4),
                    *(("step", s) for s in (5, 6, 7, 8)), ("epoch", 2, 8)]


def test_options_are_frozen_and_checked_when_built():
    options = TrainOptions(epochs=1, early_stopping=EarlyStopping("val_loss"))
    with pytest.raises(AttributeError):
        options.epochs = 2
    with pytest.raises(ValueError, match="clip_grad_norm must be positive, got -1"):
        TrainOptions(epochs=1, clip_grad_norm=-1)
    with pytest.raises(ValueError, match="give epochs, max_steps or both"):
        TrainOptions()
    with pytest.raises(ValueError, match="max_steps must be a positive int, got 2.5"):
        TrainOptions(max_steps=2.5)
