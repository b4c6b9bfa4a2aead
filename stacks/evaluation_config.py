"""An environment's evaluation (cdk.json `evaluation`) and its binding to the artifact: plain pydantic, no CDK.

`decisionctl record-evaluation` writes the record, a JSON file in the repository, from a run of the suite
against an adapter serving the artifact; synth reads it back here and checks that it is the evaluation of
the model cdk.json deploys, on the suite as it is now: the file in the repository, or, where cdk.json states the
suite's sha256 (`suite_sha256`, a suite kept out of git), the suite with that sha256. The record's format and the
`evaluation` block are decision_spec.evaluation_record's, which synth and decisionctl both read.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from decision_spec.answer_settings import ArtifactAnswerSettings
from decision_spec.evaluation_record import EvaluationConfig, parse_record
from decision_spec.memory import ModelFootprint
from pydantic import ValidationError

from stacks.adapter_settings import read_recorded


@dataclass(frozen=True)
class Binding:
    """The record read for an environment: its sha256, the evaluated manifest's, the answer settings its run
    served and the manifest's footprint (None in a record written before manifests held one), or why it does not
    bind."""

    record_sha256: str | None
    manifest_sha256: str | None
    problems: tuple[str, ...]
    answer_settings: ArtifactAnswerSettings | None = None
    footprint: ModelFootprint | None = None


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
    footprint = None
    try:
        footprint = (
            ModelFootprint.model_validate(artifact.get("footprint"), strict=False)
            if artifact.get("footprint")
            else None
        )
    except ValidationError:
        problems.append(
            f"{key}.record: {evaluation.record}'s artifact.footprint is not a footprint: record it again with {fix}."
        )
    if problems:
        return Binding(None, None, tuple(problems))
    return Binding(hashlib.sha256(data).hexdigest(), artifact["manifest_sha256"], (), answer_settings, footprint)


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
