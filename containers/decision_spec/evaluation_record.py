"""The evaluation record's format and cdk.json's `evaluation` section: plain pydantic that synth and the CLI read."""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from decision_spec.config_base import FrozenConfig

RECORD_SCHEMA = "decision-endpoints/evaluation/v1"
RECORD_OUTPUT = "EvaluationRecordSha256"  # the Serving stack's output: the sha256 of the record it serves
RECORD_NAME = "evaluation.json"  # beside manifest.json, in the artifact directory and in S3
SHA256 = re.compile(r"^[0-9a-f]{64}$")
RECORD_LIMIT_BYTES = 16 << 20  # a record holds one answer per case; far more than any suite needs


class EvaluationTolerance(FrozenConfig):
    """How far a deployed variant's answers may be from the record's and still count as the same model."""

    probability: float = Field(
        gt=0, le=1, description="Largest difference in any option's probability, in any case, against the record."
    )
    flips: int = Field(ge=0, description="Cases whose picked option may differ from the record's.")


class DecisionGates(FrozenConfig):
    """How much worse a candidate may be than the record before a review fails it; null: not gated."""

    max_accuracy_drop_points: float | None = Field(ge=0, description="Accuracy drop allowed, percentage points.")
    max_flips: int | None = Field(ge=0, description="Cases whose picked option may change.")
    max_ece_rise: float | None = Field(ge=0, description="Rise in expected calibration error allowed.")
    band_bound: bool = Field(
        description="Fail when a band's error bound measured on the suite rises and is past the band's E."
    )


# decision-diff without --env: no limit but the band bound
UNGATED = DecisionGates(max_accuracy_drop_points=None, max_flips=None, max_ece_rise=None, band_bound=True)


class EvaluationConfig(FrozenConfig):
    """The suite of labeled cases and the record of the deployed artifact's evaluation on it."""

    suite: str = Field(
        description="Path of the suite (.jsonl), one labeled case a line: relative to the repository root, or, "
        "with suite_sha256, anywhere (absolute, or relative to the root with `..`)."
    )
    suite_sha256: str | None = Field(
        default=None,
        pattern=SHA256.pattern,
        description="The suite's sha256, for a suite kept out of git: the record binds to it; synth checks the file "
        "where it is there and binds without it.",
    )
    record: str = Field(description="Repository-relative path of the record (.json) decisionctl writes.")
    enforce: Literal["warn", "refuse"] = Field(
        description="What synth does when the record is not the deployed artifact's: warn, or refuse to synthesize."
    )
    tolerance: EvaluationTolerance
    gates: DecisionGates

    @field_validator("suite")
    @classmethod
    def _suite_path(cls, value: str) -> str:
        if "\\" in value or not value.endswith(".jsonl"):
            raise ValueError(
                "must be a path with forward slashes, ending .jsonl: relative to the repository root (where cdk.json "
                "is), without `..`, or, with suite_sha256 set, anywhere"
            )
        return value

    @field_validator("record")
    @classmethod
    def _record_path(cls, value: str) -> str:
        if not _in_repository(value) or not value.endswith(".json"):
            raise ValueError(
                "must be a path relative to the repository root (where cdk.json is), without `..`, ending .json"
            )
        return value

    @model_validator(mode="after")
    def _suite_in_repository(self) -> EvaluationConfig:
        # a suite synth may find missing is one whose sha256 cdk.json states
        if self.suite_sha256 is None and not _in_repository(self.suite):
            raise ValueError(
                f"suite {self.suite} is not a path relative to the repository root (where cdk.json is) without "
                "`..`: write it so, or, to keep the suite outside the repository, set suite_sha256 to the suite's "
                "sha256 (`sha256sum <suite>`)"
            )
        return self


def _in_repository(value: str) -> bool:
    path = PurePosixPath(value)
    return not path.is_absolute() and "\\" not in value and ".." not in path.parts


def parse_record(data: bytes) -> tuple[dict[str, Any] | None, str]:
    """The record if its schema and the fields that bind it (artifact, suite) are sound, else (None, what is
    wrong): synth, decisionctl's readers and package-model's upload read a record through this one check."""
    if len(data) > RECORD_LIMIT_BYTES:
        return None, "over 16 MiB"
    try:
        record = json.loads(data)
    except ValueError:
        return None, "not JSON"
    wrong = _malformed(record)
    return (None, wrong) if wrong else (record, "")


def _malformed(record: object) -> str:
    if not isinstance(record, dict):
        return "not a JSON object"
    if record.get("schema") != RECORD_SCHEMA:
        return f"schema is {record.get('schema')!r}, not {RECORD_SCHEMA!r}"
    artifact, suite = record.get("artifact"), record.get("suite")
    if not isinstance(artifact, dict) or not all(
        isinstance(artifact.get(name), str) and SHA256.match(artifact[name])
        for name in ("model_sha256", "manifest_sha256")
    ):
        return "artifact needs model_sha256 and manifest_sha256, each 64 lowercase hex digits"
    if (
        not isinstance(suite, dict)
        or not isinstance(suite.get("path"), str)
        or not (isinstance(suite.get("sha256"), str) and SHA256.match(suite["sha256"]))
        or not (isinstance(suite.get("cases"), int) and not isinstance(suite.get("cases"), bool))
    ):
        return "suite needs path, a 64-hex sha256 and the number of cases"
    return ""
