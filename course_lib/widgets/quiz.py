"""Self-check questions: one bank in ``questions/<lesson>.yaml``, asked in the lessons with
``quiz("04.context-shape")``, in the lab and on the site.

A bank file holds ``lesson`` (its number) and ``questions``, each with:

- ``id`` (unique within the lesson; the full id is ``<lesson>.<id>``), ``after_cell`` (the id of
  the lesson's cell after which the question is asked), ``kind`` (``choice`` or ``number``) and
  ``prompt`` (Markdown, no TeX: the widget typesets nothing);
- for ``choice``: ``options``, each with ``text``, ``why`` (the explanation shown when it is
  picked, right or wrong) and, on exactly one, ``correct: true``;
- for ``number``: ``answer``, ``tolerance`` (absolute), ``right`` and ``wrong`` (the
  explanations), and optional ``expected_mistakes``, each a ``value`` with its own ``why``;
- ``computed: true`` where the key is a shape, count or value that ``course_lib`` computes; the
  test suite then recomputes it and compares. An option's ``value`` holds what it claims, in the
  form the computation returns (a shape as a list, a number).

The widget shuffles the options with a seed drawn per page load (``?quiz-seed=N`` fixes it), so
the right answer is in no fixed place.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

from course_lib.widgets.embed import EmbeddedWidget, markdown_html

BANK = Path(__file__).parent / "questions"
KINDS = ("choice", "number")


class BankError(ValueError):
    """A question bank file that breaks the format above."""


@dataclass(frozen=True)
class Option:
    text: str
    why: str
    correct: bool = False
    value: object = None


@dataclass(frozen=True)
class Question:
    qid: str  # "<lesson>.<id>"
    lesson: str
    kind: str
    prompt: str
    after_cell: str
    options: tuple[Option, ...] = ()
    answer: float | None = None
    tolerance: float = 0.0
    right: str = ""
    wrong: str = ""
    expected_mistakes: tuple[Option, ...] = ()
    computed: bool = False

    @property
    def key(self) -> object:
        """The machine-readable right answer: the number, or the correct option's value."""
        if self.kind == "number":
            return self.answer
        return next(option.value for option in self.options if option.correct)

    @property
    def correct_index(self) -> int | None:
        return next((i for i, o in enumerate(self.options) if o.correct), None)


@dataclass
class _Problems:
    where: str
    found: list[str] = field(default_factory=list)

    def need(self, condition: bool, message: str) -> None:
        if not condition:
            self.found.append(f"{self.where}: {message}")


def _text(entry: dict, key: str, problems: _Problems) -> str:
    value = entry.get(key)
    problems.need(isinstance(value, str) and value.strip() != "", f"needs a non-empty '{key}'")
    if isinstance(value, str):
        problems.need("$" not in value, f"'{key}' has TeX ($), which the widget does not typeset")
    return value if isinstance(value, str) else ""


def _option(entry: object, problems: _Problems) -> Option:
    if not isinstance(entry, dict):
        problems.need(False, f"an option must be a mapping, got {entry!r}")
        return Option("", "")
    problems.need(isinstance(entry.get("correct", False), bool), "'correct' must be true/false")
    return Option(_text(entry, "text", problems), _text(entry, "why", problems),
                  bool(entry.get("correct", False)), entry.get("value"))


def _question(lesson: str, entry: dict, problems: _Problems) -> Question:
    kind = entry.get("kind")
    problems.need(kind in KINDS, f"'kind' must be one of {KINDS}, got {kind!r}")
    common = dict(qid=f"{lesson}.{entry.get('id')}", lesson=lesson, kind=kind,
                  prompt=_text(entry, "prompt", problems),
                  after_cell=_text(entry, "after_cell", problems),
                  computed=bool(entry.get("computed", False)))
    if kind == "number":
        answer, tolerance = entry.get("answer"), entry.get("tolerance", 0)
        ok = isinstance(answer, (int, float)) and not isinstance(answer, bool)
        problems.need(ok and math.isfinite(answer), f"'answer' must be a number, got {answer!r}")
        problems.need(isinstance(tolerance, (int, float)) and tolerance >= 0,
                      f"'tolerance' must be a number >= 0, got {tolerance!r}")
        mistakes = tuple(_option({"text": str(m.get("value")), **m}, problems)
                         for m in entry.get("expected_mistakes", []))
        return Question(**common, answer=answer, tolerance=tolerance,
                        right=_text(entry, "right", problems),
                        wrong=_text(entry, "wrong", problems), expected_mistakes=mistakes)
    options = tuple(_option(o, problems) for o in entry.get("options") or [])
    problems.need(len(options) >= 2, f"needs at least 2 options, has {len(options)}")
    problems.need(sum(o.correct for o in options) == 1,
                  f"needs exactly one correct option, has {sum(o.correct for o in options)}")
    problems.need(len({o.text for o in options}) == len(options), "two options read the same")
    return Question(**common, options=options)


def parse_bank(text: str, lesson: str, where: str = "bank") -> list[Question]:
    """The questions of one bank file's text; ``BankError`` listing every problem found."""
    problems = _Problems(where)
    document = yaml.safe_load(text) or {}
    problems.need(str(document.get("lesson")) == lesson,
                  f"'lesson' must be {lesson!r}, got {document.get('lesson')!r}")
    questions, seen = [], set()
    for entry in document.get("questions") or []:
        problems.where = f"{where}: {entry.get('id', '?')}"
        problems.need(isinstance(entry.get("id"), str) and entry["id"] not in seen,
                      "needs an 'id' that no other question of the lesson has")
        seen.add(entry.get("id"))
        questions.append(_question(lesson, entry, problems))
    if problems.found:
        raise BankError("the question bank breaks its format:\n  " + "\n  ".join(problems.found))
    return questions


@cache
def load_bank() -> dict[str, Question]:
    """Every question of every lesson, by full id."""
    bank = {}
    for path in sorted(BANK.glob("*.yaml")):
        lesson = path.name[:2]
        for question in parse_bank(path.read_text(), lesson, path.name):
            bank[question.qid] = question
    return bank


# a subscript or superscript as the bank writes it outside code: h_j, y_{t−1}, x^{(i)}
_SCRIPT = re.compile(r"(?<=[\w\]\)|'’])([_^])(\{[^{}<>]+\}|[A-Za-z0-9α-ω]{1,2}\b)")
_CODE = re.compile(r"(<code>.*?</code>)", re.S)


def _scripts(html: str) -> str:
    """``h_j`` as h<sub>j</sub> and ``x^{2}`` as x<sup>2</sup>, outside code spans."""
    def tag(match: re.Match) -> str:
        name = "sub" if match.group(1) == "_" else "sup"
        return f"<{name}>{match.group(2).strip('{}')}</{name}>"

    return "".join(part if part.startswith("<code>") else _SCRIPT.sub(tag, part)
                   for part in _CODE.split(html))


def _html(text: str) -> str:
    return _scripts(markdown_html(text))


def question_data(question: Question) -> dict:
    """What the widget needs: the texts as HTML, and which option is right."""
    data = {"id": question.qid, "kind": question.kind, "prompt": _html(question.prompt)}
    if question.kind == "choice":
        data["options"] = [{"text": _html(o.text), "why": _html(o.why), "correct": o.correct}
                           for o in question.options]
    else:
        data.update(answer=question.answer, tolerance=question.tolerance,
                    right=_html(question.right), wrong=_html(question.wrong),
                    mistakes=[{"value": float(m.value), "why": _html(m.why)}
                              for m in question.expected_mistakes])
    return data


class Quiz(EmbeddedWidget):
    """Questions of the bank with instant feedback: every option explains itself."""

    widget_name = "quiz"


def quiz(*qids: str) -> Quiz:
    """The widget asking the questions ``qids`` (``"04.context-shape"``) of the bank."""
    bank = load_bank()
    if not qids:
        raise ValueError("quiz() needs at least one question id, e.g. quiz('04.context-shape')")
    unknown = [q for q in qids if q not in bank]
    if unknown:
        raise KeyError(f"no question {unknown} in the bank; this lesson's are "
                       f"{sorted(k for k in bank if k[:2] == str(unknown[0])[:2])}")
    return Quiz(data={"questions": [question_data(bank[q]) for q in qids]})
