"""Custom resource `Custom::DecisionImage`: build one decision image in CodeBuild and wait for it.

Run by the CDK provider framework: `on_event` starts the build, `is_complete` polls it. A failed
build fails the deployment with the build's log link; a successful one yields the image digest that
the SageMaker model pins (`<repository uri>@<digest>`). Deletion leaves images to the repository's
lifecycle rules: a rollback or another stack may still pull them.

CodeBuild refuses a build with AccountLimitExceededException ("Cannot have more than N builds in queue
for the account") when the account's quota "Concurrently running builds for Linux/Large environment"
(Service Quotas > AWS CodeBuild) is used up: its queue holds five times that quota, and fresh accounts
often start at 0 or 1. The start is retried with a bounded backoff (`START_RETRY_DELAYS`, about three
minutes in all) and then fails naming the quota. The stack builds one image at a time, so a quota of 1
is enough.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import boto3
from botocore.exceptions import ClientError

DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
RUNNING = "IN_PROGRESS"
QUOTA_EXCEEDED = "AccountLimitExceededException"
QUOTA_NAME = "Concurrently running builds for Linux/Large environment"
# Seconds to wait before each retry of a refused start; their sum (190 s) plus the calls fits the Start
# function's timeout (stacks/image_build.py START_TIMEOUT_SECONDS).
START_RETRY_DELAYS = (10, 20, 40, 60, 60)


class ImageBuildFailed(RuntimeError):
    """The build ended without an image; the message carries the status, the failed phase and the log link."""


def _codebuild() -> Any:
    return boto3.client("codebuild")


def on_event(
    event: dict[str, Any],
    _context: object = None,
    client: Any = None,
    sleep: Callable[[float], object] = time.sleep,
) -> dict[str, Any]:
    props = event["ResourceProperties"]
    physical_id = f"{props['RepositoryUri']}:{props['ImageTag']}"
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    overrides = [
        {"name": name, "value": str(value), "type": "PLAINTEXT"}
        for name, value in sorted(props["BuildEnvironment"].items())
    ]
    build_id = start_build(client or _codebuild(), props, overrides, sleep)
    return {"PhysicalResourceId": physical_id, "Data": {"BuildId": build_id}}


def start_build(
    codebuild: Any, props: dict[str, Any], overrides: list[dict[str, str]], sleep: Callable[[float], object]
) -> str:
    """Start the build; a refusal for the account's build quota is retried after each of START_RETRY_DELAYS."""
    delays = iter(START_RETRY_DELAYS)
    while True:
        try:
            build = codebuild.start_build(projectName=props["ProjectName"], environmentVariablesOverride=overrides)
            return str(build["build"]["id"])
        except ClientError as e:
            error = e.response.get("Error", {})
            if error.get("Code") != QUOTA_EXCEEDED:
                raise
            delay = next(delays, None)
            if delay is None:
                raise ImageBuildFailed(
                    f"CodeBuild refused to start the {props['BuildEnvironment'].get('FLAVOUR', '')} image build "
                    f"{len(START_RETRY_DELAYS) + 1} times over {sum(START_RETRY_DELAYS)} s ({QUOTA_EXCEEDED}: "
                    f'{error.get("Message", "")}). The account\'s CodeBuild quota "{QUOTA_NAME}" is used up or 0 '
                    "(new accounts often start there): request at least 1 in Service Quotas > AWS CodeBuild, or "
                    "wait for the account's other builds to finish, then deploy again"
                ) from None
            sleep(delay)


def is_complete(event: dict[str, Any], _context: object = None, client: Any = None) -> dict[str, Any]:
    if event["RequestType"] == "Delete":
        return {"IsComplete": True}
    build_id = event["Data"]["BuildId"]
    build = (client or _codebuild()).batch_get_builds(ids=[build_id])["builds"][0]
    status = build["buildStatus"]
    if status == RUNNING:
        return {"IsComplete": False}
    log_link = build.get("logs", {}).get("deepLink", "(no log link)")
    if status != "SUCCEEDED":
        raise ImageBuildFailed(f"image build {build_id} {status}{_failed_phase(build)}; build log: {log_link}")
    exported = {v["name"]: v.get("value", "") for v in build.get("exportedEnvironmentVariables", [])}
    digest = exported.get("IMAGE_DIGEST", "")
    if not DIGEST.match(digest):
        raise ImageBuildFailed(
            f"image build {build_id} published no image digest (got {digest!r}); build log: {log_link}"
        )
    props = event["ResourceProperties"]
    return {
        "IsComplete": True,
        "Data": {
            "BuildId": build_id,
            "ImageDigest": digest,
            "ImageUri": f"{props['RepositoryUri']}@{digest}",
            "ImageTag": props["ImageTag"],
            "LogLink": log_link,
        },
    }


def _failed_phase(build: dict[str, Any]) -> str:
    for phase in build.get("phases", []):
        if phase.get("phaseStatus") not in (None, "SUCCEEDED"):
            messages = "; ".join(c.get("message", "") for c in phase.get("contexts", []) if c.get("message"))
            return f" in {phase.get('phaseType')}" + (f" ({messages})" if messages else "")
    return ""
