"""Batch Transform and the asynchronous endpoint in the synthesized templates (issue 15), and their config.

Both are off in cdk.json; the "bulk" variant here is dev with both on (a nightly schedule included),
synthesized once for the module with cdk-nag registered: a synthesis that returns has zero unacknowledged
findings. Assertions are on properties, following references, never on generated logical ids.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint_file  # type: ignore[import-untyped]
from decision_spec.environment_config import ConfigError, load_environment

from app import build_app
from stacks.batch_transform import LOG_DELIVERY_ACTIONS
from stacks.nag import MIN_REASON_LENGTH, acknowledged
from tests.cdk_support import BATCH, bulk_context, cdk_context

ASYNC_NAME = "decision-dev-async"


@pytest.fixture(scope="module")
def outdir() -> Path:
    out = Path(tempfile.mkdtemp(prefix="cdk-bulk-"))
    atexit.register(shutil.rmtree, out, True)
    return out


@pytest.fixture(scope="module")
def app(outdir: Path) -> Any:
    app = build_app("dev", context=bulk_context(), outdir=str(outdir))
    app.synth()  # raises on any unacknowledged cdk-nag finding
    return app


@pytest.fixture(scope="module")
def serving(app: Any, outdir: Path) -> dict[str, Any]:
    template: dict[str, Any] = json.loads(
        (outdir / "DecisionEndpoints-dev-Serving.template.json").read_text(encoding="utf-8")
    )
    return template


def of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def one(template: dict[str, Any], kind: str) -> dict[str, Any]:
    found = list(of_type(template, kind).values())
    assert len(found) == 1, (kind, len(found))
    properties: dict[str, Any] = found[0]["Properties"]
    return properties


def render(value: Any) -> str:
    """An intrinsic as text, e.g. <CpuEndpointModel...ModelName>, so a definition string can be parsed."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        return "".join(render(part) for part in value["Fn::Join"][1])
    if "Ref" in value:
        return f"<{value['Ref']}>"
    if "Fn::GetAtt" in value:
        return f"<{value['Fn::GetAtt'][0]}.{value['Fn::GetAtt'][1]}>"
    if "Fn::ImportValue" in value:
        return f"<import {value['Fn::ImportValue']}>"
    raise AssertionError(f"unexpected intrinsic {value}")


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def role_statements(template: dict[str, Any], role_logical: str) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = []
    for policy in of_type(template, "AWS::IAM::Policy").values():
        if {"Ref": role_logical} in policy["Properties"]["Roles"]:
            statements += policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def logical_of(value: Any) -> str:
    return str(value["Ref"] if "Ref" in value else value["Fn::GetAtt"][0])


def grants(statements: list[dict[str, Any]], action: str) -> list[str]:
    return [render(r) for s in statements if action in as_list(s["Action"]) for r in as_list(s["Resource"])]


def models(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return of_type(template, "AWS::SageMaker::Model")


# --- config --------------------------------------------------------------------------------------


def test_both_are_off_in_the_shipped_environments() -> None:
    environments = cdk_context()["environments"]
    for name in environments:
        config = load_environment(environments, name)
        assert config.batch is None and config.async_inference is None, name
        assert environments[name]["batch"] == {"enabled": False}
        assert environments[name]["async"] == {"enabled": False}


def test_a_missing_section_is_off() -> None:
    environments = cdk_context()["environments"]
    del environments["dev"]["batch"], environments["dev"]["async"]
    config = load_environment(environments, "dev")
    assert config.batch is None and config.async_inference is None


@pytest.mark.parametrize(
    ("section", "change", "key", "message"),
    [
        ("batch", {"model": "gpu"}, "environments.dev.batch", "not enabled"),
        ("batch", {"instance_type": "ml.g5.xlarge"}, "environments.dev.batch", "CPU"),
        ("batch", {"max_concurrent_transforms": 10}, "environments.dev.batch", "admits"),
        ("batch", {"max_payload_mb": 7}, "environments.dev.batch.max_payload_mb", "less than or equal to 6"),
        ("batch", {"instance_count": 0}, "environments.dev.batch.instance_count", "greater than or equal"),
        ("batch", {"schedule": {"expression": "nightly"}}, "environments.dev.batch.schedule.expression", "pattern"),
        ("batch", {"schedule": {"expression": "rate(1 day)", "run": "a/b"}}, "environments.dev.batch.schedule.run", ""),
        ("async", {"max_concurrent_invocations_per_instance": 10}, "environments.dev.async", "admits"),
        ("async", {"enabled": "yes"}, "environments.dev.async.enabled", "true or false"),
        ("async", {"max_instances": 0}, "environments.dev.async.max_instances", "greater than or equal"),
        ("async", {"spare": 1}, "environments.dev.async.spare", "Extra inputs"),
    ],
)
def test_wrong_bulk_values_are_refused_with_their_key(
    section: str, change: dict[str, Any], key: str, message: str
) -> None:
    environments = bulk_context()["environments"]
    environments["dev"][section].update(change)
    with pytest.raises(ConfigError) as caught:
        load_environment(environments, "dev")
    line = next(line.strip() for line in str(caught.value).splitlines() if line.strip().startswith(key + ":"))
    assert message in line, line


# --- Batch Transform -----------------------------------------------------------------------------


def transform_state(serving: dict[str, Any]) -> dict[str, Any]:
    machines = of_type(serving, "AWS::StepFunctions::StateMachine")
    batch = [m for m in machines.values() if m["Properties"].get("StateMachineName") == "decision-dev-batch"]
    assert len(batch) == 1
    definition = json.loads(render(batch[0]["Properties"]["DefinitionString"]))
    state: dict[str, Any] = definition["States"][definition["StartAt"]]
    return state


def test_the_state_machine_runs_a_transform_job_on_the_cpu_endpoints_model(serving: dict[str, Any]) -> None:
    state = transform_state(serving)
    assert state["Resource"] == "arn:<AWS::Partition>:states:::sagemaker:createTransformJob.sync"  # waits for the job
    p = state["Parameters"]
    cpu_model = next(k for k, m in models(serving).items() if k.startswith("CpuEndpoint"))
    assert p["ModelName"] == f"<{cpu_model}.ModelName>"  # the real-time endpoint's own Model: same image and artifact
    assert models(serving)[cpu_model]["Properties"]["EnableNetworkIsolation"] is True
    assert p["BatchStrategy"] == "MultiRecord"
    assert p["MaxConcurrentTransforms"] == BATCH["max_concurrent_transforms"]
    assert p["MaxPayloadInMB"] == BATCH["max_payload_mb"]
    assert p["ModelClientConfig"] == {"InvocationsMaxRetries": 1, "InvocationsTimeoutInSeconds": 600}
    source = p["TransformInput"]
    assert (source["ContentType"], source["SplitType"]) == ("application/jsonlines", "Line")
    assert source["DataSource"]["S3DataSource"]["S3DataType"] == "S3Prefix"
    output = p["TransformOutput"]
    assert (output["Accept"], output["AssembleWith"]) == ("application/jsonlines", "Line")
    resources = p["TransformResources"]
    assert (resources["InstanceType"], resources["InstanceCount"]) == ("ml.c6i.2xlarge", 2)
    assert "Key" in resources["VolumeKmsKeyId"]  # c6i has no local NVMe: the environment key encrypts volumes
    assert state["TimeoutSeconds"] == 24 * 3600


def test_each_execution_names_its_own_job_and_folders(serving: dict[str, Any]) -> None:
    p = transform_state(serving)["Parameters"]
    assert p["TransformJobName.$"] == "States.Format('dev-batch-{}', $$.Execution.Name)"
    bucket = "<import DecisionEndpoints-dev-Foundation:ExportsOutputRefModelArtifactsBucket"
    source = p["TransformInput"]["DataSource"]["S3DataSource"]["S3Uri.$"]
    assert source.startswith(f"States.Format('s3://{bucket}") and source.endswith("/batch/input/{}/', $.run)")
    output = p["TransformOutput"]["S3OutputPath.$"]
    assert output.endswith("/batch/output/{}/{}/', $.run, $$.Execution.Name)")


def test_the_jobs_role_reads_only_its_input_and_writes_only_its_output(serving: dict[str, Any]) -> None:
    cpu_model = next(m for k, m in models(serving).items() if k.startswith("CpuEndpoint"))
    statements = role_statements(serving, logical_of(cpu_model["Properties"]["ExecutionRoleArn"]))
    reads = sorted(r.split(">")[-1] for r in grants(statements, "s3:GetObject"))
    assert reads == ["/batch/input/*", "/models/smollm2-135m-instruct-q4_1/model.tar.gz"]
    assert [r.split(">")[-1] for r in grants(statements, "s3:PutObject")] == ["/batch/output/*"]
    listing = [s for s in statements if "s3:ListBucket" in as_list(s["Action"])]
    assert [s["Condition"] for s in listing] == [{"StringLike": {"s3:prefix": "batch/input/*"}}]
    s3_actions = {a for s in statements for a in as_list(s["Action"]) if a.startswith("s3:")}
    assert s3_actions == {"s3:GetObject", "s3:ListBucket", "s3:PutObject", "s3:AbortMultipartUpload"}
    keys = [s for s in statements if "kms:GenerateDataKey" in as_list(s["Action"])]
    assert len(keys) == 1 and "s3.us-west-2." in json.dumps(keys[0]["Condition"])


def test_the_state_machine_may_run_only_this_environments_jobs(serving: dict[str, Any]) -> None:
    machine = next(
        m["Properties"]
        for m in of_type(serving, "AWS::StepFunctions::StateMachine").values()
        if m["Properties"].get("StateMachineName") == "decision-dev-batch"
    )
    statements = role_statements(serving, logical_of(machine["RoleArn"]))
    actions = {a for s in statements for a in as_list(s["Action"])}
    assert "iam:PassRole" not in actions  # CreateTransformJob passes no role: the job runs as the Model's
    for statement in statements:
        resources = [render(r) for r in as_list(statement["Resource"])]
        if any(a.startswith("sagemaker:") for a in as_list(statement["Action"])):
            assert resources == ["arn:aws:sagemaker:us-west-2:<AWS::AccountId>:transform-job/dev-batch-*"]
        if resources == ["*"]:
            assert set(as_list(statement["Action"])) <= set(LOG_DELIVERY_ACTIONS), statement
    assert "sagemaker:CreateTransformJob" in actions and "events:PutRule" in actions
    assert machine["LoggingConfiguration"]["Level"] == "ALL"
    assert machine["LoggingConfiguration"]["IncludeExecutionData"] is False  # no payloads in the logs


def test_the_nightly_schedule_may_only_start_this_state_machine(serving: dict[str, Any]) -> None:
    schedule = one(serving, "AWS::Scheduler::Schedule")
    assert (schedule["ScheduleExpression"], schedule["ScheduleExpressionTimezone"]) == (
        "cron(0 2 * * ? *)",
        "Europe/Berlin",
    )
    target = schedule["Target"]
    assert json.loads(target["Input"]) == {"run": "nightly"}
    machine = logical_of(target["Arn"])
    assert serving["Resources"][machine]["Type"] == "AWS::StepFunctions::StateMachine"
    role = logical_of(target["RoleArn"])
    assert role_statements(serving, role) == [
        {"Action": "states:StartExecution", "Effect": "Allow", "Resource": {"Ref": machine}}
    ]
    trust = serving["Resources"][role]["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert "aws:SourceAccount" in trust["Condition"]["StringEquals"]


def test_failed_or_timed_out_executions_alarm_the_topic(serving: dict[str, Any]) -> None:
    alarm = next(
        a["Properties"]
        for a in of_type(serving, "AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("AlarmName") == "decision-dev-batch-executions-failed"
    )
    metrics = {m["Id"]: m for m in alarm["Metrics"]}
    named = {m["MetricStat"]["Metric"]["MetricName"] for m in metrics.values() if "MetricStat" in m}
    assert named == {"ExecutionsFailed", "ExecutionsTimedOut"}
    for m in metrics.values():
        if "MetricStat" in m:
            assert m["MetricStat"]["Metric"]["Namespace"] == "AWS/States"
            assert m["MetricStat"]["Metric"]["Dimensions"][0]["Name"] == "StateMachineArn"
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    endpoint_alarm = next(
        a["Properties"]
        for a in of_type(serving, "AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("AlarmName") == "decision-dev-cpu-5xx-rate"
    )
    assert alarm["AlarmActions"] == endpoint_alarm["AlarmActions"]  # the environment's alarm topic


# --- asynchronous endpoint -----------------------------------------------------------------------


def async_parts(serving: dict[str, Any]) -> dict[str, Any]:
    res = serving["Resources"]
    endpoint = next(
        e
        for e in of_type(serving, "AWS::SageMaker::Endpoint").values()
        if e["Properties"]["EndpointName"] == ASYNC_NAME
    )
    config = res[logical_of(endpoint["Properties"]["EndpointConfigName"])]["Properties"]
    variant = config["ProductionVariants"][0]
    model = res[logical_of(variant["ModelName"])]["Properties"]
    return {"endpoint": endpoint["Properties"], "config": config, "variant": variant, "model": model}


def test_the_async_endpoint_queues_to_s3_and_notifies_both_topics(serving: dict[str, Any]) -> None:
    parts = async_parts(serving)
    asynchronous = parts["config"]["AsyncInferenceConfig"]
    output = asynchronous["OutputConfig"]
    assert render(output["S3OutputPath"]).endswith("/async/output/")
    assert render(output["S3FailurePath"]).endswith("/async/failure/")
    notify = output["NotificationConfig"]
    assert {serving["Resources"][logical_of(notify[k])]["Type"] for k in ("SuccessTopic", "ErrorTopic")} == {
        "AWS::SNS::Topic"
    }
    assert notify["SuccessTopic"] != notify["ErrorTopic"]
    assert "IncludeInferenceResponseIn" not in notify  # answers stay in S3, never in a notification
    assert asynchronous["ClientConfig"] == {"MaxConcurrentInvocationsPerInstance": 1}
    assert parts["variant"]["InstanceType"] == "ml.c6i.xlarge"
    assert parts["endpoint"]["RetainAllVariantProperties"] is True


def test_the_async_model_runs_the_cpu_image_and_artifact_in_isolation(serving: dict[str, Any]) -> None:
    parts = async_parts(serving)
    cpu = next(m for k, m in models(serving).items() if k.startswith("CpuEndpoint"))["Properties"]
    mine, theirs = parts["model"]["PrimaryContainer"], cpu["PrimaryContainer"]
    assert (mine["Image"], mine["ModelDataUrl"]) == (theirs["Image"], theirs["ModelDataUrl"])
    assert parts["model"]["EnableNetworkIsolation"] is True
    assert parts["model"]["ExecutionRoleArn"] != cpu["ExecutionRoleArn"]  # its own role, its own grants
    env = mine["Environment"]
    assert env["DECISION_INSTANCE_TYPES"] == "ml.c6i.xlarge"
    assert env["DECISION_EXPECTED_MODEL_SHA256"] == theirs["Environment"]["DECISION_EXPECTED_MODEL_SHA256"]


def test_the_async_role_reads_its_input_and_writes_its_answers_only(serving: dict[str, Any]) -> None:
    statements = role_statements(serving, logical_of(async_parts(serving)["model"]["ExecutionRoleArn"]))
    reads = sorted(r.split(">")[-1] for r in grants(statements, "s3:GetObject"))
    assert reads == ["/async/input/*", "/models/smollm2-135m-instruct-q4_1/model.tar.gz"]
    assert sorted(r.split(">")[-1] for r in grants(statements, "s3:PutObject")) == [
        "/async/failure/*",
        "/async/output/*",
    ]
    published = grants(statements, "sns:Publish")
    assert len(published) == 2 and all("Topic" in t for t in published)
    s3_actions = {a for s in statements for a in as_list(s["Action"]) if a.startswith("s3:")}
    assert s3_actions == {"s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"}


def test_the_topics_are_encrypted_and_tls_only(serving: dict[str, Any]) -> None:
    topics = of_type(serving, "AWS::SNS::Topic")
    assert len(topics) == 2
    for topic in topics.values():
        assert "Key" in render(topic["Properties"]["KmsMasterKeyId"])
    policies = of_type(serving, "AWS::SNS::TopicPolicy").values()
    denied = [
        s
        for p in policies
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
    ]
    assert len(denied) == 2


def test_the_async_endpoint_scales_to_zero_and_back(serving: dict[str, Any]) -> None:
    target = next(
        t["Properties"]
        for t in of_type(serving, "AWS::ApplicationAutoScaling::ScalableTarget").values()
        if t["Properties"]["ResourceId"] == f"endpoint/{ASYNC_NAME}/variant/AllTraffic"
    )
    assert (target["MinCapacity"], target["MaxCapacity"]) == (0, 3)
    policies = [
        p
        for p in of_type(serving, "AWS::ApplicationAutoScaling::ScalingPolicy").values()
        if "AsyncEndpoint" in json.dumps(p["Properties"]["ScalingTargetId"])
    ]
    by_type = {p["Properties"]["PolicyType"]: p for p in policies}
    assert set(by_type) == {"TargetTrackingScaling", "StepScaling"}
    tracking = by_type["TargetTrackingScaling"]["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["CustomizedMetricSpecification"] == {
        "Dimensions": [{"Name": "EndpointName", "Value": ASYNC_NAME}],
        "MetricName": "ApproximateBacklogSizePerInstance",
        "Namespace": "AWS/SageMaker",
        "Statistic": "Average",
    }
    assert (tracking["TargetValue"], tracking["ScaleInCooldown"]) == (4, 600)
    step = by_type["StepScaling"]["Properties"]["StepScalingPolicyConfiguration"]
    assert step["AdjustmentType"] == "ChangeInCapacity"
    assert step["StepAdjustments"] == [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}]
    step_logical = next(k for k, v in serving["Resources"].items() if v is by_type["StepScaling"])
    wake = next(
        a["Properties"]
        for a in of_type(serving, "AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == "HasBacklogWithoutCapacity"
    )
    assert (wake["Namespace"], wake["Dimensions"]) == ("AWS/SageMaker", [{"Name": "EndpointName", "Value": ASYNC_NAME}])
    assert (wake["Threshold"], wake["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    assert wake["AlarmActions"] == [{"Ref": step_logical}]


# --- outputs, nag, lint --------------------------------------------------------------------------


def test_outputs_name_what_decisionctl_reads(serving: dict[str, Any]) -> None:
    outputs = serving["Outputs"]
    for key in ("BatchStateMachineArn", "BatchInputUri", "BatchOutputUri", "AsyncEndpointName", "AsyncInputUri"):
        assert key in outputs, key
    assert render(outputs["BatchInputUri"]["Value"]).endswith("/batch/input/")
    assert outputs["AsyncEndpointName"]["Value"] == ASYNC_NAME


def test_acknowledgements_are_per_finding_and_reasoned(app: Any) -> None:
    found = {path: rules for path, rules in acknowledged(app).items() if "/Batch" in path or "/Async" in path}
    assert any("/Batch" in path for path in found) and any("/Async" in path for path in found)
    for path, rules in found.items():
        for stored, reason in rules.items():
            rule = stored.removeprefix("Annotation::")  # CDK stores unprefixed ids as annotation rules
            assert rule.startswith("AwsSolutions-") and rule not in {"AwsSolutions-IAM5", "AwsSolutions-IAM4"}, path
            assert len(reason) >= MIN_REASON_LENGTH, (path, rule)


def test_templates_have_no_cfn_lint_errors(app: Any, outdir: Path) -> None:
    files = sorted(outdir.glob("*.template.json"))
    assert len(files) == 2
    for path in files:
        matches = lint_file(path, ManualArgs(regions=["us-west-2"]))
        errors = [f"{m.rule.id} {m.path_string}: {m.message}" for m in matches if m.rule.id.startswith("E")]
        assert errors == [], f"{path.name}:\n" + "\n".join(errors)
