"""Exercises and autograding on nbgrader: ``course assign``, ``course grade`` and self-checks.

The modules at the top run inside the grading sandbox; the grader's side, outside it, is in the
sub-packages.

- :mod:`checks`: the helpers self-check and hidden test cells call (clear pass/fail messages);
  :mod:`hidden`: the hidden-test format (inputs, observations). Learners' notebooks and the
  hidden tests import these two by these paths, in the kernel, so they stay light.
- :mod:`config`: the nbgrader configuration (source = solutions/, release = exercises/) and
  ``GradingError``, which every part shares.
- :mod:`runner` and :mod:`kernel`: the two processes of the sandbox, the runner (which owns the
  grading folder's layout) and the isolated kernel it starts.
- :mod:`isolation`: the sandbox that runs them (bubblewrap) and its budget (memory, processes,
  disk, time).
- :mod:`verdicts`: the verdicts decided outside the sandbox from observations only, and what
  the student's code reaches, read without running it.
- :mod:`pages`: what the batch writes: the gradebook CSV and the feedback pages, made inert.
- :mod:`workflow`: ``course assign`` and ``course grade``: submissions staged, graded one
  student's lesson folder at a time, each run's nonce recorded.
"""
