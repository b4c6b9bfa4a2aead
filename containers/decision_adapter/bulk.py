"""The JSON Lines route of /invocations: a mini-batch of decision records on one context, one answer line each.

Batch Transform (`SplitType=Line`, `MultiRecord`), asynchronous inference and `decisionctl batch run --url`
send these bodies (docs/bulk.md). A record is a decision body with an optional `id` (a JSON scalar) that its
answer line echoes; a record that cannot be answered gets an error line with the single route's error type
and message, and the others are answered. Answer lines never carry the state or the instructions.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi.responses import Response
from pydantic import ValidationError

from . import events, handlers
from .engine import AnswerMemo, DecisionEngine
from .errors import AdapterError, TokenBudgetExceeded, error_detail, status_of, validation_detail
from .events import log_rejection
from .schemas import DecisionRequest
from .service import ModelService
from .settings import AdapterSettings

JSON_LINES = "application/jsonlines"
MAX_PAYLOAD_MB = 100  # the most Batch Transform's MaxPayloadInMB allows
RecordId = str | int | float | bool | None
ID_NOT_SCALAR = {
    "loc": ["body", "id"],
    "msg": "must be a JSON scalar: string, number, boolean or null",
    "type": "id_type",
}


def is_json_lines(content_type: str | None) -> bool:
    return (content_type or "").partition(";")[0].strip().lower() == JSON_LINES


def execution_parameters(settings: AdapterSettings) -> dict[str, Any]:
    """What a Transform job that sets none of these uses; a body limit under 1 MiB still reports 1, the least."""
    return {
        "MaxConcurrentTransforms": settings.max_concurrency,
        "BatchStrategy": "MultiRecord",
        "MaxPayloadInMB": max(1, min(MAX_PAYLOAD_MB, settings.max_body_bytes // (1 << 20))),
    }


@dataclass
class Record:
    """One non-blank line: its id, and the decision it asks for or the error it gets; `line` once answered."""

    id: RecordId
    request: DecisionRequest | None = None
    error: dict[str, Any] | None = None
    line: bytes = b""


def parse(body: bytes, served_names: set[str]) -> list[Record]:
    """The records of a body in order (blank lines are none); a record that cannot be evaluated has its error."""
    return [_record(raw, served_names) for raw in body.split(b"\n") if raw.strip()]


def _record(raw: bytes, served_names: set[str]) -> Record:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        return Record(None, error=_error("invalid_json", f"not JSON: {e.msg} at column {e.colno}", 400))
    except UnicodeDecodeError:
        return Record(None, error=_error("invalid_json", "not JSON: the line is not UTF-8", 400))
    record_id = value.get("id") if isinstance(value, dict) else None
    problems: list[dict[str, Any]] = []
    if not _is_scalar(record_id):
        record_id, problems = None, [ID_NOT_SCALAR]
    try:
        request = DecisionRequest.model_validate(value)
    except ValidationError as e:
        problems += validation_detail(e.errors(), prefix=("body",))
    if problems:
        return Record(record_id, error=_invalid(problems))
    try:
        handlers.check_model(request, served_names)
    except AdapterError as e:
        return Record(record_id, error=_domain_error(e))
    return Record(record_id, request)


def _is_scalar(value: Any) -> bool:
    """JSON's scalars, finite: `NaN` is read from a body but cannot be written back into an answer line."""
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, str | int | bool)


def _error(error_type: str, message: str, status: int) -> dict[str, Any]:
    return {"error_type": error_type, "message": message, "status": status}


def _domain_error(err: AdapterError) -> dict[str, Any]:
    """The single route's `detail` for this error (errors.ERROR_TABLE), with the status it would have got."""
    return {**error_detail(err), "status": status_of(err)}


def _invalid(detail: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The single route's 422 as an error line: its `detail` list, and `loc: msg; loc: msg` as the message."""
    message = "; ".join(f"{'.'.join(str(p) for p in d['loc'])}: {d['msg']}" for d in detail)
    return {**_error("invalid_request", message, 422), "detail": list(detail)}


def evaluation_order(records: Sequence[Record]) -> list[int]:
    """The records to evaluate, those that share a state next to each other (states in order of first
    appearance), so a state is prefilled once and stays resident for the records after it."""
    first_seen: dict[str, int] = {}
    keyed = []
    for i, record in enumerate(records):
        if record.request is not None:
            key = json.dumps(record.request.state, ensure_ascii=False)
            keyed.append((first_seen.setdefault(key, len(first_seen)), i))
    return [i for _, i in sorted(keyed)]


def answer(s: ModelService, engine: DecisionEngine, records: Sequence[Record], *, route: str) -> int:
    """Evaluate the records on one context (in a worker thread): each gets its answer line or its error.
    Returns how many were answered."""
    answered = 0
    memo: AnswerMemo = {}  # a question asked again of the same state, in this mini-batch, is not evaluated again
    for i in evaluation_order(records):
        record = records[i]
        request = record.request
        assert request is not None  # evaluation_order gives only records with a request
        request_id = uuid.uuid4().hex
        t0 = time.perf_counter()
        try:
            outcome = engine.decide(request, memo)
        except TokenBudgetExceeded as e:
            log_rejection(request_id, route, status_of(e), events.TOKEN_BUDGET_EXCEEDED)
            record.error = _domain_error(e)
            continue
        latency_ms = (time.perf_counter() - t0) * 1e3
        response = handlers.respond(s, request, outcome, request_id=request_id, route=route, latency_ms=latency_ms)
        record.line = _dumps({"id": record.id, **response.model_dump(exclude_none=True)})
        answered += 1
    return answered


def _dumps(value: dict[str, Any]) -> bytes:
    """One line, written as the single route's JSONResponse writes its body."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


async def invocations(s: ModelService, body: bytes, *, route: str = "/invocations") -> Response:
    """A mini-batch: one admission permit (429 for the whole body when none is left) and one context for all
    its records; one line per record, in the records' order."""
    records = parse(body, s.served_names)
    if any(r.request is not None for r in records):
        answered = await s.run(
            lambda engine: answer(s, engine, records, route=route), request_id=uuid.uuid4().hex, route=route
        )
        s.counters.decisions += answered
    lines = [r.line if r.error is None else _dumps({"id": r.id, "error": r.error}) for r in records]
    return Response(b"".join(line + b"\n" for line in lines), media_type=JSON_LINES)
