"""Exercises and autograding on nbgrader: ``course assign``, ``course grade`` and self-checks.

- :mod:`checks`: the helpers self-check and hidden test cells call (clear pass/fail messages).
- :mod:`config`: the nbgrader configuration (source = solutions/, release = exercises/).
- :mod:`assign`: generate ``exercises/`` from ``solutions/``.
- :mod:`submission`: a submission folder checked and staged; statuses in words.
- :mod:`sandbox`, :mod:`runner` and :mod:`kernel`: execute a submission isolated with
  bubblewrap, each observation sealed as its test cell ends; :mod:`budget`: its memory,
  processes, disk and time; :mod:`runs`: each run's nonce, for fresh inputs and replays.
- :mod:`static_check` and :mod:`capabilities`: what the student's code reaches (capabilities,
  by any path) and visible uses of the reference, read without running it.
- :mod:`hidden`: the hidden-test format (inputs, observations); the part that runs in a kernel.
- :mod:`verdict` and :mod:`trusted`: the grader's side: secret inputs, the solution's results,
  comparisons, flags; nothing the submission's kernel does decides a verdict.
- :mod:`grade`: autograde a folder of submissions into a gradebook CSV (:mod:`gradebook`) and
  feedback HTML (:mod:`feedback`).
"""
