"""Hosting modes (decision_spec/hosting_config.py): each mode of dev and prod synthesized (cdk-nag runs at synth and
fails it on a finding; cfn-lint and checkov read the same templates in test_cfn_lint.py and test_checkov.py), the
templates read for what each mode must hold, and the refusals of what a mode cannot do, each naming its fix."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from aws_cdk.assertions import Match
from decision_spec.environment_config import ConfigError, load_environment
from decision_spec.hosting_config import ServerlessHosting, serverless_memory_of
from decision_spec.memory import memory_needed_mb

from tests.cdk_support import (
    BATCH,
    HOSTING_VARIANTS,
    PROD_FOOTPRINT,
    Synthesized,
    cdk_context,
    synthesize,
    variant_context,
)

COPY_METRIC = "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"
_BAKE: dict[str, Any] = {"wait_seconds": 600, "rollback_on_alarms": True}  # prod's bake outlasts its alarms
_NO: dict[str, Any] = {"rollback_on_alarms": False}


@pytest.fixture(scope="module", params=HOSTING_VARIANTS)
def hosted(request: pytest.FixtureRequest) -> Synthesized:
    return synthesize(str(request.param))


def _of(synth: Synthesized, kind: str) -> dict[str, dict[str, Any]]:
    return {k: v["Properties"] for k, v in synth.resources("Serving", kind).items()}


def _config_of(synth: Synthesized, section: str) -> dict[str, Any]:
    (config,) = [p for k, p in _of(synth, "AWS::SageMaker::EndpointConfig").items() if k.startswith(section)]
    return config


def test_every_mode_synthesizes_with_cdk_nag_clean(hosted: Synthesized) -> None:
    """synthesize raises on any unacknowledged cdk-nag finding; each variant hosts its sections as its name says."""
    asked = hosted.outdir.name.split("-")[2]  # cdk-<environment>-<mode>-<random>
    modes = {section: s.hosting.mode for section, s in hosted.config.decision_endpoints.items()}
    expected = "components" if asked == "full" else asked
    assert modes["cpu"] == expected
    if "gpu" in modes:  # prod's: serverless takes no GPU, so prod-serverless keeps it on instances
        assert modes["gpu"] == ("instances" if expected == "serverless" else expected)


def test_a_components_variant_scales_instances_to_zero_and_hosts_no_model() -> None:
    synth = synthesize("dev-components")
    synth.template("Serving").has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ExecutionRoleArn": Match.any_value(),
            "ProductionVariants": [
                {
                    "VariantName": "AllTraffic",
                    "InstanceType": "ml.c6i.xlarge",
                    "InitialInstanceCount": 1,
                    "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 2},
                    "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"},
                    "ModelName": Match.absent(),
                    "ContainerStartupHealthCheckTimeoutInSeconds": Match.absent(),
                }
            ],
        },
    )


def test_the_component_serves_the_model_with_its_copies_memory_and_cores() -> None:
    synth = synthesize("dev-components")
    cpu = synth.config.decision_endpoints["cpu"]
    assert synth.config.model.footprint is not None
    footprint = synth.config.model.footprint
    memory = memory_needed_mb(
        footprint.gguf_bytes, footprint.kv_bytes_per_token, ctx_size=cpu.ctx_size, contexts=cpu.max_concurrency
    )
    (model_id,) = synth.resources("Serving", "AWS::SageMaker::Model")
    synth.template("Serving").has_resource_properties(
        "AWS::SageMaker::InferenceComponent",
        {
            "InferenceComponentName": "decision-dev-cpu-model",
            "EndpointName": {"Fn::GetAtt": [Match.string_like_regexp("^CpuEndpoint"), "EndpointName"]},
            "VariantName": "AllTraffic",
            "RuntimeConfig": {"CopyCount": 1},
            "Specification": {
                "ModelName": {"Fn::GetAtt": [model_id, "ModelName"]},
                "ComputeResourceRequirements": {"MinMemoryRequiredInMb": memory, "NumberOfCpuCoresRequired": 2},
                "StartupParameters": {
                    "ContainerStartupHealthCheckTimeoutInSeconds": cpu.startup_health_check_timeout_seconds,
                    "ModelDataDownloadTimeoutInSeconds": synth.config.model.download_timeout_seconds,
                },
            },
        },
    )
    # the bundled model: 88 MB of GGUF, one 4,096-token context and a two-context state cache, and the runtime
    assert memory == 870


def test_copies_scale_on_concurrency_and_come_back_from_zero_on_a_step_policy() -> None:
    synth = synthesize("dev-components")
    scaling = synth.config.decision_endpoints["cpu"].autoscaling
    template = synth.template("Serving")
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {
            "ResourceId": "inference-component/decision-dev-cpu-model",
            "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount",
            "MinCapacity": 0,
            "MaxCapacity": scaling.max_instances,
        },
    )
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyType": "TargetTrackingScaling",
            "TargetTrackingScalingPolicyConfiguration": {
                "PredefinedMetricSpecification": {"PredefinedMetricType": COPY_METRIC},
                "TargetValue": scaling.target_concurrent_requests_per_instance,
                "ScaleInCooldown": scaling.scale_in_cooldown_seconds,
                "ScaleOutCooldown": scaling.scale_out_cooldown_seconds,
            },
        },
    )
    policies = _of(synth, "AWS::ApplicationAutoScaling::ScalingPolicy")
    (step_id,) = [k for k, p in policies.items() if p["PolicyType"] == "StepScaling"]
    assert policies[step_id]["StepScalingPolicyConfiguration"] == {
        "AdjustmentType": "ChangeInCapacity",
        "Cooldown": 60,
        "MetricAggregationType": "Maximum",
        "StepAdjustments": [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}],
    }
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "AlarmName": "decision-dev-cpu-scale-out-from-zero",
            "Namespace": "AWS/SageMaker",
            "MetricName": "NoCapacityInvocationFailures",
            "Dimensions": [{"Name": "InferenceComponentName", "Value": "decision-dev-cpu-model"}],
            "Statistic": "Sum",
            "Period": 60,
            "Threshold": 1,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            "EvaluationPeriods": 1,
            # its one action is the step policy: waking is scaling, not a fault for the alarm topic
            "AlarmActions": [{"Ref": step_id}],
            "OKActions": Match.absent(),
        },
    )


def test_alarms_read_the_component_and_do_not_fire_merely_at_zero() -> None:
    synth = synthesize("dev-components")
    alarms = {p["AlarmName"]: p for p in _of(synth, "AWS::CloudWatch::Alarm").values()}
    four = alarms["decision-dev-cpu-4xx-rate"]
    (expression,) = [m["Expression"] for m in four["Metrics"] if "Expression" in m]
    # the invocations turned away at zero (400s that wake a copy) are taken out of the 4xx rate
    assert expression == (
        "IF(invocations > 0, 100 * IF(errors > FILL(nocapacity, 0), errors - FILL(nocapacity, 0), 0) / invocations, 0)"
    )
    stats = {m["Id"]: m["MetricStat"]["Metric"] for m in four["Metrics"] if "MetricStat" in m}
    assert stats["nocapacity"]["MetricName"] == "NoCapacityInvocationFailures"
    component = [{"Name": "InferenceComponentName", "Value": "decision-dev-cpu-model"}]
    assert all(metric["Dimensions"] == component for metric in stats.values())
    assert alarms["decision-dev-cpu-model-latency-p95"]["Dimensions"] == component
    for name, alarm in alarms.items():
        assert alarm.get("TreatMissingData") == "notBreaching", name  # no traffic at zero reads as fine
    # the container's decision lines land in the component's log group, which the metric filters read
    groups = {k: p["LogGroupName"] for k, p in _of(synth, "AWS::Logs::LogGroup").items() if "LogGroupName" in p}
    assert "/aws/sagemaker/InferenceComponents/decision-dev-cpu-model" in groups.values()
    (component_group,) = [k for k, v in groups.items() if v.startswith("/aws/sagemaker/InferenceComponents/")]
    filters = _of(synth, "AWS::Logs::MetricFilter")
    assert filters and all(f["LogGroupName"] == {"Ref": component_group} for f in filters.values())


def test_prod_components_roll_copies_under_the_rollback_alarms_and_keep_two_cpu_copies() -> None:
    synth = synthesize("prod-components")
    components = {p["InferenceComponentName"]: p for p in _of(synth, "AWS::SageMaker::InferenceComponent").values()}
    assert set(components) == {"decision-prod-cpu-model", "decision-prod-gpu-model"}
    gpu = components["decision-prod-gpu-model"]
    assert gpu["Specification"]["ComputeResourceRequirements"]["NumberOfAcceleratorDevicesRequired"] == 1
    policy = gpu["DeploymentConfig"]["RollingUpdatePolicy"]
    assert policy["MaximumBatchSize"] == {"Type": "COPY_COUNT", "Value": 1}
    assert policy["RollbackMaximumBatchSize"] == {"Type": "COPY_COUNT", "Value": 1}
    by_id = {k: p["AlarmName"] for k, p in _of(synth, "AWS::CloudWatch::Alarm").items()}
    rollback = [by_id[a["AlarmName"]["Ref"]] for a in gpu["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]]
    assert "decision-prod-gpu-5xx-rate" in rollback and "decision-prod-gpu-scale-out-from-zero" not in rollback
    for endpoint in _of(synth, "AWS::SageMaker::Endpoint").values():
        assert "DeploymentConfig" not in endpoint  # the endpoint hosts no model: its copies roll instead
    assert _config_of(synth, "Gpu")["ProductionVariants"][0]["ManagedInstanceScaling"]["MinInstanceCount"] == 0
    assert _config_of(synth, "Cpu")["ProductionVariants"][0]["ManagedInstanceScaling"]["MinInstanceCount"] == 2
    names = [p["AlarmName"] for p in _of(synth, "AWS::CloudWatch::Alarm").values()]
    assert "decision-prod-gpu-scale-out-from-zero" in names
    assert "decision-prod-cpu-scale-out-from-zero" not in names  # two copies always run: nothing to wake


def test_callers_and_the_deployed_check_may_invoke_the_components() -> None:
    synth = synthesize("dev-components")
    outputs = synth.template_json("Serving")["Outputs"]
    assert outputs["CpuInferenceComponentName"]["Value"] == "decision-dev-cpu-model"
    policies = _of(synth, "AWS::IAM::ManagedPolicy") | _of(synth, "AWS::IAM::Policy")
    invokes = [
        json.dumps(s["Resource"])
        for p in policies.values()
        for s in p["PolicyDocument"]["Statement"]
        if s.get("Sid") in ("InvokeTheEndpoints", "CheckDeployedEndpoints")
    ]
    assert len(invokes) == 2
    for resources in invokes:
        assert ":endpoint/decision-dev-cpu" in resources
        assert ":inference-component/decision-dev-cpu-model" in resources


def test_a_serverless_variant_is_sized_from_the_model_and_not_isolated() -> None:
    synth = synthesize("dev-serverless")
    template = synth.template("Serving")
    template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ProductionVariants": [
                {
                    "VariantName": "AllTraffic",
                    "ModelName": Match.any_value(),
                    "ServerlessConfig": {"MaxConcurrency": 8, "MemorySizeInMB": 1024},
                    "InstanceType": Match.absent(),
                    "InitialInstanceCount": Match.absent(),
                }
            ],
            "KmsKeyId": Match.absent(),  # no volume of ours to encrypt
        },
    )
    template.has_resource_properties("AWS::SageMaker::Model", {"EnableNetworkIsolation": False})
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalableTarget", 0)
    template.resource_count_is("AWS::SageMaker::InferenceComponent", 0)


def test_prod_serverless_memory_follows_the_model_and_the_gpu_stays_on_instances() -> None:
    synth = synthesize("prod-serverless")
    cpu = synth.config.decision_endpoints["cpu"]
    assert isinstance(cpu.hosting, ServerlessHosting) and synth.config.model.footprint is not None
    memory = serverless_memory_of(
        cpu.hosting, synth.config.model.footprint, ctx_size=cpu.ctx_size, contexts=cpu.max_concurrency
    )
    assert synth.config.model.footprint.gguf_bytes == 1_117_320_768  # prod's model is the decider, its own footprint
    assert memory == 3072  # 1,066 MiB of GGUF, 8,192-token contexts at 28 KiB a token and the runtime
    assert _config_of(synth, "Cpu")["ProductionVariants"][0]["ServerlessConfig"]["MemorySizeInMB"] == memory
    assert "InstancePools" in _config_of(synth, "Gpu")["ProductionVariants"][0]
    (cpu_endpoint,) = [p for k, p in _of(synth, "AWS::SageMaker::Endpoint").items() if k.startswith("Cpu")]
    traffic = cpu_endpoint["DeploymentConfig"]["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"]
    assert traffic["Type"] == "ALL_AT_ONCE"  # the one strategy serverless takes, rollback alarms kept


def _environments() -> dict[str, Any]:
    envs: dict[str, Any] = cdk_context()["environments"]
    envs["prod"]["model"]["footprint"] = dict(PROD_FOOTPRINT)
    return envs


def _refusal(envs: dict[str, Any], name: str = "dev") -> str:
    with pytest.raises(ConfigError) as caught:
        load_environment(copy.deepcopy(envs), name)
    return str(caught.value)


SERVERLESS = {"mode": "serverless", "max_concurrency": 4, "network_isolation": False}


def _serverless_dev(**cpu: Any) -> dict[str, Any]:
    envs = _environments()
    envs["dev"]["cpu"]["hosting"] = dict(SERVERLESS)
    envs["dev"]["cpu"]["autoscaling"]["enabled"] = False
    envs["dev"]["cpu"].update(cpu)
    return envs


def test_a_serverless_model_that_cannot_fit_is_refused_with_its_numbers_and_the_fix() -> None:
    message = _refusal(_serverless_dev(ctx_size=262_144))
    assert "environments.dev.cpu: the model needs about 7384 MB" in message
    assert "GGUF 88 MB, 1 decision context(s)" in message and "262144 tokens at 23040 bytes a token" in message
    assert "more than serverless inference's 6144 MB" in message
    assert "lower ctx_size or max_concurrency, or set hosting.mode to components" in message
    envs = _serverless_dev()
    envs["dev"]["cpu"]["hosting"]["memory_mb"] = 1024
    assert load_environment(copy.deepcopy(envs), "dev").cpu is not None
    envs["dev"]["cpu"]["ctx_size"] = 16_384
    message = _refusal(envs)
    assert "hosting.memory_mb 1024 is below the 1680 MB the model needs" in message and "raise it to 2048" in message


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda e: e["prod"]["gpu"].update(hosting=dict(SERVERLESS)), "serverless inference is CPU only (no GPU)"),
        (
            lambda e: e["prod"]["cpu"].update(fallback_instance_types=["ml.c6i.4xlarge"]),
            "fallback_instance_types: serverless hosting here runs one instance type (serverless has none)",
        ),
        (
            lambda e: e["prod"]["cpu"].update(
                shadow={"s3_key": "models/c/model.tar.gz", "sha256": "a" * 64, "sampling_percent": 10}
            ),
            "shadow: a shadow variant needs a model on the variant",
        ),
        (lambda e: e["prod"]["cpu"]["autoscaling"].update(enabled=True), "set autoscaling.enabled to false"),
        (
            lambda e: e["prod"]["cpu"].update(deployment={"strategy": "rolling", "batch_instances": 1, **_BAKE}),
            "deployment.strategy rolling: a serverless endpoint has no instances to step traffic by",
        ),
        (
            lambda e: e["prod"].update(
                data_capture={"enabled": True, "sampling_percent": 5, "prefix": "capture", "expiry_days": 30}
            ),
            "cpu is hosted as serverless: SageMaker serverless inference excludes data capture; turn data_capture off",
        ),
        (
            lambda e: e["prod"]["cpu"]["hosting"].pop("network_isolation"),
            "environments.prod.cpu.hosting.serverless.network_isolation: Field required",
        ),
        (
            lambda e: e["prod"]["model"].pop("footprint"),
            "hosting.mode serverless sizes memory from the model: set model.footprint",
        ),
    ],
)
def test_what_serverless_cannot_do_is_refused_with_the_alternative(change: Any, expected: str) -> None:
    envs = _environments()
    prod = envs["prod"]["cpu"]
    prod["hosting"] = dict(SERVERLESS)
    prod["autoscaling"]["enabled"] = False
    prod["deployment"] = {"strategy": "all_at_once", **_BAKE}
    assert load_environment(copy.deepcopy(envs), "prod").cpu is not None
    change(envs)
    assert expected in _refusal(envs, "prod")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda c: c.update(fallback_instance_types=["ml.c6i.2xlarge"]),
            "fallback_instance_types: components hosting here runs one instance type (one component Specification)",
        ),
        (
            lambda c: c.update(deployment={"strategy": "canary", "batch_instances": 1, "wait_seconds": 0, **_NO}),
            "deployment.strategy canary: an inference component updates its copies in rolling batches; use rolling",
        ),
        (
            lambda c: c.update(deployment={"strategy": "all_at_once", "wait_seconds": 600, "rollback_on_alarms": True}),
            "deployment.rollback_on_alarms with all_at_once: an inference component watches rollback alarms only",
        ),
        (
            lambda c: c["autoscaling"].update(enabled=False),
            "autoscaling.min_instances 0 with autoscaling.enabled false: no copy would ever start",
        ),
        (lambda c: c["hosting"].pop("cpu_cores_per_copy"), "hosting.cpu_cores_per_copy is required on a CPU section"),
    ],
)
def test_what_components_cannot_do_is_refused_with_the_alternative(change: Any, expected: str) -> None:
    envs = _environments()
    cpu = envs["dev"]["cpu"]
    cpu["hosting"] = {"mode": "components", "cpu_cores_per_copy": 2}
    cpu["autoscaling"]["min_instances"] = 0
    assert load_environment(copy.deepcopy(envs), "dev").cpu is not None
    change(cpu)
    message = _refusal(envs)
    assert f"environments.dev.cpu: hosting.mode components cannot take {expected}" in message


def test_scale_to_zero_needs_components_and_is_refused_elsewhere() -> None:
    envs = _environments()
    envs["dev"]["cpu"]["hosting"] = {"mode": "instances"}
    envs["dev"]["cpu"]["autoscaling"]["min_instances"] = 0
    message = _refusal(envs)
    assert "hosting.mode instances cannot take autoscaling.min_instances 0" in message
    assert "scaling to zero needs hosting.mode components" in message
    envs = _environments()
    envs["dev"]["cpu"]["hosting"] = {"mode": "components", "cpu_cores_per_copy": 2}
    envs["dev"]["cpu"]["autoscaling"]["min_instances"] = 0
    envs["dev"]["model"].pop("footprint")
    assert "hosting.mode components reserves memory per copy from the model: set model.footprint" in _refusal(envs)
    envs = _environments()
    envs["dev"]["chat"] = copy.deepcopy(synthesize_chat())
    envs["dev"]["chat"]["autoscaling"]["min_instances"] = 0
    assert "environments.dev.chat: autoscaling.min_instances 0: the chat endpoint" in _refusal(envs)


def synthesize_chat() -> dict[str, Any]:
    chat: dict[str, Any] = variant_context()["environments"]["dev"]["chat"]
    return chat


def test_batch_does_not_run_a_serverless_model() -> None:
    envs = _serverless_dev()
    envs["dev"]["batch"] = copy.deepcopy(BATCH)
    assert "model 'cpu' is hosted serverless, whose model runs without network isolation" in _refusal(envs)


def test_the_dashboard_shows_copies_and_cold_starts() -> None:
    for variant, title in (("dev-components", "decision-dev-cpu: copies"), ("dev-serverless", "cold starts")):
        (dashboard,) = _of(synthesize(variant), "AWS::CloudWatch::Dashboard").values()
        assert title in json.dumps(dashboard["DashboardBody"])
