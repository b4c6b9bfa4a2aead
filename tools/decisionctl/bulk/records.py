"""The records of a bulk run: CASES.jsonl read as a stream, ids kept or assigned, cut into parts, answers joined.

A file holds decision bodies (each may carry an `id`, any JSON scalar; a record without one gets its
1-based line number) or labeled cases in the `evaluate` format (`id`, `state`, `question`, `expected`),
never both. Nothing here holds more than one part of the file in memory, and answers are joined to
records by position (checked against the id each answer line echoes), so no table of the file is kept.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decision_spec.contract import RecordId

from decisionctl.core.labeled import Case

_SCALARS = (str, int, float, bool)
# Error types the client gives records it got no usable answer line for (the adapter's own types pass through).
MISSING_ANSWER = "missing_answer"
ANSWER_MISMATCH = "answer_mismatch"
UNREADABLE_ANSWER = "unreadable_answer"


class InputRecordError(ValueError):
    """An input file that cannot be run, with the line that says why."""


@dataclass(frozen=True)
class InputRecord:
    """One line of a bulk input file: what is sent for it, and its labeled case where the file is labeled."""

    line_no: int
    id: RecordId
    body: dict[str, Any]  # what is sent: the decision body, `id` first
    case: Case | None  # the labeled case, for the evaluate output

    def line(self) -> bytes:
        return json.dumps(self.body, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


@dataclass(frozen=True)
class InputSummary:
    records: int
    labeled: bool
    sha256: str


def read_records(path: Path, read_case: Callable[[int, Any], Case]) -> Iterator[InputRecord]:
    """Every record of the file, in order (blank lines and # comments skipped), one line read at a time; a labeled
    line is read into its case by `read_case` (core.cases.parse_case: its CaseError says why a line is none)."""
    labeled: bool | None = None
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputRecordError(f"line {line_no}: not JSON ({exc.msg})") from None
            if not isinstance(data, dict):
                raise InputRecordError(f"line {line_no}: a record is a JSON object")
            is_case = "question" in data and "expected" in data
            if labeled is None:
                labeled = is_case
            elif labeled != is_case:
                raise InputRecordError(
                    f"line {line_no}: the file mixes labeled cases (question, expected) and decision bodies"
                )
            yield _case_record(line_no, read_case(line_no, data)) if is_case else _body_record(line_no, data)


def _case_record(line_no: int, case: Case) -> InputRecord:
    return InputRecord(line_no, case.id, {"id": case.id, **case.request()}, case)


def _body_record(line_no: int, data: dict[str, Any]) -> InputRecord:
    if "questions" not in data:
        raise InputRecordError(
            f"line {line_no}: neither a decision body (with questions) nor a labeled case (with question, expected)"
        )
    record_id = data.get("id", line_no)
    if record_id is not None and not isinstance(record_id, _SCALARS):
        raise InputRecordError(f"line {line_no}: 'id' must be a JSON scalar (string, number, boolean or null)")
    return InputRecord(line_no, record_id, {"id": record_id, **{k: v for k, v in data.items() if k != "id"}}, None)


def scan(path: Path, read_case: Callable[[int, Any], Case]) -> InputSummary:
    """Check every record before anything is sent or uploaded (a labeled line read by `read_case`, as
    read_records); labeled case ids must be unique (evaluate's rule)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    count, labeled, seen = 0, False, set()
    for record in read_records(path, read_case):
        count += 1
        if record.case is not None:
            labeled = True
            if record.case.id in seen:
                raise InputRecordError(f"line {record.line_no}: duplicate case id {record.case.id!r}")
            seen.add(record.case.id)
    if count == 0:
        raise InputRecordError(f"{path}: no records")
    return InputSummary(count, labeled, digest.hexdigest())


def chunks(records: Iterable[InputRecord], *, max_records: int, max_bytes: int) -> Iterator[list[InputRecord]]:
    """The records cut into parts of at most `max_records` records and `max_bytes` serialized bytes."""
    part: list[InputRecord] = []
    size = 0
    for record in records:
        length = len(record.line())
        if length > max_bytes:
            raise InputRecordError(
                f"line {record.line_no}: {length} bytes serialized, more than a part holds ({max_bytes})"
            )
        if part and (len(part) == max_records or size + length > max_bytes):
            yield part
            part, size = [], 0
        part.append(record)
        size += length
    if part:
        yield part


def serialized(part: Iterable[InputRecord]) -> bytes:
    return b"".join(record.line() for record in part)


@dataclass(frozen=True)
class PartAnswers:
    """The answer lines of one part (None: there are none) and why they are missing."""

    count: int
    lines: Iterable[bytes] | None
    missing_reason: str = ""


def error_line(record_id: RecordId, error_type: str, message: str) -> dict[str, Any]:
    return {"id": record_id, "error": {"error_type": error_type, "message": message, "status": 0}}


def join(records: Iterable[InputRecord], parts: Iterable[PartAnswers]) -> Iterator[tuple[InputRecord, dict[str, Any]]]:
    """Each record with its answer line, by position; an id that differs or a missing line is that record's error."""
    stream = iter(records)
    for part in parts:
        answers = iter(line for line in (part.lines or ()) if line.strip())
        for position in range(part.count):
            record = next(stream)
            raw = next(answers, None)
            if raw is None:
                reason = part.missing_reason or f"the answers end after {position} of the part's {part.count} records"
                yield record, error_line(record.id, MISSING_ANSWER, reason)
                continue
            yield record, _checked(record, raw)
    if next(stream, None) is not None:
        raise InputRecordError("the input file has more records than the run's parts: was it changed during the run?")


def _checked(record: InputRecord, raw: bytes) -> dict[str, Any]:
    try:
        answer = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return error_line(record.id, UNREADABLE_ANSWER, "the answer line is not JSON")
    if not isinstance(answer, dict):
        return error_line(record.id, UNREADABLE_ANSWER, "the answer line is not a JSON object")
    if answer.get("id") != record.id:
        return error_line(record.id, ANSWER_MISMATCH, f"the answer in its place carries id {answer.get('id')!r}")
    answer.pop("state", None)  # the contract says it is never there; outputs never carry state text
    return answer
