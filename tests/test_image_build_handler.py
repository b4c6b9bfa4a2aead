"""Custom::DecisionImage handler: starts the build, waits, yields the digest, or fails with the log link."""

from __future__ import annotations

from typing import Any

import pytest

from stacks.image_build_handler.index import ImageBuildFailed, is_complete, on_event

REPO = "111111111111.dkr.ecr.us-west-2.amazonaws.com/decision"
DIGEST = "sha256:" + "ab" * 32
LOG = "https://console.aws.amazon.com/cloudwatch/home?region=us-west-2#logsV2:log-groups/x"


class FakeCodeBuild:
    def __init__(self, build: dict[str, Any] | None = None) -> None:
        self.build = build or {}
        self.started: list[dict[str, Any]] = []

    def start_build(self, **kwargs: Any) -> dict[str, Any]:
        self.started.append(kwargs)
        return {"build": {"id": "decision-images:1234"}}

    def batch_get_builds(self, ids: list[str]) -> dict[str, Any]:
        assert ids == ["decision-images:1234"]
        return {"builds": [{"id": ids[0], "logs": {"deepLink": LOG}, **self.build}]}


def event(request: str, **extra: Any) -> dict[str, Any]:
    return {
        "RequestType": request,
        "ResourceProperties": {
            "ProjectName": "decision-images",
            "RepositoryUri": REPO,
            "ImageTag": "cpu-0123456789abcdef0123",
            "BuildEnvironment": {"IMAGE_TAG": "cpu-0123456789abcdef0123", "FLAVOUR": "cpu", "BASE_IMAGE": "b@sha256:1"},
        },
        **extra,
    }


@pytest.mark.parametrize("request_type", ["Create", "Update"])
def test_create_and_update_start_a_build_with_the_properties(request_type: str) -> None:
    client = FakeCodeBuild()
    result = on_event(event(request_type, PhysicalResourceId="old"), None, client)
    assert result == {
        "PhysicalResourceId": f"{REPO}:cpu-0123456789abcdef0123",
        "Data": {"BuildId": "decision-images:1234"},
    }
    (call,) = client.started
    assert call["projectName"] == "decision-images"
    assert {v["name"]: v["value"] for v in call["environmentVariablesOverride"]} == {
        "BASE_IMAGE": "b@sha256:1",
        "FLAVOUR": "cpu",
        "IMAGE_TAG": "cpu-0123456789abcdef0123",
    }


def test_delete_starts_nothing_and_completes_at_once() -> None:
    client = FakeCodeBuild()
    assert on_event(event("Delete", PhysicalResourceId="p"), None, client) == {"PhysicalResourceId": "p"}
    assert client.started == []
    assert is_complete(event("Delete", PhysicalResourceId="p"), None, client) == {"IsComplete": True}


def test_running_build_is_not_complete() -> None:
    client = FakeCodeBuild({"buildStatus": "IN_PROGRESS"})
    assert is_complete(event("Create", Data={"BuildId": "decision-images:1234"}), None, client) == {"IsComplete": False}


def test_successful_build_yields_the_digest_pinned_uri() -> None:
    client = FakeCodeBuild(
        {"buildStatus": "SUCCEEDED", "exportedEnvironmentVariables": [{"name": "IMAGE_DIGEST", "value": DIGEST}]}
    )
    result = is_complete(event("Create", Data={"BuildId": "decision-images:1234"}), None, client)
    assert result["IsComplete"] is True
    assert result["Data"]["ImageDigest"] == DIGEST
    assert result["Data"]["ImageUri"] == f"{REPO}@{DIGEST}"
    assert result["Data"]["LogLink"] == LOG


@pytest.mark.parametrize("status", ["FAILED", "FAULT", "STOPPED", "TIMED_OUT"])
def test_failed_build_fails_the_deployment_with_the_log_link(status: str) -> None:
    phases = [
        {"phaseType": "PRE_BUILD", "phaseStatus": "SUCCEEDED"},
        {
            "phaseType": "BUILD",
            "phaseStatus": "FAILED",
            "contexts": [{"message": "COMMAND_EXECUTION_ERROR: serve --check"}],
        },
    ]
    client = FakeCodeBuild({"buildStatus": status, "phases": phases})
    with pytest.raises(ImageBuildFailed) as caught:
        is_complete(event("Update", Data={"BuildId": "decision-images:1234"}), None, client)
    message = str(caught.value)
    assert status in message and "in BUILD" in message and "serve --check" in message and LOG in message


def test_success_without_a_digest_is_a_failure() -> None:
    client = FakeCodeBuild({"buildStatus": "SUCCEEDED", "exportedEnvironmentVariables": [{"name": "IMAGE_DIGEST"}]})
    with pytest.raises(ImageBuildFailed, match="published no image digest"):
        is_complete(event("Create", Data={"BuildId": "decision-images:1234"}), None, client)
