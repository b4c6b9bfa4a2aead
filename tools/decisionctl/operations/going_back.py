"""The rollback use case: back to the model deployed before the one the environment serves, through a deployment.

CloudFormation deletes a replaced endpoint configuration and model once a deployment completes, and an endpoint
changed outside its stack drifts from it, so going back is a deployment of the previous artifact: its evaluation
record (the version of evaluation.record before the one the Serving stack serves, found in git history) and its
`model` block of cdk.json are put back, and the deployment that follows runs under the same guardrails and alarms as
any. Refused where that record no longer binds (another suite, or a suite changed since) or the artifact is gone
from the bucket (retired)."""

from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decision_spec.evaluation_record import parse_record
from decision_spec.names import BUCKET_OUTPUT, stack_name

from decisionctl.core.served import served_sha256, version_with
from decisionctl.operations.deployed_names import ClientFor, load


class RollbackRefused(ValueError):
    """There is nothing to go back to, or the previous artifact cannot be deployed as evaluated; nothing written."""


@dataclass
class Rollback:
    lines: list[str] = field(default_factory=list)


def _git(args: list[str], cwd: Path) -> bytes:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True).stdout


def previous_version(root: Path, record: str, served_revision: str) -> tuple[str, bytes, dict[str, Any]]:
    """The newest commit before `served_revision` whose record evaluates another artifact, its record's bytes and
    its cdk.json's environments block; RollbackRefused where the history holds none."""
    served = json.loads(_git(["show", f"{served_revision}:{record}"], root))["artifact"]["manifest_sha256"]
    for revision in _git(["log", "--format=%H", f"{served_revision}~1", "--", record], root).decode().split():
        try:
            data = _git(["show", f"{revision}:{record}"], root)
            cdk = json.loads(_git(["show", f"{revision}:cdk.json"], root))
        except (subprocess.CalledProcessError, ValueError):
            continue
        parsed, _ = parse_record(data)
        if parsed is not None and parsed["artifact"]["manifest_sha256"] != served:
            return revision, data, cdk["context"]["environments"]
    raise RollbackRefused(
        f"no earlier version of {record} in the history evaluates another artifact than the one deployed: there is "
        "nothing to go back to (a shallow clone holds too little history: fetch it whole)"
    )


def roll_back(
    cdk_json: Path,
    environment: str,
    region: str | None,
    *,
    write: bool,
    client: ClientFor,
    git_root: Path | None = None,
) -> Rollback:
    """What going back means for the environment, checked; with `write`, the previous record and model block put back
    into the working tree. RollbackRefused says why not."""
    deployed = load(cdk_json, environment)
    region = region or deployed.region
    if deployed.record is None:
        raise RollbackRefused(
            f"environments.{environment}.evaluation is not configured: no record says what ran before"
        )
    cloudformation = client("cloudformation", region)
    served = served_sha256(cloudformation, deployed.serving_stack)
    if served is None:
        raise RollbackRefused(f"{deployed.serving_stack} serves no bound evaluation record: nothing to go back from")
    root = git_root or deployed.root
    revision, served_data = version_with(root / deployed.record, served)
    serving_model = str(json.loads(served_data)["artifact"]["model_sha256"])
    previous, data, environments = previous_version(root, deployed.record, revision)
    record = json.loads(data)
    model = environments[environment]["model"]
    evaluation = environments[environment].get("evaluation") or {}
    current = json.loads(cdk_json.read_text(encoding="utf-8"))
    suite_path = current["context"]["environments"][environment]["evaluation"]["suite"]
    problems = _binding_problems(record, model, evaluation, suite_path, deployed.root)
    if problems:
        raise RollbackRefused(
            f"the record of the previous artifact ({deployed.record} as of {previous[:12]}) no longer binds:\n  "
            + "\n  ".join(problems)
            + "\n  record the previous artifact's evaluation again (byom.md step 10) and commit it with the rollback"
        )
    bucket = _output(cloudformation, stack_name(environment, "Foundation"), BUCKET_OUTPUT)
    _artifact_present(client("s3", region), bucket, model["s3_key"])
    done = Rollback()
    done.lines.append(
        f"{environment} serves {deployed.record} as of {revision[:12]} (model {serving_model[:12]}); the previous "
        f"artifact is {deployed.record} as of {previous[:12]}: model {model['sha256'][:12]} at "
        f"s3://{bucket}/{model['s3_key']}, its record binding the suite as it is now"
    )
    if write:
        (deployed.root / deployed.record).write_bytes(data)
        current["context"]["environments"][environment]["model"] = model
        cdk_json.write_text(json.dumps(current, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        done.lines.append(
            f"wrote {deployed.record} and environments.{environment}.model of cdk.json as of {previous[:12]}"
        )
    else:
        done.lines.append("run again with --write to put them back into the working tree")
    done.lines.append(
        f"then commit and deploy as any change (the pipeline, or bin/cdk deploy -c env={environment} "
        f"'{stack_name(environment, '*')}'): the same guardrails and rollback alarms apply, and synth checks that "
        "the record binds"
    )
    return done


def _binding_problems(
    record: dict[str, Any], model: dict[str, Any], evaluation: dict[str, Any], suite_path: str, root: Path
) -> list[str]:
    """Why the previous record would not bind to the previous model block and the suite as it is now."""
    problems = []
    if record["artifact"]["model_sha256"] != model.get("sha256"):
        problems.append(
            f"it evaluates model {record['artifact']['model_sha256'][:12]}, not that version's model.sha256"
        )
    if record["suite"]["path"] != suite_path:
        problems.append(f"it was measured on {record['suite']['path']}, and the suite is now {suite_path}")
        return problems
    now: str | None
    try:
        now = hashlib.sha256((root / suite_path).read_bytes()).hexdigest()
    except OSError:
        now = evaluation.get("suite_sha256")
    if now is not None and record["suite"]["sha256"] != now:
        problems.append(
            f"it was measured on {suite_path} with sha256 {record['suite']['sha256'][:12]}, and the suite has changed "
            f"since (sha256 {now[:12]})"
        )
    return problems


def _output(cloudformation: Any, stack: str, key: str) -> str:
    described = cloudformation.describe_stacks(StackName=stack)
    for output in described["Stacks"][0].get("Outputs", []):
        if output["OutputKey"] == key:
            return str(output["OutputValue"])
    raise RollbackRefused(f"{stack} has no output {key}: deploy the Foundation stack")


def _artifact_present(s3: Any, bucket: str, key: str) -> None:
    from botocore.exceptions import ClientError

    try:
        s3.head_object(Bucket=bucket, Key=key)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey", "NotFound"):
            raise
        raise RollbackRefused(
            f"s3://{bucket}/{key}, the previous artifact, is gone (retired): upload it again with package-model "
            "--upload to that key, then run rollback again"
        ) from None
