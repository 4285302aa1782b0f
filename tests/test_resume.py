"""train/resume.py: Ctrl-C in ``fit`` saves a resumable state and says so in one line; the
next call with the same ``resume_path`` goes on from it and ends with exactly the weights, and
the history, of a run that was never interrupted. Interrupts land mid-step, mid-update, during
validation and in a callback; a run killed outright goes on from the last periodic save."""

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from course_lib.models.toy import ToyClassifier, ToyConfig, make_spirals
from course_lib.seeding import seed_everything
from course_lib.train.history import EarlyStopping
from course_lib.train.loop import fit, supervised_loss
from course_lib.train.resume import TrainingInterrupted
from course_lib.train.schedules import cosine_decay

CE = supervised_loss(nn.functional.cross_entropy)
STEPS = 23  # 4 batches an epoch: the run ends in the middle of its sixth epoch


class Interrupt:
    """Raises KeyboardInterrupt (what Ctrl-C raises) on its ``at``-th call, once."""

    def __init__(self, at: int | None) -> None:
        self.at, self.calls = at, 0

    def __call__(self) -> None:
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt


def run(tmp_path, *, loader="generator", in_loss=None, in_metric=None, in_callback=None,
        in_update=None, early_stopping=None, save_every=5, crash_at=None, steps=STEPS):
    """One call of the same training cell: seeds, builds, trains with dropout, a cosine
    schedule and clipping. The ``in_*`` arguments choose where Ctrl-C lands."""
    seed_everything(0)
    x, y = make_spirals(100, noise=0.05, seed=0)
    generator = torch.Generator().manual_seed(1) if loader == "generator" else None
    batches = DataLoader(TensorDataset(x, y), batch_size=50, shuffle=True, generator=generator)
    model = nn.Sequential(nn.Dropout(0.2), ToyClassifier(ToyConfig(hidden=16)))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)
    schedule = cosine_decay(optimizer, steps)
    if in_update is not None:  # Ctrl-C after the weights moved, before the step is counted
        hook = Interrupt(in_update)
        optimizer.register_step_post_hook(lambda *_: hook())

    loss_hook, metric_hook, callback_hook = Interrupt(in_loss), Interrupt(in_metric), \
        Interrupt(in_callback)

    def loss_fn(model, batch):
        if model.training:  # count training steps only, not validation batches
            if crash_at is not None and loss_hook.calls + 1 == crash_at:
                raise RuntimeError("the kernel died")
            loss_hook()
        return CE(model, batch)

    class Callback:
        def on_epoch_end(self, epoch, record, model):
            callback_hook()
            record["from_callback"] = float(epoch)

    history = fit(model, optimizer, batches, loss_fn, max_steps=steps, device="cpu",
                  val_batches=DataLoader(TensorDataset(x, y), batch_size=100),
                  metrics={"probe": lambda m: (metric_hook(), 0.0)[1]}, callbacks=[Callback()],
                  scheduler=schedule, clip_grad_norm=0.5,
                  early_stopping=early_stopping, progress=False, live_plot=False,
                  resume_path=tmp_path / "run.resume.pt", save_every=save_every)
    return model, history


def same_run(first, second):
    (model_a, history_a), (model_b, history_b) = first, second
    for (name, a), b in zip(model_a.state_dict().items(), model_b.state_dict().values(),
                            strict=True):
        assert torch.equal(a, b), name
    drop = ("time_s", "train_s")
    assert [{k: v for k, v in r.items() if k not in drop} for r in history_a.records] == \
        [{k: v for k, v in r.items() if k not in drop} for r in history_b.records]
    assert history_a.best_epoch == history_b.best_epoch


@pytest.mark.parametrize("loader", ["generator", "global"])
@pytest.mark.parametrize("where", [
    {"in_loss": 7},  # mid-epoch, between two periodic saves
    {"in_loss": 5},  # on the first step of an epoch
    {"in_metric": 2},  # after the second epoch's steps, while it is evaluated
    {"in_callback": 3},  # after the third epoch was recorded, in a callback
    {"in_update": 9},  # inside an optimiser step: the last periodic save is used
])
def test_an_interrupted_run_goes_on_to_the_same_weights(tmp_path, loader, where):
    reference = run(tmp_path / "reference", loader=loader)
    with pytest.raises(TrainingInterrupted) as stopped:
        run(tmp_path, loader=loader, **where)
    assert (tmp_path / "run.resume.pt").is_file()
    assert "stopped at step" in str(stopped.value) and "run.resume.pt" in str(stopped.value)
    resumed = run(tmp_path, loader=loader)
    same_run(reference, resumed)
    assert not (tmp_path / "run.resume.pt").exists()  # a finished run leaves no state behind


def test_ctrl_c_saves_the_step_it_stopped_at_and_says_so_in_one_line(tmp_path):
    with pytest.raises(TrainingInterrupted) as stopped:
        run(tmp_path, in_loss=8, save_every=100)  # no periodic save before step 8
    message = str(stopped.value)
    assert message.startswith(f"Training stopped at step 7 of {STEPS}; the state after step 7")
    assert "\n" not in message
    assert stopped.value._render_traceback_() == [message]  # IPython shows just this line
    assert isinstance(stopped.value, KeyboardInterrupt)  # `except Exception` does not eat it


def test_ctrl_c_in_an_update_with_nothing_saved_says_the_run_starts_again(tmp_path):
    with pytest.raises(TrainingInterrupted, match="nothing was saved, and the next run starts"):
        run(tmp_path, in_update=3, save_every=100)
    same_run(run(tmp_path / "reference"), run(tmp_path))


def test_a_run_killed_outright_goes_on_from_the_last_periodic_save(tmp_path):
    with pytest.raises(RuntimeError, match="kernel died"):
        run(tmp_path, crash_at=13, save_every=5)
    saved = torch.load(tmp_path / "run.resume.pt", weights_only=True)  # tensors only: no code
    assert saved["steps"] == 10
    same_run(run(tmp_path / "reference"), run(tmp_path))


def test_early_stopping_and_its_best_weights_survive_the_interrupt(tmp_path):
    rule = EarlyStopping("val_loss", patience=2, restore_best=True)
    reference = run(tmp_path / "reference", early_stopping=rule, steps=60)
    with pytest.raises(TrainingInterrupted):
        run(tmp_path, early_stopping=rule, steps=60, in_loss=30)
    same_run(reference, run(tmp_path, early_stopping=rule, steps=60))


def test_a_state_saved_for_another_budget_is_refused_by_name(tmp_path):
    with pytest.raises(TrainingInterrupted):
        run(tmp_path, in_loss=8)
    with pytest.raises(ValueError, match="run.resume.pt was saved for a run with budget"):
        run(tmp_path, steps=STEPS + 1)


def test_without_a_resume_path_ctrl_c_says_nothing_was_saved():
    x, y = make_spirals(20, seed=0)
    model = ToyClassifier(ToyConfig(hidden=8))
    hook = Interrupt(3)

    def loss_fn(model, batch):
        hook()
        return CE(model, batch)

    with pytest.raises(TrainingInterrupted, match="stopped at step 2 of 5; the model holds"):
        fit(model, torch.optim.SGD(model.parameters(), lr=0.1),
            DataLoader(TensorDataset(x, y), batch_size=8), loss_fn, max_steps=5, device="cpu",
            progress=False, live_plot=False)


@pytest.mark.parametrize("every", [0, -1, 2.5, True])
def test_save_every_must_be_a_positive_int(tmp_path, every):
    with pytest.raises(ValueError, match="save_every must be a positive int"):
        run(tmp_path, save_every=every)


def test_ctrl_c_in_an_experiment_says_what_it_saved_and_the_next_run_goes_on(tmp_path):
    """A real SIGINT to a process training the no-attention translator (fast profile, CPU, 150
    steps), held after its first saved state so that the signal lands while it trains, however
    slow the machine: the error names the model, the step and the saved state, and the same
    call then resumes and ends with the uninterrupted run's model and record."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.reproduce_cli import without_times

    script = ("import sys\nfrom pathlib import Path\n"
              "from course_lib.experiments.bottleneck import reproduce_bottleneck\n"
              "reproduce_bottleneck('none', steps=150, out_dir=Path(sys.argv[1]), progress=False)")

    # The first saved state, then a pause inside the training step: the test's Ctrl-C lands
    # there (a run left to go on could finish before a signal sent from a busy machine).
    hold = ("import time\nfrom course_lib.train import resume\n"
            "save = resume.Checkpointer.save\n"
            "def save_and_hold(self, *args):\n"
            "    save(self, *args)\n"
            "    resume.Checkpointer.save = save\n"
            "    time.sleep(300)\n"
            "resume.Checkpointer.save = save_and_hold\n")

    def start(cache, held=False):
        return subprocess.Popen(
            [sys.executable, "-c", (hold if held else "") + script, str(cache / "results")],
            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            # Ctrl-C as a terminal sends it, whatever this process ignores: a child that inherits
            # an ignored SIGINT (code run earlier in this worker may ignore it) never sees it.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            env={**os.environ, "COURSE_PROFILE": "fast", "COURSE_DEVICE": "cpu",
                 "COURSE_MODEL_CACHE": str(cache)})

    def finish(process):
        out, err = process.communicate(timeout=600)
        return process.returncode, out, err

    reference, interrupted = tmp_path / "reference", tmp_path / "interrupted"
    code, _, err = finish(start(reference))
    assert code == 0, err
    process = start(interrupted, held=True)
    deadline = time.monotonic() + 300
    while not list(interrupted.glob("*.resume.pt")) and process.poll() is None:
        assert time.monotonic() < deadline, "no resumable state was saved"
        time.sleep(0.05)
    assert process.poll() is None, "the run ended before it could be interrupted"
    process.send_signal(signal.SIGINT)
    code, _, err = finish(process)
    assert code != 0
    last = err.strip().splitlines()[-1]
    assert last.startswith("course_lib.train.resume.TrainingInterrupted: none: Training stopped "
                           "at step "), last
    assert "is saved in" in last and ".resume.pt" in last
    code, out, err = finish(start(interrupted))
    assert code == 0, err
    assert "resuming from step" in out
    assert not list(interrupted.glob("*.resume.pt"))
    (mine,), (theirs,) = interrupted.glob("bottleneck-none-*.pt"), reference.glob("*.pt")
    mine, theirs = (torch.load(p, weights_only=True)["state_dict"] for p in (mine, theirs))
    assert all(torch.equal(mine[name], theirs[name]) for name in theirs)
    records = [json.loads((c / "results" / "bottleneck-none.json").read_text())
               for c in (reference, interrupted)]
    assert without_times(records[0]) == without_times(records[1])


def test_course_reproduce_turns_an_interrupt_into_one_line_and_exit_130(monkeypatch, capsys):
    from course_lib.course import cli
    from course_lib.experiments import reproduce

    def stopped(args):
        raise TrainingInterrupted("none: Training stopped at step 7 of 20; the state ...")

    monkeypatch.setattr(reproduce, "reproduce_cli", stopped)
    assert cli.main(["reproduce", "bottleneck"]) == 130
    assert capsys.readouterr().err == "none: Training stopped at step 7 of 20; the state ...\n"
