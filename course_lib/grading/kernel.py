"""The grading kernel: ``python -I -m course_lib.grading.kernel -f CONNECTION_FILE``.

An IPython kernel started isolated (``-I``; IPython's ``ignore_cwd``), so that modules a
submission ships beside its notebook are never imported in place of the real ones. It volunteers
first for the out-of-memory killer, so that when a submission's processes together exceed the
memory budget the kernel goes, not the runner that reports what happened.
"""

from __future__ import annotations

import contextlib


def main() -> None:
    with contextlib.suppress(OSError):  # Linux only; raising one's own score needs no privilege
        with open("/proc/self/oom_score_adj", "w") as file:
            file.write("1000")
    from ipykernel import kernelapp

    kernelapp.launch_new_instance()


if __name__ == "__main__":
    main()
