"""The ``course`` command (also ``python -m course_lib``).

    course check                  is this environment ready? (exit 1 with the fix if not)
    course clean-notebooks [PATH] strip outputs and stray metadata from committed notebooks
"""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="course", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    check = commands.add_parser("check", help="report Python, torch, device, dependencies, kernel")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    clean = commands.add_parser("clean-notebooks", help="strip outputs and stray metadata")
    clean.add_argument("paths", nargs="*", default=["notebooks", "solutions", "exercises"])
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "check":
        from course_lib.check import run_check

        return run_check(as_json=args.json)
    if args.command == "clean-notebooks":
        from course_lib.nbhygiene import clean_files

        changed = clean_files(args.paths)
        for path in changed:
            print(f"cleaned {path}")
        print(f"{len(changed)} notebook(s) changed")
        return 0
    return 2  # unreachable: argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
