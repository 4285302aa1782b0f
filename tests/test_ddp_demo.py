"""The torchrun demonstration, data-parallel training (course_lib.experiments.ddp_demo): two
gloo processes under torchrun against one.

The two-process run and the one-process run see the same global batches in the same order from
the same initial weights, so they do the same arithmetic except for the order of floating-point
sums (two half-batch gradient means averaged by the all-reduce instead of one full-batch mean).
Rounding differences of float32 (~1e-7 relative) grow slowly during training; the tolerances
below (1e-5) leave a wide margin for that and are far below what a data or reduction bug gives
(a rank reading the wrong rows changes the first epoch's loss by percents).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import distributed as dist

from course_lib.data.sequence_tasks import sequence_task
from course_lib.device import get_device
from course_lib.experiments.ddp_demo import (
    TORCHRUN_VARIABLES,
    DataParallelSettings,
    DistributedContext,
    build_parser,
    distributed_loader,
    main,
    per_rank_batch_size,
    settings_from_args,
    setup,
    train,
    wrap_model,
)
from course_lib.models.toy import ToyClassifier, ToyConfig
from course_lib.models.transformer import Transformer
from course_lib.tokens import SPECIALS
from course_lib.train.loop import fit, supervised_loss

ROOT = Path(__file__).resolve().parents[1]
CPU = torch.device("cpu")
# A copy task that a one-layer Transformer half-learns in 128 steps (16 per epoch), small enough
# for two processes on a 2-core machine in seconds. Fixed-length sequences: see the settings.
RUN = ["--task", "copy", "--n-examples", "256", "--n-symbols", "8", "--seq-len", "4",
       "--d-model", "32", "--num-heads", "4", "--num-layers", "1", "--d-ff", "64",
       "--epochs", "8", "--global-batch-size", "16", "--lr", "3e-3", "--seed", "0"]
LOSS_TOLERANCE = dict(rtol=1e-5, atol=0.0)
WEIGHT_TOLERANCE = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def two_process_run(tmp_path_factory):
    """History and each rank's final weights from ``torchrun --nproc_per_node 2`` (gloo, CPU)."""
    out = tmp_path_factory.mktemp("ddp")
    env = {name: value for name, value in os.environ.items()
           if name not in (*TORCHRUN_VARIABLES, "MASTER_ADDR", "MASTER_PORT")}
    env.update(OMP_NUM_THREADS="1", COURSE_DEVICE="cpu")  # CPU and gloo, even on a GPU machine
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node", "2", "-m", "course_lib.experiments.ddp_demo", *RUN,
               "--backend", "gloo", "--no-progress", "--out", str(out)]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, f"torchrun failed:\n{result.stdout[-3000:]}\n" \
                                   f"{result.stderr[-3000:]}"
    summary = json.loads((out / "history.json").read_text())
    states = [torch.load(out / f"state_rank{rank}.pt", weights_only=True) for rank in (0, 1)]
    return summary, states


@pytest.fixture(scope="module")
def one_process_run():
    """The same settings trained in this process, one rank reading whole global batches."""
    settings = settings_from_args(build_parser().parse_args(RUN))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread, as each torchrun process (OMP_NUM_THREADS=1)
    try:
        history, model = train(settings, DistributedContext(0, 1, 0, CPU), progress=False)
    finally:
        torch.set_num_threads(threads)
    return settings, history, model


def test_both_ranks_end_with_identical_weights(two_process_run):
    _, (rank0, rank1) = two_process_run
    assert rank0.keys() == rank1.keys()
    different = [name for name in rank0 if not torch.equal(rank0[name], rank1[name])]
    assert not different, f"the ranks' copies drifted apart in {different}"


def test_two_processes_record_the_loss_of_one_process(two_process_run, one_process_run):
    summary, _ = two_process_run
    settings, history, _ = one_process_run
    assert summary["world_size"] == 2
    assert summary["batch_size_per_rank"] * 2 == settings.global_batch_size
    two = torch.tensor([record["train_loss"] for record in summary["history"]])
    one = torch.tensor(history["train_loss"])
    assert len(two) == len(one) == settings.epochs
    torch.testing.assert_close(two, one, **LOSS_TOLERANCE, check_dtype=False)
    assert one[-1] < one[0] / 3, f"the model hardly learned ({one[0]:.3f} -> {one[-1]:.3f}), " \
                                 f"so the comparison would prove little"


def test_two_processes_end_with_the_model_of_one_process(two_process_run, one_process_run):
    _, (rank0, _) = two_process_run
    settings, _, model = one_process_run
    reference = model.state_dict()
    # The key projection's bias b adds q·b to every score of a query, which softmax ignores: its
    # true gradient is 0, and Adam (dividing by the gradient's RMS) turns the rounding noise
    # into steps of size ~lr, so it wanders apart in the two runs. It is checked through the
    # outputs below instead.
    for name, tensor in rank0.items():
        if not name.endswith("k_proj.bias"):
            torch.testing.assert_close(tensor, reference[name], **WEIGHT_TOLERANCE,
                                       msg=lambda text, name=name: f"{name}: {text}")
    data = sequence_task(settings.task, n=settings.n_examples, n_symbols=settings.n_symbols,
                         min_len=settings.seq_len, max_len=settings.seq_len, seed=settings.seed)
    two_process_model = Transformer(model.config)
    two_process_model.load_state_dict(rank0)
    with torch.no_grad():
        logits = [m.eval()(data.src, data.src_lengths, data.tgt_in)
                  for m in (two_process_model, model)]
    torch.testing.assert_close(logits[0], logits[1], rtol=1e-4, atol=3e-4)


@pytest.fixture
def no_torchrun(monkeypatch):
    for name in TORCHRUN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    return monkeypatch


def test_without_torchrun_the_run_is_a_single_process(no_torchrun):
    context = setup()
    assert context == DistributedContext(rank=0, world_size=1, local_rank=0,
                                         device=get_device())
    assert context.is_main
    assert not dist.is_initialized()
    model = ToyClassifier(ToyConfig())
    assert wrap_model(model, context) is model


def test_half_a_torchrun_environment_is_refused(no_torchrun):
    no_torchrun.setenv("RANK", "0")
    with pytest.raises(ValueError, match="LOCAL_RANK, WORLD_SIZE missing"):
        setup()
    assert not dist.is_initialized()


def test_nccl_without_cuda_is_refused(no_torchrun):
    for name, value in zip(TORCHRUN_VARIABLES, ("0", "0", "2"), strict=True):
        no_torchrun.setenv(name, value)
    with pytest.raises(ValueError, match="nccl backend needs CUDA"):
        setup("nccl")
    assert not dist.is_initialized()


def test_the_global_batch_must_split_evenly_over_the_processes(capsys, no_torchrun):
    assert per_rank_batch_size(12, 4) == 3
    with pytest.raises(ValueError, match="global batch size 10 does not split evenly over 4"):
        per_rank_batch_size(10, 4)
    with pytest.raises(ValueError, match="does not split evenly"):
        train(DataParallelSettings(global_batch_size=10), DistributedContext(1, 4, 1, CPU))
    assert main(["--global-batch-size", "0"]) == 2
    assert "must be at least 1" in capsys.readouterr().err


def test_two_ranks_read_together_the_batches_of_one_process():
    data, per_rank = range(37), 4  # 37 rows: drop_last leaves whole, equal batches everywhere
    one = distributed_loader(data, 2 * per_rank, context=DistributedContext(0, 1, 0, CPU),
                             seed=3)
    ranks = [distributed_loader(data, per_rank, context=DistributedContext(r, 2, r, CPU), seed=3)
             for r in (0, 1)]
    orders = []
    for epoch in (0, 1):
        for loader in (one, *ranks):
            loader.sampler.set_epoch(epoch)
        whole = [batch.tolist() for batch in one]
        shares = [[batch.tolist() for batch in loader] for loader in ranks]
        assert len(whole) == len(shares[0]) == len(shares[1]) == 37 // (2 * per_rank)
        assert all(len(batch) == per_rank for share in shares for batch in share)
        for step, batch in enumerate(whole):
            assert sorted(shares[0][step] + shares[1][step]) == sorted(batch)
        orders.append(whole)
    assert orders[0] != orders[1], "set_epoch should reshuffle"


class RecordingSampler:
    def __init__(self):
        self.epochs = []

    def set_epoch(self, epoch):
        self.epochs.append(epoch)


class LoaderWithSampler:
    """Two fixed batches and a sampler that records ``set_epoch`` calls, as a DataLoader has."""

    def __init__(self):
        torch.manual_seed(0)
        self.batches = [(torch.randn(4, 2), torch.randint(0, 2, (4,))) for _ in range(2)]
        self.sampler = RecordingSampler()

    def __iter__(self):
        return iter(self.batches)

    def __len__(self):
        return len(self.batches)


def test_fit_calls_set_epoch_before_every_epoch():
    loader = LoaderWithSampler()
    model = ToyClassifier(ToyConfig(hidden=8, layers=1))
    fit(model, torch.optim.SGD(model.parameters(), lr=0.1), loader,
        supervised_loss(torch.nn.functional.cross_entropy), epochs=3, device=CPU,
        progress=False)
    assert loader.sampler.epochs == [0, 1, 2]


def test_command_line_flags_set_the_run_and_its_nested_model():
    settings = settings_from_args(build_parser().parse_args(
        ["--num-layers", "2", "--d-model", "16", "--n-symbols", "5", "--seq-len", "3",
         "--epochs", "4"]))
    assert settings.epochs == 4 and settings.seq_len == 3
    assert (settings.model.num_encoder_layers, settings.model.num_decoder_layers) == (2, 2)
    assert settings.model.d_model == 16
    config = settings.model
    vocab_size = len(SPECIALS) + 5
    assert (config.src_vocab_size, config.tgt_vocab_size, config.max_len) == \
        (vocab_size, vocab_size, 4)
    assert config.norm_first and config.dropout == 0.0
    first, second = DataParallelSettings(), DataParallelSettings()
    assert first.model == second.model and first.model is not second.model  # no shared default
    # The model is complete from the start, and one that does not fit the task is refused.
    assert DataParallelSettings(n_symbols=7).model.src_vocab_size == len(SPECIALS) + 7
    with pytest.raises(ValueError, match=r"model.src_vocab_size must be 14 for 10 symbols and "
                                         r"sequences of 6, got 9; build it with task_model"):
        DataParallelSettings(model=config)
    with pytest.raises(ValueError, match=r"model.max_len must be 7 for 5 symbols and sequences "
                                         r"of 6, got 4"):
        DataParallelSettings(n_symbols=5, model=config)
