"""What a learner sees while a model trains: progress bars over steps or epochs."""

from __future__ import annotations

from tqdm.auto import tqdm


def in_notebook() -> bool:
    """True inside a Jupyter kernel (where live curves can be drawn)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


class Progress:
    """The progress bars of :func:`fit`: with a step budget, one bar over all ``max_steps``
    steps (its remaining time is estimated from the steps still to take); otherwise a bar over
    epochs and one over the batches of the current epoch."""

    def __init__(self, enabled: bool, epochs: int, max_steps: int | None) -> None:
        self.by_steps = max_steps is not None
        self.epochs = tqdm(total=epochs, desc="epochs", disable=not enabled or self.by_steps)
        self.batches = tqdm(total=max_steps, desc="steps" if self.by_steps else "batches",
                            leave=self.by_steps, disable=not enabled)

    def start_epoch(self, epoch: int, batches: int | None) -> None:
        if not self.by_steps:
            self.batches.reset(total=batches)
        self.batches.set_description(f"epoch {epoch}")

    def skip(self, steps: int, batches: int) -> None:
        """Count the steps a resumed run already took (or the epoch's batches it already used)."""
        self.batches.update(steps if self.by_steps else batches)

    def step(self, loss: float) -> None:
        self.batches.update(1)
        self.batches.set_postfix(loss=f"{loss:.4f}", refresh=False)

    def end_epoch(self, record: dict[str, float]) -> None:
        shown = {k: f"{v:.4g}" for k, v in record.items()
                 if k not in ("epoch", "grad_norm", "lr", "time_s", "train_s", "steps")}
        (self.batches if self.by_steps else self.epochs).set_postfix(shown)
        self.epochs.update(1)

    def close(self) -> None:
        self.batches.close()
        self.epochs.close()
