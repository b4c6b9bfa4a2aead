"""Custom::DecisionImage handler against botocore's Stubber (a stand-in for CodeBuild).

It starts the build (retrying a refusal for the account's build quota), waits, yields the digest, or
fails with the log link.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from stacks import image_build
from stacks.image_build_handler.index import (
    QUOTA_NAME,
    START_RETRY_DELAYS,
    ImageBuildFailed,
    is_complete,
    on_event,
)

REPO = "111111111111.dkr.ecr.us-west-2.amazonaws.com/decision"
DIGEST = "sha256:" + "ab" * 32
LOG = "https://console.aws.amazon.com/cloudwatch/home?region=us-west-2#logsV2:log-groups/x"
BUILD_ID = "decision-images:1234"
TAG = "cpu-0123456789abcdef0123"
QUEUE_FULL = "Cannot have more than 0 builds in queue for the account"
START = {
    "projectName": "decision-images",
    "environmentVariablesOverride": [
        {"name": "BASE_IMAGE", "value": "b@sha256:1", "type": "PLAINTEXT"},
        {"name": "FLAVOUR", "value": "cpu", "type": "PLAINTEXT"},
        {"name": "IMAGE_TAG", "value": TAG, "type": "PLAINTEXT"},
    ],
}


@pytest.fixture()
def codebuild() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client("codebuild", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def event(request: str, **extra: Any) -> dict[str, Any]:
    return {
        "RequestType": request,
        "ResourceProperties": {
            "ProjectName": "decision-images",
            "RepositoryUri": REPO,
            "ImageTag": TAG,
            "BuildEnvironment": {"IMAGE_TAG": TAG, "FLAVOUR": "cpu", "BASE_IMAGE": "b@sha256:1"},
        },
        **extra,
    }


def expect_start(stub: Stubber) -> None:
    stub.add_response("start_build", {"build": {"id": BUILD_ID}}, START)


def expect_build(stub: Stubber, **build: Any) -> None:
    stub.add_response(
        "batch_get_builds", {"builds": [{"id": BUILD_ID, "logs": {"deepLink": LOG}, **build}]}, {"ids": [BUILD_ID]}
    )


def refuse_for_quota(stub: Stubber) -> None:
    stub.add_client_error("start_build", "AccountLimitExceededException", QUEUE_FULL, 400, expected_params=START)


@pytest.mark.parametrize("request_type", ["Create", "Update"])
def test_create_and_update_start_a_build_with_the_properties(request_type: str, codebuild: tuple[Any, Stubber]) -> None:
    client, stub = codebuild
    expect_start(stub)
    result = on_event(event(request_type, PhysicalResourceId="old"), None, client)
    assert result == {"PhysicalResourceId": f"{REPO}:{TAG}", "Data": {"BuildId": BUILD_ID}}


def test_a_start_refused_for_the_build_quota_is_retried_with_backoff(codebuild: tuple[Any, Stubber]) -> None:
    client, stub = codebuild
    refuse_for_quota(stub)
    refuse_for_quota(stub)
    expect_start(stub)
    slept: list[float] = []
    result = on_event(event("Create"), None, client, sleep=slept.append)
    assert result["Data"] == {"BuildId": BUILD_ID}
    assert slept == list(START_RETRY_DELAYS[:2])
    assert slept == sorted(slept)  # backing off, not hammering


def test_the_retries_are_bounded_and_the_failure_names_the_quota(codebuild: tuple[Any, Stubber]) -> None:
    client, stub = codebuild
    for _ in range(len(START_RETRY_DELAYS) + 1):
        refuse_for_quota(stub)
    slept: list[float] = []
    with pytest.raises(ImageBuildFailed) as caught:
        on_event(event("Create"), None, client, sleep=slept.append)
    assert slept == list(START_RETRY_DELAYS)
    message = str(caught.value)
    assert message.startswith(f"CodeBuild refused to start the cpu image build {len(START_RETRY_DELAYS) + 1} times")
    assert f'quota "{QUOTA_NAME}"' in message and "Service Quotas > AWS CodeBuild" in message
    assert QUEUE_FULL in message


def test_other_start_errors_are_not_retried(codebuild: tuple[Any, Stubber]) -> None:
    client, stub = codebuild
    stub.add_client_error("start_build", "ResourceNotFoundException", "no such project", 400)
    with pytest.raises(Exception, match="ResourceNotFoundException"):
        on_event(event("Create"), None, client, sleep=lambda _: pytest.fail("must not wait"))


def test_the_retry_budget_fits_the_start_function_and_the_custom_resource_hour() -> None:
    assert sum(START_RETRY_DELAYS) + 30 <= image_build.START_TIMEOUT_SECONDS  # 30 s for the calls themselves
    start_minutes = image_build.START_TIMEOUT_SECONDS / 60
    assert start_minutes + image_build.WAIT_MINUTES < image_build.CUSTOM_RESOURCE_LIMIT_MINUTES


def test_delete_starts_nothing_and_completes_at_once(codebuild: tuple[Any, Stubber]) -> None:
    client, _ = codebuild  # nothing queued: any call would fail
    assert on_event(event("Delete", PhysicalResourceId="p"), None, client) == {"PhysicalResourceId": "p"}
    assert is_complete(event("Delete", PhysicalResourceId="p"), None, client) == {"IsComplete": True}


def test_running_build_is_not_complete(codebuild: tuple[Any, Stubber]) -> None:
    client, stub = codebuild
    expect_build(stub, buildStatus="IN_PROGRESS")
    assert is_complete(event("Create", Data={"BuildId": BUILD_ID}), None, client) == {"IsComplete": False}


def test_successful_build_yields_the_digest_pinned_uri(codebuild: tuple[Any, Stubber]) -> None:
    client, stub = codebuild
    expect_build(
        stub, buildStatus="SUCCEEDED", exportedEnvironmentVariables=[{"name": "IMAGE_DIGEST", "value": DIGEST}]
    )
    result = is_complete(event("Create", Data={"BuildId": BUILD_ID}), None, client)
    assert result["IsComplete"] is True
    assert result["Data"]["ImageDigest"] == DIGEST
    assert result["Data"]["ImageUri"] == f"{REPO}@{DIGEST}"
    assert result["Data"]["LogLink"] == LOG


@pytest.mark.parametrize("status", ["FAILED", "FAULT", "STOPPED", "TIMED_OUT"])
def test_failed_build_fails_the_deployment_with_the_log_link(status: str, codebuild: tuple[Any, Stubber]) -> None:
    phases = [
        {"phaseType": "PRE_BUILD", "phaseStatus": "SUCCEEDED"},
        {
            "phaseType": "BUILD",
            "phaseStatus": "FAILED",
            "contexts": [{"message": "COMMAND_EXECUTION_ERROR: serve --check"}],
        },
    ]
    client, stub = codebuild
    expect_build(stub, buildStatus=status, phases=phases)
    with pytest.raises(ImageBuildFailed) as caught:
        is_complete(event("Update", Data={"BuildId": BUILD_ID}), None, client)
    message = str(caught.value)
    assert status in message and "in BUILD" in message and "serve --check" in message and LOG in message


def test_success_without_a_digest_is_a_failure(codebuild: tuple[Any, Stubber]) -> None:
    client, stub = codebuild
    expect_build(stub, buildStatus="SUCCEEDED", exportedEnvironmentVariables=[{"name": "IMAGE_DIGEST"}])
    with pytest.raises(ImageBuildFailed, match="published no image digest"):
        is_complete(event("Create", Data={"BuildId": BUILD_ID}), None, client)
