"""The error table and the event names, without a model: every domain error has a row, each row gives the
contract's body, start-up failures name their event, and the stacks' metric filters select the names the
adapter writes."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest
from decision_adapter import error_bodies
from decision_adapter.app import startup_failure
from decision_adapter.core import errors
from decision_adapter.prompting.systemone import TemplateNotSeparable
from decision_spec import events
from decision_spec.gguf_metadata import UnsupportedDecisionScheme
from decision_spec.manifest import ChecksumMismatch, ModelNotFound

from stacks.observability import OVERLOAD_PATTERN, action_pattern

DOMAIN_ERRORS = [
    cls
    for _, cls in inspect.getmembers(errors, inspect.isclass)
    if issubclass(cls, errors.AdapterError) and cls is not errors.AdapterError
]


def test_every_domain_error_has_a_row() -> None:
    assert len(DOMAIN_ERRORS) >= 8
    assert set(DOMAIN_ERRORS) == set(errors.ERROR_TABLE)


@pytest.mark.parametrize("cls", [c for c in DOMAIN_ERRORS if c is not errors.InvalidRequest], ids=lambda c: c.__name__)
def test_body_is_the_contracts_shape(cls: type[errors.AdapterError]) -> None:
    response = error_bodies.error_response(cls("what went wrong"))
    body = json.loads(bytes(response.body))
    kind = errors.ERROR_TABLE[cls]
    assert response.status_code == kind.status and response.media_type == "application/json"
    assert body == {"detail": {"error_type": kind.error_type, "message": kind.message.format("what went wrong")}}


def test_invalid_request_is_the_contracts_422_and_its_json_lines_line() -> None:
    problems = errors.validation_detail(
        [{"loc": ("questions",), "msg": "Field required", "type": "missing"}], prefix=("body",)
    )
    response = error_bodies.error_response(errors.InvalidRequest(problems))
    assert response.status_code == 422 and response.media_type == "application/json"
    assert json.loads(bytes(response.body)) == {
        "detail": [{"loc": ["body", "questions"], "msg": "Field required", "type": "missing"}]
    }
    line = errors.record_error(errors.InvalidRequest(problems))
    assert line == {
        "error_type": "invalid_request",
        "message": "body.questions: Field required",
        "status": 422,
        "detail": problems,
    }
    assert errors.record_error(errors.ModelNotServed("no such model")) == {
        "error_type": "model_not_found",
        "message": "no such model",
        "status": 404,
    }


@pytest.mark.parametrize(
    ("raw", "where", "msg"),
    [(b'{"state": ', 10, "JSON decode error: Expecting value at column 11"),
     (b'{"state": "\xff"}', 11, "JSON decode error: not UTF-8")],
)  # fmt: skip
def test_malformed_json_is_one_422_json_invalid_at_the_character_where_reading_stopped(
    raw: bytes, where: int, msg: str
) -> None:
    try:
        json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        err = errors.invalid_json(e)
    assert err.detail == [{"loc": ["body", where], "msg": msg, "type": "json_invalid"}]
    assert errors.status_of(err) == 422 and errors.record_error(err)["error_type"] == "invalid_request"


def test_statuses_clients_retry_are_never_for_bad_input() -> None:
    retried = {cls for cls, kind in errors.ERROR_TABLE.items() if kind.status in (429, 500, 503)}
    assert retried == {errors.Overloaded, errors.NotReady, errors.RuntimeFailure}


def test_retry_after_from_the_error_or_the_table() -> None:
    assert error_bodies.error_response(errors.Overloaded("full", retry_after=3)).headers["Retry-After"] == "3"
    failure = error_bodies.error_response(TemplateNotSeparable("cannot split"))  # a RuntimeFailure subclass
    assert failure.status_code == 500 and failure.headers["Retry-After"] == "1"
    assert json.loads(bytes(failure.body))["detail"]["message"] == "the model runtime failed: cannot split"
    assert error_bodies.error_response(errors.AuthenticationError("no key")).headers["WWW-Authenticate"] == "Bearer"
    assert errors.status_of(KeyError("not a domain error")) == 500


def test_startup_failures_name_their_event() -> None:
    mismatch = startup_failure(ChecksumMismatch(Path("/m/x.gguf"), "a" * 64, "b" * 64))
    assert mismatch is not None and mismatch["event"] == events.MODEL_CHECKSUM_MISMATCH
    assert (mismatch["file"], mismatch["expected_sha256"], mismatch["actual_sha256"]) == (
        "/m/x.gguf",
        "a" * 64,
        "b" * 64,
    )
    for err in (ModelNotFound("no gguf"), UnsupportedDecisionScheme("llama.decision.type", "kev")):
        line = startup_failure(err)
        assert line is not None and line["event"] == events.MODEL_NOT_LOADED and line["message"] == str(err)
    assert startup_failure(KeyError("unknown")) is None


def test_the_stacks_metric_filters_select_the_adapters_event_names() -> None:
    """stacks/ is synthesized without the adapter installed, so it writes the names again; this keeps them equal."""
    overload = re.fullmatch(r'\{ \$\.event = "(\w+)" \}', OVERLOAD_PATTERN)
    assert overload is not None and overload.group(1) == events.OVERLOAD_REJECTED
    decision = re.match(r'\{ \$\.event = "(\w+)" ', action_pattern("automated"))
    assert decision is not None and decision.group(1) == events.DECISION
