"""decisionctl: the operator's commands for decision endpoints, from packaging a model to reading live traffic.

Builds the parser from the command modules in `decisionctl.commands` and runs the one named; those modules
are the only ones that read arguments and the environment, everything else takes plain values.
"""

from __future__ import annotations

import argparse
import sys

from decisionctl.commands import ALL, STAGES
from decisionctl.commands.options import EXIT_FAILED, UsageError, say
from decisionctl.transport import aws_setup_failure

_SUMMARY = (__doc__ or "").splitlines()[0].removeprefix("decisionctl: ")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="decisionctl",
        description=_SUMMARY[0].upper() + _SUMMARY[1:],
        epilog=_commands_by_stage(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", help="one of the commands below")
    for command in ALL:
        p = sub.add_parser(command.NAME, description=command.HELP)  # listed once, by stage, in the epilog
        command.add_arguments(p)
        p.set_defaults(run=command.run)
    return parser


def _commands_by_stage() -> str:
    """The commands in the order of the work, stage by stage, each with its one line (`decisionctl COMMAND -h`)."""
    width = max(len(command.NAME) for command in ALL)
    lines = ["commands, in the order of the work (decisionctl COMMAND -h for each):"]
    for stage, commands in STAGES:
        lines.append(f"\n  {stage}:")
        lines.extend(f"    {command.NAME:<{width}}  {command.HELP}" for command in commands)
    return "\n".join(lines)


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
    except Exception as exc:
        reason = aws_setup_failure(exc)  # the same for every call: said once, never retried
        if reason is None:
            raise
        say(reason)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
