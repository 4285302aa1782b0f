"""The question bank: every lesson asks at least four questions where its ideas are fresh, every
option explains itself, the right answer is in no fixed place, every computable key is computed
by course_lib here (tests/quiz_keys_*.py) and compared, and a bank file that breaks the format
is refused with every problem named."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from course_lib.course.quiz_cells import asked, sync_all
from course_lib.course.syllabus import COURSE_ROOT, LESSONS
from course_lib.widgets.quiz import BankError, load_bank, parse_bank, question_data, quiz
from tests.quiz_keys_00_05 import COMPUTED as EARLY
from tests.quiz_keys_06_11 import COMPUTED as LATE

BANK = load_bank()
COMPUTED = {**EARLY, **LATE}


@pytest.mark.parametrize("lesson", LESSONS, ids=[lesson.number for lesson in LESSONS])
def test_each_lesson_asks_four_or_more_questions_spread_through_it(lesson):
    questions = [q for q in BANK.values() if q.lesson == lesson.number]
    assert len(questions) >= 4, f"lesson {lesson.number} has {len(questions)} questions"
    cells = json.loads((COURSE_ROOT / lesson.notebook).read_text())["cells"]
    places = [next(i for i, c in enumerate(cells) if asked(c) == q.qid) for q in questions]
    assert max(places) < len(cells) - 1 and min(places) < len(cells) // 2, \
        "the questions are not spread through the lesson"
    assert len(set(q.after_cell for q in questions)) == len(questions)


def test_the_lessons_ask_exactly_the_questions_of_the_bank_in_place():
    assert sync_all(write=False) == [], "run python -m course_lib.course.quiz_cells"
    asked_ids = Counter(asked(cell) for lesson in LESSONS for cell in json.loads(
        (COURSE_ROOT / lesson.notebook).read_text())["cells"] if asked(cell))
    assert set(asked_ids) == set(BANK) and set(asked_ids.values()) == {1}


def test_every_option_explains_itself_and_no_explanation_is_copied():
    texts = Counter()
    for question in BANK.values():
        explanations = ([o.why for o in question.options] if question.kind == "choice" else
                        [question.right, question.wrong, *(m.why for m in
                                                           question.expected_mistakes)])
        assert all(len(text.split()) >= 5 for text in explanations), question.qid
        texts.update(explanations)
    copied = [text for text, count in texts.items() if count > 1]
    assert copied == [], f"explanations used twice: {copied[:3]}"


def test_the_right_option_is_in_no_fixed_place():
    places = Counter(q.correct_index for q in BANK.values() if q.kind == "choice")
    assert len(places) >= 3, f"the right option sits only at {sorted(places)}"
    assert max(places.values()) < 0.5 * sum(places.values()), places


@pytest.mark.parametrize("qid", sorted(q for q in BANK if BANK[q].computed))
def test_a_computable_key_equals_what_course_lib_computes(qid):
    question = BANK[qid]
    assert qid in COMPUTED, f"{qid} is marked computed but tests/quiz_keys_*.py lacks it"
    value = COMPUTED[qid]()
    if question.kind == "number":
        assert abs(float(value) - question.answer) <= question.tolerance + 1e-9, (value,
                                                                                  question.answer)
        return
    claims = [option.value for option in question.options]
    assert all(claim is not None for claim in claims), f"{qid}: an option has no value"
    matching = [i for i, claim in enumerate(claims) if claim == value or (
        isinstance(claim, (int, float)) and isinstance(value, (int, float))
        and abs(claim - value) <= 1e-6)]
    assert matching == [question.correct_index], (value, claims)


def test_every_computation_belongs_to_a_computed_question():
    assert sorted(set(COMPUTED) - {q for q in BANK if BANK[q].computed}) == []
    assert sum(q.computed for q in BANK.values()) >= len(LESSONS) * 2 - 4


def test_the_widget_data_carries_every_explanation_and_one_right_option():
    for question in BANK.values():
        data = question_data(question)
        if question.kind == "choice":
            assert sum(o["correct"] for o in data["options"]) == 1
            assert all(o["why"].strip() for o in data["options"])
    widget = quiz(*list(BANK)[:2])
    assert [q["id"] for q in widget.data["questions"]] == list(BANK)[:2]
    with pytest.raises(KeyError, match="no question"):
        quiz("04.no-such-question")
    with pytest.raises(ValueError, match="at least one"):
        quiz()


GOOD_CHOICE = """
  - id: q
    after_cell: abc
    kind: choice
    prompt: Which?
    options:
      - {text: one, why: because one is wrong here, correct: true}
      - {text: two, why: because two is the other}
"""
BAD_BANKS = {
    "wrong lesson": ("lesson: '05'\nquestions:" + GOOD_CHOICE, "'lesson' must be '04'"),
    "an option without why": (GOOD_CHOICE.replace(", why: because two is the other", ""),
                              "needs a non-empty 'why'"),
    "two right options": (GOOD_CHOICE.replace("two, why", "two, correct: true, why"),
                          "exactly one correct option, has 2"),
    "no right option": (GOOD_CHOICE.replace(", correct: true", ""),
                        "exactly one correct option, has 0"),
    "TeX in a prompt": (GOOD_CHOICE.replace("Which?", "Which $x$?"), "has TeX"),
    "an unknown kind": (GOOD_CHOICE.replace("kind: choice", "kind: essay"), "'kind' must be"),
    "the same id twice": (GOOD_CHOICE + GOOD_CHOICE, "needs an 'id' that no other"),
    "one option": (GOOD_CHOICE.split("      - {text: two")[0], "at least 2 options"),
    "a number without its answer": ("""
  - id: n
    after_cell: abc
    kind: number
    prompt: How many?
    right: it is three because of this
    wrong: count again the rows here""", "'answer' must be a number"),
}


@pytest.mark.parametrize("case", BAD_BANKS, ids=list(BAD_BANKS))
def test_a_bank_that_breaks_the_format_is_refused_naming_the_problem(case):
    text, message = BAD_BANKS[case]
    if not text.startswith("lesson"):
        text = "lesson: '04'\nquestions:" + text
    with pytest.raises(BankError, match=message):
        parse_bank(text, "04", "04_test.yaml")
    assert len(parse_bank("lesson: '04'\nquestions:" + GOOD_CHOICE, "04")) == 1


def test_subscripts_are_typeset_outside_code_only():
    from course_lib.widgets.quiz import _html

    html = _html("E[y_{t−1}] meets h_j and x^{2}; `count_parameters` and `h_j` stay code")
    assert "E[y<sub>t−1</sub>] meets h<sub>j</sub> and x<sup>2</sup>" in html
    assert "<code>count_parameters</code>" in html and "<code>h_j</code>" in html
