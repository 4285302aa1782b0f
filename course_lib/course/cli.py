"""The ``course`` command (also ``python -m course_lib``).

    course check                  is this environment ready? (exit 1 with the fix if not)
    course clean-notebooks [PATH] strip outputs and stray metadata from committed notebooks
    course assign [LESSON ...]    regenerate exercises/ from solutions/ (nbgrader)
    course grade SUBMISSIONS      autograde submissions into a gradebook CSV and feedback HTML
    course reproduce EXPERIMENT   retrain and measure one experiment (course reproduce --help
                                  lists them), write results/seed-N/EXPERIMENT.json
    course reproduce all          every experiment for seeds 0-4 (or --seeds), then
                                  docs/results.md
    course results                regenerate docs/results.md from results/seed-*/
    course bench                  time course_lib against PyTorch; results/bench.json and
                                  docs/performance.md
    course site [--profile P]     the course as an offline website: build/site/P/_build/html
    course slides [LESSON ...]    one reveal.js deck per lesson: build/slides/P/
"""

from __future__ import annotations

import argparse
import sys

# The commands that read or write the repository's notebooks, solutions, results or docs.
NEEDS_CHECKOUT = {"assign", "grade", "reproduce", "results", "bench", "site", "slides"}


def _registry():
    """The course's experiments (imported on first use: they need torch, ``course check``
    must not)."""
    from course_lib.experiments.catalogue import REGISTRY

    return REGISTRY


class ExperimentChoices:
    """The names ``course reproduce`` accepts: every registered experiment, then ``all``, read
    from the registry when argparse first looks at them."""

    def _names(self) -> list[str]:
        return [*_registry().names(), "all"]

    def __iter__(self):
        return iter(self._names())

    def __contains__(self, name: object) -> bool:
        return name in self._names()


def experiments_epilog() -> str:
    """Each experiment, what it does and the models ``--model`` or ``--dataset`` picks."""
    import textwrap

    def entry(name: str, text: str) -> str:
        return textwrap.fill(text, 79, initial_indent=f"  {name:<14}", subsequent_indent=" " * 16,
                             break_on_hyphens=False)

    lines = ["experiments:"]
    for experiment in _registry():
        lines.append(entry(experiment.name, experiment.summary))
        if len(experiment.models) > 1:
            lines.append(entry("", f"--{experiment.model_option}: "
                                   f"{', '.join(experiment.models)} (default: "
                                   f"{', '.join(experiment.default_models)})"))
    lines.append(entry("all", "every experiment for seeds 0-4 (or --seeds), then "
                              "docs/results.md"))
    return "\n".join(lines)


class CommandParser(argparse.ArgumentParser):
    """A subcommand's parser whose epilog may be computed when its help is shown."""

    def __init__(self, *args, epilog_from=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.epilog_from = epilog_from

    def format_help(self) -> str:
        if self.epilog_from is not None:
            self.epilog = self.epilog_from()
        return super().format_help()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="course", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=CommandParser)
    check = commands.add_parser("check", help="report Python, torch, device, dependencies, kernel")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    clean = commands.add_parser("clean-notebooks", help="strip outputs and stray metadata")
    clean.add_argument("paths", nargs="*", default=["notebooks", "solutions", "exercises"])
    assign = commands.add_parser("assign", help="regenerate exercises/ from solutions/")
    assign.add_argument("lessons", nargs="*", metavar="LESSON",
                        help="lesson folders under solutions/ (default: all)")
    grade = commands.add_parser("grade", help="autograde a folder of submissions")
    grade.add_argument("submissions", metavar="SUBMISSIONS_DIR",
                       help="laid out as SUBMISSIONS_DIR/<student>/<lesson>/<notebook>.ipynb")
    grade.add_argument("--out", default="gradebook.csv",
                       help="gradebook CSV to write; feedback/ is written beside it")
    grade.add_argument("--timeout", type=int, default=None, help="seconds per cell")
    grade.add_argument("--memory-gb", type=float, default=None, help="memory cap per submission")
    grade.add_argument("--workers", type=int, default=1,
                       help="submissions graded side by side (each kernel then gets "
                            "cpus / workers threads); default 1")
    grade.add_argument("--key", default=None, metavar="FILE",
                       help="secret key the hidden tests' inputs are drawn from (default: "
                            "<out>.key beside the gradebook, made on first use; keep it with "
                            "the gradebook)")
    grade.add_argument("--replay", default=None, metavar="RUN",
                       help="draw the inputs of an earlier run again (its id, from "
                            "<out>.runs.jsonl), to repeat it exactly; default: a fresh run")
    grade.add_argument("--unsafe", action="store_true",
                       help="run submissions without a sandbox when bubblewrap is missing")
    add_reproduce_command(commands)
    results = commands.add_parser("results", help="regenerate docs/results.md from results/")
    results.add_argument("--results-dir", default=None, help="default: results/")
    results.add_argument("--page", default=None, help="default: docs/results.md")
    bench = commands.add_parser(
        "bench", help="time course_lib against PyTorch; write results/bench.json and "
                      "docs/performance.md")
    bench.add_argument("--parts", default=None,
                       help="comma-separated: attention, transformer_step, kv_cache, lessons "
                            "(default: all)")
    bench.add_argument("--lesson-profiles", default="fast,full",
                       help="profiles to time each lesson in: fast, full or fast,full (default; "
                            "the full profile trains for minutes where no saved model exists)")
    bench.add_argument("--lessons", nargs="*", metavar="PREFIX",
                       help="time only the lessons whose names start so (e.g. 08 09)")
    bench.add_argument("--out-dir", default=None, help="where bench.json goes (default: results/)")
    bench.add_argument("--docs", default=None,
                       help="the Markdown page to write (default: docs/performance.md)")
    add_publishing_commands(commands)
    return parser


def add_reproduce_command(commands) -> None:
    """``course reproduce``: its experiments and models come from the registry."""
    reproduce = commands.add_parser("reproduce", help="retrain and measure a headline result",
                                    epilog_from=experiments_epilog,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
    reproduce.add_argument("experiment", choices=ExperimentChoices(), metavar="EXPERIMENT",
                           help="one of the experiments below, or all")
    reproduce.add_argument("--model", default=None,
                           help="train only this model of the experiment (listed below)")
    reproduce.add_argument("--dataset", default=None,
                           help="train only this data set's model (experiments that train one "
                                "model per data set, listed below)")
    reproduce.add_argument("--seed", type=int, default=None,
                           help="data and initialisation seed (default 0; for all: 0-4)")
    reproduce.add_argument("--seeds", default=None, metavar="A-B",
                           help="several seeds, e.g. 0-4 or 0,2 (instead of --seed)")
    reproduce.add_argument("--out-dir", default=None,
                           help="results folder; each seed goes in seed-N/ (default: results/)")
    reproduce.add_argument("--max-minutes", type=float, default=None,
                           help="stop each model's training after this many minutes even if its "
                                "step budget is not spent (the numbers then differ from the "
                                "documented ones; the output says so)")
    reproduce.add_argument("--threads", type=int, default=None,
                           help="torch threads (default 1, the count the documented numbers were "
                                "measured with; another count gives other bits)")
    reproduce.add_argument("--jobs", type=int, default=1,
                           help="all only: train this many models side by side, one process "
                                "each (the numbers stay the same; 2 suits a 2-core laptop)")
    reproduce.add_argument("--page", default=None,
                           help="all only: the results page to write (default: docs/results.md)")
    reproduce.add_argument("--no-page", action="store_true",
                           help="all only: do not write the results page")
    reproduce.add_argument("--use-shipped", action="store_true",
                           help="start from the shipped reference models where they fit the "
                                "settings, instead of training them")
    reproduce.add_argument("--check-shipped", action="store_true",
                           help="train the shipped models again from scratch and compare them "
                                "with the files, bit for bit (exit 1 when one differs)")
    reproduce.add_argument("--ship", action="store_true",
                           help="copy the trained models (loaded when saved with these settings) "
                                "into reference-models/ and list them in its manifest")


def add_publishing_commands(commands) -> None:
    """``course site`` and ``course slides``."""
    site = commands.add_parser("site", help="build the course website from the executed lessons")
    slides = commands.add_parser("slides", help="build a reveal.js deck for each lesson")
    slides.add_argument("lessons", nargs="*", metavar="LESSON",
                        help="two-digit lesson numbers (default: all)")
    for command in (site, slides):
        command.add_argument("--profile", choices=["fast", "full"], default="full",
                             help="run the lessons in this profile (default: full, what a "
                                  "learner runs; fast builds in about a minute, for checks)")
    site.add_argument("--rerun", action="store_true",
                      help="execute every lesson again, even those whose cells did not change")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command in NEEDS_CHECKOUT:
        from course_lib.paths import NotACheckout, require_checkout

        try:
            require_checkout(f"course {args.command}")
        except NotACheckout as error:
            print(error, file=sys.stderr)
            return 1
    if args.command == "check":
        from course_lib.course.check import run_check

        return run_check(as_json=args.json)
    if args.command == "clean-notebooks":
        from course_lib.nbhygiene import clean_files

        changed = clean_files(args.paths)
        for path in changed:
            print(f"cleaned {path}")
        print(f"{len(changed)} notebook(s) changed")
        return 0
    if args.command == "assign":
        from course_lib.grading.workflow.assign import AssignError, assign

        try:
            written = assign(args.lessons or None)
        except AssignError as error:
            print(f"course assign: {error}", file=sys.stderr)
            return 1
        for path in written:
            print(f"wrote {path}")
        return 0
    if args.command == "grade":
        from course_lib.grading.workflow.grade import GradingError, grade_cli

        try:
            return grade_cli(args)
        except GradingError as error:
            print(f"course grade: {error}", file=sys.stderr)
            return 2
    if args.command == "reproduce":
        from course_lib.experiments.reproduce import reproduce_cli

        try:
            return reproduce_cli(args)
        except KeyboardInterrupt as stopped:  # training says in one line what it saved
            print(str(stopped) or "course reproduce: interrupted", file=sys.stderr)
            return 130
    if args.command == "results":
        from course_lib.experiments.reproduce import results_cli

        return results_cli(args)
    if args.command == "bench":
        from course_lib.experiments.benchmarks import bench_cli

        return bench_cli(args)
    if args.command in ("site", "slides"):
        from course_lib.course.publish import publish_cli

        return publish_cli(args)
    return 2  # unreachable: argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
