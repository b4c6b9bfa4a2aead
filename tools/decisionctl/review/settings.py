"""An environment's evaluation settings read from cdk.json: the suite, the record, the tolerance and the gates."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from decision_spec.evaluation_record import DecisionGates, EvaluationConfig
from pydantic import ValidationError


@dataclass(frozen=True)
class Settings:
    environment: str
    root: Path  # cdk.json's directory: the paths cdk.json names are relative to it
    evaluation: EvaluationConfig

    @property
    def suite(self) -> Path:
        return self.root / self.evaluation.suite  # an absolute suite (one kept out of git) stays as it is

    def read_suite(self) -> bytes:
        """The suite's bytes, read once (core.cases.parse_suite reads its cases); ValueError where it cannot be read
        or has another sha256 than cdk.json states for it (evaluation.suite_sha256)."""
        try:
            data = self.suite.read_bytes()
        except OSError as exc:
            raise ValueError(f"{self.suite}: {exc}") from None
        stated, actual = self.evaluation.suite_sha256, hashlib.sha256(data).hexdigest()
        if stated is not None and actual != stated:
            key = f"environments.{self.environment}.evaluation.suite_sha256"
            raise ValueError(
                f"{self.suite} has sha256 {actual}, but {key} is {stated}: put the suite with that sha256 there, "
                f"or, to evaluate on this one, set {key} to {actual} in a reviewed change of cdk.json"
            )
        return data

    @property
    def record(self) -> Path:
        return self.root / self.evaluation.record

    @property
    def gates(self) -> DecisionGates:
        return self.evaluation.gates


def load(cdk_json: Path, environment: str) -> Settings:
    """`context.environments.<environment>.evaluation` of cdk.json; ValueError names the key at fault."""
    try:
        environments = json.loads(cdk_json.read_text(encoding="utf-8"))["context"]["environments"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{cdk_json}: no context.environments to read ({exc})") from exc
    if environment not in environments:
        raise ValueError(f"{cdk_json}: no environment {environment!r} (known: {', '.join(environments)})")
    block = environments[environment].get("evaluation")
    if block is None:
        raise ValueError(
            f"{cdk_json}: environments.{environment}.evaluation is not configured: name its suite and record "
            "there (docs/deploy.md, the review loop)"
        )
    try:
        evaluation = EvaluationConfig.model_validate(block)
    except ValidationError as exc:
        raise ValueError(f"{cdk_json}: environments.{environment}.evaluation: {exc}") from exc
    return Settings(environment, cdk_json.resolve().parent, evaluation)
