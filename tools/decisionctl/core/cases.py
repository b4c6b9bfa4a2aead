"""Labeled cases read from their JSONL files and checked, an answer read back into a case's option order
(a Prediction), and a case's and a run's fingerprints. The cases and predictions themselves are labeled.py's."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from decision_spec import contract
from decision_spec.gguf_metadata import Temperatures
from decision_spec.question_types import kind_of, types_phrase
from decision_spec.schemas import DecisionResponse, RunIdentity

from decisionctl.core.labeled import QUESTION_ID, Case, Prediction
from decisionctl.readback import readback_of


class CaseError(ValueError):
    """A labeled file that cannot be evaluated, with the line that says why."""


def parse_case(line_no: int, data: Any) -> Case:
    if not isinstance(data, dict):
        raise CaseError(f"line {line_no}: a case is a JSON object")
    case_id, question = data.get("id"), data.get("question")
    if not isinstance(case_id, str) or not case_id:
        raise CaseError(f"line {line_no}: 'id' must be a non-empty string")
    if "state" not in data:
        raise CaseError(f"line {line_no}: case {case_id!r} has no 'state'")
    if not isinstance(question, dict) or question.get("type") not in contract.QUESTION_TYPES:
        raise CaseError(f"line {line_no}: case {case_id!r} needs a question with type {types_phrase()}")
    if "expected" not in data:
        raise CaseError(f"line {line_no}: case {case_id!r} has no 'expected' answer")
    qtype = str(question["type"])
    readback = readback_of(qtype)
    try:
        options = readback.case_options(question.get("criteria"))
        expected_index = readback.expected_index(data["expected"], options)
    except ValueError as exc:
        raise CaseError(f"line {line_no}: {exc}") from exc
    return Case(case_id, qtype, data["state"], dict(question), options, expected_index)


def load_cases(path: Path) -> list[Case]:
    """Every case of a labeled JSONL file, checked before anything is sent (blank lines and # comments skipped)."""
    return parse_cases(path.read_bytes(), path)


def parse_cases(data: bytes, path: Path) -> list[Case]:
    """The cases of a labeled JSONL file's bytes (load_cases), for a reader that also hashes the bytes it scored."""
    cases: list[Case] = []
    seen: set[str] = set()
    for line_no, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CaseError(f"line {line_no}: not JSON ({exc.msg})") from exc
        case = parse_case(line_no, data)
        if case.id in seen:
            raise CaseError(f"line {line_no}: duplicate case id {case.id!r}")
        seen.add(case.id)
        cases.append(case)
    if not cases:
        raise CaseError(f"{path}: no cases")
    return cases


def parse_suite(data: bytes, path: Path) -> list[Case]:
    """The cases of a suite's bytes (parse_cases), a ValueError naming the file: a case that is not one, a file that
    is not UTF-8."""
    try:
        return parse_cases(data, path)
    except ValueError as exc:  # CaseError, and a file that is not UTF-8
        raise ValueError(f"{path}: {exc}") from None


def prediction_from_response(case: Case, response: DecisionResponse, latency_s: float) -> Prediction:
    """Read the one answer a case's request gets back into the case's option order."""
    answer = response.answers.get(QUESTION_ID)
    if answer is None or answer.type != case.type:
        raise ValueError(f"case {case.id}: the response has no {case.type} answer for question {QUESTION_ID!r}")
    run = response.x_run
    # the temperature in force for this question: per type, or per option-count bucket when a GGUF sets those
    temperature = Temperatures(run.calibration.temperature if run else {}).of(case.type, len(case.options))
    kind = kind_of(case.type)
    probs: list[float] = kind.distribution(answer, case.options)
    predicted: int = kind.picked(answer, case.options)
    return Prediction(
        case.id,
        case.type,
        list(case.options),
        probs,
        case.expected_index,
        predicted,
        probs[predicted],
        readback_of(case.type).contract_confidence(answer),
        temperature,
        run.model_sha256 if run else "",
        latency_s,
    )


def run_fingerprint(run: RunIdentity | None) -> dict[str, Any]:
    """The part of a run identity that must not change within one evaluation (None: the server sends none)."""
    if run is None:
        return {"model_sha256": None, "calibration": None}
    return {"model_sha256": run.model_sha256, "calibration": run.calibration.model_dump(mode="json")}


def case_digest(case: Case) -> str:
    """A case's content as one sha256 (state, question, options, label): a saved prediction is reused only for it."""
    canonical = json.dumps(
        [case.state, case.question, case.options, case.expected_index],
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
