"""Custom resource `Custom::DecisionImage`: build one decision image in CodeBuild and wait for it.

Run by the CDK provider framework: `on_event` starts the build, `is_complete` polls it. A failed
build fails the deployment with the build's log link; a successful one yields the image digest that
the SageMaker model pins (`<repository uri>@<digest>`). Deletion leaves images to the repository's
lifecycle rules: a rollback or another stack may still pull them.
"""

from __future__ import annotations

import re
from typing import Any

import boto3

DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
RUNNING = "IN_PROGRESS"


class ImageBuildFailed(RuntimeError):
    """The build ended without an image; the message carries the status, the failed phase and the log link."""


def _codebuild() -> Any:
    return boto3.client("codebuild")


def on_event(event: dict[str, Any], _context: object = None, client: Any = None) -> dict[str, Any]:
    props = event["ResourceProperties"]
    physical_id = f"{props['RepositoryUri']}:{props['ImageTag']}"
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    overrides = [
        {"name": name, "value": str(value), "type": "PLAINTEXT"}
        for name, value in sorted(props["BuildEnvironment"].items())
    ]
    build = (client or _codebuild()).start_build(
        projectName=props["ProjectName"], environmentVariablesOverride=overrides
    )
    return {"PhysicalResourceId": physical_id, "Data": {"BuildId": build["build"]["id"]}}


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
