"""decisionctl: the operator's commands for decision endpoints, from packaging a model to reading live traffic.

Builds the parser from the registry in `decisionctl.commands` and runs the command named; only that command's module
is imported (the top-level help imports none), so a command loads what it uses and nothing another command needs.
The command modules are the only ones that read arguments and the environment; everything else takes plain values.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Collection, Sequence

from decisionctl.commands import ALL, BY_NAME, STAGES
from decisionctl.commands.options import UsageError, say
from decisionctl.exit_codes import EXIT_FAILED
from decisionctl.transport import aws_setup_failure

_SUMMARY = (__doc__ or "").splitlines()[0].removeprefix("decisionctl: ")


def build_parser(load: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; the arguments of the commands named in `load` only (None: every command's)."""
    parser = argparse.ArgumentParser(
        prog="decisionctl",
        description=_SUMMARY[0].upper() + _SUMMARY[1:],
        epilog=_commands_by_stage(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", help="one of the commands below")
    for command in ALL:
        p = sub.add_parser(command.name, description=command.help)  # listed once, by stage, in the epilog
        if load is None or command.name in load:
            module = command.load()
            module.add_arguments(p)
            p.set_defaults(run=module.run)
    return parser


def _commands_by_stage() -> str:
    """The commands in the order of the work, stage by stage, each with its one line (`decisionctl COMMAND -h`)."""
    width = max(len(command.name) for command in ALL)
    lines = ["commands, in the order of the work (decisionctl COMMAND -h for each):"]
    for stage, commands in STAGES:
        lines.append(f"\n  {stage}:")
        lines.extend(f"    {command.name:<{width}}  {command.help}" for command in commands)
    return "\n".join(lines)


def named_command(argv: Sequence[str]) -> str | None:
    """The command argv names: its first word that is not an option (the top level takes no option with a value)."""
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    return first if first in BY_NAME else None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    named = named_command(argv)
    parser = build_parser(load=[named] if named else [])
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
