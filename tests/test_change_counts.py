"""docs/architecture.md's counts, measured by making the change: a new CLI command, a new setting that changes answers
and a new question type, each added step by step in a scratch copy of the committed tree, the structural checks run
after each step (tests/change_counts_support.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.change_counts_support import (
    ASK_LIKERT,
    NEW_ANSWER_SETTING_CHECKS,
    NEW_COMMAND_CHECKS,
    NEW_QUESTION_TYPE_CHECKS,
    PINNED_TEMPERATURES,
    failing,
    new_answer_setting_steps,
    new_command_steps,
    new_question_type_steps,
    run_in,
    scratch,
    with_model,
)

pytestmark = pytest.mark.slow  # pytest runs in a scratch tree: 30 to 45 s for the command, about 40 s for the setting,
# about 80 s for the question type (the model loaded in the tree three times, its routes asked once)


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
    ran = run_in(tree, ["-m", "decisionctl.commands.cli", "case-mix", "evaluation/decider/fit.jsonl"], timeout=120)
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


def ask_likert(tree: Path) -> dict[str, Any]:
    """Both routes of the tree's own adapter asked one likert question: {route: [status, body]}."""
    ran = run_in(tree, ["-c", ASK_LIKERT], timeout=300)
    assert ran.returncode == 0, ran.stderr[-3000:]
    result: dict[str, Any] = json.loads(ran.stdout)
    return result


def test_a_new_question_type_is_six_code_files_and_two_test_files(tmp_path: Path) -> None:
    """A five-level `likert` type, answered as a score is. Each step leaves the checks that name the next ones failing
    (a check names OpenAI's missing translation, where the route would answer the type with a 500); with all seven
    steps both routes answer it on the model, the same probabilities on each."""
    tree = with_model(scratch(tmp_path / "tree"))
    types_file, readback_file = NEW_QUESTION_TYPE_CHECKS
    kinds = f"{types_file}::test_every_contract_type_has_one_kind_in_contract_order"  # and the type list's wording
    openai = f"{types_file}::test_every_type_is_asked_and_answered_on_openais_route_too"
    contract_types = f"{types_file}::test_manifest_policy_and_cases_take_the_contract_types"  # and its wording
    unions = f"{types_file}::test_the_kinds_name_the_models_the_schemas_unions_hold"
    translated = f"{types_file}::test_every_openai_question_is_translated_and_every_answer_rendered"
    readback = f"{readback_file}::test_every_contract_type_has_its_readback_in_contract_order"
    assert failing(tree, [*NEW_QUESTION_TYPE_CHECKS, PINNED_TEMPERATURES]) == []
    contract_, schemas, kind, openai_models, translation, readback_module, test_files = new_question_type_steps()
    contract_[1](tree)  # named, with its levels and shape: no kind, no models, no readback, no OpenAI tag
    assert failing(tree, NEW_QUESTION_TYPE_CHECKS) == sorted([kinds, openai, contract_types, readback])
    schemas[1](tree)  # the unions hold models no kind names
    assert failing(tree, NEW_QUESTION_TYPE_CHECKS) == sorted([kinds, openai, contract_types, unions, readback])
    kind[1](tree)
    assert failing(tree, NEW_QUESTION_TYPE_CHECKS) == sorted([kinds, openai, contract_types, readback])
    openai_models[1](tree)  # OpenAI validates the type, translates nothing of it (/v1/decisions would answer a 500)
    assert failing(tree, NEW_QUESTION_TYPE_CHECKS) == sorted([kinds, contract_types, readback, translated])
    translation[1](tree)
    assert failing(tree, NEW_QUESTION_TYPE_CHECKS) == sorted([kinds, contract_types, readback])
    readback_module[1](tree)
    assert failing(tree, [*NEW_QUESTION_TYPE_CHECKS, PINNED_TEMPERATURES]) == sorted(
        [kinds, contract_types, PINNED_TEMPERATURES]
    )
    test_files[1](tree)  # the type list's wording and the temperatures every answer reports
    assert failing(tree, [*NEW_QUESTION_TYPE_CHECKS, PINNED_TEMPERATURES]) == []
    asked = ask_likert(tree)
    (one_status, one), (two_status, two) = asked["systemone"], asked["decisions"]
    assert one_status == two_status == 200
    levels = one["answers"]["q"]["probabilities"]
    assert list(levels) == ["0", "1", "2", "3", "4"] and abs(sum(levels.values()) - 1) < 1e-6
    assert one["answers"]["q"]["type"] == two["answers"][0]["type"] == "likert"
    by_route = [p["probability"] for p in two["answers"][0]["probabilities"]]
    assert by_route == pytest.approx(list(levels.values()), abs=1e-9)  # one internal answer, two renderings
