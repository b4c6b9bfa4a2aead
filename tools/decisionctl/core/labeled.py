"""Labeled cases (one state, one typed question, the expected answer), the predictions made on them and a scored
run, as plain data: what the metrics, the fits, the bands and every job read.

A case's options are put in one order for every type (noul: yes, no; choice: the criteria's keys;
score: levels 0..n-1) so that metrics and calibration work on plain probability vectors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from decision_spec import contract

# A scored run's files: each case's prediction (with its case_digest) and the run identity it was scored under.
PREDICTIONS = "predictions.jsonl"
IDENTITY = "identity.json"

QUESTION_ID = "q"


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


@dataclass
class Run:
    """A labeled set scored: its predictions, how many were reused and sent, and the run identity they came from."""

    predictions: list[Prediction]
    skipped: int
    sent: int
    errors: list[dict[str, Any]] = field(default_factory=list)
    identity: dict[str, Any] | None = None
    interrupted: bool = False
    hardware: dict[str, dict[str, Any]] = field(default_factory=dict)  # per case sent: the x_run hardware that answered
