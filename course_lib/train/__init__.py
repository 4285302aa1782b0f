"""The training loop, its schedules, checkpoints and data-parallel reductions."""
