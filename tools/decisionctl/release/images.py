"""Pinning the llama.cpp DLC images: digests looked up through ECR's API, written into cdk.json in place.

The lookup is `ecr:BatchGetImage`, the call a `docker pull` makes to resolve a tag, so it needs only the
pull permission the DLC registry already grants (DescribeImages is not part of a pull and is refused on
other accounts' repositories). The registry is the environment's `dlc.registry_account` in its own region
and, for another region (`--region`), that region's DLC account from the table synth checks cdk.json
against (decisionctl/dlc_registry.py, plain data without CDK imports). cdk.json is edited as text: only the
digest strings change, every other byte (formatting, key order, the feature flags) stays as it was.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decision_spec.dlc_registry import DLC_REGISTRY_ACCOUNTS, partition_of, registry_account

# cdk.json key under environments.<env>.dlc -> the DLC tag it pins.
DLC_TAGS = {"cpu_digest": "server-sagemaker-cpu-v1", "cuda_digest": "server-sagemaker-cuda-v1"}
# Every manifest kind ECR stores, so it returns the tag's own manifest unconverted and its digest is the
# one a pull of the tag resolves to (left out, ECR may answer with a converted schema-1 manifest).
MANIFEST_MEDIA_TYPES = (
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
)
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_ACCOUNT = re.compile(r"^\d{12}$")
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class PinError(RuntimeError):
    """Pinning cannot go ahead; the message says why and what to do. cdk.json is left as it was."""


@dataclass(frozen=True)
class DlcSource:
    """Where one environment's DLC images come from, and the digests cdk.json pins now."""

    environment: str
    region: str
    registry_account: str
    repository: str
    pinned: Mapping[str, str]
    registry_origin: str  # where registry_account came from, for messages that say what to check

    @property
    def registry(self) -> str:
        return f"repository {self.repository} of registry {self.registry_account} in {self.region}"


@dataclass(frozen=True)
class DigestChange:
    """One digest key: what cdk.json holds and what the tag resolves to now."""

    key: str
    tag: str
    old: str
    new: str

    @property
    def changed(self) -> bool:
        return self.old != self.new

    def describe(self, environment: str) -> str:
        where = f"environments.{environment}.dlc.{self.key} ({self.tag})"
        return f"{where}: {self.old} -> {self.new}" if self.changed else f"{where}: {self.new} (unchanged)"


def read_source(document: Mapping[str, Any], environment: str, region: str | None = None) -> DlcSource:
    """The DLC block of `environments.<environment>` in a parsed cdk.json; `region` overrides the env's."""
    context = document.get("context")
    environments = context.get("environments") if isinstance(context, Mapping) else None
    if not isinstance(environments, Mapping) or environment not in environments:
        known = ", ".join(sorted(environments)) if isinstance(environments, Mapping) else "none"
        raise PinError(f"cdk.json has no environment {environment!r} under context.environments (known: {known})")
    env = environments[environment]
    prefix = f"environments.{environment}"
    dlc = env.get("dlc") if isinstance(env, Mapping) else None
    if not isinstance(dlc, Mapping):
        raise PinError(f"{prefix}.dlc: missing (an object with registry_account, repository and the digests)")
    account, repository = dlc.get("registry_account"), dlc.get("repository")
    if not isinstance(account, str) or not _ACCOUNT.match(account):
        raise PinError(f"{prefix}.dlc.registry_account: must be a 12-digit account id, got {account!r}")
    if not isinstance(repository, str) or not repository:
        raise PinError(f"{prefix}.dlc.repository: must be a repository name such as llama-cpp, got {repository!r}")
    pinned = {}
    for key in DLC_TAGS:
        value = dlc.get(key)
        if not isinstance(value, str):
            raise PinError(f"{prefix}.dlc.{key}: missing; write any sha256:... string and pin again")
        pinned[key] = value
    own_region = env.get("region")
    chosen = region or own_region
    if not isinstance(chosen, str) or not chosen:
        raise PinError(f"{prefix}.region: missing; pass --region")
    origin = f"{prefix}.dlc.registry_account"
    if chosen != own_region:
        # cdk.json's account is the DLC registry of the environment's region; other regions have their own.
        found = registry_account(chosen)
        if found is None:
            raise PinError(
                f"no DLC registry is published in {chosen} (containers/decision_spec/dlc_registry.py); regions with "
                "one: " + ", ".join(DLC_REGISTRY_ACCOUNTS)
            )
        account, origin = found, f"the DLC registry account of {chosen} (containers/decision_spec/dlc_registry.py)"
    return DlcSource(environment, chosen, account, repository, pinned, origin)


def ecr_client(region: str) -> Any:
    """An ECR client from the standard AWS credential chain."""
    import boto3

    return boto3.client("ecr", region_name=region)


def look_up(source: DlcSource, client: Any) -> dict[str, str]:
    """The digest each DLC tag resolves to now, by cdk.json key; PinError names what went wrong."""
    from botocore.exceptions import BotoCoreError, ClientError

    tags = list(DLC_TAGS.values())
    try:
        reply = client.batch_get_image(
            registryId=source.registry_account,
            repositoryName=source.repository,
            imageIds=[{"imageTag": tag} for tag in tags],
            acceptedMediaTypes=list(MANIFEST_MEDIA_TYPES),
        )
    except ClientError as exc:
        raise PinError(_client_error(source, exc)) from None
    except BotoCoreError as exc:
        raise PinError(f"cannot reach ECR in {source.region}: {exc}") from None
    found: dict[str, str] = {}
    for image in reply.get("images", []):
        image_id = image.get("imageId", {})
        tag, digest = image_id.get("imageTag"), image_id.get("imageDigest")
        if tag in tags and isinstance(digest, str) and _DIGEST.match(digest):
            found[tag] = digest
    problems = [
        f"{failure.get('imageId', {}).get('imageTag', '?')}: {failure.get('failureCode')} "
        f"({failure.get('failureReason', 'no reason given')})"
        for failure in reply.get("failures", [])
    ]
    missing = [tag for tag in tags if tag not in found]
    if missing:
        detail = "; ".join(problems) if problems else "no image with a sha256 digest returned"
        raise PinError(
            f"{source.registry}: tag {', '.join(missing)} not found ({detail}). Check that the DLC publishes "
            f"these tags in {source.region} (another region: --region) and that {source.registry_origin} "
            f"({source.registry_account}) is that region's DLC account"
        )
    return {key: found[tag] for key, tag in DLC_TAGS.items()}


def _client_error(source: DlcSource, exc: Any) -> str:
    code = exc.response.get("Error", {}).get("Code", "")
    message = exc.response.get("Error", {}).get("Message", "")
    registry = f"{source.region}:{source.registry_account}"
    arn = f"arn:{partition_of(source.region)}:ecr:{registry}:repository/{source.repository}"
    if code in ("AccessDeniedException", "AccessDenied"):
        return (
            f"access denied reading {source.registry} ({message}). The credentials need ecr:BatchGetImage on "
            f"{arn} (the pull permission; no Docker login is needed)"
        )
    if code == "RepositoryNotFoundException":
        return (
            f"{source.registry}: no such repository ({message}). Check "
            f"environments.{source.environment}.dlc.repository and {source.registry_origin} "
            f"against the DLC registry of {source.region}"
        )
    if code in ("UnrecognizedClientException", "InvalidSignatureException", "ExpiredTokenException"):
        return f"the AWS credentials were refused ({code}: {message}); refresh them and pin again"
    return f"ECR refused BatchGetImage on {source.registry}: {code}: {message}"


def changes(source: DlcSource, digests: Mapping[str, str]) -> list[DigestChange]:
    return [DigestChange(key, tag, source.pinned[key], digests[key]) for key, tag in DLC_TAGS.items()]


def rewrite(text: str, environment: str, digests: Mapping[str, str]) -> str:
    """cdk.json's text with `environments.<environment>.dlc.<key>` set to each digest, nothing else touched."""
    spans = []
    for key, digest in digests.items():
        if not _DIGEST.match(digest):
            raise PinError(f"refusing to write {digest!r} into {key}: not a sha256:<64 hex> digest")
        start, end = _string_span(text, ("context", "environments", environment, "dlc", key))
        spans.append((start, end, json.dumps(digest)))
    result = text
    for start, end, literal in sorted(spans, reverse=True):
        result = result[:start] + literal + result[end:]
    expected = json.loads(text)
    expected["context"]["environments"][environment]["dlc"].update(digests)
    if json.loads(result) != expected:
        raise PinError(
            "cdk.json has a layout this editor does not handle (a duplicated key?); edit the digests by hand"
        )
    return result


def _string_span(text: str, path: tuple[str, ...]) -> tuple[int, int]:
    """Start and end offsets of the JSON string literal at `path` (object keys from the root)."""
    pos = _skip(text, 0)
    for depth, key in enumerate(path):
        where = ".".join(path[:depth]) or "the document"
        if text[pos : pos + 1] != "{":
            raise PinError(f"cdk.json: {where} is not an object")
        pos = _member_value(text, pos, key, where)
    if text[pos : pos + 1] != '"':
        raise PinError(f"cdk.json: {'.'.join(path)} is not a string")
    _, end = _DECODER.raw_decode(text, pos)
    return pos, end


def _member_value(text: str, pos: int, key: str, where: str) -> int:
    """Offset of the value of `key` in the object whose `{` is at `pos`."""
    pos = _skip(text, pos + 1)
    while text[pos : pos + 1] == '"':
        name, pos = _DECODER.raw_decode(text, pos)
        pos = _skip(text, pos)
        pos = _skip(text, pos + 1)  # past the colon
        if name == key:
            return pos
        _, pos = _DECODER.raw_decode(text, pos)
        pos = _skip(text, pos)
        if text[pos : pos + 1] == ",":
            pos = _skip(text, pos + 1)
    raise PinError(f"cdk.json: {where} has no key {key!r}")


def _skip(text: str, pos: int) -> int:
    match = _WHITESPACE.match(text, pos)
    assert match is not None  # the pattern matches the empty string
    return match.end()


@dataclass(frozen=True)
class PinResult:
    source: DlcSource
    changes: list[DigestChange]
    written: bool


def pin_images(
    cdk_json: Path, environment: str, *, region: str | None = None, dry_run: bool = False, client: Any = None
) -> PinResult:
    """Look up the DLC digests for `environment` and write changed ones into `cdk_json` (unless dry_run)."""
    try:
        text = cdk_json.read_bytes().decode("utf-8")  # bytes: line endings come back exactly as they were
    except OSError as exc:
        raise PinError(f"cannot read {cdk_json}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise PinError(f"{cdk_json} is not UTF-8 text: {exc}") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PinError(f"{cdk_json} is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise PinError(f"{cdk_json} must hold a JSON object with a context key")
    source = read_source(document, environment, region)
    digests = look_up(source, client if client is not None else ecr_client(source.region))
    found = changes(source, digests)
    if dry_run or not any(change.changed for change in found):
        return PinResult(source, found, written=False)
    _replace_file(cdk_json, rewrite(text, environment, digests))
    return PinResult(source, found, written=True)


def _replace_file(path: Path, text: str) -> None:
    """Write beside the file, then rename over it: an interrupted run leaves the old cdk.json whole."""
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.chmod(temporary, path.stat().st_mode & 0o777)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
