"""Adaptive rotations on the real model over HTTP: against every rotation read, the orders it reports, determinism.

One adapter in DECISION_ORDER_DEBIAS=adaptive. The full-rotation reference is read from the same adapter: each
rotation of a question sent as its own request with x_slot_probabilities, whose first order read ("given") is
exactly what a rotations reading shows the model in that rotation (same state, same question head, same tokens).
The bundled model picks by slot, not by content (its reads hardly change across rotations: about 0.5 on slot B of
three whatever sits there), so its rotation averages are near ties and it reads every rotation: here the answers
equal the rotations answers exactly. Stopping early, and the tolerance it keeps, is checked on decisive
hand-made reads in test_signals.py.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from decision_adapter.adaptive import reported
from decision_spec.policy import PolicyError, Provenance, seal

from tests.app_support import AppServer, start_app
from tests.conftest import require_model

pytestmark = pytest.mark.model

ADAPTIVE_TOLERANCE = 0.34
ROTATION_OF = {"given": 0, "reversed": 1}  # with 2 options the one rotation is the reversed order
NAMES = ["Billing", "Technical", "Sales", "Legal", "Security", "Shipping", "Returns", "Careers"]
STATES = [
    "Please refund the second charge on my card.",
    "The login page shows an error since this morning.",
    "We want a quote for 40 seats.",
    "Your contract clause 7 conflicts with our law.",
    "My parcel never arrived.",
]
# A state that names its answer (the bundled model still answers by slot).
DECISIVE = {
    "state": "Answer: Red. Red. Red. The colour is Red.",
    "questions": {
        "c": {
            "type": "choice",
            "instructions": "Which colour is named?",
            "criteria": {"Red": None, "Blue": None, "Green": None},
        }
    },
}


@pytest.fixture(scope="module")
def adaptive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    require_model()
    proc = start_app(
        env={"DECISION_ORDER_DEBIAS": "adaptive", "DECISION_ADAPTIVE_TOLERANCE": str(ADAPTIVE_TOLERANCE)},
    )
    yield proc
    proc.stop()


def random_requests() -> list[dict[str, Any]]:
    """One choice question of each size from 2 to 8 options, names and state drawn with a fixed seed."""
    rng = random.Random(21)
    out = []
    for n in range(2, 9):
        names = rng.sample(NAMES, n)
        question = {"type": "choice", "instructions": "Which team?", "criteria": dict.fromkeys(names)}
        out.append({"state": rng.choice(STATES), "questions": {"q": question}})
    return [*out, DECISIVE]


def post(client: httpx.Client, url: str, body: dict[str, Any]) -> dict[str, Any]:
    r = client.post(url + "/v1/systemone", json=body)
    assert r.status_code == 200, r.text
    return dict(r.json())


def with_slots(body: dict[str, Any]) -> dict[str, Any]:
    ((qid, q),) = body["questions"].items()
    return {**body, "questions": {qid: {**q, "x_slot_probabilities": True}}}


def full_rotations(client: httpx.Client, url: str, body: dict[str, Any]) -> tuple[np.ndarray, list[np.ndarray]]:
    """The mean over every rotation of the option distribution, and each rotation's raw slot distribution."""
    ((qid, q),) = body["questions"].items()
    names = list(q["criteria"])
    n = len(names)
    per_rotation, mean = [], np.zeros(n)
    for r in range(n):
        order = names[r:] + names[:r]
        rotated = {**q, "criteria": {o: q["criteria"][o] for o in order}, "x_slot_probabilities": True}
        answer = post(client, url, {**body, "questions": {qid: rotated}})["answers"][qid]
        assert answer["x_orders_read"][0] == "given"
        slots = np.array(answer["x_slot_probabilities"][0])
        per_rotation.append(slots)
        mean[[names.index(o) for o in order]] += slots / n
    return mean, per_rotation


@pytest.mark.slow
def test_adaptive_equals_every_rotation_within_the_tolerance(adaptive: AppServer) -> None:
    with httpx.Client(timeout=300) as client:
        for body in random_requests():
            got = post(client, adaptive.url, with_slots(body))
            answer = got["answers"]["q" if "q" in body["questions"] else "c"]
            names = list(next(iter(body["questions"].values()))["criteria"])
            n = len(names)
            temperature = got["x_run"]["calibration"]["temperature"].get("choice", 1.0)
            mean, per_rotation = full_rotations(client, adaptive.url, body)
            reference = reported(mean, temperature, out_of_scope=False)
            probs = np.array([answer["probabilities"][k] for k in names])
            read = answer["x_orders_read"]
            assert 1 <= answer["x_orders"] == len(read) <= n and read[0] == "given" and len(set(read)) == len(read)
            for name, slots in zip(read, answer["x_slot_probabilities"], strict=True):  # the same reads, exactly
                r = ROTATION_OF[name] if name in ROTATION_OF else int(name.removeprefix("rotation:"))
                assert np.allclose(slots, per_rotation[r], atol=1e-12, rtol=0)
            assert answer["choice"] == names[int(np.argmax(reference))]
            if len(read) == n:
                assert np.allclose(probs, reference, atol=1e-9, rtol=0)
            else:
                assert np.max(np.abs(probs - reference)) <= ADAPTIVE_TOLERANCE


def test_the_same_request_reads_the_same_orders(adaptive: AppServer) -> None:
    with httpx.Client(timeout=300) as client:
        first, again = (post(client, adaptive.url, DECISIVE)["answers"]["c"] for _ in range(2))
    assert first["x_orders_read"] == again["x_orders_read"]
    assert first["probabilities"] == again["probabilities"]
    assert "x_slot_probabilities" not in first  # only where a question asks for them


def test_run_identity_reports_the_mode_and_tolerance(adaptive: AppServer) -> None:
    body = httpx.post(adaptive.url + "/v1/systemone", json=DECISIVE, timeout=300).json()
    assert body["x_run"]["order_debias_mode"] == "adaptive"
    assert body["x_run"]["order_debias_tolerance"] == ADAPTIVE_TOLERANCE


def test_a_policy_binds_the_adaptive_tolerance() -> None:
    sealed = {
        "model_sha256": "a" * 64,
        "calibration_sha256": "b" * 64,
        "types": {},
        "provenance": Provenance(
            cases_file="cases.jsonl",
            cases_sha256="c" * 64,
            target_accuracy=0.9,
            min_support=5,
            review_accuracy=0.5,
            created="2026-12-01",
        ),
    }
    policy = seal(**sealed, order_debias_mode="adaptive", order_debias_tolerance=ADAPTIVE_TOLERANCE)  # type: ignore[arg-type]
    policy.check_debias("adaptive", ADAPTIVE_TOLERANCE)
    with pytest.raises(PolicyError, match=r"DECISION_ADAPTIVE_TOLERANCE=0\.34"):
        policy.check_debias("adaptive", 0.1)
    with pytest.raises(PolicyError, match="DECISION_ORDER_DEBIAS=adaptive"):
        policy.check_debias("rotations", None)
    untimed = seal(**sealed)  # type: ignore[arg-type]
    assert untimed.order_debias_tolerance is None and untimed.version != policy.version
