"""`decisionctl served-record`: the record a stack serves, found by its EvaluationRecordSha256 in a git history.

CloudFormation is a stand-in, named as such: botocore's `Stubber` on a real `cloudformation` client, answering
describe_stacks to the exact request. The history is a real git repository holding three versions of a record.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.stub import Stubber
from decisionctl.commands import cli, served_record

STACK = "DecisionEndpoints-prod-Serving"
REGION = "us-west-2"
STACK_UUID = "0b1c2d3e-4f50-11f1-9a2b-0a1b2c3d4e5f"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=repo, check=True, capture_output=True
    )


@pytest.fixture()
def history(tmp_path: Path) -> tuple[Path, list[bytes]]:
    """A repository whose evaluation/prod.json was committed three times; the checkout holds the third."""
    repo = tmp_path / "repo"
    (repo / "evaluation").mkdir(parents=True)
    _git(repo, "init", "-q")
    versions = [f'{{"schema": "decision-endpoints/evaluation/v1", "n": {i}}}\n'.encode() for i in range(3)]
    for i, data in enumerate(versions):
        (repo / "evaluation" / "prod.json").write_bytes(data)
        (repo / "other.txt").write_text(str(i))
        _git(repo, "add", ".")
        _git(repo, "commit", "-q", "-m", f"version {i}")
    return repo / "evaluation" / "prod.json", versions


def cloudformation(response: dict[str, Any] | None = None, *, missing: bool = False) -> Any:
    session = botocore.session.get_session()
    session.set_credentials("AKIDEXAMPLESTANDIN", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    client = session.create_client("cloudformation", region_name=REGION)
    stubber = Stubber(client)
    if missing:
        stubber.add_client_error(
            "describe_stacks",
            service_error_code="ValidationError",
            service_message=f"Stack with id {STACK} does not exist",
            http_status_code=400,
            expected_params={"StackName": STACK},
        )
    else:
        stubber.add_response("describe_stacks", response, {"StackName": STACK})
    stubber.activate()
    return client


def stack(outputs: list[dict[str, str]]) -> dict[str, Any]:
    """DescribeStacks' response for STACK, as CloudFormation shapes it."""
    return {
        "Stacks": [
            {
                "StackId": f"arn:aws:cloudformation:{REGION}:111122223333:stack/{STACK}/{STACK_UUID}",
                "StackName": STACK,
                "CreationTime": "2026-11-30T09:00:00Z",
                "StackStatus": "UPDATE_COMPLETE",
                "Outputs": outputs,
            }
        ]
    }


def _run(record: Path, out: Path, client: Any) -> int:
    args = cli.build_parser().parse_args(
        ["served-record", "--stack", STACK, "--record", str(record), "--out", str(out), "--region", REGION]
    )
    return served_record.write(args, cloudformation=client)


def test_the_version_with_the_served_sha256_is_written(history, tmp_path: Path) -> None:
    record, versions = history
    served = hashlib.sha256(versions[1]).hexdigest()
    outputs = [
        {"OutputKey": "DashboardUrl", "OutputValue": "https://example"},
        {"OutputKey": "EvaluationRecordSha256", "OutputValue": served, "Description": "sha256 of evaluation/prod.json"},
    ]
    out = tmp_path / "served-record.json"
    assert _run(record, out, cloudformation(stack(outputs))) == 0
    assert out.read_bytes() == versions[1]


@pytest.mark.parametrize("missing", [True, False], ids=["no stack", "no output"])
def test_nothing_served_yet_writes_nothing_and_exits_0(history, tmp_path: Path, missing: bool, capsys) -> None:
    record, _ = history
    out = tmp_path / "served-record.json"
    client = cloudformation(
        None if missing else stack([{"OutputKey": "DashboardUrl", "OutputValue": "x"}]), missing=missing
    )
    assert _run(record, out, client) == 0
    assert not out.exists()
    assert "serves no recorded evaluation yet" in capsys.readouterr().err


def test_an_unknown_sha256_exits_1_naming_it_and_the_path(history, tmp_path: Path, capsys) -> None:
    record, _ = history
    unknown = hashlib.sha256(b"never committed").hexdigest()
    out = tmp_path / "served-record.json"
    client = cloudformation(stack([{"OutputKey": "EvaluationRecordSha256", "OutputValue": unknown}]))
    assert _run(record, out, client) == 1
    assert not out.exists()
    err = capsys.readouterr().err
    assert unknown in err and "evaluation/prod.json" in err and "fetch-depth: 0" in err
