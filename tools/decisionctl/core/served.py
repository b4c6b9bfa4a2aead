"""The evaluation record a deployed stack serves: its sha256 from the stack's output, its bytes from git history.

The Serving stack carries the sha256 of the record it was deployed with as the output EvaluationRecordSha256
(stacks/serving_stack.py); the record's path holds the candidate's version now, so the served one is found among
the versions the repository's history holds of that path.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Any

from decision_spec.evaluation_record import RECORD_OUTPUT


class ServedError(ValueError):
    """The served record cannot be found: the history holds no version with that sha256, or PATH is not in git."""


def served_sha256(cloudformation: Any, stack: str) -> str | None:
    """The stack's EvaluationRecordSha256; None when the stack does not exist or has no such output."""
    from botocore.exceptions import ClientError

    try:
        described = cloudformation.describe_stacks(StackName=stack)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") == "ValidationError" and "does not exist" in str(error.get("Message", "")):
            return None
        raise
    for found in described.get("Stacks", []):
        for output in found.get("Outputs") or []:
            if output.get("OutputKey") == RECORD_OUTPUT:
                return str(output["OutputValue"])
    return None


def _git(args: list[str], cwd: Path) -> bytes:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True).stdout


def version_with(path: Path, sha256: str) -> tuple[str, bytes]:
    """The newest commit whose version of `path` has this sha256, and those bytes; ServedError if none has."""
    path = path.resolve()
    try:
        top = Path(_git(["rev-parse", "--show-toplevel"], path.parent).decode().strip()).resolve()
        relative = path.relative_to(top).as_posix()
        revisions = _git(["log", "--format=%H", "--", relative], top).decode().split()
    except (subprocess.CalledProcessError, OSError, ValueError) as exc:
        raise ServedError(f"{path}: not a file in a git repository's history ({exc})") from exc
    for revision in revisions:
        try:
            data = _git(["show", f"{revision}:{relative}"], top)
        except subprocess.CalledProcessError:
            continue  # the commit deleted it
        if hashlib.sha256(data).hexdigest() == sha256:
            return revision, data
    raise ServedError(
        f"no version of {relative} in the {len(revisions)} commits of its history here has sha256 {sha256}, the "
        "record the stack serves: a shallow clone holds too little history (check out with fetch-depth: 0)"
    )


def write_served_record(stack: str, record: str, out: str, *, cloudformation: Any) -> str:
    """The served-record use case: the version of the record at path `record` the stack serves written to `out`;
    what happened, as text (nothing written where the stack serves no record yet); ServedError where no version has
    its sha256."""
    sha256 = served_sha256(cloudformation, stack)
    if sha256 is None:
        return f"{stack} serves no recorded evaluation yet (no stack or no {RECORD_OUTPUT}): nothing written"
    revision, data = version_with(Path(record), sha256)
    Path(out).write_bytes(data)
    return f"{stack} serves {record} as of {revision[:12]} (sha256 {sha256}): wrote {out}"
