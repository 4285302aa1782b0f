"""Shared test set-up: headless plotting, the fast notebook profile, the markers tests are
chosen by (by location, and GPU-only)."""

import os
import shutil
import uuid
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("COURSE_PROFILE", "fast")
# Under pytest-xdist (`make test` runs two workers) each worker, and every kernel it starts,
# gets an equal share of the cores: two workers each using every core would oversubscribe them,
# which makes OpenMP spin and slows both many times over.
if os.environ.get("PYTEST_XDIST_WORKER"):
    _share = max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", 1)))
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(_share)

# One folder of executed lessons for the whole session, shared by every worker (they inherit the
# variable from the first process): tests/test_lessons_run.py executes each lesson into it, and
# the site and decks the browser tests build reuse those runs instead of executing them again.
_OWN_EXECUTED_CACHE = "COURSE_EXECUTED_CACHE" not in os.environ
if _OWN_EXECUTED_CACHE:
    os.environ["COURSE_EXECUTED_CACHE"] = str(
        Path(__file__).resolve().parent.parent / "build" / "test-executed" / uuid.uuid4().hex)

import pytest  # noqa: E402
import torch  # noqa: E402

if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

from _pytest.mark.expression import Expression  # noqa: E402

from course_lib.device import mps_available  # noqa: E402

# The markers a contributor picks tests by (docs/contributing.md), applied by where a test lives:
# every item collected from a notebook is `notebook`, and each file below carries its marker
# (a file that mixes kinds marks its few other tests itself, as test_feedback.py its browser
# checks).
MARKED_FILES = {
    "notebook": {"test_lessons_run.py", "test_notebook_timeout.py"},
    "browser": {"test_browser.py", "test_lab_browser.py", "test_slides_browser.py",
                "test_slides_overflow.py", "test_widgets_browser.py"},
    "sandbox": {"test_grading.py"},
    "e2e": {"test_benchmarks.py", "test_bottleneck_experiment.py",
            "test_captioning_experiment.py", "test_ddp_demo.py", "test_determinism.py",
            "test_make_lab.py", "test_reproduce.py", "test_resume.py", "test_shipped.py",
            "test_transformer_experiment.py"},
}


# The files whose tests take longest, in the order their work should start: pytest-xdist hands
# each worker whole files (--dist loadscope --no-loadscope-reorder) in collection order, so
# starting the long ones first keeps both workers busy to the end. The site build comes first
# and the lessons' own runs right after it (tests/test_lessons_run.py), so that the two execute
# the lessons from opposite ends.
LONGEST_FIRST = ("test_browser.py", "test_lessons_run.py", "test_grading.py", "test_shipped.py",
                 "test_reproduce.py", "test_slides_browser.py", "test_lab_browser.py",
                 "test_feedback.py", "test_notebook_timeout.py", "test_attention_seq2seq.py",
                 "test_transformer_experiment.py", "test_resume.py", "test_determinism.py",
                 "test_transformer.py", "test_seq2seq.py", "test_corpus.py",
                 "test_hidden_tests.py", "test_bottleneck_experiment.py",
                 "test_reencode_trial.py", "test_ddp_demo.py", "test_pointer.py",
                 "test_widgets_browser.py", "test_captioning_experiment.py",
                 "test_translation.py", "test_check.py", "test_diagrams.py", "test_layers.py")


def pytest_configure(config):
    named = {name for files in MARKED_FILES.values() for name in files} | set(LONGEST_FIRST)
    missing = sorted(name for name in named if not (Path(__file__).parent / name).is_file())
    if missing:
        raise pytest.UsageError(f"tests/conftest.py marks test files that do not exist: {missing}")


def pytest_unconfigure(config):
    if _OWN_EXECUTED_CACHE and not os.environ.get("PYTEST_XDIST_WORKER"):
        shutil.rmtree(os.environ["COURSE_EXECUTED_CACHE"], ignore_errors=True)


def selects_slow(config) -> bool:
    """Whether ``-m`` asks for the tests marked ``slow`` (``-m slow``, ``-m "slow or cuda"``),
    as opposed to merely naming them (``-m "not slow"``)."""
    expression = config.getoption("-m")
    return bool(expression) and Expression.compile(expression).evaluate(
        lambda name, **_: name == "slow")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    skip_cuda = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
    skip_mps = pytest.mark.skip(reason="needs Apple's MPS backend")
    skip_slow = pytest.mark.skip(reason="minutes of training: run with `make test-full`")
    run_slow = selects_slow(config)
    for item in items:
        path = item.path
        if path.suffix == ".ipynb":
            item.add_marker("notebook")
        for marker, files in MARKED_FILES.items():
            if path.name in files:
                item.add_marker(marker)
        if "cuda" in item.keywords and not torch.cuda.is_available():
            item.add_marker(skip_cuda)
        if "mps" in item.keywords and not mps_available():
            item.add_marker(skip_mps)
        if "slow" in item.keywords and not run_slow:
            item.add_marker(skip_slow)
    rank = {name: index for index, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: order kept within


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium for the browser tests of one module (tests/browser_support.py);
    skipped where it is missing, except in CI (require_browser)."""
    from tests.browser_support import chromium_browser, require_browser

    require_browser()

    with chromium_browser() as chromium:
        yield chromium


@pytest.fixture
def no_device_override(monkeypatch):
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
