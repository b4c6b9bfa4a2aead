"""decisionctl: call a decision endpoint, package a model, measure calibration, compare runs, load-test, pin images.

Builds the parser from the command modules in `decisionctl.commands` and runs the one named; those modules
are the only ones that read arguments and the environment, everything else takes plain values.
"""

from __future__ import annotations

import argparse
import sys

from decisionctl.commands import ALL
from decisionctl.commands.options import EXIT_FAILED, UsageError, say


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="decisionctl", description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in ALL:
        p = sub.add_parser(command.NAME, help=command.HELP)
        command.add_arguments(p)
        p.set_defaults(run=command.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except UsageError as exc:
        parser.error(str(exc))
    except (OSError, ValueError) as exc:
        say(f"{type(exc).__name__}: {exc}")
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
