"""The first deployment fails fast and the updates roll out guarded (issue 12), read off the synthesized templates.

Every environment is synthesized once per session (tests/cdk_support.py); assertions follow
references instead of relying on generated logical ids.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from stacks import image_build
from stacks.preflight import manifest_key
from tests.cdk_support import VARIANTS, Synthesized, synthesize


@pytest.fixture(scope="module", params=VARIANTS)
def synth(request: pytest.FixtureRequest) -> Synthesized:
    return synthesize(str(request.param))


@pytest.fixture(scope="module")
def prod() -> Synthesized:
    return synthesize("prod")


def one(resources: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    assert len(resources) == 1, sorted(resources)
    return next(iter(resources.items()))


def depends_on(resource: dict[str, Any]) -> set[str]:
    return set(resource.get("DependsOn", []))


def statements_of_role(s: Synthesized, role_logical: str) -> list[dict[str, Any]]:
    res = s.template_json("Serving")["Resources"]
    found = []
    for policy in res.values():
        if policy["Type"] == "AWS::IAM::Policy" and {"Ref": role_logical} in policy["Properties"]["Roles"]:
            found += policy["Properties"]["PolicyDocument"]["Statement"]
    return found


# --- point 2: the preflight ---------------------------------------------------------------------


def test_one_preflight_checks_the_configured_artifact(synth: Synthesized) -> None:
    _, preflight = one(synth.resources("Serving", "Custom::ModelPreflight"))
    props = preflight["Properties"]
    config = synth.config
    assert props["ArtifactKey"] == config.model.s3_key
    assert props["ManifestKey"] == manifest_key(config.model.s3_key)
    assert props["ManifestKey"].endswith("/manifest.json")
    assert "Fn::ImportValue" in props["Bucket"]  # the Foundation's model bucket
    if config.decision_endpoints:
        assert props["ExpectedModelSha256"] == config.model.sha256
    assert props["ImageDigests"] == {
        f"environments.{config.name}.dlc.{flavour}_digest": config.dlc.digest(flavour)
        for flavour in config.image_flavours
    }


def test_every_model_and_image_build_waits_for_the_preflight(synth: Synthesized) -> None:
    preflight, _ = one(synth.resources("Serving", "Custom::ModelPreflight"))
    models = synth.resources("Serving", "AWS::SageMaker::Model")
    builds = synth.resources("Serving", "Custom::DecisionImage")
    assert models
    for logical, resource in {**models, **builds}.items():
        assert preflight in depends_on(resource), logical


def test_the_preflight_reads_exactly_the_two_objects_and_decrypts_only_through_s3(synth: Synthesized) -> None:
    res = synth.template_json("Serving")["Resources"]
    functions = synth.resources("Serving", "AWS::Lambda::Function")
    _, check = one(
        {
            k: v
            for k, v in functions.items()
            if v["Properties"].get("Handler") == "index.on_event"
            and "ModelPreflight" in v["Properties"].get("Description", "")
        }
    )
    role = check["Properties"]["Role"]["Fn::GetAtt"][0]
    assert res[role]["Type"] == "AWS::IAM::Role"
    statements = statements_of_role(synth, role)
    actions = sorted(a for s in statements for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]]))
    assert actions == ["kms:Decrypt", "logs:CreateLogStream", "logs:PutLogEvents", "s3:GetObject"]
    (get,) = [s for s in statements if s["Action"] == "s3:GetObject"]
    resources = json.dumps(get["Resource"])
    key = synth.config.model.s3_key
    assert len(get["Resource"]) == 2
    assert f'"/{key}"' in resources and f'"/{manifest_key(key)}"' in resources
    (decrypt,) = [s for s in statements if s["Action"] == "kms:Decrypt"]
    via = json.dumps(decrypt["Condition"]["StringEquals"]["kms:ViaService"])
    assert f"s3.{synth.config.region}." in via and "AWS::URLSuffix" in via


# --- point 6: one image build at a time ---------------------------------------------------------


def test_the_cuda_build_waits_for_the_cpu_build(prod: Synthesized) -> None:
    builds = prod.resources("Serving", "Custom::DecisionImage")
    by_flavour = {b["Properties"]["BuildEnvironment"]["FLAVOUR"]: (k, b) for k, b in builds.items()}
    assert set(by_flavour) == {"cpu", "cuda"}
    cpu, _ = by_flavour["cpu"]
    _, cuda = by_flavour["cuda"]
    assert cpu in depends_on(cuda)
    assert by_flavour["cuda"][0] not in depends_on(by_flavour["cpu"][1])


def test_the_start_function_has_time_for_its_quota_retries(prod: Synthesized) -> None:
    functions = prod.resources("Serving", "AWS::Lambda::Function").values()
    start = [f for f in functions if "Custom::DecisionImage on_event" in f["Properties"].get("Description", "")]
    assert [f["Properties"]["Timeout"] for f in start] == [image_build.START_TIMEOUT_SECONDS]
