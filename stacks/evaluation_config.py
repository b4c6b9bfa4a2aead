"""An environment's evaluation (cdk.json `evaluation`) and its binding to the artifact: plain pydantic, no CDK.

`decisionctl record-evaluation` writes the record, a JSON file in the repository, from a run of the suite
against an adapter serving the artifact; synth reads it back here and checks that it is the evaluation of
the model cdk.json deploys, on the suite as it is now: the file in the repository, or, where cdk.json states the
suite's sha256 (`suite_sha256`, a suite kept out of git), the suite with that sha256. decisionctl imports this
module too, so it imports neither aws_cdk nor anything that does.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from stacks.adapter_settings import ArtifactAnswerSettings, read_recorded
from stacks.config_base import FrozenConfig

RECORD_SCHEMA = "decision-endpoints/evaluation/v1"
RECORD_OUTPUT = "EvaluationRecordSha256"  # the Serving stack's output: the sha256 of the record it serves
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
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


class EvaluationConfig(FrozenConfig):
    """The suite of labeled cases and the record of the deployed artifact's evaluation on it."""

    suite: str = Field(
        description="Path of the suite (.jsonl), one labeled case a line: relative to the repository root, or, "
        "with suite_sha256, anywhere (absolute, or relative to the root with `..`)."
    )
    suite_sha256: str | None = Field(
        default=None,
        pattern=_SHA256.pattern,
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


@dataclass(frozen=True)
class Binding:
    """The record read for an environment: its sha256, the evaluated manifest's and the answer settings its run
    served, or why it does not bind."""

    record_sha256: str | None
    manifest_sha256: str | None
    problems: tuple[str, ...]
    answer_settings: ArtifactAnswerSettings | None = None


def fix_command(env_name: str) -> str:
    return (
        f"`decisionctl record-evaluation --env {env_name} --url <adapter serving the artifact> "
        "--artifact <artifact dir>`"
    )


def read_binding(root: Path, env_name: str, evaluation: EvaluationConfig, model_sha256: str) -> Binding:
    """Read the record and the suite under `root`; every problem is one sentence naming the key or path and its fix."""
    key = f"environments.{env_name}.evaluation"
    fix = fix_command(env_name)
    problems: list[str] = []
    suite_sha256 = _suite_file_sha256(root, key, evaluation, fix, problems)
    record_path = root / evaluation.record
    try:
        data = record_path.read_bytes()
    except OSError as e:
        problems.append(
            f"{key}.record: {evaluation.record} cannot be read ({e.strerror or e}): record the evaluation of the "
            f"artifact this environment deploys with {fix}, and commit the record."
        )
        return Binding(None, None, tuple(problems))
    record, malformed = parse_record(data)
    if record is None:
        problems.append(
            f"{key}.record: {evaluation.record} is not an evaluation record ({malformed}): record it again with {fix}."
        )
        return Binding(None, None, tuple(problems))
    artifact, suite = record["artifact"], record["suite"]
    if artifact["model_sha256"] != model_sha256:
        problems.append(
            f"{key}.record: {evaluation.record} evaluates the GGUF with sha256 {artifact['model_sha256']}, but "
            f"environments.{env_name}.model.sha256 is {model_sha256}: record the evaluation of the model deployed "
            f"with {fix}, and commit the record."
        )
    if suite["path"] != evaluation.suite:
        problems.append(
            f"{key}.record: {evaluation.record} was measured on the suite {suite['path']}, but {key}.suite is "
            f"{evaluation.suite}: record the evaluation on that suite with {fix}."
        )
    elif evaluation.suite_sha256 is not None and suite["sha256"] != evaluation.suite_sha256:
        problems.append(
            f"{key}.record: {evaluation.record} was measured on the suite with sha256 {suite['sha256']}, but "
            f"{key}.suite_sha256 is {evaluation.suite_sha256}: record the evaluation on the suite with that sha256 "
            f"with {fix}."
        )
    elif evaluation.suite_sha256 is None and suite_sha256 is not None and suite["sha256"] != suite_sha256:
        problems.append(
            f"{key}.record: {evaluation.suite} changed since {evaluation.record} was recorded (sha256 "
            f"{suite_sha256}, the record's {suite['sha256']}): record the evaluation again with {fix}."
        )
    answer_settings, wrong = read_recorded(record.get("answer_settings"))
    if answer_settings is None:
        problems.append(f"{key}.record: {evaluation.record} holds {wrong}: record it again with {fix}.")
    if problems:
        return Binding(None, None, tuple(problems))
    return Binding(hashlib.sha256(data).hexdigest(), artifact["manifest_sha256"], (), answer_settings)


def _suite_file_sha256(root: Path, key: str, evaluation: EvaluationConfig, fix: str, problems: list[str]) -> str | None:
    """The sha256 of the suite file (None where it cannot be read). A suite whose sha256 cdk.json states need not
    be there (CI and the pipeline synthesize without it), but where it is, it must have that sha256."""
    try:
        actual = hashlib.sha256((root / evaluation.suite).read_bytes()).hexdigest()
    except OSError as e:
        if evaluation.suite_sha256 is None:
            problems.append(
                f"{key}.suite: {evaluation.suite} cannot be read ({e.strerror or e}): add the suite of labeled "
                "cases there, or point suite at it."
            )
        return None
    if evaluation.suite_sha256 is not None and actual != evaluation.suite_sha256:
        problems.append(
            f"{key}.suite: {evaluation.suite} has sha256 {actual}, but {key}.suite_sha256 is "
            f"{evaluation.suite_sha256}: put the suite with that sha256 there, or, to evaluate on this one, set "
            f"{key}.suite_sha256 to {actual} and record the evaluation again with {fix}."
        )
    return actual


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
        isinstance(artifact.get(name), str) and _SHA256.match(artifact[name])
        for name in ("model_sha256", "manifest_sha256")
    ):
        return "artifact needs model_sha256 and manifest_sha256, each 64 lowercase hex digits"
    if (
        not isinstance(suite, dict)
        or not isinstance(suite.get("path"), str)
        or not (isinstance(suite.get("sha256"), str) and _SHA256.match(suite["sha256"]))
        or not (isinstance(suite.get("cases"), int) and not isinstance(suite.get("cases"), bool))
    ):
        return "suite needs path, a 64-hex sha256 and the number of cases"
    return ""
