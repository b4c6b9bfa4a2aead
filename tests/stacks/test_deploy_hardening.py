"""Issue 23 in the synthesized templates: isolated environments, M-of-N rollback alarms, canary share, per-type GPU
alarms and covered GPUs, what prod keeps, the dashboard's scaling metric.

The shipped environments come from tests/cdk_support (synthesized once per session); "hardened" is prod with
Batch Transform on and a CPU fleet of four whose canary may serve at most a quarter, synthesized once here with
cdk-nag registered (a synthesis that returns has no unacknowledged finding).
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from decision_spec.environment_config import ConfigError, load_environment

from app import build_app
from stacks.isolation import check_isolation
from tests.cdk_support import Synthesized, cdk_context, synthesize


def of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def alarms_by_name(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["Properties"]["AlarmName"]: a["Properties"] for a in of_type(template, "AWS::CloudWatch::Alarm").values()}


def rollback_alarm_names(template: dict[str, Any], endpoint_name: str) -> list[str]:
    names = {k: a["Properties"]["AlarmName"] for k, a in of_type(template, "AWS::CloudWatch::Alarm").items()}
    (endpoint,) = [
        e
        for e in of_type(template, "AWS::SageMaker::Endpoint").values()
        if e["Properties"]["EndpointName"] == endpoint_name
    ]
    alarms = endpoint["Properties"]["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]
    return [names[a["AlarmName"]["Ref"]] for a in alarms]


HARDENED_CPU = {"min_instances": 4, "max_instances": 4}


def hardened_context() -> dict[str, Any]:
    context = cdk_context()
    prod = context["environments"]["prod"]
    prod["cpu"]["autoscaling"].update(HARDENED_CPU)
    prod["cpu"]["deployment"]["max_step_share_percent"] = 25
    prod["batch"] = {
        "enabled": True,
        "model": "cpu",
        "instance_type": "ml.c6i.8xlarge",
        "instance_count": 1,
        "max_concurrent_transforms": 1,
        "max_payload_mb": 1,
    }
    return context


@pytest.fixture(scope="module")
def hardened() -> dict[str, Any]:
    outdir = Path(tempfile.mkdtemp(prefix="cdk-hardened-"))
    build_app("prod", context=hardened_context(), outdir=str(outdir)).synth()
    template: dict[str, Any] = json.loads((outdir / "DecisionEndpoints-prod-Serving.template.json").read_text())
    return template


# --- 1. isolation -----------------------------------------------------------------------------------


def _without_qualifiers() -> dict[str, Any]:
    context = cdk_context()
    for env in context["environments"].values():
        env.pop("bootstrap_qualifier", None)
    return context


def test_two_unpinned_environments_in_one_region_are_refused_with_the_fix() -> None:
    with pytest.raises(ConfigError) as caught:
        build_app("dev", context=_without_qualifiers(), outdir=tempfile.mkdtemp())
    message = str(caught.value)
    assert "environments.dev and environments.prod" in message
    assert "same unknown account" in message and "cdk-hnb659fds-*" in message
    assert "bootstrap_qualifier" in message and "environments.<env>.account" in message
    assert "--qualifier" in message and "--toolkit-stack-name" in message


@pytest.mark.parametrize(
    ("dev", "prod", "refused"),
    [
        ({"account": "111111111111"}, {"account": "111111111111"}, True),  # one pinned account
        ({"account": None}, {"account": "222222222222"}, True),  # unpinned may be prod's account
        ({"account": "111111111111"}, {"account": "222222222222"}, False),  # an account each
        ({"account": None}, {"account": None, "region": "eu-west-1"}, False),  # bootstrap roles are per region
        ({"bootstrap_qualifier": "decdev"}, {"bootstrap_qualifier": "decdev"}, True),  # the same qualifier
        ({"bootstrap_qualifier": "decdev"}, {}, True),  # only one has its own
        ({"bootstrap_qualifier": "decdev"}, {"bootstrap_qualifier": "decprod"}, False),
    ],
)
def test_isolation_needs_an_account_or_a_qualifier_each(
    dev: dict[str, Any], prod: dict[str, Any], refused: bool
) -> None:
    environments = _without_qualifiers()["environments"]
    environments["dev"].update(dev)
    environments["prod"].update(prod)
    if refused:
        with pytest.raises(ConfigError, match="are not isolated"):
            check_isolation(environments)
    else:
        check_isolation(environments)


def test_each_environment_deploys_through_its_own_qualifiers_bootstrap(prod: Synthesized) -> None:
    assert prod.config.bootstrap_qualifier == "decprod"
    for part in ("Foundation", "Serving"):
        parameter = prod.template_json(part)["Parameters"]["BootstrapVersion"]
        assert parameter["Default"] == "/cdk-bootstrap/decprod/version"
    artifact = prod.assembly.get_stack_artifact("DecisionEndpoints-prod-Serving")
    assert artifact.assume_role_arn is not None and ":role/cdk-decprod-deploy-role-" in artifact.assume_role_arn


# --- 3. M-of-N rollback alarms ------------------------------------------------------------------------


def test_every_alarm_fires_on_m_of_n_periods_within_a_bake(prod: Synthesized) -> None:
    thresholds = prod.config.alarms
    assert (thresholds.datapoints_to_alarm, thresholds.evaluation_periods) == (2, 5)
    template = prod.template_json("Serving")
    alarms = alarms_by_name(template)
    for section, settings in prod.config.decision_endpoints.items():
        rollback = rollback_alarm_names(template, f"decision-prod-{section}")
        assert len(rollback) >= 3
        for name in rollback:
            assert alarms[name]["DatapointsToAlarm"] == 2, name
            assert alarms[name]["EvaluationPeriods"] == 5, name
        # A canary failing from its first request breaches M periods and rolls back inside the bake.
        assert thresholds.datapoints_to_alarm * thresholds.period_seconds < settings.deployment.bake_seconds
    runtime = alarms["decision-prod-cpu-runtime-failures"]
    assert runtime["Threshold"] == 0 and runtime["ComparisonOperator"] == "GreaterThanThreshold"


def test_each_guarded_endpoint_may_read_exactly_its_rollback_alarms(prod: Synthesized) -> None:
    """SageMaker reads the alarms' state with the endpoint's execution role during a deployment."""
    template = prod.template_json("Serving")
    resources = template["Resources"]
    names = {k: a["Properties"]["AlarmName"] for k, a in of_type(template, "AWS::CloudWatch::Alarm").items()}
    for section in prod.config.decision_endpoints:
        name = f"decision-prod-{section}"
        (endpoint,) = [
            e for e in of_type(template, "AWS::SageMaker::Endpoint").values() if e["Properties"]["EndpointName"] == name
        ]
        # endpoint -> its config -> the variant's model -> the model's execution role, by reference
        config = resources[endpoint["Properties"]["EndpointConfigName"]["Fn::GetAtt"][0]]
        model = resources[config["Properties"]["ProductionVariants"][0]["ModelName"]["Fn::GetAtt"][0]]
        role_id = model["Properties"]["ExecutionRoleArn"]["Fn::GetAtt"][0]
        statements = [
            st
            for p in of_type(template, "AWS::IAM::Policy").values()
            if {"Ref": role_id} in p["Properties"]["Roles"]
            for st in p["Properties"]["PolicyDocument"]["Statement"]
            if st["Action"] == "cloudwatch:DescribeAlarms"
        ]
        assert len(statements) == 1, name
        arns = statements[0]["Resource"]
        readable = sorted(names[r["Fn::GetAtt"][0]] for r in (arns if isinstance(arns, list) else [arns]))
        assert readable == sorted(rollback_alarm_names(template, name))


def test_m_may_not_exceed_n() -> None:
    environments = cdk_context()["environments"]
    environments["prod"]["alarms"]["datapoints_to_alarm"] = 6
    with pytest.raises(ConfigError, match=r"environments\.prod\.alarms\.datapoints_to_alarm: must be at most"):
        load_environment(environments, "prod")


# --- 4. canary share --------------------------------------------------------------------------------


def test_a_canary_above_its_share_is_refused_naming_the_fleet_it_needs() -> None:
    environments = cdk_context()["environments"]
    environments["prod"]["cpu"]["deployment"]["max_step_share_percent"] = 25
    with pytest.raises(ConfigError) as caught:
        load_environment(environments, "prod")
    message = str(caught.value)
    assert "environments.prod.cpu.deployment" in message
    assert "50% of 2 instances" in message and "raise autoscaling.min_instances to 4" in message


def test_a_fleet_of_four_keeps_the_canary_at_a_quarter(hardened: dict[str, Any]) -> None:
    (endpoint,) = [
        e
        for e in of_type(hardened, "AWS::SageMaker::Endpoint").values()
        if e["Properties"]["EndpointName"] == "decision-prod-cpu"
    ]
    routing = endpoint["Properties"]["DeploymentConfig"]["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"]
    assert routing["CanarySize"] == {"Type": "INSTANCE_COUNT", "Value": 1}
    configs = of_type(hardened, "AWS::SageMaker::EndpointConfig").values()
    counts = [
        v["InitialInstanceCount"]
        for c in configs
        for v in c["Properties"]["ProductionVariants"]
        if v.get("InstanceType") == "ml.c6i.8xlarge"
    ]
    assert counts == [4]
    assert routing["CanarySize"]["Value"] / counts[0] <= 0.25


# --- 5. GPU pool: per-type alarms, covered types ----------------------------------------------------------


def test_a_pool_rolls_back_on_each_types_own_latency_threshold(prod: Synthesized) -> None:
    gpu = prod.config.gpu
    assert gpu is not None and len(gpu.instance_types) == 4
    template = prod.template_json("Serving")
    alarms = alarms_by_name(template)
    rollback = rollback_alarm_names(template, "decision-prod-gpu")
    assert "decision-prod-gpu-model-latency-p95" not in alarms  # no single p95 over the mixed pool
    thresholds = {}
    for instance_type in gpu.instance_types:
        name = f"decision-prod-gpu-model-latency-p95-{instance_type.removeprefix('ml.')}"
        assert name in rollback
        alarm = alarms[name]
        dimensions = {d["Name"]: d["Value"] for d in alarm["Dimensions"]}
        assert dimensions["InstanceType"] == instance_type
        assert alarm["ExtendedStatistic"] == "p95" and alarm["MetricName"] == "ModelLatency"
        thresholds[instance_type] = alarm["Threshold"] / 1000
    assert thresholds == {
        "ml.g6e.xlarge": 1500,
        "ml.g6.xlarge": 3000,
        "ml.g5.xlarge": 2500,
        "ml.g4dn.xlarge": 4500,
    }
    assert len(rollback) == 6  # 5xx, four latencies, runtime failures: within SageMaker's ten


@pytest.mark.parametrize(
    ("fallback", "message"),
    [
        ("ml.p3.2xlarge", "compute capability 7.0"),  # V100: below CUDA 13's 7.5
        (
            "ml.g4ad.xlarge",
            "g4ad family is not in containers/decision_spec/instance_types.py",
        ),  # AMD GPU: no CUDA at all
    ],
)
def test_a_pool_type_the_cuda_build_does_not_cover_stops_synth(fallback: str, message: str) -> None:
    environments = cdk_context()["environments"]
    environments["prod"]["gpu"]["fallback_instance_types"][-1] = fallback
    environments["prod"]["gpu"]["model_latency_p95_ms_by_instance_type"].pop("ml.g4dn.xlarge")
    with pytest.raises(ConfigError) as caught:
        load_environment(environments, "prod")
    assert "environments.prod.gpu.fallback_instance_types" in str(caught.value)
    assert message in str(caught.value)


def test_a_threshold_for_a_type_outside_the_pool_is_refused() -> None:
    environments = cdk_context()["environments"]
    environments["prod"]["gpu"]["model_latency_p95_ms_by_instance_type"]["ml.g5.2xlarge"] = 900
    with pytest.raises(ConfigError, match=re.escape("['ml.g5.2xlarge'] are not in the pool")):
        load_environment(environments, "prod")


# --- 7. what stays, and the dashboard ---------------------------------------------------------------------


def test_prod_deletes_the_batch_state_machine_and_its_log_group(hardened: dict[str, Any]) -> None:
    (machine,) = [
        m
        for m in of_type(hardened, "AWS::StepFunctions::StateMachine").values()
        if m["Properties"].get("StateMachineName") == "decision-prod-batch"
    ]
    assert machine["DeletionPolicy"] == "Delete"
    destination = machine["Properties"]["LoggingConfiguration"]["Destinations"][0]
    group = destination["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
    assert hardened["Resources"][group]["DeletionPolicy"] == "Delete"
    # The endpoint logs, which hold what the endpoints did, are what prod keeps.
    kept = [
        g
        for g in of_type(hardened, "AWS::Logs::LogGroup").values()
        if g.get("DeletionPolicy") in ("Retain", "RetainExceptOnCreate")
    ]
    assert {g["Properties"]["LogGroupName"] for g in kept} == {
        "/aws/sagemaker/Endpoints/decision-prod-cpu",
        "/aws/sagemaker/Endpoints/decision-prod-gpu",
    }


def test_the_auto_delete_function_logs_into_a_group_that_expires_and_goes_with_the_stack() -> None:
    dev = synthesize("dev")
    foundation = dev.template_json("Foundation")
    (function_id,) = of_type(foundation, "AWS::Lambda::Function")
    groups = [
        (k, g)
        for k, g in of_type(foundation, "AWS::Logs::LogGroup").items()
        if g["Properties"]["LogGroupName"] == {"Fn::Join": ["", ["/aws/lambda/", {"Ref": function_id}]]}
    ]
    assert len(groups) == 1
    group_id, group = groups[0]
    assert group["Properties"]["RetentionInDays"] == dev.config.log_retention_days
    assert group["DeletionPolicy"] == "Delete"
    (cleaner,) = of_type(foundation, "Custom::S3AutoDeleteObjects").values()
    assert group_id in cleaner["DependsOn"]  # deleted after the function's last run, not before


def test_the_dashboard_shows_the_metric_the_policy_tracks(prod: Synthesized) -> None:
    (dashboard,) = of_type(prod.template_json("Serving"), "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert "ConcurrentRequestsPerModel" in body and "(the scaling metric)" in body
    assert "per instance (scaling metric)" not in body
    (policy,) = [
        p
        for p in of_type(prod.template_json("Serving"), "AWS::ApplicationAutoScaling::ScalingPolicy").values()
        if "TargetTrackingScalingPolicyConfiguration" in p["Properties"]
    ][:1]
    predefined = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]["PredefinedMetricSpecification"]
    assert predefined["PredefinedMetricType"].startswith("SageMakerVariantConcurrentRequestsPerModel")
