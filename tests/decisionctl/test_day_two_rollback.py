"""decisionctl rollback against botocore's Stubber and a real git history (issue 46): the previous artifact's record
and model block put back for a deployment, and refusals where its record no longer binds or its archive is gone."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
from botocore.stub import Stubber
from decision_spec.evaluation_record import RECORD_OUTPUT
from decisionctl.commands import rollback

from tests.cdk_support import ROOT

REGION = "us-west-2"
WHEN = datetime(2026, 12, 3, 20, 15, tzinfo=UTC)
SUITE = "evaluation/support-suite.jsonl"
OLD, NEW = "a" * 64, "b" * 64  # the previous model's sha256, the one deployed now
BUCKET = "decisionendpoints-prod-foundation-modelbucket-1abc"


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def record(model: str, suite: bytes) -> bytes:
    """A record as record-evaluation writes it: the shipped record's answers, for `model` on `suite`."""
    data = json.loads((ROOT / "evaluation" / "dev.json").read_text(encoding="utf-8"))
    data["artifact"].update(model_sha256=model, manifest_sha256=hashlib.sha256(model.encode()).hexdigest())
    data["suite"] = {"path": SUITE, "sha256": hashlib.sha256(suite).hexdigest(), "cases": data["suite"]["cases"]}
    return json.dumps(data, indent=1).encode()


def commit(root: Path, model: str, key: str, suite: bytes, message: str) -> bytes:
    cdk = json.loads((ROOT / "cdk.json").read_text(encoding="utf-8"))
    cdk["context"]["environments"]["prod"]["model"].update(sha256=model, s3_key=key)
    (root / "cdk.json").write_text(json.dumps(cdk, indent=2) + "\n", encoding="utf-8")
    (root / SUITE).write_bytes(suite)
    data = record(model, suite)
    (root / "evaluation" / "prod.json").write_bytes(data)
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", message)
    return data


def history(tmp: Path) -> tuple[Path, bytes, bytes]:
    root = tmp / "repo"
    (root / "evaluation").mkdir(parents=True)
    git(root, "init", "-q")
    suite = (ROOT / SUITE).read_bytes()
    old = commit(root, OLD, "models/old/model.tar.gz", suite, "serve the old model")
    new = commit(root, NEW, "models/new/model.tar.gz", suite, "serve the new model")
    return root, old, new


def stubbed(served: bytes, *, present: bool = True, foundation: bool = True) -> tuple[dict[str, Any], list[Stubber]]:
    session = boto3.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name=REGION)
    clients = {name: session.client(name) for name in ("cloudformation", "s3")}
    cfn, s3 = Stubber(clients["cloudformation"]), Stubber(clients["s3"])

    def stack(name: str, outputs: dict[str, str]) -> dict[str, Any]:
        entries = [{"OutputKey": k, "OutputValue": v} for k, v in outputs.items()]
        return {"Stacks": [{"StackName": name, "CreationTime": WHEN, "StackStatus": "UPDATE_COMPLETE",
                            "Outputs": entries}]}  # fmt: skip

    serving = {RECORD_OUTPUT: hashlib.sha256(served).hexdigest()}
    cfn.add_response("describe_stacks", stack("DecisionEndpoints-prod-Serving", serving),
                     {"StackName": "DecisionEndpoints-prod-Serving"})  # fmt: skip
    if foundation:
        cfn.add_response("describe_stacks", stack("DecisionEndpoints-prod-Foundation", {"ModelBucketName": BUCKET}),
                         {"StackName": "DecisionEndpoints-prod-Foundation"})  # fmt: skip
        head = {"Bucket": BUCKET, "Key": "models/old/model.tar.gz"}
        if present:
            s3.add_response("head_object", {"ContentLength": 1024, "Metadata": {"model-sha256": OLD}}, head)
        else:
            s3.add_client_error("head_object", service_error_code="404", http_status_code=404, expected_params=head)
    for stub in (cfn, s3):
        stub.activate()
    return clients, [cfn, s3]


def run(root: Path, clients: dict[str, Any], *, write: bool) -> tuple[int, str, str]:
    args = argparse.Namespace(env="prod", write=write, region=None, cdk_json=str(root / "cdk.json"))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = rollback.go_back(args, client=lambda service, region: clients[service])
    return code, out.getvalue(), err.getvalue()


def test_the_previous_artifact_is_put_back_for_a_deployment(tmp_path: Path) -> None:
    root, old, new = history(tmp_path)
    clients, stubs = stubbed(new)
    code, printed, said = run(root, clients, write=True)
    for stub in stubs:
        stub.assert_no_pending_responses()
    print(printed)
    assert code == 0, said
    assert (root / "evaluation" / "prod.json").read_bytes() == old
    model = json.loads((root / "cdk.json").read_text())["context"]["environments"]["prod"]["model"]
    assert (model["sha256"], model["s3_key"]) == (OLD, "models/old/model.tar.gz")
    assert f"model {OLD[:12]} at s3://{BUCKET}/models/old/model.tar.gz" in printed
    assert "the same guardrails and rollback alarms apply" in printed
    assert git(root, "status", "--porcelain").split() == ["M", "cdk.json", "M", "evaluation/prod.json"]


def test_without_write_nothing_changes(tmp_path: Path) -> None:
    root, _, new = history(tmp_path)
    clients, _ = stubbed(new)
    code, printed, _ = run(root, clients, write=False)
    assert code == 0 and "run again with --write" in printed
    assert git(root, "status", "--porcelain") == ""


def test_a_record_that_no_longer_binds_is_refused(tmp_path: Path) -> None:
    root, _, _ = history(tmp_path)
    changed = (ROOT / SUITE).read_bytes() + b'{"id": "added-later", "state": "x"}\n'
    served = commit(root, NEW, "models/new/model.tar.gz", changed, "a case added")  # re-recorded on the new suite
    clients, _ = stubbed(served, foundation=False)
    code, _, said = run(root, clients, write=True)
    print(said)
    assert code == 1
    assert "the record of the previous artifact (evaluation/prod.json as of" in said
    assert "and the suite has changed since" in said
    assert git(root, "status", "--porcelain") == ""


def test_a_retired_archive_is_refused(tmp_path: Path) -> None:
    root, _, new = history(tmp_path)
    clients, _ = stubbed(new, present=False)
    code, _, said = run(root, clients, write=True)
    assert code == 1 and f"s3://{BUCKET}/models/old/model.tar.gz, the previous artifact, is gone (retired)" in said
