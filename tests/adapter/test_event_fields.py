"""Log event names and decision-line fields are named once, in decision_spec.events: the adapter writes them from
there, and the stacks' metric filters select and sum them from there too. No model: the decision line's counts are
built from answers made here."""

from __future__ import annotations

import re
from typing import cast

from decision_adapter import handlers
from decision_adapter.answers import answered
from decision_adapter.outcomes import DecisionOutcome, Scored
from decision_spec import events
from decision_spec.schemas import DecisionRequest, RequestRun

from stacks import decision_shift, observability

SHA = "0123456789abcdef"


def event_selected(pattern: str) -> str:
    match = re.match(r'\{ \$\.event = "(\w+)"', pattern)
    assert match is not None, pattern
    return match.group(1)


def test_observability_selects_the_adapters_events() -> None:
    """The filters' patterns select the events by name, read from decision_spec.events (no copy to keep in step)."""
    assert event_selected(observability.OVERLOAD_PATTERN) == events.OVERLOAD_REJECTED
    assert event_selected(observability.RUNTIME_FAILURE_PATTERN) == events.RUNTIME_FAILURE
    assert event_selected(observability.action_pattern("automated")) == events.DECISION
    assert {a: field for a, (field, _) in observability.ACTION_COUNTS.items()} == events.ACTION_COUNT_FIELDS


def test_decision_shift_selects_decision_lines_and_reads_picks_by_key() -> None:
    assert event_selected(decision_shift.decision_pattern(events.PICKED_FIELD)) == events.DECISION
    assert events.picked_key(SHA, 3) == f"q{SHA}_3"  # a pick's key as the alarms' metric filters spell it


def test_a_decision_lines_counts_carry_the_names_the_filters_read() -> None:
    """handlers.shift_counts (what a decision line adds under a policy) keyed as decision_shift reads it."""
    questions = DecisionRequest.model_validate(
        {
            "state": "s",
            "questions": {"a": {"type": "choice", "criteria": {"Billing": None, "Sales": None}}, "b": {"type": "noul"}},
        }
    ).questions
    outcome = DecisionOutcome(
        {
            "a": Scored(["Billing", "Sales"], [0.3, 0.7], SHA, 1, 1, label_mass=0.9),
            "b": Scored(["true", "false"], [0.2, 0.8], SHA[::-1], 1, 1),
        },
        input_tokens=2,
        evaluated_tokens=2,
        state_source="computed",
    )
    done = answered(model="m", questions=dict(questions), outcome=outcome, run=cast(RequestRun, None), latency_ms=1.0)
    counts = handlers.shift_counts(done)
    assert counts == {
        events.PICKED_FIELD: {events.picked_key(SHA, 1): 1, events.picked_key(SHA[::-1], 1): 1},
        events.LABEL_MASS_SUM_FIELD: 0.9,
        events.LABEL_MASS_ANSWERS_FIELD: 1,
    }
