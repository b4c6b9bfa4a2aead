"""decisionctl pin-images on a copy of the real cdk.json.

botocore's Stubber stands in for ECR (no AWS account is used): it checks every BatchGetImage request
field for field and answers as ECR does, including its per-tag failures and AccessDenied.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from decision_spec import dlc_registry
from decisionctl.commands import ALL, BY_NAME, cli, pin_images
from decisionctl.release import images

ROOT = Path(__file__).resolve().parents[2]
CPU = "sha256:" + "1" * 64
CUDA = "sha256:" + "c" * 64
ZERO = "sha256:" + "0" * 64
CPU_TAG, CUDA_TAG = "server-sagemaker-cpu-v1", "server-sagemaker-cuda-v1"


def _ecr(region: str = "us-west-2") -> Any:
    return boto3.client("ecr", region_name=region, aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret")


def _request(registry: str = "763104351884") -> dict[str, Any]:
    return {
        "registryId": registry,
        "repositoryName": "llama-cpp",
        "imageIds": [{"imageTag": CPU_TAG}, {"imageTag": CUDA_TAG}],
        "acceptedMediaTypes": list(images.MANIFEST_MEDIA_TYPES),
    }


def _image(tag: str, digest: str) -> dict[str, Any]:
    return {
        "registryId": "763104351884",
        "repositoryName": "llama-cpp",
        "imageId": {"imageTag": tag, "imageDigest": digest},
        "imageManifest": "{}",
        "imageManifestMediaType": "application/vnd.docker.distribution.manifest.v2+json",
    }


FOUND = {"images": [_image(CPU_TAG, CPU), _image(CUDA_TAG, CUDA)], "failures": []}


@pytest.fixture
def cdk_json(tmp_path: Path) -> Path:
    copy = tmp_path / "cdk.json"
    shutil.copyfile(ROOT / "cdk.json", copy)
    return copy


@pytest.fixture
def ecr(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The client pin-images creates, stubbed; `regions` records the region it was created for."""
    made: dict[str, Any] = {"regions": []}

    def factory(region: str) -> Any:
        made["regions"].append(region)
        made["client"] = client = _ecr(region)
        made["stub"] = stub = Stubber(client)
        for response, params in made.get("script", []):
            if isinstance(response, str):
                stub.add_client_error("batch_get_image", service_error_code=response, expected_params=params)
            else:
                stub.add_response("batch_get_image", response, params)
        stub.activate()
        return client

    monkeypatch.setattr(images, "ecr_client", factory)
    return made


def _run(cdk_json: Path, *argv: str) -> int:
    """Through decisionctl's own parser, as `decisionctl pin-images ...` runs."""
    return cli.main(["pin-images", *argv, "--cdk-json", str(cdk_json)])


def test_only_the_environments_digest_strings_change(cdk_json: Path, ecr: dict[str, Any], capsys) -> None:
    before = cdk_json.read_bytes()
    ecr["script"] = [(FOUND, _request())]
    assert _run(cdk_json, "--env", "dev") == 0
    ecr["stub"].assert_no_pending_responses()
    after = cdk_json.read_bytes()
    # Byte diff: the same bytes except the two dev digests; prod holds the same zeros and keeps them.
    old_lines, new_lines = before.split(b"\n"), after.split(b"\n")
    assert len(old_lines) == len(new_lines)
    changed = [(a, b) for a, b in zip(old_lines, new_lines, strict=True) if a != b]
    assert changed == [
        (b'          "cpu_digest": "%s",' % ZERO.encode(), b'          "cpu_digest": "%s",' % CPU.encode()),
        (b'          "cuda_digest": "%s"' % ZERO.encode(), b'          "cuda_digest": "%s"' % CUDA.encode()),
    ]
    first_change = next(i for i, (a, b) in enumerate(zip(old_lines, new_lines, strict=True)) if a != b)
    assert b'"dev"' in b"\n".join(old_lines[:first_change])
    assert b'"prod"' not in b"\n".join(old_lines[:first_change])
    document = json.loads(after)
    assert document["context"]["environments"]["prod"]["dlc"]["cpu_digest"] == ZERO
    assert list(document["context"]) == list(json.loads(before)["context"])
    out = capsys.readouterr().out
    assert f"environments.dev.dlc.cpu_digest ({CPU_TAG}): {ZERO} -> {CPU}" in out
    assert f"environments.dev.dlc.cuda_digest ({CUDA_TAG}): {ZERO} -> {CUDA}" in out


def test_region_defaults_to_the_environments_and_can_be_overridden(cdk_json: Path, ecr: dict[str, Any]) -> None:
    ecr["script"] = [(FOUND, _request())]
    assert _run(cdk_json, "--env", "prod", "--dry-run") == 0
    assert ecr["regions"] == ["us-west-2"]  # environments.prod.region
    assert _run(cdk_json, "--env", "prod", "--dry-run", "--region", "eu-west-1") == 0
    assert ecr["regions"] == ["us-west-2", "eu-west-1"]
    assert ecr["client"].meta.region_name == "eu-west-1"


@pytest.mark.parametrize(("region", "registry"), [("af-south-1", "626614931356"), ("cn-north-1", "727897471807")])
def test_another_region_is_read_from_that_regions_dlc_registry(
    cdk_json: Path, ecr: dict[str, Any], region: str, registry: str
) -> None:
    # cdk.json holds us-west-2's account (763104351884); the Stubber fails the call on any other registryId.
    assert dlc_registry.registry_account(region) == registry
    ecr["script"] = [(FOUND, _request(registry))]
    assert _run(cdk_json, "--env", "dev", "--dry-run", "--region", region) == 0
    ecr["stub"].assert_no_pending_responses()
    assert ecr["regions"] == [region]


def test_the_environments_own_region_keeps_its_cdk_json_account(cdk_json: Path, ecr: dict[str, Any]) -> None:
    document = json.loads(cdk_json.read_text())
    document["context"]["environments"]["dev"]["dlc"]["registry_account"] = "111122223333"
    cdk_json.write_text(json.dumps(document, indent=2))
    ecr["script"] = [(FOUND, _request("111122223333"))]
    assert _run(cdk_json, "--env", "dev", "--dry-run", "--region", "us-west-2") == 0
    ecr["stub"].assert_no_pending_responses()


def test_another_regions_access_denial_names_that_regions_registry(cdk_json: Path, ecr: dict[str, Any], capsys) -> None:
    ecr["script"] = [("AccessDeniedException", _request("626614931356"))]
    assert _run(cdk_json, "--env", "dev", "--region", "af-south-1") == 1
    err = capsys.readouterr().err
    assert "ecr:BatchGetImage on arn:aws:ecr:af-south-1:626614931356:repository/llama-cpp" in err


def test_a_region_without_a_dlc_registry_stops_before_any_call(cdk_json: Path, ecr: dict[str, Any], capsys) -> None:
    before = cdk_json.read_bytes()
    assert _run(cdk_json, "--env", "dev", "--region", "us-gov-west-1") == 1
    assert ecr["regions"] == []
    assert cdk_json.read_bytes() == before
    err = capsys.readouterr().err
    assert "no DLC registry is published in us-gov-west-1 (containers/decision_spec/dlc_registry.py)" in err


def test_the_registry_table_is_importable_without_the_cdk() -> None:
    # decisionctl imports the table synth checks cdk.json against; on operators' machines it must stay plain data.
    code = (
        "import sys, decisionctl.release.images; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('aws_cdk', 'constructs', 'jsii')))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_dry_run_shows_the_change_and_writes_nothing(cdk_json: Path, ecr: dict[str, Any], capsys) -> None:
    before = cdk_json.read_bytes()
    ecr["script"] = [(FOUND, _request())]
    assert _run(cdk_json, "--env", "dev", "--dry-run") == 0
    assert cdk_json.read_bytes() == before
    captured = capsys.readouterr()
    assert f"{ZERO} -> {CUDA}" in captured.out
    assert "dry run" in captured.err


def test_a_second_run_finds_nothing_to_change(cdk_json: Path, ecr: dict[str, Any], capsys) -> None:
    ecr["script"] = [(FOUND, _request())]
    assert _run(cdk_json, "--env", "dev") == 0
    pinned = cdk_json.read_bytes()
    capsys.readouterr()
    assert _run(cdk_json, "--env", "dev") == 0
    assert cdk_json.read_bytes() == pinned
    captured = capsys.readouterr()
    assert f"{CPU} (unchanged)" in captured.out
    assert "already pins" in captured.err


def test_a_missing_tag_names_it_and_leaves_cdk_json_untouched(cdk_json: Path, ecr: dict[str, Any], capsys) -> None:
    before = cdk_json.read_bytes()
    missing = {
        "images": [_image(CPU_TAG, CPU)],
        "failures": [
            {
                "imageId": {"imageTag": CUDA_TAG},
                "failureCode": "ImageNotFound",
                "failureReason": "Requested image not found",
            }
        ],
    }
    ecr["script"] = [(missing, _request())]
    assert _run(cdk_json, "--env", "dev") == 1
    assert cdk_json.read_bytes() == before
    err = capsys.readouterr().err
    assert f"tag {CUDA_TAG} not found (server-sagemaker-cuda-v1: ImageNotFound (Requested image not found))" in err
    assert "environments.dev.dlc.registry_account" in err
    assert "cdk.json was not changed" in err


def test_access_denied_names_the_permission_and_leaves_cdk_json_untouched(
    cdk_json: Path, ecr: dict[str, Any], capsys
) -> None:
    before = cdk_json.read_bytes()
    ecr["script"] = [("AccessDeniedException", _request())]
    assert _run(cdk_json, "--env", "dev") == 1
    assert cdk_json.read_bytes() == before
    err = capsys.readouterr().err
    assert "access denied" in err
    assert "ecr:BatchGetImage on arn:aws:ecr:us-west-2:763104351884:repository/llama-cpp" in err
    assert "cdk.json was not changed" in err


def test_unknown_environment_is_named_before_any_call(cdk_json: Path, ecr: dict[str, Any], capsys) -> None:
    assert _run(cdk_json, "--env", "staging") == 1
    assert ecr["regions"] == []
    assert "no environment 'staging' under context.environments (known: dev, prod)" in capsys.readouterr().err


def test_rewrite_keeps_any_layout_and_refuses_non_digests() -> None:
    text = '{"context":{"environments":{"a":{"dlc":{"cuda_digest":"x","cpu_digest" : "y"}},"b":{"dlc":{}}}}}\r\n'
    assert images.rewrite(text, "a", {"cpu_digest": CPU}) == text.replace('"y"', f'"{CPU}"')
    with pytest.raises(images.PinError, match="not a sha256"):
        images.rewrite(text, "a", {"cpu_digest": "latest"})
    with pytest.raises(images.PinError, match="has no key 'cpu_digest'"):
        images.rewrite(text, "b", {"cpu_digest": CPU})


def test_the_lookup_needs_no_docker_only_batch_get_image() -> None:
    source = images.read_source(json.loads((ROOT / "cdk.json").read_text()), "dev")
    client = _ecr()
    with Stubber(client) as stub:
        stub.add_response("batch_get_image", FOUND, _request())
        assert images.look_up(source, client) == {"cpu_digest": CPU, "cuda_digest": CUDA}


def test_registered_as_a_decisionctl_command() -> None:
    assert BY_NAME["pin-images"] in ALL and BY_NAME["pin-images"].load() is pin_images
