"""decisionctl status against botocore's Stubber (issue 46): the exact requests SageMaker, CloudWatch and
CloudFormation receive, and responses in the APIs' own shapes (Stubber checks both against the service models)."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from decision_spec.evaluation_record import RECORD_OUTPUT
from decision_spec.names import component_name
from decisionctl.commands import status

from tests.cdk_support import ROOT

REGION = "us-west-2"
ACCOUNT = "123456789012"
WHEN = datetime(2026, 12, 3, 20, 15, tzinfo=UTC)
GGUF_SHA = "c624c2bea4349b36453448197f53b3935a96da7934904c124a612716c348a8ff"


def clients() -> dict[str, Any]:
    session = boto3.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name=REGION)
    return {name: session.client(name) for name in ("sagemaker", "cloudwatch", "cloudformation")}


def arn(kind: str, name: str) -> str:
    return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:{kind}/{name}"


def stack(outputs: dict[str, str], status_: str = "UPDATE_COMPLETE") -> dict[str, Any]:
    return {
        "Stacks": [
            {
                "StackName": "DecisionEndpoints-dev-Serving",
                "CreationTime": WHEN,
                "LastUpdatedTime": WHEN,
                "StackStatus": status_,
                "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in outputs.items()],
            }
        ]
    }


def endpoint(name: str, config: str, variants: list[dict[str, Any]], state: str = "InService") -> dict[str, Any]:
    return {
        "EndpointName": name,
        "EndpointArn": arn("endpoint", name),
        "EndpointConfigName": config,
        "ProductionVariants": variants,
        "EndpointStatus": state,
        "CreationTime": WHEN,
        "LastModifiedTime": WHEN,
    }


def model(name: str, environment: dict[str, str]) -> dict[str, Any]:
    return {
        "ModelName": name,
        "PrimaryContainer": {"Image": f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/r@sha256:{'1' * 64}",
                             "Environment": environment},
        "CreationTime": WHEN,
        "ModelArn": arn("model", name),
    }  # fmt: skip


def run(stubbed: dict[str, Any]) -> tuple[int, str]:
    args = argparse.Namespace(env="dev", region=None, cdk_json=str(ROOT / "cdk.json"))
    asked: list[tuple[str, str]] = []

    def client(service: str, region: str) -> Any:
        asked.append((service, region))
        return stubbed[service]

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = status.show(args, client=client)
    assert asked == [("sagemaker", REGION), ("cloudwatch", REGION), ("cloudformation", REGION)]  # cdk.json's region
    return code, printed.getvalue()


def test_a_components_environment_scaled_to_zero_with_an_alarm(capsys: pytest.CaptureFixture[str]) -> None:
    stubbed = clients()
    stubs = {name: Stubber(c) for name, c in stubbed.items()}
    record_sha = hashlib.sha256((ROOT / "evaluation/dev.json").read_bytes()).hexdigest()
    stubs["cloudformation"].add_response(
        "describe_stacks", stack({RECORD_OUTPUT: record_sha}), {"StackName": "DecisionEndpoints-dev-Serving"}
    )
    variant = {
        "VariantName": "AllTraffic",
        "CurrentInstanceCount": 0,
        "DesiredInstanceCount": 0,
        "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 2},
    }
    stubs["sagemaker"].add_response(
        "describe_endpoint",
        endpoint("decision-dev-cpu", "CpuEndpointConfig-Ab12", [variant]),
        {"EndpointName": "decision-dev-cpu"},
    )
    component = component_name("dev", "cpu")
    stubs["sagemaker"].add_response(
        "describe_inference_component",
        {
            "InferenceComponentName": component,
            "InferenceComponentArn": arn("inference-component", component),
            "EndpointName": "decision-dev-cpu",
            "EndpointArn": arn("endpoint", "decision-dev-cpu"),
            "VariantName": "AllTraffic",
            "Specification": {"ModelName": "CpuModel-Xy34"},
            "RuntimeConfig": {"DesiredCopyCount": 0, "CurrentCopyCount": 0},
            "CreationTime": WHEN,
            "LastModifiedTime": WHEN,
            "InferenceComponentStatus": "InService",
        },
        {"InferenceComponentName": component},
    )
    stubs["sagemaker"].add_response(
        "describe_model",
        model("CpuModel-Xy34", {"DECISION_EXPECTED_MODEL_SHA256": GGUF_SHA, "DECISION_ORDER_DEBIAS": "reverse"}),
        {"ModelName": "CpuModel-Xy34"},
    )
    stubs["cloudwatch"].add_response(
        "describe_alarms",
        {
            "MetricAlarms": [
                {
                    "AlarmName": "decision-dev-cpu-runtime-failures",
                    "StateValue": "ALARM",
                    "StateReason": "Threshold Crossed: 2 out of the last 3 datapoints were greater than the threshold",
                    "StateUpdatedTimestamp": WHEN,
                }
            ]
        },
        {"AlarmNamePrefix": "decision-dev-", "StateValue": "ALARM"},
    )
    for stub in stubs.values():
        stub.activate()
    code, printed = run(stubbed)
    for stub in stubs.values():
        stub.assert_no_pending_responses()
    print(printed)
    assert code == 1  # an alarm in ALARM
    assert "last deployment: DecisionEndpoints-dev-Serving UPDATE_COMPLETE at 2026-12-03 20:15:00 UTC" in printed
    assert f"evaluation record in force: evaluation/dev.json as committed here (sha256 {record_sha[:12]})" in printed
    assert "cpu  decision-dev-cpu  InService  config CpuEndpointConfig-Ab12" in printed
    assert "variant AllTraffic: 0 instance(s), desired 0 (managed 0-2)" in printed
    assert f"component {component}: InService, 0 copy(ies), desired 0  scaled to zero" in printed
    assert f"model CpuModel-Xy34: sha256 {GGUF_SHA}; answer settings DECISION_ORDER_DEBIAS=reverse" in printed
    assert "decision-dev-cpu-runtime-failures since 2026-12-03 20:15:00 UTC: Threshold Crossed" in printed
    assert len(printed.splitlines()) <= 24  # one screen


def test_an_environment_not_deployed_and_a_record_not_in_force() -> None:
    stubbed = clients()
    stubs = {name: Stubber(c) for name, c in stubbed.items()}
    stubs["cloudformation"].add_response(
        "describe_stacks", stack({RECORD_OUTPUT: "f" * 64}, "UPDATE_ROLLBACK_COMPLETE"),
        {"StackName": "DecisionEndpoints-dev-Serving"},
    )  # fmt: skip
    stubs["sagemaker"].add_client_error(
        "describe_endpoint",
        service_error_code="ValidationException",
        service_message='Could not find endpoint "decision-dev-cpu".',
        http_status_code=400,
        expected_params={"EndpointName": "decision-dev-cpu"},
    )
    stubs["cloudwatch"].add_response("describe_alarms", {"MetricAlarms": []}, {"AlarmNamePrefix": "decision-dev-",
                                                                                "StateValue": "ALARM"})  # fmt: skip
    for stub in stubs.values():
        stub.activate()
    code, printed = run(stubbed)
    print(printed)
    assert code == 1
    assert "UPDATE_ROLLBACK_COMPLETE" in printed
    assert f"evaluation record in force: sha256 {'f' * 12}; evaluation/dev.json here is" in printed
    assert "decision-dev-cpu: not deployed" in printed and "alarms in ALARM: none (decision-dev-*)" in printed


def test_another_aws_error_is_not_taken_for_a_missing_endpoint() -> None:
    stubbed = clients()
    stubs = {name: Stubber(c) for name, c in stubbed.items()}
    stubs["cloudformation"].add_response("describe_stacks", stack({}), {"StackName": "DecisionEndpoints-dev-Serving"})
    stubs["sagemaker"].add_client_error("describe_endpoint", service_error_code="AccessDeniedException")
    for stub in stubs.values():
        stub.activate()
    with pytest.raises(ClientError):
        run(stubbed)


def test_the_command_is_listed(capsys: pytest.CaptureFixture[str]) -> None:
    from decisionctl.commands import cli

    with pytest.raises(SystemExit):
        cli.main(["-h"])
    assert "status" in capsys.readouterr().out and Path(status.__file__).name == "status.py"
