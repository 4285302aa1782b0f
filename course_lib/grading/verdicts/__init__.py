"""Verdicts decided outside the sandbox, from observations only.

- :mod:`verdict`: the reference, the inputs drawn from the key, comparisons, a verdict per test;
  :mod:`trusted`: a notebook graded with the sandbox's answer and the static flags.
- :mod:`static_check`: which cells are the student's, and what each capability or visible use of
  the reference means for each exercise; :mod:`capabilities` (the catalogue of what can reach or
  switch off the grading or hide a call), :mod:`reach` and :mod:`code_reader` (a cell read as the
  kernel would run it, following its names to the objects they reach).
"""
