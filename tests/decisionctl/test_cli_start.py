"""decisionctl starts light: a command imports its own module and what it uses, never another command's, and the
top-level help imports none (each measured in a fresh interpreter, as a shell runs it)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from decisionctl.commands import ALL, BY_NAME

PROBE = """
import json, sys
from decisionctl.commands import cli
try:
    cli.main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def loaded(*argv: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], check=True, capture_output=True, text=True, timeout=120)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def commands_in(modules: set[str]) -> set[str]:
    """The command modules loaded (the entry point, commands.cli, is not one)."""
    return {m.removeprefix("decisionctl.commands.") for m in modules if m.startswith("decisionctl.commands.")} - {"cli"}


def test_the_top_level_help_imports_no_command_and_no_plotting() -> None:
    modules = loaded("--help")
    assert commands_in(modules) <= {"options"}, commands_in(modules)
    assert "matplotlib" not in modules and "numpy" not in modules


def test_decide_imports_its_own_module_only_and_no_plotting() -> None:
    modules = loaded("decide", "--help")
    assert commands_in(modules) == {"decide", "options"}
    assert "matplotlib" not in modules and not any(m.startswith("decisionctl.certification") for m in modules)


def test_every_command_is_registered_once_with_a_module_that_runs_it() -> None:
    assert len(BY_NAME) == len(ALL)
    for command in ALL:
        module = command.load()
        assert callable(module.add_arguments) and callable(module.run), command.name
        assert command.help and "\n" not in command.help


def test_an_unknown_command_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    from decisionctl.commands import cli

    with pytest.raises(SystemExit) as stopped:
        cli.main(["no-such-command"])
    assert stopped.value.code == 2 and "invalid choice: 'no-such-command'" in capsys.readouterr().err
