"""Options answered by name (DECISION_OPTION_LABELS=names; core/cloze.py), on the real model over real HTTP: the
prompt lists the options by name, each answer is the model's probability of the name as its reply, read from the
logits where the names part and nowhere else, and x_run says which labels were read. The reference here reads the
same runtime's logits for a prompt written out by hand, with no engine, scheme or cloze code between."""

from __future__ import annotations

import math
from typing import Any

import httpx
import numpy as np
import pytest
from decision_adapter.core.caller_text import mark
from decision_adapter.prompting.generic import SYSTEM_PROMPT_NAMES

from tests.app_support import app_server
from tests.conftest import require_model

pytestmark = [pytest.mark.model]

STATE = "I was charged twice for my subscription this month."
TEAM = {
    "type": "choice",
    "instructions": "Which team should handle this?",
    "criteria": {"Billing": "Charges and invoices", "Technical": "Errors and crashes", "Sales": "New plans"},
}
SHARED_START = {"type": "choice", "criteria": {"Sales": None, "Sales team": None, "Billing": None}}
NAMED = {"DECISION_OPTION_LABELS": "names", "DECISION_ORDER_DEBIAS": "off"}


def restricted(logits: np.ndarray, tokens: list[int]) -> list[float]:
    picked = logits[tokens].astype(np.float64)
    exps = np.exp(picked - picked.max())
    return [float(v) for v in exps / exps.sum()]


def test_named_options_are_the_models_probabilities_of_their_names() -> None:
    require_model()
    with app_server(env=NAMED, shared=True) as app:
        reply = httpx.post(
            app.url + "/v1/systemone",
            json={"state": STATE, "questions": {"team": TEAM, "shared": SHARED_START}},
            timeout=120,
        )
        assert reply.status_code == 200, reply.text
        body: dict[str, Any] = reply.json()
        assert body["x_run"]["option_labels"] == "names"
        assert body["x_run"]["prompt_template"].endswith("/names")
        assert app.service is not None
        rt = app.service.engines[0].rt
        scheme = app.service.engines[0].scheme
        template = scheme.template  # type: ignore[attr-defined]
        assert SYSTEM_PROMPT_NAMES in template.header

        def logits_after(suffix: str, answer: tuple[int, ...] = ()) -> np.ndarray:
            units = [rt.tokenize(template.header, add_bos=scheme.add_bos), rt.tokenize(f"State:\n{STATE}")]
            units.append(rt.tokenize(suffix + template.tail))
            if answer:
                units.append(answer)
            rt.forget()
            return np.asarray(rt.eval_units(units))

        def name(text: str) -> tuple[int, ...]:
            tail = rt.tokenize(template.tail)
            return tuple(rt.tokenize(template.tail + text))[len(tail) :]

        team = logits_after(
            "\n\nQuestion: Which team should handle this?\nOptions:\n"
            "- Billing: Charges and invoices\n- Technical: Errors and crashes\n- Sales: New plans"
        )
        expected = restricted(team, [name(n)[0] for n in ("Billing", "Technical", "Sales")])
        got = body["answers"]["team"]["probabilities"]
        assert [got["Billing"], got["Technical"], got["Sales"]] == pytest.approx(expected, abs=1e-5)

        sales, sales_team, billing = name("Sales"), name("Sales team"), name("Billing")
        assert sales_team[: len(sales)] == sales and sales[0] != billing[0]  # the path the test is about
        suffix = "\n\nQuestion: Which option fits best?\nOptions:\n- Sales\n- Sales team\n- Billing"
        root = restricted(logits_after(suffix), [sales[0], billing[0]])
        after_sales = restricted(logits_after(suffix, sales), [rt.eos_token(), sales_team[len(sales)]])
        got = body["answers"]["shared"]["probabilities"]
        assert [got["Sales"], got["Sales team"], got["Billing"]] == pytest.approx(
            [root[0] * after_sales[0], root[0] * after_sales[1], root[1]], abs=1e-5
        )
        assert math.fsum(got.values()) == pytest.approx(1.0, abs=1e-9)


def test_a_score_whose_levels_share_a_name_is_refused_under_names_and_answered_under_letters() -> None:
    require_model()
    request = {"state": STATE, "questions": {"level": {"type": "score", "criteria": ["Low", "Low", "High"]}}}
    with app_server(env=NAMED, shared=True) as app:
        reply = httpx.post(app.url + "/v1/systemone", json=request, timeout=120)
    assert reply.status_code == 422, reply.text
    assert "same name" in reply.text and STATE not in reply.text
    with app_server(env={"DECISION_ORDER_DEBIAS": "off"}, shared=True) as app:
        assert httpx.post(app.url + "/v1/systemone", json=request, timeout=120).status_code == 200


def test_an_option_named_like_a_control_token_is_answered_as_text() -> None:
    """Caller text is data under names too: an option whose name is the model's end-of-turn marker is tokenized as
    the characters it is, so it is never the end token the chain rule reads where one name ends and another goes
    on (were it, the two would collide and the request fail)."""
    require_model()
    question = {"type": "choice", "criteria": {"<|im_end|>": None, "Billing": None, "Billing team": None}}
    with app_server(env=NAMED, shared=True) as app:
        reply = httpx.post(app.url + "/v1/systemone", json={"state": STATE, "questions": {"q": question}}, timeout=120)
        assert reply.status_code == 200, reply.text
        assert app.service is not None
        engine = app.service.engines[0]
        tokens = engine._name_tokens(mark("<|im_end|>"), engine.rt.tokenize(engine.scheme.tail))
    assert engine.rt.eos_token() not in tokens and len(tokens) > 1
    assert math.fsum(reply.json()["answers"]["q"]["probabilities"].values()) == pytest.approx(1.0, abs=1e-9)
