"""Custom::ModelPreflight handler against botocore's Stubber (a stand-in for S3): each failure says what and how to fix.

The manifests are written by the packaging code itself (decisionctl.release.packaging), so the check reads
exactly what `decisionctl package-model --upload` puts in the bucket.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber
from decision_spec.manifest import SCHEMA, Manifest
from decision_spec.names import MANIFEST_NAME

from stacks.preflight import manifest_key
from stacks.preflight_handler.index import PLACEHOLDER, PreflightFailed, fingerprint, on_event

BUCKET = "decisionendpoints-dev-model-bucket"
ARTIFACT = "models/smollm2/model.tar.gz"
MANIFEST = "models/smollm2/manifest.json"
GGUF_SHA = "c624c2bea4349b36453448197f53b3935a96da7934904c124a612716c348a8ff"
OTHER_SHA = "ab" * 32
TAR_SHA = "cd" * 32
DIGEST = "sha256:" + "12" * 32
FIX = (
    f"`decisionctl package-model <model.gguf> --expected-sha256 {GGUF_SHA} --source <where from> "
    f"--license <license> --out build/model-dev --upload s3://{BUCKET}/{ARTIFACT}`"
)


def props(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "ServiceToken": "arn:aws:lambda:us-west-2:111111111111:function:provider",
        "Bucket": BUCKET,
        "ArtifactKey": ARTIFACT,
        "ManifestKey": MANIFEST,
        "ExpectedModelSha256": GGUF_SHA,
        "ImageDigests": {"environments.dev.dlc.cpu_digest": DIGEST},
        "Environment": "dev",
        "ConfigKey": "environments.dev",
    }
    return {**base, **overrides}


def event(request: str = "Create", **overrides: Any) -> dict[str, Any]:
    return {"RequestType": request, "ResourceProperties": props(**overrides), "PhysicalResourceId": "p"}


def manifest_bytes(sha256: str = GGUF_SHA) -> bytes:
    manifest = Manifest(
        schema=SCHEMA, model_file="SmolLM2-135M-Instruct.Q4_0.gguf", sha256=sha256, size_bytes=98, source="t"
    )
    return json.dumps(manifest.dump(), indent=2, sort_keys=True).encode()


@pytest.fixture()
def s3() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client("s3", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def expect_manifest(stub: Stubber, body: bytes) -> None:
    stub.add_response(
        "get_object",
        {"Body": StreamingBody(io.BytesIO(body), len(body)), "ContentLength": len(body)},
        {"Bucket": BUCKET, "Key": MANIFEST},
    )


def expect_tarball(stub: Stubber, metadata: dict[str, str]) -> None:
    stub.add_response("head_object", {"ContentLength": 1000, "Metadata": metadata}, {"Bucket": BUCKET, "Key": ARTIFACT})


def failure(client: Any, ev: dict[str, Any]) -> str:
    with pytest.raises(PreflightFailed) as caught:
        on_event(ev, None, client)
    return str(caught.value)


def test_the_manifest_key_is_where_package_model_uploads_it() -> None:
    from decisionctl.release.packaging import parse_s3_url

    bucket, key = parse_s3_url(f"s3://{BUCKET}/{ARTIFACT}")
    assert (bucket, manifest_key(key)) == (BUCKET, MANIFEST)
    assert MANIFEST.endswith(MANIFEST_NAME)


def test_a_packaged_artifact_passes_and_reports_its_checksums(s3: tuple[Any, Stubber]) -> None:
    client, stub = s3
    expect_manifest(stub, manifest_bytes())
    expect_tarball(stub, {"sha256": TAR_SHA, "model-sha256": GGUF_SHA})
    result = on_event(event(), None, client)
    assert result == {
        "PhysicalResourceId": f"s3://{BUCKET}/{ARTIFACT}#{fingerprint(props())}",
        "Data": {"ModelFile": "SmolLM2-135M-Instruct.Q4_0.gguf", "ModelSha256": GGUF_SHA, "ArtifactSha256": TAR_SHA},
    }


def test_what_package_model_uploads_passes(s3: tuple[Any, Stubber], tmp_path: Path) -> None:
    """The real upload code writes the manifest and the metadata; the check accepts exactly that."""
    from decisionctl.release.packaging import Packaged, upload_artifacts

    (tmp_path / MANIFEST_NAME).write_bytes(manifest_bytes())
    tarball = tmp_path / "model.tar.gz"
    tarball.write_bytes(b"archive")
    manifest = Manifest.model_validate_json(manifest_bytes())
    uploaded: dict[str, Any] = {}

    class Recorder:
        def head_object(self, **_: Any) -> dict[str, Any]:
            from botocore.exceptions import ClientError

            raise ClientError({"Error": {"Code": "404"}}, "HeadObject")

        def upload_file(self, _path: str, _bucket: str, _key: str, **kwargs: Any) -> None:
            uploaded["metadata"] = kwargs["ExtraArgs"]["Metadata"]

        def put_object(self, **kwargs: Any) -> None:
            uploaded["manifest"] = (kwargs["Key"], kwargs["Body"])

    upload_artifacts(
        Packaged(tmp_path, tmp_path / "m.gguf", manifest, tarball, TAR_SHA), BUCKET, ARTIFACT, s3_client=Recorder()
    )
    client, stub = s3
    key, body = uploaded["manifest"]
    assert key == MANIFEST
    expect_manifest(stub, body)
    expect_tarball(stub, uploaded["metadata"])
    assert on_event(event(), None, client)["Data"]["ArtifactSha256"] == TAR_SHA


def test_missing_manifest_names_the_object_and_the_upload_command(s3: tuple[Any, Stubber]) -> None:
    client, stub = s3
    stub.add_client_error(
        "get_object",
        "NoSuchKey",
        "The specified key does not exist.",
        404,
        expected_params={"Bucket": BUCKET, "Key": MANIFEST},
    )
    message = failure(client, event())
    assert message == f"missing: s3://{BUCKET}/{MANIFEST} does not exist. Package and upload the model: {FIX}"


def test_a_missing_object_read_without_list_permission_is_reported_as_missing(s3: tuple[Any, Stubber]) -> None:
    client, stub = s3
    stub.add_client_error("get_object", "AccessDenied", "Access Denied", 403)
    message = failure(client, event())
    assert message.startswith(f"missing or unreadable: s3://{BUCKET}/{MANIFEST} (S3 answered AccessDenied")
    assert message.endswith(FIX)


def test_missing_tarball_names_it(s3: tuple[Any, Stubber]) -> None:
    client, stub = s3
    expect_manifest(stub, manifest_bytes())
    stub.add_client_error("head_object", "404", "Not Found", 404, expected_params={"Bucket": BUCKET, "Key": ARTIFACT})
    message = failure(client, event())
    assert message == f"missing: s3://{BUCKET}/{ARTIFACT} does not exist. Package and upload the model: {FIX}"


def test_wrong_model_checksum_names_both_and_both_fixes(s3: tuple[Any, Stubber]) -> None:
    client, stub = s3
    expect_manifest(stub, manifest_bytes(OTHER_SHA))
    message = failure(client, event())
    assert message.startswith(
        f"checksum mismatch: s3://{BUCKET}/{MANIFEST} names SmolLM2-135M-Instruct.Q4_0.gguf with sha256 {OTHER_SHA}, "
        f"but environments.dev.model.sha256 is {GGUF_SHA}."
    )
    assert FIX in message and f"set environments.dev.model.sha256 to {OTHER_SHA}" in message


def test_a_tarball_from_another_upload_is_a_mismatch(s3: tuple[Any, Stubber]) -> None:
    client, stub = s3
    expect_manifest(stub, manifest_bytes())
    expect_tarball(stub, {"sha256": TAR_SHA, "model-sha256": OTHER_SHA})
    message = failure(client, event())
    assert f"s3://{BUCKET}/{ARTIFACT} was packaged from a GGUF with sha256 {OTHER_SHA}" in message
    assert f"names {GGUF_SHA}" in message and message.endswith(FIX)


def test_a_tarball_uploaded_without_metadata_is_accepted(s3: tuple[Any, Stubber]) -> None:
    client, stub = s3
    expect_manifest(stub, manifest_bytes())
    expect_tarball(stub, {})
    assert on_event(event(), None, client)["Data"]["ArtifactSha256"] == ""


def test_a_file_that_is_not_a_manifest_is_refused(s3: tuple[Any, Stubber]) -> None:
    client, stub = s3
    expect_manifest(stub, b"<html>not json</html>")
    message = failure(client, event())
    assert message.startswith(f"s3://{BUCKET}/{MANIFEST} is not a model manifest") and message.endswith(FIX)


def test_placeholder_digest_fails_before_any_s3_call(s3: tuple[Any, Stubber]) -> None:
    client, _ = s3  # no response queued: any S3 call would raise
    digests = {"environments.prod.dlc.cpu_digest": DIGEST, "environments.prod.dlc.cuda_digest": "sha256:" + PLACEHOLDER}
    message = failure(client, event(ImageDigests=digests, Environment="prod", ConfigKey="environments.prod"))
    assert message == (
        "environments.prod.dlc.cuda_digest is the all-zero placeholder: run `decisionctl pin-images --env prod` "
        "(it looks the digests up in the DLC registry and writes them into cdk.json), then deploy again"
    )


def test_placeholder_model_checksum_says_where_the_checksum_comes_from(s3: tuple[Any, Stubber]) -> None:
    client, _ = s3
    message = failure(client, event(ExpectedModelSha256=PLACEHOLDER))
    assert message.startswith("environments.dev.model.sha256 is the all-zero placeholder: set it to the GGUF's sha256")
    assert "--expected-sha256 <the GGUF's sha256>" in message and PLACEHOLDER not in message


def test_without_an_expected_checksum_only_presence_is_checked(s3: tuple[Any, Stubber]) -> None:
    client, stub = s3
    expect_manifest(stub, manifest_bytes(OTHER_SHA))
    expect_tarball(stub, {"model-sha256": OTHER_SHA})
    ev = event()
    del ev["ResourceProperties"]["ExpectedModelSha256"]
    assert on_event(ev, None, client)["Data"]["ModelSha256"] == OTHER_SHA


def test_delete_touches_nothing(s3: tuple[Any, Stubber]) -> None:
    client, _ = s3
    assert on_event(event("Delete", ExpectedModelSha256=PLACEHOLDER), None, client) == {"PhysicalResourceId": "p"}


def test_an_update_to_new_properties_is_checked(s3: tuple[Any, Stubber]) -> None:
    client, stub = s3
    stub.add_client_error("get_object", "NoSuchKey", "The specified key does not exist.", 404)
    previous = f"s3://{BUCKET}/models/old/model.tar.gz#{fingerprint(props(ArtifactKey='models/old/model.tar.gz'))}"
    ev = {"RequestType": "Update", "ResourceProperties": props(), "PhysicalResourceId": previous}
    assert failure(client, ev).startswith("missing:")


def test_a_rollback_to_properties_that_passed_is_not_checked_again(s3: tuple[Any, Stubber]) -> None:
    """CloudFormation rolls a failed update back with the old properties and the old physical id; the old
    artifact may be gone by then, and a failing rollback leaves the stack in UPDATE_ROLLBACK_FAILED."""
    client, _ = s3  # nothing queued: any S3 call would raise
    passed = f"s3://{BUCKET}/{ARTIFACT}#{fingerprint(props())}"
    ev = {"RequestType": "Update", "ResourceProperties": props(), "PhysicalResourceId": passed}
    assert on_event(ev, None, client) == {"PhysicalResourceId": passed}


# --- the evaluated manifest (issue 31) ---------------------------------------------------------

EVALUATION_RECORD = "evaluation/dev.json"


def evaluated(body: bytes) -> dict[str, Any]:
    return event(EvaluatedManifestSha256=hashlib.sha256(body).hexdigest(), EvaluationRecord=EVALUATION_RECORD)


def test_the_evaluated_manifest_passes(s3: tuple[Any, Stubber]) -> None:
    client, stub = s3
    body = manifest_bytes()
    expect_manifest(stub, body)
    expect_tarball(stub, {"sha256": TAR_SHA, "model-sha256": GGUF_SHA})
    assert on_event(evaluated(body), None, client)["Data"]["ModelSha256"] == GGUF_SHA


def test_another_manifest_of_the_same_model_is_not_the_evaluated_artifact(s3: tuple[Any, Stubber]) -> None:
    """Same GGUF, another packaging (a policy or calibration changed): its manifest bytes differ."""
    client, stub = s3
    body = manifest_bytes()
    repackaged = body.replace(b'"source": "t"', b'"source": "another packaging"')
    assert repackaged != body
    expect_manifest(stub, repackaged)  # nothing queued after it: the tarball is not read
    ev = evaluated(body)
    message = failure(client, ev)
    uploaded, recorded = hashlib.sha256(repackaged).hexdigest(), hashlib.sha256(body).hexdigest()
    assert message.startswith(
        f"not the evaluated artifact: s3://{BUCKET}/{MANIFEST} has sha256 {uploaded}, but {EVALUATION_RECORD} "
        f"evaluated the artifact whose manifest.json has sha256 {recorded}."
    )
    assert f"--out <that dir> --upload s3://{BUCKET}/{ARTIFACT}" in message
    assert "`decisionctl record-evaluation --env dev --url <adapter serving the artifact>" in message
