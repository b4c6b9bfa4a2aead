"""The typed decision response against jevcompat's own shapes: the validator it judges servers with, and
the replies of its spec-exact mock, which the same models must read. No model is loaded."""

from __future__ import annotations

import json

import pytest
from decision_adapter.answers import answered, decision_response
from decision_adapter.outcomes import DecisionOutcome, Scored
from decision_spec.schemas import (
    CalibrationInForce,
    ChoiceAnswer,
    DecisionRequest,
    DecisionResponse,
    Hardware,
    RequestRun,
    RunIdentity,
)
from fastapi.responses import JSONResponse
from jevcompat import mock, validate
from jevcompat.client import Response, parse_json

REQUEST = {
    "state": "a customer writes about a refund",
    "questions": {
        "urgent": {"type": "noul", "instructions": "Is it urgent?"},
        "team": {"type": "choice", "criteria": {"billing": "payments", "sälj": None, "other": {"note": "rest"}}},
        "anger": {"type": "score", "criteria": ["Calm", {"level": "Frustrated"}, "Very angry"]},
    },
}
PROBS = {"urgent": [0.125, 0.875], "team": [0.2, 0.5, 0.3], "anger": [1e-7, 0.6, 0.3999999]}
KEYS = {"urgent": ["true", "false"], "team": ["billing", "sälj", "other"], "anger": ["0", "1", "2"]}
IDENTITY = RunIdentity(
    model_file="m.gguf",
    model_sha256="a" * 64,
    model_name="m",
    llama_cpp_python="0.3.36",
    llama_cpp_build="b1",
    adapter="0.1.0",
    image_digest="unset",
    instance_types="unset",
    hardware=Hardware(cpu="cpu", logical_cpus=2, threads=2, machine="x86_64", gpus=[]),
    n_gpu_layers=0,
    prompt_template="generic-v2/gguf-chat-template",
    order_debias=True,
    calibration=CalibrationInForce(source="identity", temperature={"noul": 1.0, "choice": 1.0, "score": 1.0}),
)


def _body() -> bytes:
    request = DecisionRequest.model_validate(REQUEST)
    scored = {qid: Scored(KEYS[qid], PROBS[qid], f"sha-{qid}", 5, 2) for qid in request.questions}
    outcome = DecisionOutcome(scored, 40, 12, "computed", {"tokenize": 0.1, "state": 2.5, "questions": 4.0})
    run = RequestRun(**IDENTITY.model_dump(), request_id="r1", state_source=outcome.state_source)
    response = decision_response(
        answered(model="m", questions=request.questions, outcome=outcome, run=run, latency_ms=7.891)
    )
    return bytes(JSONResponse(response.model_dump(exclude_none=True)).body)  # what the handler sends


def _as_jevcompat_response(body: bytes) -> Response:
    data, error, nonfinite = parse_json(body)
    return Response(200, {"content-type": "application/json"}, body, 1.0, data, error, nonfinite)


def test_response_passes_jevcompats_validator() -> None:
    violations = validate.validate_success(REQUEST, _as_jevcompat_response(_body()))
    assert violations == []


def test_validator_can_fail_on_a_broken_response() -> None:
    broken = json.loads(_body())
    broken["answers"]["team"]["probabilities"]["billing"] = 0.9  # no longer sums to 1
    broken["answers"]["urgent"]["extra"] = 1  # an unprefixed field
    violations = validate.validate_success(REQUEST, _as_jevcompat_response(json.dumps(broken).encode()))
    assert {v.req for v in violations} >= {"response.extensions"} and len(violations) >= 2


def test_wire_order_and_extensions() -> None:
    data = json.loads(_body())
    assert list(data) == ["model", "answers", "usage", "x_run", "x_timing_ms", "x_evaluated_tokens"]
    assert list(data["answers"]) == ["urgent", "team", "anger"]  # the request's order
    assert list(data["answers"]["team"]) == [
        "type",
        "choice",
        "probabilities",
        "confidence",
        "x_margin",
        "x_options_sha256",
        "x_orders",
    ]
    assert data["answers"]["team"]["choice"] == "sälj" and data["answers"]["team"]["x_margin"] == 0.2
    assert data["answers"]["anger"]["legend"]["1"] == '{"level": "Frustrated"}'
    assert data["usage"] == {"input_tokens": 40, "output_tokens": 0}
    assert list(data["x_run"])[-2:] == ["request_id", "state_source"]
    assert data["x_timing_ms"] == {"tokenize": 0.1, "state": 2.5, "questions": 4.0, "total": 7.89}
    assert "sälj".encode() in _body()  # non-ASCII kept as is, as FastAPI's JSONResponse writes it


def test_models_read_their_own_replies_back() -> None:
    body = _body()
    parsed = DecisionResponse.model_validate_json(body)
    assert isinstance(parsed.answers["team"], ChoiceAnswer)
    assert parsed.x_run is not None and parsed.x_run.calibration.source == "identity"
    assert JSONResponse(parsed.model_dump(exclude_none=True)).body == body


@pytest.mark.parametrize("faults", [frozenset(), frozenset({"first-question-only"})])
def test_models_read_the_reference_servers_replies(faults: frozenset[str]) -> None:
    """A client reads any conformant server with these models: jevcompat's mock sends no x_ fields."""
    reply = mock.respond(mock.MockConfig(faults=faults), REQUEST)
    parsed = DecisionResponse.model_validate(reply)
    assert parsed.x_run is None and parsed.answers[next(iter(reply["answers"]))].x_margin is None
    assert parsed.model_dump(exclude_none=True) == reply
