"""Custom resource `Custom::ModelPreflight`: check the model artifact in S3 before any image build or model starts.

Run by the CDK provider framework on Create and Update. Without it, an endpoint created before
`model.tar.gz` exists waits out its startup health-check timeout (up to an hour) and then the stack
rolls back. This fails in seconds instead, with one message naming what is wrong and the command
that fixes it:

- a DLC digest or the model sha256 still holds the all-zero placeholder;
- `manifest.json` (written beside `model.tar.gz` by `decisionctl package-model --upload`) is missing,
  unreadable or not a model manifest;
- the manifest's GGUF sha256 differs from `environments.<env>.model.sha256`;
- the manifest's bytes are not the manifest the environment's evaluation record evaluated (its
  `EvaluatedManifestSha256`, set where synth found the record bound to the artifact: stacks/evaluation_binding.py);
- `model.tar.gz` is missing, or its `model-sha256` metadata (set by the same upload) names another GGUF.

The tarball is not downloaded: the adapter verifies the GGUF's sha256 when the endpoint starts; S3
verified the bytes at upload. Delete does nothing.

The physical id names the properties that passed (`#<fingerprint>`). An Update that brings back exactly
those, as CloudFormation's rollback of a failed update does, is not checked again: the artifact of the
deployment being restored may be gone by then, and a failing rollback would leave the stack stuck in
UPDATE_ROLLBACK_FAILED.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

PLACEHOLDER = "0" * 64
SHA256 = re.compile(r"^[0-9a-f]{64}$")
MANIFEST_LIMIT_BYTES = 1 << 20
# A stuck call must not hold the deployment: a few seconds per try, two tries.
CLIENT_CONFIG = Config(connect_timeout=5, read_timeout=10, retries={"max_attempts": 2, "mode": "standard"})
MISSING = {"NoSuchKey", "404", "NotFound"}
DENIED = {"AccessDenied", "403", "Forbidden"}


class PreflightFailed(RuntimeError):
    """The deployment must stop; the message says what is wrong and how to fix it."""


def _s3() -> Any:
    return boto3.client("s3", config=CLIENT_CONFIG)


def on_event(event: dict[str, Any], _context: object = None, client: Any = None) -> dict[str, Any]:
    props = event["ResourceProperties"]
    physical_id = f"s3://{props['Bucket']}/{props['ArtifactKey']}#{fingerprint(props)}"
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": event.get("PhysicalResourceId", physical_id)}
    if event["RequestType"] == "Update" and event.get("PhysicalResourceId") == physical_id:
        return {"PhysicalResourceId": physical_id}  # these properties passed before: a rollback restores them
    check_placeholders(props)
    s3 = client or _s3()
    manifest, manifest_bytes = read_manifest(s3, props)
    expected = props.get("ExpectedModelSha256", "")
    if expected and manifest["sha256"] != expected:
        raise PreflightFailed(
            f"checksum mismatch: {_url(props, props['ManifestKey'])} names {manifest['model_file']} with sha256 "
            f"{manifest['sha256']}, but {props['ConfigKey']}.model.sha256 is {expected}. Upload the model that has "
            f"{expected}: {fix_command(props)}; or, if the uploaded model is the one to serve, set "
            f"{props['ConfigKey']}.model.sha256 to {manifest['sha256']} in cdk.json"
        )
    check_evaluated(props, manifest_bytes)
    tarball = head_tarball(s3, props)
    packaged_from = tarball.get("Metadata", {}).get("model-sha256", "")
    if packaged_from and packaged_from != manifest["sha256"]:
        raise PreflightFailed(
            f"checksum mismatch: {_url(props, props['ArtifactKey'])} was packaged from a GGUF with sha256 "
            f"{packaged_from} (its model-sha256 metadata), but the manifest.json beside it names {manifest['sha256']}: "
            f"the two come from different uploads. Upload both again: {fix_command(props)}"
        )
    return {
        "PhysicalResourceId": physical_id,
        "Data": {
            "ModelFile": manifest["model_file"],
            "ModelSha256": manifest["sha256"],
            "ArtifactSha256": tarball.get("Metadata", {}).get("sha256", ""),
        },
    }


def fingerprint(props: dict[str, Any]) -> str:
    checked = {k: v for k, v in props.items() if k != "ServiceToken"}
    return hashlib.sha256(json.dumps(checked, sort_keys=True).encode()).hexdigest()[:16]


def check_placeholders(props: dict[str, Any]) -> None:
    """All-zero values mean cdk.json was never filled in (synth lets them through only with allow_placeholders)."""
    env = props["Environment"]
    problems = [
        f"{key} is the all-zero placeholder: run `decisionctl pin-images --env {env}` (it looks the digests up in "
        "the DLC registry and writes them into cdk.json), then deploy again"
        for key, digest in sorted(props.get("ImageDigests", {}).items())
        if digest.removeprefix("sha256:") == PLACEHOLDER
    ]
    if props.get("ExpectedModelSha256") == PLACEHOLDER:
        problems.append(
            f"{props['ConfigKey']}.model.sha256 is the all-zero placeholder: set it to the GGUF's sha256 (what "
            f"`decisionctl package-model` prints and writes into manifest.json as sha256), then: {fix_command(props)}"
        )
    if problems:
        raise PreflightFailed("; ".join(problems))


def check_evaluated(props: dict[str, Any], manifest_bytes: bytes) -> None:
    """The uploaded manifest is, byte for byte, the one whose artifact the committed evaluation record evaluated."""
    evaluated = props.get("EvaluatedManifestSha256", "")
    uploaded = hashlib.sha256(manifest_bytes).hexdigest()
    if not evaluated or uploaded == evaluated:
        return
    env, record = props["Environment"], props.get("EvaluationRecord", "the evaluation record")
    raise PreflightFailed(
        f"not the evaluated artifact: {_url(props, props['ManifestKey'])} has sha256 {uploaded}, but {record} "
        f"evaluated the artifact whose manifest.json has sha256 {evaluated}. Upload the artifact directory whose "
        f"manifest was evaluated: `decisionctl package-model ... --out <that dir> --upload "
        f"{_url(props, props['ArtifactKey'])}`; or, if the uploaded artifact is the one to serve, record its "
        f"evaluation: `decisionctl record-evaluation --env {env} --url <adapter serving the artifact> --artifact "
        f"<artifact dir>`, commit {record} and deploy again"
    )


def read_manifest(s3: Any, props: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    """The manifest, parsed, and its bytes as uploaded (the evaluation record names their sha256)."""
    key = props["ManifestKey"]
    try:
        response = s3.get_object(Bucket=props["Bucket"], Key=key)
        body = response["Body"].read(MANIFEST_LIMIT_BYTES + 1)
    except ClientError as e:
        raise _unreadable(e, props, key) from None
    except BotoCoreError as e:
        raise PreflightFailed(f"could not read {_url(props, key)}: {e}") from None
    if len(body) > MANIFEST_LIMIT_BYTES:
        raise PreflightFailed(f"{_url(props, key)} is over 1 MiB: not a model manifest. {fix_command(props)}")
    try:
        manifest = json.loads(body)
    except ValueError:
        manifest = None
    if (
        not isinstance(manifest, dict)
        or not isinstance(manifest.get("model_file"), str)
        or not SHA256.match(str(manifest.get("sha256", "")))
    ):
        raise PreflightFailed(
            f"{_url(props, key)} is not a model manifest (it needs model_file and a 64-hex sha256): upload it "
            f"again with {fix_command(props)}"
        )
    return manifest, body


def head_tarball(s3: Any, props: dict[str, Any]) -> dict[str, Any]:
    key = props["ArtifactKey"]
    try:
        head: dict[str, Any] = s3.head_object(Bucket=props["Bucket"], Key=key)
    except ClientError as e:
        raise _unreadable(e, props, key) from None
    except BotoCoreError as e:
        raise PreflightFailed(f"could not read {_url(props, key)}: {e}") from None
    return head


def fix_command(props: dict[str, Any]) -> str:
    expected = props.get("ExpectedModelSha256", "")
    if expected in ("", PLACEHOLDER):
        expected = "<the GGUF's sha256>"
    return (
        f"`decisionctl package-model <model.gguf> --expected-sha256 {expected} --source <where from> "
        f"--license <license> --out build/model-{props['Environment']} --upload {_url(props, props['ArtifactKey'])}`"
    )


def _unreadable(error: ClientError, props: dict[str, Any], key: str) -> PreflightFailed:
    code = str(error.response.get("Error", {}).get("Code", ""))
    url = _url(props, key)
    if code in MISSING:
        return PreflightFailed(f"missing: {url} does not exist. Package and upload the model: {fix_command(props)}")
    if code in DENIED:
        # Without s3:ListBucket (this check has only s3:GetObject on two keys) S3 answers 403 for a missing object.
        return PreflightFailed(
            f"missing or unreadable: {url} (S3 answered {code}, which is also its answer for a missing object to a "
            f"reader that may not list the bucket). Package and upload the model: {fix_command(props)}"
        )
    return PreflightFailed(f"could not read {url}: {code} {error.response.get('Error', {}).get('Message', '')}")


def _url(props: dict[str, Any], key: str) -> str:
    return f"s3://{props['Bucket']}/{key}"
