"""docs/architecture.md's counts, measured by making the change: a new CLI command and a new setting that changes
answers, each added step by step in a scratch copy of the committed tree, the structural checks run after each step
(tests/change_counts_support.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.change_counts_support import (
    NEW_ANSWER_SETTING_CHECKS,
    NEW_COMMAND_CHECKS,
    failing,
    new_answer_setting_steps,
    new_command_steps,
    scratch,
    tree_env,
)

pytestmark = pytest.mark.slow  # pytest runs in a scratch tree: 30 to 45 s for the command, about 40 s for the setting


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


def test_a_new_answer_setting_is_three_code_files_a_test_row_and_a_readme_row(tmp_path: Path) -> None:
    """Each step leaves exactly the checks that name the next ones failing; with all of them, every test of the
    artifact's layers carries the new setting (packaged, recorded, adopted, reported in x_run, written by synth)."""
    tree = scratch(tmp_path / "tree")
    shape, carried_row, readme, identity = NEW_ANSWER_SETTING_CHECKS
    assert failing(tree, NEW_ANSWER_SETTING_CHECKS) == []
    registry, artifact, run_field, row, table, served = new_answer_setting_steps()
    registry[1](tree)  # the registry has it, the artifact's model does not, the README does not list it
    assert failing(tree, NEW_ANSWER_SETTING_CHECKS) == sorted([shape, readme])
    artifact[1](tree)  # the artifact may record it; x_run cannot report it; no layer's tests have a value for it
    assert failing(tree, NEW_ANSWER_SETTING_CHECKS) == sorted([carried_row, readme, identity])
    run_field[1](tree)
    assert failing(tree, NEW_ANSWER_SETTING_CHECKS) == sorted([carried_row, readme])
    row[1](tree)
    assert failing(tree, NEW_ANSWER_SETTING_CHECKS) == [readme]
    table[1](tree)
    assert failing(tree, NEW_ANSWER_SETTING_CHECKS) == []
    served[1](tree)  # the adapter reports the value in force: a third code file no check asks for
    carried = ["tests/decisionctl/test_answer_settings_carried.py", "tests/stacks/test_adapter_settings.py"]
    assert failing(tree, [*carried, "-k", "min_margin"]) == []  # every test parametrized by the new name passes
