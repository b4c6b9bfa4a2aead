"""The JSON Lines route of /invocations: a mini-batch of decision records on one context, one answer line each.

Batch Transform (`SplitType=Line`, `MultiRecord`), asynchronous inference and `decisionctl batch run --url`
send these bodies (docs/bulk.md). A record is a decision body with an optional `id` (a JSON scalar) that its
answer line echoes; a record that cannot be answered gets an error line with the single route's error type
and message (the error table's, `errors.record_error`), and the others are answered. The service evaluates
the records (`ModelService.decide_batch`); this module parses them and writes their lines. Answer lines never
carry the state or the instructions.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from fastapi.responses import Response
from pydantic import ValidationError

from . import handlers
from .errors import AdapterError, InvalidRequest, invalid_json, record_error, validation_detail
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
    error: AdapterError | None = None
    line: bytes = b""


def parse(body: bytes, served_names: set[str]) -> list[Record]:
    """The records of a body in order (blank lines are none); a record that cannot be evaluated has its error."""
    return [_record(raw, served_names) for raw in body.split(b"\n") if raw.strip()]


def _record(raw: bytes, served_names: set[str]) -> Record:
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        return Record(None, error=invalid_json(e))
    record_id = value.get("id") if isinstance(value, dict) else None
    problems: list[dict[str, Any]] = []
    if not _is_scalar(record_id):
        record_id, problems = None, [ID_NOT_SCALAR]
    try:
        request = DecisionRequest.model_validate(value)
    except ValidationError as e:
        problems += validation_detail(e.errors(), prefix=("body",))
    if problems:
        return Record(record_id, error=InvalidRequest(problems))
    try:
        handlers.check_model(request, served_names)
    except AdapterError as e:
        return Record(record_id, error=e)
    return Record(record_id, request)


def _is_scalar(value: Any) -> bool:
    """JSON's scalars, finite: `NaN` is read from a body but cannot be written back into an answer line."""
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, str | int | bool)


def _dumps(value: dict[str, Any]) -> bytes:
    """One line, written as the single route's JSONResponse writes its body."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


async def invocations(s: ModelService, body: bytes, *, route: str = "/invocations") -> Response:
    """A mini-batch: one admission permit (429 for the whole body when none is left) and one context for all
    its records (the service's `decide_batch`); one line per record, in the records' order."""
    records = parse(body, s.served_names)
    pending = [r for r in records if r.request is not None]
    if pending:
        decided = await s.decide_batch([r.request for r in pending if r.request is not None], route=route)
        for record, d in zip(pending, decided, strict=True):
            if d.outcome is None:
                record.error = d.error
                continue
            assert record.request is not None  # pending holds only records with a request
            response = handlers.respond(
                s, record.request, d.outcome, request_id=d.request_id, route=route, latency_ms=d.latency_ms
            )
            record.line = _dumps({"id": record.id, **response.model_dump(exclude_none=True)})
    lines = [r.line if r.error is None else _dumps({"id": r.id, "error": record_error(r.error)}) for r in records]
    return Response(b"".join(line + b"\n" for line in lines), media_type=JSON_LINES)
