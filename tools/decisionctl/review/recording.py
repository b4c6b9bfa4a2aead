"""The record-evaluation use case: an artifact scored on its suite, its record written where cdk.json says."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from decision_spec.answer_settings import contradictions, run_answer_settings
from decision_spec.evaluation_record import RECORD_NAME
from decision_spec.manifest import Manifest
from decision_spec.names import MANIFEST_NAME

from decisionctl.core import scoring
from decisionctl.core.bands import question_keys
from decisionctl.core.cases import case_digest, parse_suite
from decisionctl.core.labeled import Case
from decisionctl.core.served_calibration import PolicyRefused, check_run_served
from decisionctl.review import record as records
from decisionctl.review import settings as review_settings
from decisionctl.transport import RetryPolicy, Sender

WORK_DIR = "evaluation-run"  # in the artifact directory: the predictions, one folder per manifest (--resume)


@dataclass
class Recorded:
    """Whether the record was written (else failed or interrupted, said why) and the lines the command prints."""

    failed: bool = False
    interrupted: bool = False  # scoring stopped by Ctrl-C: --resume scores the rest
    printed: list[str] = field(default_factory=list)


def _inputs(
    cdk_json: Path, env: str, artifact: Path
) -> tuple[review_settings.Settings, Manifest, bytes, bytes, list[Case]]:
    """The settings, the artifact's manifest (and bytes) and the suite's bytes and cases, checked before any case is
    sent; ValueError if not."""
    settings = review_settings.load(cdk_json, env)
    manifest_path = artifact / MANIFEST_NAME
    try:
        manifest_bytes = manifest_path.read_bytes()
        manifest = Manifest.model_validate_json(manifest_bytes)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{manifest_path}: not a model manifest ({exc}); package the model first") from None
    suite_bytes = settings.read_suite()
    cases = parse_suite(suite_bytes, settings.suite)
    return settings, manifest, manifest_bytes, suite_bytes, cases


def record_evaluation(
    cdk_json: Path,
    env: str,
    artifact: Path,
    *,
    connect: Callable[[], Sender],
    concurrency: int,
    resume: bool,
    retry: RetryPolicy,
    say: Callable[[str], None],
) -> Recorded:
    """Score the suite on the endpoint `connect` opens, check it served the artifact, and write the record to
    ARTIFACT/evaluation.json and to environments.<env>.evaluation.record; ValueError where the inputs are not
    readable (before anything is sent)."""
    settings, manifest, manifest_bytes, suite_bytes, cases = _inputs(cdk_json, env, artifact)
    work = artifact / WORK_DIR / records.sha256_bytes(manifest_bytes)[:16]
    endpoint = connect()
    try:
        scored = scoring.score_cases(cases, endpoint, work, concurrency=concurrency, policy=retry, restart=not resume)
    except scoring.IdentityChanged as exc:
        say(str(exc))
        return Recorded(failed=True)
    finally:
        endpoint.close()
    if scored.interrupted:
        say("interrupted: run the same command with --resume to score the rest")
        return Recorded(interrupted=True)
    if scored.errors or len(scored.predictions) != len(cases):
        for e in scored.errors[:5]:
            say(f"{e['id']}: {e['error']}")
        say(f"{len(cases) - len(scored.predictions)} of {len(cases)} cases not scored: a record holds every case")
        return Recorded(failed=True)
    try:
        check_served(scored.identity, manifest)
    except records.EvaluationRecordError as exc:
        say(f"not recorded: {exc}")
        return Recorded(failed=True)
    digests = {c.id: case_digest(c) for c in cases}
    record = records.build(
        predictions=scored.predictions,
        case_sha256=digests,
        keys=question_keys(cases),
        identity=scored.identity,
        manifest=manifest,
        manifest_bytes=manifest_bytes,
        suite_path=settings.evaluation.suite,
        suite_bytes=suite_bytes,  # the bytes scored: the record names their sha256
        cases=len(cases),
        created=datetime.now(UTC),
    )
    data = records.dumps(record)
    beside = artifact / RECORD_NAME
    for path in (beside, settings.record):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    overall = record["metrics"]["overall"]
    return Recorded(
        printed=[
            f"{len(cases)} cases of {settings.evaluation.suite}: accuracy {overall['accuracy']:.1%}, "
            f"ECE {overall['ece']:.3f}, Brier {overall['brier']:.3f}; model {manifest.sha256[:12]}, "
            f"manifest {record['artifact']['manifest_sha256'][:12]}, policy {record['artifact']['policy_version']}",
            f"wrote {beside} and {settings.record} (sha256 {records.sha256_bytes(data)})",
        ]
    )


def check_served(identity: Mapping[str, Any] | None, manifest: Manifest) -> None:
    """The endpoint served this manifest: its model, its calibration, its policy and the answer settings it records
    (its block and its policy's modes); EvaluationRecordError otherwise."""
    try:
        check_run_served(identity, manifest)
    except PolicyRefused as exc:
        raise records.EvaluationRecordError(str(exc)) from exc
    served = (identity or {}).get("policy")
    wanted = manifest.policy.version if manifest.policy else None
    if served != wanted:
        raise records.EvaluationRecordError(
            f"the endpoint served policy {served or 'none'}, but the artifact's manifest holds {wanted or 'none'}: "
            "restart the adapter on this artifact and record again"
        )
    contradicted = contradictions(run_answer_settings(identity or {}), manifest.recorded_answer_settings())
    if contradicted:
        listed = ", ".join(f"{name} {mine} (the artifact's: {its})" for name, (mine, its) in contradicted.items())
        raise records.EvaluationRecordError(
            f"the endpoint served other answer settings than the artifact records: {listed}; restart the adapter on "
            "this artifact (it adopts them) and record again"
        )
