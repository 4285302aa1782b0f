"""How long a lesson takes to work through: the time each lesson's introduction states, and the
estimate it is checked against.

A lesson's study time is estimated from what a learner has to get through:

    minutes = prose words / 100 + code lines / 8 + 3 · widget controls + 1 · questions

- **prose** is read at 100 words a minute, the pace of studying a technical text with inline
  mathematics rather than reading it through;
- **code** (non-blank, non-comment lines) at 8 lines a minute, which covers reading a cell,
  running it and looking at what it prints or draws;
- each **widget control** (a slider, a drop-down, one ``interact`` call) takes about 3 minutes
  of trying it out;
- each **self-check question** takes about a minute: reading it, answering, reading the
  explanation (its cell's two lines of code do not count as code).

The rates were chosen against the one timed walk-through of the course we have: a learner took
about 15 hours for the twelve lessons, computing included, and about two hours for the
Transformer lesson. On the lessons as they stood then, the rates give 13.5 hours of study, to
which the lessons added about an hour of full-profile training by their own statements, and 101
minutes for the Transformer lesson. Training and evaluation in the full profile come on top of
the estimate; each introduction states them separately, from the step budgets of
:mod:`course_lib.experiments.reproduce`.

The estimate is rounded to 5 minutes. ``tests/test_study_time.py`` checks that every lesson's
stated time lies within :data:`TOLERANCE_MINUTES` of it, so a lesson that grows must say so.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

WORDS_PER_MINUTE = 100
CODE_LINES_PER_MINUTE = 8
MINUTES_PER_WIDGET = 3
MINUTES_PER_QUESTION = 1
TOLERANCE_MINUTES = 10

STATED_TIME = re.compile(r"\*\*Estimated time\*\*:\s*(\d+)\s*minutes")
WORD = re.compile(r"[A-Za-z0-9][\w'’-]*")
DISPLAY_MATH = re.compile(r"\$\$.*?\$\$", re.S)
INLINE_MATH = re.compile(r"\$[^$\n]+\$")
# One match per interact() call or explicitly created control.
WIDGET_CALL = re.compile(r"\binteract(?:ive)?\(|widgets\.(?:IntSlider|FloatSlider|Dropdown|"
                         r"ToggleButtons|SelectionSlider|RadioButtons)\(")
QUESTION_CALL = re.compile(r"^quiz\(", re.M)


@dataclass(frozen=True)
class LessonLoad:
    """What a learner reads, runs and plays with in one lesson notebook."""

    prose_words: int
    code_lines: int
    widgets: int
    questions: int = 0

    @classmethod
    def of_notebook(cls, notebook: dict) -> LessonLoad:
        """Count a notebook's prose words (an inline formula counts as one word, a displayed
        equation as none: it is read with the sentence around it), its non-blank non-comment
        code lines and its widget controls."""
        words = lines = widgets = questions = 0
        for cell in notebook["cells"]:
            text = "".join(cell["source"])
            if cell["cell_type"] == "markdown":
                prose = INLINE_MATH.sub(" x ", DISPLAY_MATH.sub(" ", text))
                words += len(WORD.findall(prose))
            elif cell["cell_type"] == "code" and QUESTION_CALL.search(text):
                questions += len(QUESTION_CALL.findall(text))
            elif cell["cell_type"] == "code":
                lines += sum(1 for line in text.splitlines()
                             if line.strip() and not line.strip().startswith("#"))
                widgets += len(WIDGET_CALL.findall(text))
        return cls(words, lines, widgets, questions)

    def minutes(self) -> float:
        """words / 100 + code lines / 8 + 3 · widget controls + 1 · questions (see the module
        docstring)."""
        return (self.prose_words / WORDS_PER_MINUTE + self.code_lines / CODE_LINES_PER_MINUTE
                + MINUTES_PER_WIDGET * self.widgets + MINUTES_PER_QUESTION * self.questions)


def _notebook(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def estimated_minutes(path: Path) -> int:
    """The study time of the lesson notebook at ``path``, rounded to 5 minutes."""
    return 5 * max(1, round(LessonLoad.of_notebook(_notebook(path)).minutes() / 5))


def stated_minutes(path: Path) -> int:
    """The minutes after "**Estimated time**:" in the lesson's introduction."""
    for cell in _notebook(path)["cells"]:
        if cell["cell_type"] == "markdown":
            match = STATED_TIME.search("".join(cell["source"]))
            if match:
                return int(match.group(1))
    raise ValueError(f"{path} states no '**Estimated time**: N minutes'")
