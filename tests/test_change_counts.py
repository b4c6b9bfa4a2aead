"""docs/architecture.md's counts, measured by making the change: a new CLI command added step by step in a scratch
copy of the committed tree, the structural checks run after each step (tests/change_counts_support.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.change_counts_support import NEW_COMMAND_CHECKS, failing, new_command_steps, scratch, tree_env

pytestmark = pytest.mark.slow  # four pytest runs in a scratch tree, 30 to 45 s


def test_a_new_cli_command_is_three_code_files_and_two_places_in_the_docs(tmp_path: Path) -> None:
    """Each step leaves exactly the check that names the next one failing; with all three, the command runs."""
    tree = scratch(tmp_path / "tree")
    assert failing(tree, NEW_COMMAND_CHECKS) == []  # the committed tree passes them
    modules, registry, docs = new_command_steps()
    modules[1](tree)  # a use case and a command module, in no stage: parsed by nothing
    assert failing(tree, NEW_COMMAND_CHECKS) == [
        "tests/decisionctl/test_layout.py::test_every_command_module_is_reachable_from_the_help"
    ]
    registry[1](tree)  # registered: in --help, but not in docs/cli.md
    assert failing(tree, NEW_COMMAND_CHECKS) == [
        "tests/test_docs.py::test_cli_md_lists_every_command_in_the_order_of_the_help"
    ]
    docs[1](tree)  # its row in cli.md's table and its section
    assert failing(tree, NEW_COMMAND_CHECKS) == []
    ran = subprocess.run(
        [sys.executable, "-m", "decisionctl.commands.cli", "case-mix", "evaluation/decider/fit.jsonl"],
        check=False,
        cwd=tree,
        env=tree_env(tree),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0 and "choice" in ran.stdout, ran.stderr[-2000:]
