"""The JSON Lines route of /invocations: a mini-batch of decision records on one context, one answer line each.

Batch Transform (`SplitType=Line`, `MultiRecord`), asynchronous inference and `decisionctl batch run --url`
send these bodies (docs/bulk.md). A record is a decision body with an optional `id` (a JSON scalar) that its
answer line echoes; a record that cannot be answered gets an error line with the single route's error type
and message (the error table's, `errors.record_error`), and the others are answered. The service evaluates
the records (`ModelService.decide_batch`), the handler (`handlers.answer_json_lines`) checks their model and answers
them; this module parses them and writes their lines. Answer lines never carry the state or the instructions.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from decision_spec.contract import RecordId
from decision_spec.names import JSON_LINES, MAX_PAYLOAD_MB
from decision_spec.schemas import DecisionRequest
from pydantic import ValidationError

from .asked import Asked, asked_of
from .core.errors import (
    AdapterError,
    InvalidRequest,
    RequestLimitExceeded,
    invalid_json,
    record_error,
    validation_detail,
)
from .core.settings import AdapterSettings

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
class JsonLinesRecord:
    """One non-blank line: its id, and the decision it asks for (walked, asked.py) or the error it gets; `line` once
    answered."""

    id: RecordId
    request: Asked | None = None
    error: AdapterError | None = None
    line: bytes = b""


def parse(body: bytes, max_records: int | None = None) -> list[JsonLinesRecord]:
    """The records of a body in order (blank lines are none); a record that cannot be read has its error. More than
    `max_records` (DECISION_MAX_BODY_RECORDS) is refused whole, counted before any record is read."""
    lines = [raw for raw in body.split(b"\n") if raw.strip()]
    if max_records is not None and len(lines) > max_records:
        raise RequestLimitExceeded(
            f"the body has {len(lines)} records; this endpoint reads at most {max_records} in one body "
            "(DECISION_MAX_BODY_RECORDS): split the body"
        )
    return [_record(raw) for raw in lines]


def _record(raw: bytes) -> JsonLinesRecord:
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        return JsonLinesRecord(None, error=invalid_json(e))
    except RecursionError:  # nested deeper than Python's JSON reader goes (about 1,000 levels)
        return JsonLinesRecord(None, error=invalid_json(json.JSONDecodeError("nested too deep", "", 0)))
    record_id = value.get("id") if isinstance(value, dict) else None
    problems: list[dict[str, Any]] = []
    if not _is_scalar(record_id):
        record_id, problems = None, [ID_NOT_SCALAR]
    try:
        request = DecisionRequest.model_validate(value)
    except ValidationError as e:
        problems += validation_detail(e.errors(), prefix=("body",))
    if problems:
        return JsonLinesRecord(record_id, error=InvalidRequest(problems))
    return JsonLinesRecord(record_id, asked_of(request))


def _is_scalar(value: Any) -> bool:
    """JSON's scalars, finite: `NaN` is read from a body but cannot be written back into an answer line."""
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, str | int | bool)


def _dumps(value: dict[str, Any]) -> bytes:
    """One line, written as the single route's JSONResponse writes its body."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


def answer_line(record_id: RecordId, answer: dict[str, Any]) -> bytes:
    """An answered record's line: its id, then the answer as the single route sends it."""
    return _dumps({"id": record_id, **answer})


def body_of(records: list[JsonLinesRecord]) -> bytes:
    """The response body: one line per record, in the records' order (an error line where it got an error)."""
    lines = [r.line if r.error is None else _dumps({"id": r.id, "error": record_error(r.error)}) for r in records]
    return b"".join(line + b"\n" for line in lines)
