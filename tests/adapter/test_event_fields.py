"""Log event names and decision-line fields are named once, in decision_adapter.events: the adapter writes them from
there, and the stacks' metric filters (synthesized without the adapter, so they write the names again) select and
sum exactly those names. No model: the decision line's counts are built from answers made here."""

from __future__ import annotations

import re
from types import SimpleNamespace

from decision_adapter import events, handlers
from decision_adapter.core.schemas import ChoiceAnswer, NoulAnswer

from stacks import decision_shift, observability

SHA = "0123456789abcdef"


def event_selected(pattern: str) -> str:
    match = re.match(r'\{ \$\.event = "(\w+)"', pattern)
    assert match is not None, pattern
    return match.group(1)


def test_observability_selects_the_adapters_events_and_sums_its_counts() -> None:
    assert event_selected(observability.OVERLOAD_PATTERN) == events.OVERLOAD_REJECTED
    assert event_selected(observability.RUNTIME_FAILURE_PATTERN) == events.RUNTIME_FAILURE
    assert event_selected(observability.action_pattern("automated")) == events.DECISION
    assert {a: field for a, (field, _) in observability.ACTION_COUNTS.items()} == events.ACTION_COUNT_FIELDS
    assert (observability.ANSWERS_FIELD, observability.INPUT_FLAGGED_FIELD) == (
        events.ANSWERS_FIELD,
        events.INPUT_FLAGGED_FIELD,
    )


def test_decision_shift_reads_the_adapters_fields() -> None:
    assert event_selected(decision_shift.decision_pattern(decision_shift.PICKED_FIELD)) == events.DECISION
    assert f"$.{events.POLICY_FIELD}" == decision_shift.POLICY_FIELD
    assert decision_shift.PICKED_FIELD == events.PICKED_FIELD
    assert decision_shift.LABEL_MASS_SUM_FIELD == events.LABEL_MASS_SUM_FIELD
    assert decision_shift.LABEL_MASS_ANSWERS_FIELD == events.LABEL_MASS_ANSWERS_FIELD
    assert decision_shift.ACTION_FIELDS == events.ACTION_COUNT_FIELDS
    assert decision_shift.picked_key(SHA, 3) == events.picked_key(SHA, 3) == f"q{SHA}_3"


def test_a_decision_lines_counts_carry_the_names_the_filters_read() -> None:
    """handlers.shift_counts (what a decision line adds under a policy) keyed as decision_shift reads it."""
    answers = {
        "a": ChoiceAnswer(
            choice="Sales",
            probabilities={"Billing": 0.3, "Sales": 0.7},
            confidence=0.4,
            x_options_sha256=SHA,
            x_label_mass=0.9,
        ),
        "b": NoulAnswer(noul=0.2, x_options_sha256=SHA[::-1]),
    }
    counts = handlers.shift_counts(SimpleNamespace(answers=answers))  # type: ignore[arg-type]
    assert counts == {
        decision_shift.PICKED_FIELD: {decision_shift.picked_key(SHA, 1): 1, decision_shift.picked_key(SHA[::-1], 1): 1},
        decision_shift.LABEL_MASS_SUM_FIELD: 0.9,
        decision_shift.LABEL_MASS_ANSWERS_FIELD: 1,
    }
