"""Model artifacts: a verified GGUF, its manifest.json and model.tar.gz (both at the archive root), optionally in S3.

The checksum is checked before anything is written. Every step is idempotent: a second run with the
same inputs changes nothing, and a calibration, a policy and answer settings already written into the manifest
for the same model file are kept (an answer setting given again replaces the recorded one). The upload puts the
artifact's evaluation record (`decisionctl record-evaluation`) beside manifest.json when the directory holds one
of this manifest.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import posixpath
import re
import shutil
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from decision_spec.answer_settings import AnswerSettings, contradictions, shown
from decision_spec.evaluation_record import RECORD_NAME, parse_record
from decision_spec.manifest import (
    SCHEMA,
    ChecksumMismatch,
    Manifest,
    policy_answer_settings,
    read_manifest,
    sha256_file,
    write_manifest,
)
from decision_spec.names import MANIFEST_NAME
from decision_spec.policy import Policy
from pydantic import ValidationError
from tqdm import tqdm

from decisionctl.release.footprint import Footprint, footprint_or_note
from decisionctl.release.requantize import TARGETS, RequantizeError, requantize_q4_0, requantized_name

TARBALL = "model.tar.gz"
GGUF_MAGIC = b"GGUF"
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
_COPY_CHUNK = 8 * 1024 * 1024


class PackagingError(Exception):
    pass


def _bar(desc: str, total: int) -> Any:
    return tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024, disable=None, leave=False)


class _MeteredReader(io.RawIOBase):
    """A read-only file that reports the bytes read to a progress bar."""

    def __init__(self, inner: IO[bytes], bar: Any) -> None:
        self._inner, self._bar = inner, bar

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self._inner.read(size)
        self._bar.update(len(data))
        return data

    def close(self) -> None:
        self._inner.close()
        super().close()


def hash_with_progress(path: Path, desc: str) -> str:
    with _bar(desc, path.stat().st_size) as bar:
        return sha256_file(path, on_chunk=bar.update)


@dataclass
class Packaged:
    directory: Path
    gguf: Path
    manifest: Manifest
    tarball: Path
    tarball_sha256: str
    footprint: Footprint | None = None  # None: the GGUF's header gave no shape (the manifest names no KV size)
    actions: list[str] = field(default_factory=list)
    uploaded: list[str] = field(default_factory=list)


def parse_s3_url(url: str) -> tuple[str, str]:
    """s3://bucket/key (a key ending in / gets model.tar.gz appended)."""
    match = re.match(r"^s3://([a-z0-9][a-z0-9.\-]{1,61}[a-z0-9])/(.*)$", url)
    if not match:
        raise PackagingError(f"not an S3 URL of the form s3://bucket/key: {url!r}")
    bucket, key = match.groups()
    if not key or key.endswith("/"):
        key += TARBALL
    return bucket, key


def _place(source: Path, dest: Path, sha256: str) -> str:
    """Hard-link the GGUF into place (copy across file systems); nothing to do if it is already there."""
    if dest.exists():
        if os.path.samefile(source, dest):
            return f"{dest.name} already in place (same file)"
        if dest.stat().st_size == source.stat().st_size and hash_with_progress(dest, f"checking {dest.name}") == sha256:
            return f"{dest.name} already in place (same sha256)"
    tmp = dest.with_name(dest.name + ".partial")
    tmp.unlink(missing_ok=True)
    try:
        os.link(source, tmp)
        how = "hard-linked"
    except OSError:
        bar = _bar(f"copying {source.name}", source.stat().st_size)
        with source.open("rb") as src, tmp.open("wb") as dst, bar:
            while chunk := src.read(_COPY_CHUNK):
                dst.write(chunk)
                bar.update(len(chunk))
        shutil.copystat(source, tmp)
        how = "copied"
    os.replace(tmp, dest)
    return f"{dest.name} {how} into {dest.parent}"


def _tarball_current(tar_path: Path, manifest_bytes: bytes, gguf: Path) -> bool:
    """True if the archive holds this manifest first, then a GGUF of this name and size (the GGUF is not inflated)."""
    if not tar_path.exists():
        return False
    try:
        with tarfile.open(tar_path, "r:gz") as tar:
            first = tar.next()
            if first is None or first.name != MANIFEST_NAME:
                return False
            stored = tar.extractfile(first)
            if stored is None or stored.read() != manifest_bytes:
                return False
            second = tar.next()
            return second is not None and second.name == gguf.name and second.size == gguf.stat().st_size
    except (tarfile.TarError, OSError, EOFError):
        return False


class _HashingWriter(io.RawIOBase):
    def __init__(self, inner: IO[bytes]) -> None:
        self._inner, self.digest = inner, hashlib.sha256()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = bytes(data)
        self.digest.update(view)
        return self._inner.write(view)


def _build_tarball(tar_path: Path, manifest_path: Path, gguf: Path) -> str:
    """A reproducible archive (fixed times and owners): the same inputs give the same bytes. Returns its sha256."""
    tmp = tar_path.with_name(tar_path.name + ".partial")
    with tmp.open("wb") as raw:
        hashing = _HashingWriter(raw)
        # level 1: quantized weights barely compress, and level 9 costs minutes on large models
        with (
            gzip.GzipFile(filename="", mode="wb", fileobj=hashing, compresslevel=1, mtime=0) as gz,
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
            _bar(f"archiving {tar_path.name}", manifest_path.stat().st_size + gguf.stat().st_size) as bar,
        ):
            for member in (manifest_path, gguf):
                info = tarfile.TarInfo(member.name)
                info.size, info.mode, info.mtime = member.stat().st_size, 0o644, 0
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                with member.open("rb") as f:
                    tar.addfile(info, _MeteredReader(f, bar))
    os.replace(tmp, tar_path)
    return hashing.digest.hexdigest()


def answer_settings_given(given: Mapping[str, str], kept: AnswerSettings | None) -> AnswerSettings | None:
    """The answer settings to record: those kept from the previous manifest of this model, with `given` (name ->
    value, as the DECISION_ variable reads it) over them; PackagingError names a setting or value that is wrong."""
    unknown = sorted(set(given) - set(AnswerSettings.model_fields))
    if unknown:
        raise PackagingError(
            f"--answer-setting {', '.join(unknown)}: not a setting that changes answers; those are "
            f"{', '.join(AnswerSettings.model_fields)}"
        )
    try:
        values = AnswerSettings.model_validate({**(kept.recorded() if kept else {}), **given})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise PackagingError(f"--answer-setting {first['loc'][0]}={first.get('input')}: {first['msg']}") from None
    return values if values.recorded() else None


def check_answer_settings(recorded: AnswerSettings | None, policy: Policy | None) -> None:
    """PackagingError where the settings recorded contradict those the kept policy was measured under."""
    contradicted = contradictions(recorded or AnswerSettings(), policy_answer_settings(policy))
    if contradicted and policy is not None:
        listed = ", ".join(f"{name} {mine} (the policy: {its})" for name, (mine, its) in contradicted.items())
        raise PackagingError(
            f"the answer settings contradict policy {policy.version} of this model, measured under other ones: "
            f"{listed}; measure the policy again under them (`decisionctl evaluate --write-policy`), or record the "
            "policy's; nothing was written"
        )


def _readable_manifest(path: Path) -> Manifest | None:
    """The manifest a previous run wrote, if there is a readable one."""
    try:
        return read_manifest(path) if path.exists() else None
    except ValueError:
        return None


def _checked_arguments(gguf: Path, expected_sha256: str, requantize: str | None) -> str:
    """The expected sha256 normalised; PackagingError for a malformed one, a missing file or an unknown target."""
    expected = expected_sha256.strip().lower()
    if not _SHA256_HEX.match(expected):
        raise PackagingError(f"--expected-sha256 must be 64 hex digits, got {expected_sha256!r}")
    if not gguf.is_file():
        raise PackagingError(f"no such file: {gguf}")
    if requantize is not None and requantize not in TARGETS:
        raise PackagingError(f"--requantize {requantize}: the one target is {', '.join(TARGETS)}")
    return expected


def _requantized(gguf: Path, sha256: str, source: str, out: Path) -> tuple[Path, str, str, str]:
    """The verified `gguf`'s Q4_0 copy written into `out` (kept where `out` already holds these bytes): its path,
    sha256, the manifest's source (naming the file it was made from) and what was done."""
    dest = out / requantized_name(gguf.name)
    tmp = dest.with_name(dest.name + ".partial")
    tmp.unlink(missing_ok=True)
    try:
        rewritten = requantize_q4_0(gguf, tmp)  # makes `out`, once the source is known to be rewritable
    except RequantizeError as exc:
        raise PackagingError(f"{exc}; nothing was written") from None
    made = hash_with_progress(tmp, f"sha256 {dest.name}")
    if dest.exists() and dest.stat().st_size == tmp.stat().st_size and sha256_file(dest) == made:
        tmp.unlink()
        action = f"{dest.name} already in place (same sha256)"
    else:
        os.replace(tmp, dest)
        action = f"{dest.name} written: {rewritten} Q4_1 tensors of {gguf.name} requantized to Q4_0"
    described = f"{source}; {gguf.name} (sha256 {sha256}) requantized to Q4_0 by decisionctl package-model"
    return dest, made, described, action


def package_model(
    gguf: Path,
    *,
    expected_sha256: str,
    source: str,
    license: str,
    out: Path,
    upload: str | None = None,
    s3_client: Any = None,
    answer_settings: Mapping[str, str] | None = None,
    requantize: str | None = None,
) -> Packaged:
    """`answer_settings`: the settings that change answers to record (package-model's --answer-setting), over those
    a previous manifest of the model recorded; the adapter adopts them at start. `requantize` ("q4_0"): the artifact
    holds the verified GGUF's Q4_0 copy (decisionctl.release.requantize), its own sha256 in the manifest and the
    source's named in `source`."""
    expected = _checked_arguments(gguf, expected_sha256, requantize)
    destination = parse_s3_url(upload) if upload else None
    actual = hash_with_progress(gguf, f"sha256 {gguf.name}")
    if actual != expected:
        raise ChecksumMismatch(gguf, expected, actual)
    with gguf.open("rb") as f:
        if f.read(4) != GGUF_MAGIC:
            raise PackagingError(f"{gguf} has the expected checksum but is not a GGUF file (no GGUF magic)")
    written = None  # what --requantize did, which places the copy itself
    if requantize is not None:
        gguf, actual, source, written = _requantized(gguf, actual, source, out)
    footprint, unread = footprint_or_note(gguf)

    manifest_path = out / MANIFEST_NAME
    previous = _readable_manifest(manifest_path)
    same_model = previous if previous is not None and previous.sha256 == actual else None
    kept = same_model.calibration if same_model else None
    kept_policy = same_model.policy if same_model else None  # measured on this model and calibration: still valid
    recorded = answer_settings_given(answer_settings or {}, same_model.answer_settings if same_model else None)
    check_answer_settings(recorded, kept_policy)

    out.mkdir(parents=True, exist_ok=True)
    dest = out / gguf.name
    actions = [written or _place(gguf, dest, actual)]
    manifest = Manifest(
        schema=SCHEMA,
        model_file=gguf.name,
        sha256=actual,
        size_bytes=dest.stat().st_size,
        kv_bytes_per_token=footprint.kv_bytes_per_token if footprint is not None else None,
        source=source,
        license=license,
        calibration=kept,
        policy=kept_policy,
        answer_settings=recorded,
    )
    if manifest == previous:
        actions.append(f"{MANIFEST_NAME} unchanged")
    else:
        write_manifest(manifest, manifest_path)
        kept_parts = [name for name, block in (("calibration", kept), ("policy", kept_policy)) if block]
        actions.append(f"{MANIFEST_NAME} written" + (f" ({' and '.join(kept_parts)} kept)" if kept_parts else ""))
    actions += [unread] if unread else []
    if recorded is not None:
        listed = ", ".join(f"{name} {shown(value)}" for name, value in recorded.recorded().items())
        actions.append(f"answer settings recorded: {listed} (the adapter adopts them at start)")
    manifest_bytes = manifest_path.read_bytes()
    others = sorted(p.name for p in out.glob("*.gguf") if p.name != gguf.name)
    if others:
        actions.append(f"note: {out} also holds {', '.join(others)}; the manifest names {gguf.name}")

    tar_path, sidecar = out / TARBALL, out / (TARBALL + ".sha256")
    if _tarball_current(tar_path, manifest_bytes, dest) and sidecar.exists():
        tar_sha = sidecar.read_text(encoding="utf-8").split()[0]
        actions.append(f"{TARBALL} unchanged")
    else:
        tar_sha = _build_tarball(tar_path, manifest_path, dest)
        sidecar.write_text(f"{tar_sha}  {TARBALL}\n", encoding="utf-8")
        actions.append(f"{TARBALL} written")
    packaged = Packaged(out, dest, manifest, tar_path, tar_sha, footprint, actions)
    if destination is not None:
        upload_artifacts(packaged, *destination, s3_client=s3_client)
    return packaged


def upload_artifacts(packaged: Packaged, bucket: str, key: str, *, s3_client: Any = None) -> None:
    """Put model.tar.gz at s3://bucket/key and manifest.json beside it; skip the archive if S3 has these bytes."""
    from botocore.exceptions import ClientError

    if s3_client is None:
        import boto3

        s3_client = boto3.client("s3")
    manifest_key = posixpath.join(posixpath.dirname(key), MANIFEST_NAME)
    try:
        head = s3_client.head_object(Bucket=bucket, Key=key)
        present = head.get("Metadata", {}).get("sha256") == packaged.tarball_sha256
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey", "NotFound"):
            raise
        present = False
    if present:
        packaged.actions.append(f"s3://{bucket}/{key} already holds this archive")
    else:
        with _bar(f"uploading {TARBALL}", packaged.tarball.stat().st_size) as bar:
            s3_client.upload_file(
                str(packaged.tarball),
                bucket,
                key,
                Callback=bar.update,
                ExtraArgs={
                    "ContentType": "application/gzip",
                    "Metadata": {"sha256": packaged.tarball_sha256, "model-sha256": packaged.manifest.sha256},
                },
            )
        packaged.actions.append(f"uploaded s3://{bucket}/{key}")
    s3_client.put_object(
        Bucket=bucket,
        Key=manifest_key,
        Body=(packaged.directory / MANIFEST_NAME).read_bytes(),
        ContentType="application/json",
    )
    packaged.uploaded += [f"s3://{bucket}/{key}", f"s3://{bucket}/{manifest_key}"]
    _upload_evaluation(packaged, bucket, posixpath.dirname(key), s3_client)


def _upload_evaluation(packaged: Packaged, bucket: str, prefix: str, s3_client: Any) -> None:
    """Put the artifact's evaluation record (decisionctl record-evaluation) beside manifest.json, if the directory
    holds one of this manifest; a record of another manifest stays behind, with a note."""
    path = packaged.directory / RECORD_NAME
    if not path.is_file():
        return
    data = path.read_bytes()
    record, malformed = parse_record(data)
    evaluated = record["artifact"]["manifest_sha256"] if record is not None else None
    if evaluated != sha256_file(packaged.directory / MANIFEST_NAME):
        why = (
            f"the evaluation of another manifest ({evaluated})" if record else f"not an evaluation record ({malformed})"
        )
        packaged.actions.append(
            f"note: {path} is {why}; not uploaded: run `decisionctl record-evaluation` against this artifact"
        )
        return
    evaluation_key = posixpath.join(prefix, RECORD_NAME)
    s3_client.put_object(Bucket=bucket, Key=evaluation_key, Body=data, ContentType="application/json")
    packaged.uploaded.append(f"s3://{bucket}/{evaluation_key}")
