"""Labeled cases (one state, one typed question, the expected answer) and the predictions made on them.

A case's options are put in one order for every type (noul: yes, no; choice: the criteria's keys;
score: levels 0..n-1) so that metrics and calibration work on plain probability vectors.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from decision_spec import contract
from decision_spec.gguf_metadata import Temperatures
from decision_spec.question_types import kind_of, types_phrase
from decision_spec.schemas import DecisionResponse, RunIdentity
from pydantic import ValidationError

from decisionctl.readback import readback_of

# A scored run's files: each case's prediction (with its case_digest) and the run identity it was scored under.
PREDICTIONS = "predictions.jsonl"
IDENTITY = "identity.json"

QUESTION_ID = "q"


class CaseError(ValueError):
    """A labeled file that cannot be evaluated, with the line that says why."""


@dataclass(frozen=True)
class Case:
    id: str
    type: str
    state: Any
    question: dict[str, Any]
    options: tuple[str, ...]
    expected_index: int

    def request(self, model: str = contract.DEFAULT_MODEL_ALIAS) -> dict[str, Any]:
        return {"model": model, "state": self.state, "questions": {QUESTION_ID: self.question}}


@dataclass(frozen=True)
class Prediction:
    """What the endpoint said about one case; no state text, so it can be kept and shared."""

    id: str
    type: str
    options: list[str]
    probs: list[float]
    expected_index: int
    predicted_index: int
    confidence: float  # probability of the predicted option (noul: max(p, 1 - p))
    contract_confidence: float | None  # the answer's own `confidence` field (choice, score)
    temperature: float  # temperature in force at the endpoint for this type (x_run; 1.0 if absent)
    model_sha256: str
    latency_s: float

    @property
    def correct(self) -> bool:
        return self.predicted_index == self.expected_index

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["correct"] = self.correct
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Prediction:
        fields = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in fields})


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


def predicted_index(qtype: str, probs: Sequence[float]) -> int:
    """The option an answer picks: noul yes when p(yes) >= 0.5, otherwise the most probable option."""
    picked: int = kind_of(qtype).pick(probs)
    return picked


def reanswered(pred: Prediction, probs: list[float], *, temperature: float) -> Prediction:
    """The prediction as the endpoint would make it with these probabilities, served under `temperature` (its pick
    and confidence follow; the contract's own confidence is not recomputed)."""
    picked = predicted_index(pred.type, probs)
    return replace(
        pred,
        probs=probs,
        predicted_index=picked,
        confidence=probs[picked],
        temperature=temperature,
        contract_confidence=None,
    )


def describe_invalid(exc: ValidationError) -> str:
    """Where a reply departs from the response models and how; never the offending value (it may quote input)."""
    error = exc.errors()[0]
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return ".".join(str(part) for part in error["loc"]) + f": {error['msg']}{more}"


def read_response(body: Any) -> DecisionResponse:
    """A decision reply as the adapter's response models read it; a ValueError says where it departs from them."""
    try:
        return DecisionResponse.model_validate(body)
    except ValidationError as exc:
        raise ValueError(describe_invalid(exc)) from exc


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
