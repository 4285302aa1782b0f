"""A pytest plugin (``-p tests.kernel_guard``, set in pyproject.toml) that keeps nbval's
notebook kernels from hanging a test run on a busy machine.

- **A kernel that dies fails its cell at once.** nbval waits for a cell's reply for the whole
  cell timeout without asking whether the kernel still exists, then tries to interrupt it and
  reports "Failed to interrupt kernel". A kernel killed while it runs a cell (by the
  out-of-memory killer, for one) therefore looked like a cell that hung for the full timeout and
  ignored the interrupt. Here the wait is cut into one-second slices and the kernel's process is
  checked between them: a dead kernel fails the cell within a second or two, with its exit
  status and signal.
- **Kernels talk over Unix sockets in folders of their own.** nbval starts each kernel on TCP
  ports that jupyter_client picks by binding port 0 and letting it go; another process can take
  one of them before the kernel binds it (jupyter_client issue 487), and with two test workers,
  the site build and the grader all starting kernels, the window is there. A socket file in a
  fresh temporary folder cannot collide.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from queue import Empty

import nbval.kernel
from jupyter_client.manager import KernelManager
from traitlets import CaselessStrEnum, default

SLICE_S = 1.0


class KernelDied(RuntimeError):
    """The kernel's process ended while a cell was running."""


class IsolatedKernelManager(KernelManager):
    """A kernel manager whose kernel listens on Unix sockets in a temporary folder of its own."""

    transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc", config=True)

    @default("ip")
    def _ip_default(self) -> str:
        if self.transport != "ipc":
            return super()._ip_default()
        self._socket_folder = tempfile.mkdtemp(prefix="kernel-")
        return os.path.join(self._socket_folder, "socket")

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        folder = getattr(self, "_socket_folder", None)
        if folder and not restart:
            shutil.rmtree(folder, ignore_errors=True)


def exit_description(code: int | None) -> str:
    """``-9`` → "killed by SIGKILL (the signal the out-of-memory killer sends)"."""
    if code is None:
        return "ended with an unknown status"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        note = " (the signal the out-of-memory killer sends)" if -code == signal.SIGKILL else ""
        return f"killed by {name}{note}"
    return f"exited with status {code}"


_await_reply = nbval.kernel.RunningKernel.await_reply


def await_reply_while_alive(self, msg_id, timeout=None):
    """nbval's ``await_reply`` in one-second slices, failing as soon as the kernel is gone."""
    deadline = None if timeout is None else time.monotonic() + float(timeout)
    while True:
        left = SLICE_S if deadline is None else min(SLICE_S, deadline - time.monotonic())
        if left <= 0:
            raise Empty
        try:
            return _await_reply(self, msg_id, timeout=left)
        except Empty:
            if not self.km.is_alive():
                process = getattr(self.km.provisioner, "process", None)
                code = None if process is None else process.poll()
                raise KernelDied(f"the notebook's kernel {exit_description(code)} while this "
                                 "cell ran; the cell did not finish") from None


def pytest_configure(config) -> None:
    nbval.kernel.KernelManager = IsolatedKernelManager
    nbval.kernel.RunningKernel.await_reply = await_reply_while_alive
