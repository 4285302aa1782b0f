# The course's entry points. Two commands are all a learner needs:
#   make lab    set up .venv if needed, then start JupyterLab on the course, open at lesson 00
#   make test   set up .venv if needed, then lint and run the whole test suite
#   make test-quick   the tests that need no notebook, browser, sandbox or end-to-end run
# and one for the measured results:
#   make reproduce   retrain every experiment for SEEDS (default 0-4), regenerate docs/results.md
# and two for reading and teaching without a kernel:
#   make site        the course as an offline website (PROFILE=fast: tiny models, for checks)
#   make slides      one reveal.js deck per lesson, for instructors
# Kept to GNU Make 3.81 features (the make that macOS ships).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8888
# What the lab serves (the whole course: lessons, exercises, solutions, docs) and the page it opens.
LAB_ROOT ?= .
LAB_START := /lab/tree/notebooks/00_start_here.ipynb
# More `jupyter lab` options, for example LAB_OPTIONS=--LabApp.expose_app_in_browser=True
LAB_OPTIONS ?=
# Jupyter refuses to run as root (containers, CI) unless told to.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)
# Notebooks under test run in the fast profile (tiny sizes); `make test-full` runs what a learner runs.
# `make test` runs each lesson once, through tests/test_lessons_run.py (as the site executes
# them; the site the browser tests build reuses those runs), and each solution notebook once, in
# the grading batch of tests/test_grading.py (in the sandbox, every cell, none may raise).
NOTEBOOK_DIRS := notebooks solutions
# What `make test-quick` leaves out (the markers are applied in tests/conftest.py).
QUICK := not (notebook or browser or sandbox or e2e or slow)
PYTEST_NOTEBOOKS := --nbval-lax --nbval-current-env
# The full profile trains inside cells, for up to an hour: a cell still running after
# FULL_CELL_TIMEOUT has hung, and fails then, named by notebook and cell.
FULL_CELL_TIMEOUT ?= 3600
# One pytest worker per core; a test file or notebook stays on one worker, in order (loadscope),
# handed out in the order tests/conftest.py sorts them (longest first), and tests/conftest.py
# gives each worker its share of the cores' threads. PYTEST_PARALLEL= runs
# everything in one process.
PYTEST_PARALLEL ?= -n auto --dist loadscope --no-loadscope-reorder

SEEDS ?= 0-4
# The profile `make site` and `make slides` run the lessons in: full (what a learner runs) or fast.
PROFILE ?= full

.PHONY: lab test test-quick setup test-full check exercises clean-notebooks clean reproduce site slides

setup:
	@COURSE_VENV=$(VENV) $(PYTHON) tools/bootstrap.py

lab: setup
	@echo "Starting JupyterLab on the course: lessons in notebooks/, exercises in exercises/, docs in docs/."
	@echo "Open the http://127.0.0.1:$(PORT)$(LAB_START)?token=... URL printed below: it opens lesson 00."
	$(BIN)/jupyter lab --no-browser --ip=127.0.0.1 --port=$(PORT) $(ALLOW_ROOT) \
		--ServerApp.root_dir="$(LAB_ROOT)" --LabApp.default_url=$(LAB_START) $(LAB_OPTIONS)

test: setup
	$(BIN)/ruff check .
	COURSE_PROFILE=fast $(BIN)/python -m pytest $(PYTEST_PARALLEL) tests --durations=15 -rs

test-quick: setup
	$(BIN)/ruff check .
	COURSE_PROFILE=fast $(BIN)/python -m pytest $(PYTEST_PARALLEL) tests -m "$(QUICK)" \
		--durations=10 -q

test-full: setup
	COURSE_PROFILE=full $(BIN)/python -m pytest tests -m slow
	COURSE_PROFILE=full $(BIN)/python -m pytest $(NOTEBOOK_DIRS) $(PYTEST_NOTEBOOKS) \
		--nbval-cell-timeout=$(FULL_CELL_TIMEOUT)

reproduce: setup
	COURSE_PROFILE=full $(BIN)/course reproduce all --seeds $(SEEDS)

site: setup
	$(BIN)/course site --profile $(PROFILE)

slides: setup
	$(BIN)/course slides --profile $(PROFILE)

check: setup
	$(BIN)/course check

exercises: setup
	$(BIN)/course assign

clean-notebooks: setup
	$(BIN)/course clean-notebooks notebooks solutions exercises

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
