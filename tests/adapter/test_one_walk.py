"""Every dialect parses into one decision (asked.py), which the engine answers once and each dialect renders: on the
real model over HTTP, a request's caller text is walked once (core/caller_text.walk: one call for the state and one
per question) for its limits, its marking and its flags, and its strings are normalized once for both flags that read
words; no other walk of a value runs on the way (before issue 47 the state was walked five times, and on
/v1/decisions the request was also translated into System One's and validated again, and the answer rendered from
System One's response)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from decision_adapter import asked, engine, handlers, input_flags, instruction_flags, limits
from decision_adapter.core import caller_text

from tests.app_support import AppServer

pytestmark = pytest.mark.model

STATE = {"ticket": "I was charged twice for my March invoice.", "meta": {"tier": "gold", "tags": ["billing", 3]}}
SYSTEMONE = {
    "state": STATE,
    "questions": {
        "refund": {"type": "noul", "instructions": "Money back?"},
        "team": {"type": "choice", "criteria": {"Billing": "payments", "Sales": None}},
    },
}
OPENAI = {
    "model": "jev-latest",
    "input": [{"type": "message", "role": "user", "content": "I was charged twice for my March invoice."}],
    "questions": [
        {"type": "predicate", "name": "refund", "instructions": "Money back?"},
        {"type": "choice", "name": "team", "instructions": "Team?", "choices": [{"value": "Billing"}, {"value": True}]},
    ],
}


@pytest.fixture()
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Walks and normalizations counted; any other walk of a caller value on the decision path fails the request."""
    calls: Counter[str] = Counter()

    def counting(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return real(*args, **kwargs)

        return wrapper

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a second walk of the caller's text")

    monkeypatch.setattr(asked, "walk", counting("walk", caller_text.walk))
    monkeypatch.setattr(engine, "normalized_strings", counting("normalized", input_flags.normalized_strings))
    for module in (input_flags, instruction_flags, limits):
        monkeypatch.setattr(module, "caller_strings", refused)
    monkeypatch.setattr(caller_text, "mark_model", refused)
    yield calls


def test_system_ones_request_is_walked_once(adapter: AppServer, counted: Counter[str]) -> None:
    r = httpx.post(f"{adapter.url}/v1/systemone", json=SYSTEMONE, timeout=120)
    assert r.status_code == 200, r.text
    assert counted == {"walk": 3, "normalized": 1}  # the state and the two questions; the state's strings once


def test_a_json_lines_record_is_walked_once(adapter: AppServer, counted: Counter[str]) -> None:
    body = "\n".join(json.dumps({"id": i, **SYSTEMONE}) for i in range(2)).encode()
    r = httpx.post(
        f"{adapter.url}/invocations", content=body, headers={"Content-Type": "application/jsonlines"}, timeout=120
    )
    assert r.status_code == 200, r.text
    assert [line["id"] for line in map(json.loads, r.text.splitlines())] == [0, 1]
    # each record's state and questions walked once; the state's strings normalized once, for the first record (the
    # second's answers come from the mini-batch's memo: it raises no flag of its own to read)
    assert counted == {"walk": 6, "normalized": 1}


def test_openais_request_is_walked_once_and_never_rendered_as_system_ones(
    adapter: AppServer, counted: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("System One's response built on OpenAI's route")

    monkeypatch.setattr(handlers, "decision_response", refused)
    r = httpx.post(f"{adapter.url}/v1/decisions", json=OPENAI, timeout=120)
    assert r.status_code == 200, r.text
    assert [a["name"] for a in r.json()["answers"]] == ["refund", "team"]
    assert counted == {"walk": 3, "normalized": 1}


def test_the_counts_can_fail(adapter: AppServer, counted: Counter[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks above see a second walk: the engine walking the state again for its flags, as it did before."""
    real = engine.state_flags

    def walks_again(strings: Any, lines: Any, has_control_string: Any) -> Any:
        input_flags.addressed_to_classifier(STATE)  # a walk of the state of its own
        return real(strings, lines, has_control_string)

    monkeypatch.setattr(engine, "state_flags", walks_again)
    r = httpx.post(f"{adapter.url}/v1/systemone", json=SYSTEMONE, timeout=120)
    assert r.status_code == 500
