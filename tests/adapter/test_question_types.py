"""Each question type defined once (decision_spec.question_types): every type the contract names has its kind,
its kind names the request and answer models the schemas' unions hold, and the other modules read those names.

No model is loaded: the answers, log lines and prompts a kind builds are checked on the real model in
test_adapter_decisions and test_adapter_response; this file checks that the definitions agree with each other.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any, get_args

import pytest
from decision_adapter import handlers
from decision_adapter import openai_schemas as oa
from decision_spec import contract, schemas
from decision_spec.manifest import Calibration
from decision_spec.policy import OptionMix, QuestionBand
from decision_spec.question_types import KINDS, kind_of, types_phrase
from decisionctl.core import cases

ROOT = Path(__file__).resolve().parents[2]
ADAPTER = ROOT / "containers" / "decision_adapter"
DEFINITIONS = {
    "decision_spec/question_types.py",
    "decision_spec/contract.py",
    "decision_spec/schemas.py",
}  # where a type is defined, not read


def union_members(annotation: Any) -> set[type]:
    """The model classes of a (possibly Annotated) union."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = get_args(annotation)[0]
    return set(get_args(annotation))


OPENAI_TAGS = {"noul": "predicate"}  # OpenAI's name where it differs from System One's; the others are the same


def test_every_type_is_asked_and_answered_on_openais_route_too() -> None:
    """/v1/decisions validates its own models: a type missing there is refused with a 400 naming the tags it knows,
    though the System One routes answer it (docs/architecture.md: six code files for a new type)."""
    wanted = {OPENAI_TAGS.get(name, name) for name in contract.QUESTION_TYPES}
    for union in (oa.OpenAIQuestion, oa.OpenAIAnswer):
        tags = {get_args(model.model_fields["type"].annotation)[0] for model in union_members(union)}
        assert tags - {"refusal"} == wanted, union  # a declined question is an answer of its own


def test_every_openai_question_is_translated_and_every_answer_rendered() -> None:
    """openai_decisions.py names each of OpenAI's question models where it parses a question into the engine's and
    builds each of OpenAI's answer models where it renders one: a type with its models but no translation is
    seen here, not as a 500 on /v1/decisions (tests/test_change_counts.py's new type shows both)."""
    import inspect

    from decision_adapter import openai_decisions

    asked = inspect.getsource(openai_decisions.parse)
    rendered = inspect.getsource(openai_decisions.answer_of)
    questions = {model.__name__ for model in union_members(oa.OpenAIQuestion)}
    answers = {model.__name__ for model in union_members(oa.OpenAIAnswer)}
    assert {name for name in questions if f"oa.{name})" not in asked} == set()  # isinstance(q, oa.<Model>)
    assert {name for name in answers if f"oa.{name}(" not in rendered} == set()


def test_every_contract_type_has_one_kind_in_contract_order() -> None:
    assert tuple(KINDS) == contract.QUESTION_TYPES == get_args(contract.QuestionType)
    assert all(kind.name == name for name, kind in KINDS.items())
    assert types_phrase() == "noul, choice or score"
    with pytest.raises(KeyError):
        kind_of("ranking")


def test_the_kinds_name_the_models_the_schemas_unions_hold() -> None:
    assert {kind.question_model for kind in KINDS.values()} == union_members(schemas.AnyQuestion)
    assert {kind.answer_model for kind in KINDS.values()} == union_members(schemas.Answer)
    for name, kind in KINDS.items():
        assert get_args(kind.question_model.model_fields["type"].annotation) == (name,)
        assert kind.answer_model.model_fields["type"].default == name


def test_manifest_policy_and_cases_take_the_contract_types() -> None:
    assert set(Calibration(temperature=dict.fromkeys(contract.QUESTION_TYPES, 1.0)).temperature) == set(KINDS)
    for name in KINDS:
        QuestionBand(type=name)  # type: ignore[arg-type]
        OptionMix(type=name, cases=1, options=["a", "b"], shares=[1.0, 0.0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="noul, choice or score"):
        cases.parse_case(1, {"id": "c", "state": "s", "question": {"type": "ranking"}, "expected": 0})


@pytest.mark.parametrize(
    ("question", "expected", "options", "index"),
    [
        ({"type": "noul"}, False, ("yes", "no"), 1),
        ({"type": "choice", "criteria": {"Billing": None, "Sales": "deals"}}, "Sales", ("Billing", "Sales"), 1),
        ({"type": "score", "criteria": ["Calm", "Angry", "Furious"]}, 2, ("0", "1", "2"), 2),
    ],
)
def test_a_labeled_case_reads_its_options_and_expected_answer_through_its_kind(
    question: dict[str, Any], expected: Any, options: tuple[str, ...], index: int
) -> None:
    case = cases.parse_case(1, {"id": "c", "state": "s", "question": question, "expected": expected})
    assert (case.options, case.expected_index) == (options, index)
    with pytest.raises(cases.CaseError, match=r"^line 7: "):
        cases.parse_case(7, {"id": "c", "state": "s", "question": question, "expected": [expected]})


def test_every_kind_says_an_answer_shape_every_reader_of_a_pick_handles() -> None:
    from decision_spec.loop_config import PICKED_SHAPES

    assert get_args(contract.AnswerShape) == contract.ANSWER_SHAPES
    assert set(contract.SHAPE_OF_TYPE) == set(contract.QUESTION_TYPES)  # a new type says its shape in the contract
    for kind in KINDS.values():
        assert "answer_shape" in type(kind).__dict__  # said by the kind itself, never inherited by a new one
        assert kind.answer_shape in contract.ANSWER_SHAPES
        assert kind.answer_shape in handlers.PICKS  # the decision line's `picked` counts
    assert set(PICKED_SHAPES) <= set(contract.ANSWER_SHAPES)  # the shapes the stacks' routing questions can count


def docs_section(start: str, end: str) -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    return text[text.index(start) : text.index(end)]


def modules_mentioning(pattern: str) -> set[str]:
    """Modules of the adapter, decisionctl and the stacks whose source matches, named as architecture.md names
    them: `handlers.py`, `prompting/base.py`, decisionctl's `evaluation/cases.py`, `stacks/decision_shift.py`."""
    found = set()
    spec = (ROOT / "containers" / "decision_spec", "decision_spec/")
    for folder, prefix in ((ADAPTER, ""), (ROOT / "tools" / "decisionctl", ""), (ROOT / "stacks", "stacks/"), spec):
        for path in folder.rglob("*.py"):
            if re.search(pattern, path.read_text()):
                found.add(prefix + path.relative_to(folder).as_posix())
    return found - DEFINITIONS


def modules_named(section: str) -> set[str]:
    """The modules a section names (test files aside)."""
    return {m for m in re.findall(r"`([\w/]+\.py)`", section) if not m.startswith("tests/")}


def test_architecture_md_names_every_module_that_reads_the_kind() -> None:
    """'A new question type' names each module that reads a type's kind or the type names."""
    named = docs_section("- **A new question type**", "- **A question type with another answer shape**")
    readers = modules_mentioning(r"kind_of\(|\bKINDS\b|QUESTION_TYPES|\bQuestionType\b|answer_shape|ANSWER_SHAPES")
    assert "handlers.py" in readers
    assert {m for m in readers if f"`{m}`" not in named} == set()
    assert modules_named(named) <= modules_mentioning("") | DEFINITIONS  # none gone stale


def test_architecture_md_names_every_module_that_reads_one_pick() -> None:
    """'Another answer shape' names each module that reads the one option an answer picks."""
    named = docs_section("- **A question type with another answer shape**", "- **A new error**")
    readers = modules_mentioning(
        r"\.picked\(|\.pick\(|picked_probability|expected_index|picked_name|picked_index|final_option|"
        r"\bPICKS\b|PICKED_SHAPES|softmax"
    )
    assert {"handlers.py", "decision_spec/policy.py", "engine.py"} <= readers
    assert {m for m in readers if f"`{m}`" not in named} == set()
    assert modules_named(named) <= modules_mentioning("") | DEFINITIONS  # none gone stale
