"""What decisionctl reads back of each question type (decisionctl.readback): every type the contract names has
its read-back, and an answer's option names, pick, probabilities by name and a final answer read through it."""

from __future__ import annotations

from typing import get_args

import pytest
from decision_spec import contract, schemas
from decision_spec.question_types import KINDS
from decisionctl.readback import NOUL_OPTIONS, READBACKS, Readback, readback_of


def test_every_contract_type_has_its_readback_in_contract_order() -> None:
    """A new type added to the contract and question_types.KINDS fails here until decisionctl reads it back."""
    assert tuple(READBACKS) == tuple(KINDS) == contract.QUESTION_TYPES == get_args(contract.QuestionType)
    for name, readback in READBACKS.items():
        assert readback.name == name and "name" in type(readback).__dict__
        assert isinstance(readback, Readback)
    with pytest.raises(KeyError):
        readback_of("ranking")


def test_the_servers_kind_holds_none_of_the_read_back() -> None:
    """What only decisionctl reads stays out of the image: the kinds do not define it."""
    read_back = {n for n in vars(Readback) if not n.startswith("_")} - {"name"}
    assert read_back >= {"summary", "case_options", "expected_index", "option_names", "final_option", "case_question"}
    for kind in KINDS.values():
        assert {n for n in read_back if hasattr(kind, n)} == set()


@pytest.mark.parametrize(
    ("answer", "picked", "by_name", "summary"),
    [
        (schemas.NoulAnswer(noul=0.25), "no", {"yes": 0.25, "no": 0.75}, "no"),
        (
            schemas.ChoiceAnswer(choice="Sales", probabilities={"Billing": 0.4, "Sales": 0.6}, confidence=0.2),
            "Sales",
            {"Billing": 0.4, "Sales": 0.6},
            "Sales",
        ),
        (
            schemas.ScoreAnswer(
                score=1.2, legend={"0": "Calm", "1": "Angry"}, probabilities={"1": 0.8, "0": 0.2}, confidence=0.6
            ),
            "1",
            {"1": 0.8, "0": 0.2},
            "1.20 (mode Angry)",
        ),
    ],
)
def test_an_answer_reads_back_its_options_pick_and_a_final_answer(
    answer: schemas.Answer, picked: str, by_name: dict[str, float], summary: str
) -> None:
    readback = readback_of(answer.type)
    names = readback.option_names(answer)
    assert readback.picked_name(answer) == picked and picked in names
    assert readback.named_distribution(answer) == by_name and set(by_name) == set(names)
    assert readback.summary(answer) == summary
    assert readback.final_option(answer, picked) == picked
    with pytest.raises(ValueError, match="final answer"):
        readback.final_option(answer, "nothing of the kind")
    fields, expected = readback.case_question(answer, picked)
    options = readback.case_options(fields.get("criteria"))
    assert options == (NOUL_OPTIONS if answer.type == "noul" else names)
    assert options[readback.expected_index(expected, options)] == picked
