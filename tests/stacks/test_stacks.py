"""The synthesized templates, per environment: what issue 4 says the infrastructure must be.

Each app is synthesized once per session (tests/cdk_support.py) with cdk-nag registered, so a
synthesis that returns at all has zero unacknowledged AwsSolutions findings. Assertions are on
properties, never on generated logical ids.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Match, Template
from constructs import Construct
from decision_adapter.request_log import log_rejection
from decision_adapter.serve import JsonFormatter
from decision_spec import events

from app import build_app
from stacks import image_build
from stacks.image_build import BUILDSPEC, image_tag, recipe_hash
from stacks.nag import MIN_REASON_LENGTH, acknowledged
from stacks.observability import OVERLOAD_PATTERN
from tests.cdk_support import (
    VARIANT_ACCOUNT,
    VARIANT_TOPIC,
    Synthesized,
    as_list,
    by_ref,
    cdk_context,
    role_statements,
    synthesize,
)

DLC_ACCOUNT = "763104351884"
# The only actions that may have Resource "*" (AWS offers no resource-level permissions for them), each with the
# condition that scopes it where AWS offers one: metrics only into SageMaker's endpoint namespaces.
WILDCARD_RESOURCE_ACTIONS: dict[str, dict[str, Any] | None] = {
    "ecr:GetAuthorizationToken": None,
    "cloudwatch:PutMetricData": {
        "StringEquals": {"cloudwatch:namespace": ["/aws/sagemaker/Endpoints", "/aws/sagemaker/InferenceComponents"]}
    },
}


def endpoints(s: Synthesized) -> dict[str, dict[str, Any]]:
    """Endpoint name -> its Model, EndpointConfig and Endpoint properties (and its inference component where it hosts
    one, hosting.mode components: the model is the component's then), followed through references."""
    res = s.template_json("Serving")["Resources"]
    components = {
        v["Properties"]["EndpointName"]["Fn::GetAtt"][0]: v["Properties"]
        for v in res.values()
        if v["Type"] == "AWS::SageMaker::InferenceComponent"
    }
    found = {}
    for logical, endpoint in ((k, v) for k, v in res.items() if v["Type"] == "AWS::SageMaker::Endpoint"):
        config = by_ref(res, endpoint["Properties"]["EndpointConfigName"])
        variant = config["Properties"]["ProductionVariants"][0]
        component = components.get(logical)
        model = by_ref(res, component["Specification"]["ModelName"] if component else variant["ModelName"])
        found[endpoint["Properties"]["EndpointName"]] = {
            "endpoint": endpoint["Properties"],
            "config": config["Properties"],
            "variant": variant,
            "component": component,
            "model": model["Properties"],
            "role": by_ref(res, model["Properties"]["ExecutionRoleArn"]),
        }
    return found


def policy_statements(template: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(policy logical id, statement) for every identity policy in the template."""
    out = []
    for logical, resource in template["Resources"].items():
        documents = []
        if resource["Type"] == "AWS::IAM::Policy":
            documents.append(resource["Properties"]["PolicyDocument"])
        if resource["Type"] == "AWS::IAM::Role":
            documents += [p["PolicyDocument"] for p in resource["Properties"].get("Policies", [])]
        for document in documents:
            out += [(logical, statement) for statement in document["Statement"]]
    return out


# --- stacks and resource counts -----------------------------------------------------------------


def test_two_stacks_per_environment_named_for_the_front_door(synth: Synthesized) -> None:
    names = sorted(stack.stack_name for stack in synth.assembly.stacks)
    assert names == [synth.stack_name("Foundation"), synth.stack_name("Serving")]
    files = [p.name for p in synth.template_files()]
    assert files == [f"{synth.stack_name(part)}.template.json" for part in ("Foundation", "Serving")]


@pytest.mark.parametrize(
    ("variant_name", "counts"),
    [
        (
            "dev",  # hosted as an inference component that scales to zero (hosting.mode components)
            {
                "AWS::SageMaker::Model": 1,
                "AWS::SageMaker::EndpointConfig": 1,
                "AWS::SageMaker::Endpoint": 1,
                "AWS::SageMaker::InferenceComponent": 1,
                "AWS::ApplicationAutoScaling::ScalableTarget": 1,
                "AWS::ApplicationAutoScaling::ScalingPolicy": 2,  # copies tracking concurrency, and out of zero
                "AWS::CloudWatch::Alarm": 8,  # and the scale-out-from-zero alarm
                # overload rejections, runtime failures, answers per action (test_action_metrics.py), answers and
                # input-flagged answers (test_input_flags.py)
                "AWS::Logs::MetricFilter": 7,
                "AWS::CloudWatch::Dashboard": 1,
                "AWS::CodeBuild::Project": 1,
                "Custom::DecisionImage": 1,
            },
        ),
        (
            "prod",
            {
                "AWS::SageMaker::Model": 2,
                "AWS::SageMaker::EndpointConfig": 2,
                "AWS::SageMaker::Endpoint": 2,
                "AWS::ApplicationAutoScaling::ScalableTarget": 2,
                "AWS::ApplicationAutoScaling::ScalingPolicy": 2,
                "AWS::CloudWatch::Alarm": 17,  # the GPU pool: a latency alarm per type (4) instead of one
                "AWS::Logs::MetricFilter": 14,
                "AWS::CloudWatch::Dashboard": 1,
                "AWS::CodeBuild::Project": 1,
                "Custom::DecisionImage": 2,
            },
        ),
        (
            "variant",
            {
                "AWS::SageMaker::Model": 2,
                "AWS::SageMaker::EndpointConfig": 2,
                "AWS::SageMaker::Endpoint": 2,
                "AWS::ApplicationAutoScaling::ScalableTarget": 2,
                "AWS::ApplicationAutoScaling::ScalingPolicy": 3,
                "AWS::CloudWatch::Alarm": 12,  # the chat endpoint has no adapter: no overload, runtime or flag alarm
                "AWS::Logs::MetricFilter": 7,
                "AWS::CloudWatch::Dashboard": 1,
                "AWS::CodeBuild::Project": 1,
                "Custom::DecisionImage": 1,  # the chat endpoint runs the stock DLC image: no build
            },
        ),
    ],
)
def test_serving_resource_counts(variant_name: str, counts: dict[str, int]) -> None:
    template = synthesize(variant_name).template("Serving")
    for kind, count in counts.items():
        template.resource_count_is(kind, count)


def test_foundation_resource_counts(synth: Synthesized) -> None:
    template = synth.template("Foundation")
    template.resource_count_is("AWS::KMS::Key", 1)
    template.resource_count_is("AWS::ECR::Repository", 1)
    # model artifacts, and their access logs where buckets are retained (model_artifacts.py says why)
    template.resource_count_is("AWS::S3::Bucket", 1 if synth.config.destroy_on_delete else 2)
    template.resource_count_is("AWS::SNS::Topic", 0 if synth.config.alarms.topic_arn else 1)


# --- image build --------------------------------------------------------------------------------


def test_codebuild_builds_from_the_buildspec_file_with_docker(synth: Synthesized) -> None:
    project = next(iter(synth.resources("Serving", "AWS::CodeBuild::Project").values()))["Properties"]
    assert yaml.safe_load(project["Source"]["BuildSpec"]) == yaml.safe_load(BUILDSPEC.read_text(encoding="utf-8"))
    assert project["Source"]["Type"] == "S3"
    assert project["Environment"]["PrivilegedMode"] is True
    assert {v["Name"] for v in project["Environment"]["EnvironmentVariables"]} == {"REPOSITORY_URI", "REPOSITORY_NAME"}
    assert "EncryptionKey" in project


def test_one_image_build_per_decision_flavour_with_content_derived_tags(synth: Synthesized) -> None:
    images = synth.resources("Serving", "Custom::DecisionImage")
    flavours = {p["Properties"]["BuildEnvironment"]["FLAVOUR"]: p["Properties"] for p in images.values()}
    expected = {"cpu": "cpu", "gpu": "cuda"}
    assert set(flavours) == {expected[section] for section in synth.config.decision_endpoints}
    for flavour, props in flavours.items():
        build = props["BuildEnvironment"]
        digest = synth.config.dlc.digest(flavour)
        assert build["IMAGE_TAG"] == props["ImageTag"]
        pinned = f"{DLC_ACCOUNT}/llama-cpp@{digest}"
        assert props["ImageTag"] == image_tag(flavour, build["SOURCE_HASH"], pinned, recipe_hash())
        base = json.dumps(build["BASE_IMAGE"])
        assert f"{DLC_ACCOUNT}.dkr.ecr.us-west-2." in base and f"/llama-cpp@{digest}" in base


def test_image_tag_changes_with_source_base_or_recipe_only() -> None:
    base = f"{DLC_ACCOUNT}/llama-cpp@sha256:" + "1" * 64
    tag = image_tag("cpu", "aaa", base, "r")
    assert tag == image_tag("cpu", "aaa", base, "r")
    assert tag != image_tag("cpu", "aab", base, "r")
    assert tag != image_tag("cpu", "aaa", base.replace("1", "2"), "r")
    assert tag != image_tag("cpu", "aaa", base, "s")
    assert image_tag("cuda", "aaa", base, "r").startswith("cuda-")


def test_the_image_build_waits_through_an_is_complete_provider(dev: Synthesized) -> None:
    functions = dev.resources("Serving", "AWS::Lambda::Function").values()
    handlers = {f["Properties"]["Handler"] for f in functions}
    assert {"index.on_event", "index.is_complete"} <= handlers
    dev.template("Serving").resource_count_is("AWS::StepFunctions::StateMachine", 1)  # the provider's waiter


def test_the_build_and_its_waiter_end_inside_cloudformations_custom_resource_hour(dev: Synthesized) -> None:
    project = next(iter(dev.resources("Serving", "AWS::CodeBuild::Project").values()))["Properties"]
    queued, build = project["QueuedTimeoutInMinutes"], project["TimeoutInMinutes"]
    assert (queued, build) == (image_build.QUEUED_MINUTES, image_build.BUILD_MINUTES)
    assert queued + build <= image_build.WAIT_MINUTES < image_build.CUSTOM_RESOURCE_LIMIT_MINUTES
    waiter = json.dumps(next(iter(dev.resources("Serving", "AWS::StepFunctions::StateMachine").values())))
    polls = image_build.WAIT_MINUTES * 60 // 30  # the provider polls every 30 s
    assert f'MaxAttempts\\":{polls},' in waiter and 'IntervalSeconds\\":30,' in waiter


# --- endpoints ----------------------------------------------------------------------------------


def test_decision_models_pin_the_built_image_by_digest(synth: Synthesized) -> None:
    res = synth.template_json("Serving")["Resources"]
    for name, parts in endpoints(synth).items():
        if not name.startswith("decision-"):
            continue
        container = parts["model"]["PrimaryContainer"]
        image_ref = container["Image"]["Fn::GetAtt"]
        assert image_ref[1] == "ImageUri"
        assert res[image_ref[0]]["Type"] == "Custom::DecisionImage"
        assert container["Environment"]["DECISION_IMAGE_DIGEST"] == {"Fn::GetAtt": [image_ref[0], "ImageDigest"]}


def test_models_and_configs_get_generated_names(synth: Synthesized) -> None:
    for parts in endpoints(synth).values():
        assert "ModelName" not in parts["model"]
        assert "EndpointConfigName" not in parts["config"]
        assert parts["endpoint"]["RetainAllVariantProperties"] is True  # autoscaling is on in these configs


def test_endpoint_names_and_run_identity_environment(synth: Synthesized) -> None:
    found = endpoints(synth)
    config = synth.config
    for section, settings in config.decision_endpoints.items():
        env = found[f"decision-{config.name}-{section}"]["model"]["PrimaryContainer"]["Environment"]
        assert env["DECISION_EXPECTED_MODEL_SHA256"] == config.model.sha256
        assert env["DECISION_INSTANCE_TYPES"] == ",".join(settings.instance_types)
        assert env["DECISION_MAX_CONCURRENCY"] == str(settings.max_concurrency)
        assert env["DECISION_MAX_QUEUE"] == str(settings.max_queue)
        assert env["DECISION_CHAT_CONTEXTS"] == "0"  # decisions keep every context and core; chat is its own endpoint
        assert env["SM_LLAMA_CPP_CTX_SIZE"] == str(settings.ctx_size)
        if section == "cpu":
            assert env["SM_LLAMA_CPP_THREADS"] == str(settings.threads)  # type: ignore[union-attr]
            assert "SM_LLAMA_CPP_N_GPU_LAYERS" not in env
        else:
            assert env["SM_LLAMA_CPP_N_GPU_LAYERS"] == "999"


def test_timeouts_are_sized_for_gguf_loads(synth: Synthesized) -> None:
    for parts in endpoints(synth).values():
        # a component's copies start under its own startup parameters, a model's variant under the variant's
        startup = parts["component"]["Specification"]["StartupParameters"] if parts["component"] else parts["variant"]
        assert startup["ContainerStartupHealthCheckTimeoutInSeconds"] >= 600
        assert startup["ModelDataDownloadTimeoutInSeconds"] == synth.config.model.download_timeout_seconds


def test_models_read_model_tar_gz_from_the_model_bucket_in_isolation(synth: Synthesized) -> None:
    for parts in endpoints(synth).values():
        model = parts["model"]
        assert model["EnableNetworkIsolation"] is True
        url = json.dumps(model["PrimaryContainer"]["ModelDataUrl"])
        assert url.startswith('{"Fn::Join": ["", ["s3://"') and synth.config.model.s3_key in url


def test_gpu_endpoint_offloads_all_layers_on_a_pinned_ami_from_a_pool(prod: Synthesized) -> None:
    gpu = endpoints(prod)["decision-prod-gpu"]
    settings = prod.config.gpu
    assert settings is not None
    variant = gpu["variant"]
    assert variant["InferenceAmiVersion"] == settings.inference_ami_version
    assert variant["InstancePools"] == [
        {"InstanceType": t, "Priority": i} for i, t in enumerate(settings.instance_types, start=1)
    ]
    assert "InstanceType" not in variant
    assert "KmsKeyId" not in gpu["config"]  # the pool's instances have local NVMe


def test_cpu_endpoint_volume_is_encrypted_with_the_environment_key(synth: Synthesized) -> None:
    cpu = endpoints(synth)[f"decision-{synth.environment}-cpu"]
    assert "Fn::ImportValue" in cpu["config"]["KmsKeyId"]
    assert "InferenceAmiVersion" not in cpu["variant"]
    assert cpu["variant"]["InstanceType"] == synth.config.cpu.instance_type  # type: ignore[union-attr]


def test_chat_endpoint_runs_the_stock_dlc_image_by_digest(variant: Synthesized) -> None:
    chat = endpoints(variant)["chat-dev-cpu"]
    container = chat["model"]["PrimaryContainer"]
    image = json.dumps(container["Image"])
    assert f"{DLC_ACCOUNT}.dkr.ecr.us-west-2." in image and f"/llama-cpp@{variant.config.dlc.cpu_digest}" in image
    assert container["Environment"] == {"SM_LLAMA_CPP_CTX_SIZE": "4096", "SM_LLAMA_CPP_THREADS": "8"}
    pulls = [s for s in role_statements(variant, chat["role"]) if "ecr:BatchGetImage" in as_list(s["Action"])]
    assert [s["Resource"] for s in pulls] == [f"arn:aws:ecr:us-west-2:{DLC_ACCOUNT}:repository/llama-cpp"]


def test_pinned_account_is_used(variant: Synthesized) -> None:
    for stack in variant.assembly.stacks:
        assert stack.environment.account == VARIANT_ACCOUNT
        assert stack.environment.region == "us-west-2"


def test_unpinned_account_keeps_stacks_account_agnostic(prod: Synthesized) -> None:
    for stack in prod.assembly.stacks:
        assert stack.environment.account == "unknown-account"
        assert stack.environment.region == "us-west-2"


# --- autoscaling --------------------------------------------------------------------------------


def test_each_endpoint_has_a_scalable_target_and_tracking_policy(synth: Synthesized) -> None:
    template = synth.template("Serving")
    settings = {**synth.config.decision_endpoints}
    names = {section: f"decision-{synth.environment}-{section}" for section in settings}
    if synth.config.chat is not None:
        settings["chat"] = synth.config.chat  # type: ignore[assignment]
        names["chat"] = f"chat-{synth.environment}-{synth.config.chat.flavour}"
    for section, s in settings.items():
        a = s.autoscaling
        component = endpoints(synth)[names[section]]["component"]
        template.has_resource_properties(
            "AWS::ApplicationAutoScaling::ScalableTarget",
            {
                "ServiceNamespace": "sagemaker",
                # a components endpoint scales its copies (tests/stacks/test_hosting_modes.py), others their instances
                "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount"
                if component
                else "sagemaker:variant:DesiredInstanceCount",
                "ResourceId": f"inference-component/{component['InferenceComponentName']}"
                if component
                else f"endpoint/{names[section]}/variant/AllTraffic",
                "MinCapacity": a.min_instances,
                "MaxCapacity": a.max_instances,
                "RoleARN": Match.any_value(),
            },
        )
        # its target tracking policy: tests/stacks/test_scaling.py
        # Initial instance count is the scaling minimum (at least one to create a components endpoint with).
        assert endpoints(synth)[names[section]]["variant"]["InitialInstanceCount"] == max(1, a.min_instances)


def test_autoscaling_can_be_switched_off_for_an_instance_type_change(tmp_path: Path) -> None:
    context = cdk_context()
    context["environments"]["dev"]["cpu"]["autoscaling"]["enabled"] = False
    context["environments"]["dev"]["cpu"]["autoscaling"]["min_instances"] = 1  # a copy that always runs
    assembly = build_app("dev", context=context, outdir=str(tmp_path)).synth()
    template = Template.from_json(assembly.get_stack_by_name("DecisionEndpoints-dev-Serving").template)
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalableTarget", 0)
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalingPolicy", 0)
    template.resource_count_is("AWS::SageMaker::Endpoint", 1)  # the endpoint itself stays
    template.has_resource_properties("AWS::SageMaker::Endpoint", {"RetainAllVariantProperties": False})


def test_scalable_targets_wait_for_their_endpoints(synth: Synthesized) -> None:
    res = synth.template_json("Serving")["Resources"]
    for target in synth.resources("Serving", "AWS::ApplicationAutoScaling::ScalableTarget").values():
        waits_for = {"AWS::SageMaker::Endpoint", "AWS::SageMaker::InferenceComponent"}  # a variant's or a component's
        assert any(res[d]["Type"] in waits_for for d in target["DependsOn"])
        role = json.dumps(target["Properties"]["RoleARN"])
        assert "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint" in role


# --- observability ------------------------------------------------------------------------------


def test_alarms_per_decision_endpoint(prod: Synthesized) -> None:
    resources = prod.resources("Serving", "AWS::CloudWatch::Alarm").values()
    alarms = {a["Properties"]["AlarmName"]: a["Properties"] for a in resources}
    for section in ("cpu", "gpu"):
        name = f"decision-prod-{section}"
        settings = prod.config.decision_endpoints[section]
        pooled = len(settings.instance_types) > 1  # a pool has a latency alarm per type (test_deploy_hardening)
        latency_suffix = (
            f"model-latency-p95-{settings.instance_type.removeprefix('ml.')}" if pooled else "model-latency-p95"
        )
        for suffix in ("5xx-rate", "4xx-rate", latency_suffix, "invocation-errors", "overload-rejections"):
            alarm = alarms[f"{name}-{suffix}"]
            assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
            assert alarm["TreatMissingData"] == "notBreaching"
            assert alarm["AlarmActions"] and alarm["OKActions"]
        latency = alarms[f"{name}-{latency_suffix}"]
        assert latency["ExtendedStatistic"] == "p95" and latency["MetricName"] == "ModelLatency"
        assert latency["Threshold"] == settings.model_latency_p95_ms * 1000
        rate = alarms[f"{name}-5xx-rate"]
        expressions = [m.get("Expression") for m in rate["Metrics"]]
        assert "IF(invocations > 0, 100 * errors / invocations, 0)" in expressions
        assert rate["Threshold"] == prod.config.alarms.http_5xx_rate_percent


def test_overload_rejections_are_counted_from_the_adapter_log_lines(prod: Synthesized) -> None:
    res = prod.template_json("Serving")["Resources"]
    filters = prod.resources("Serving", "AWS::Logs::MetricFilter").values()
    groups = set()
    for f in filters:
        props = f["Properties"]
        if props["FilterPattern"] != OVERLOAD_PATTERN:
            continue  # the answers-per-action filters, tested in test_action_metrics.py
        groups.add(by_ref(res, props["LogGroupName"])["Properties"]["LogGroupName"])
        assert props["MetricTransformations"][0]["MetricName"] == "OverloadRejections"
    assert groups == {"/aws/sagemaker/Endpoints/decision-prod-cpu", "/aws/sagemaker/Endpoints/decision-prod-gpu"}


def test_the_overload_filter_matches_the_adapters_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    """The line the adapter writes when it refuses a request with 429, as `serve` formats it, carries the
    field and value the metric filter selects at top level."""
    with caplog.at_level(logging.WARNING, logger="decision_adapter.requests"):
        log_rejection("r1", "/invocations", 429, events.OVERLOAD_REJECTED)
    (record,) = caplog.records
    line = json.loads(JsonFormatter().format(record))
    selects = re.fullmatch(r'\{ \$\.(\w+) = "(\w+)" \}', OVERLOAD_PATTERN)
    assert selects is not None
    field, value = selects.groups()
    assert line[field] == value and line["status"] == 429


def test_alarms_notify_the_configured_topic(synth: Synthesized, variant: Synthesized) -> None:
    for alarm in synth.resources("Serving", "AWS::CloudWatch::Alarm").values():
        if alarm["Properties"].get("MetricName") == "NoCapacityInvocationFailures":
            continue  # the scale-out-from-zero alarm scales, it notifies no one (test_hosting_modes.py)
        action = alarm["Properties"]["AlarmActions"][0]
        if synth is variant:
            assert action == VARIANT_TOPIC
        else:  # the Foundation's topic by its fixed name, not through an export (test_deploy_path.py)
            assert f":DecisionEndpoints-{synth.environment}-alarms" in json.dumps(action)


def test_dashboard_shows_latency_invocations_errors_instances(synth: Synthesized) -> None:
    dashboard = next(iter(synth.resources("Serving", "AWS::CloudWatch::Dashboard").values()))["Properties"]
    assert dashboard["DashboardName"] == f"DecisionEndpoints-{synth.environment}"
    body = json.dumps(dashboard["DashboardBody"])
    for metric in ("ModelLatency", "Invocations", "Invocation5XXErrors"):
        assert metric in body
    for name, parts in endpoints(synth).items():
        # a components endpoint shows its copies and scales per copy (test_hosting_modes.py)
        capacity, concurrency = ("copies", "ConcurrentRequestsPerCopy") if parts["component"] else ("instances", "")
        assert f"{name}: {capacity}" in body
        assert (concurrency or "ConcurrentRequestsPerModel") in body


# --- IAM ----------------------------------------------------------------------------------------


def test_no_action_wildcard_and_resource_wildcard_only_where_aws_requires(synth: Synthesized) -> None:
    for part in ("Foundation", "Serving"):
        for logical, statement in policy_statements(synth.template_json(part)):
            actions = set(as_list(statement["Action"]))
            assert "*" not in actions, logical
            assert not any(a.endswith(":*") for a in actions), (logical, actions)
            if "*" in as_list(statement["Resource"]):
                assert actions <= set(WILDCARD_RESOURCE_ACTIONS), (logical, actions)
                for action in actions:
                    assert statement.get("Condition") == WILDCARD_RESOURCE_ACTIONS[action], (logical, action)


def test_no_aws_managed_full_access_policies(synth: Synthesized) -> None:
    for part in ("Foundation", "Serving"):
        for logical, role in synth.resources(part, "AWS::IAM::Role").items():
            managed = json.dumps(role["Properties"].get("ManagedPolicyArns", []))
            assert "FullAccess" not in managed, logical
            if part == "Serving":
                assert managed == "[]", logical  # our roles carry inline, exact statements only


def test_sagemaker_role_reads_exactly_its_model_object_and_repository(synth: Synthesized) -> None:
    for name, parts in endpoints(synth).items():
        statements = role_statements(synth, parts["role"])
        by_action = {a: s for s in statements for a in as_list(s["Action"])}
        s3 = by_action["s3:GetObject"]
        assert json.dumps(s3["Resource"]).endswith(f'"/{synth.config.model.s3_key}"]]}}')
        assert not any(a.startswith("s3:") and a != "s3:GetObject" for a in by_action)
        via = json.dumps(by_action["kms:Decrypt"]["Condition"]["StringEquals"]["kms:ViaService"])
        region = synth.config.region
        # decrypt only through S3 and ECR in the endpoint's region, in whatever partition it is deployed to
        assert f'"s3.{region}."' in via and f'"ecr.{region}."' in via and via.count("AWS::URLSuffix") == 2, via
        assert "amazonaws.com" not in via, via
        logs = json.dumps(by_action["logs:PutLogEvents"]["Resource"])
        assert "Logs" in logs  # its own log group's ARN attribute, nothing wider
        if name.startswith("decision-"):
            assert "ImagesRepository" in json.dumps(by_action["ecr:BatchGetImage"]["Resource"])
        assert parts["role"]["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
            "Service": "sagemaker.amazonaws.com"
        }


def test_endpoint_log_groups_are_the_sagemaker_names(synth: Synthesized) -> None:
    names = {g["Properties"].get("LogGroupName") for g in synth.resources("Serving", "AWS::Logs::LogGroup").values()}
    for name in endpoints(synth):
        assert f"/aws/sagemaker/Endpoints/{name}" in names


def test_codebuild_pulls_only_its_dlc_repository_and_pushes_only_its_own(synth: Synthesized) -> None:
    project = next(iter(synth.resources("Serving", "AWS::CodeBuild::Project").values()))
    role = by_ref(synth.template_json("Serving")["Resources"], project["Properties"]["ServiceRole"])
    statements = role_statements(synth, role)
    pushes = [s for s in statements if "ecr:PutImage" in as_list(s["Action"])]
    assert len(pushes) == 1 and "ImagesRepository" in json.dumps(pushes[0]["Resource"])
    dlc = [s for s in statements if s["Resource"] == f"arn:aws:ecr:us-west-2:{DLC_ACCOUNT}:repository/llama-cpp"]
    assert len(dlc) == 1 and set(dlc[0]["Action"]) == {
        "ecr:BatchCheckLayerAvailability",
        "ecr:BatchGetImage",
        "ecr:GetDownloadUrlForLayer",
    }


# --- storage and removal policies ---------------------------------------------------------------


def test_model_bucket_is_locked_down(synth: Synthesized) -> None:
    template = synth.template("Foundation")
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [
                    {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": Match.any_value()}}
                ]
            },
            "VersioningConfiguration": {"Status": "Enabled"},
            "LoggingConfiguration": Match.absent()
            if synth.config.destroy_on_delete
            else {"DestinationBucketName": Match.any_value(), "LogFilePrefix": "model-bucket/"},
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
        },
    )
    policies = synth.resources("Foundation", "AWS::S3::BucketPolicy").values()
    for policy in policies:
        denials = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
        assert any(s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in denials)
    assert len(list(policies)) == (1 if synth.config.destroy_on_delete else 2)


def test_repository_scans_on_push_with_immutable_tags_lifecycle_and_kms(synth: Synthesized) -> None:
    repo = next(iter(synth.resources("Foundation", "AWS::ECR::Repository").values()))["Properties"]
    assert repo["ImageScanningConfiguration"] == {"ScanOnPush": True}
    assert repo["ImageTagMutability"] == "IMMUTABLE"
    assert repo["EncryptionConfiguration"]["EncryptionType"] == "KMS"
    rules = json.loads(repo["LifecyclePolicy"]["LifecyclePolicyText"])["rules"]
    keep_images = synth.config.image_repository.keep_images
    assert {r["selection"]["tagStatus"] for r in rules} == (
        {"untagged"} if keep_images is None else {"untagged", "any"}
    )
    keep = [r["selection"]["countNumber"] for r in rules if r["selection"]["tagStatus"] == "any"]
    assert keep == ([] if keep_images is None else [keep_images])


STATEFUL = ("AWS::KMS::Key", "AWS::ECR::Repository", "AWS::S3::Bucket")


def test_dev_empties_and_deletes_everything(dev: Synthesized) -> None:
    for kind in STATEFUL:
        for resource in dev.resources("Foundation", kind).values():
            assert resource["DeletionPolicy"] == "Delete", kind
    repo = next(iter(dev.resources("Foundation", "AWS::ECR::Repository").values()))
    assert repo["Properties"]["EmptyOnDelete"] is True
    dev.template("Foundation").resource_count_is("Custom::S3AutoDeleteObjects", 1)  # the model bucket only
    for group in dev.resources("Serving", "AWS::Logs::LogGroup").values():
        assert group["DeletionPolicy"] == "Delete"


def test_prod_retains_keys_images_models_and_endpoint_logs(prod: Synthesized) -> None:
    for kind in STATEFUL:
        resources = prod.resources("Foundation", kind).values()
        assert resources
        for resource in resources:
            assert resource["DeletionPolicy"] == "Retain", kind
            assert resource["UpdateReplacePolicy"] == "Retain", kind
    repo = next(iter(prod.resources("Foundation", "AWS::ECR::Repository").values()))
    assert repo["Properties"].get("EmptyOnDelete") in (None, False)
    prod.template("Foundation").resource_count_is("Custom::S3AutoDeleteObjects", 0)
    endpoint_logs = [
        g
        for g in prod.resources("Serving", "AWS::Logs::LogGroup").values()
        if g["Properties"].get("LogGroupName", "").startswith("/aws/sagemaker/Endpoints/")
    ]
    # kept on update and delete, not left behind by a failed first create
    assert len(endpoint_logs) == 2 and all(g["DeletionPolicy"] == "RetainExceptOnCreate" for g in endpoint_logs)


def test_termination_protection_follows_config(synth: Synthesized) -> None:
    for stack in synth.assembly.stacks:
        assert stack.termination_protection is synth.config.termination_protection


def test_foundation_exports_do_not_depend_on_which_endpoints_are_on(dev: Synthesized, variant: Synthesized) -> None:
    def exports(s: Synthesized) -> set[str]:
        outputs = s.template_json("Foundation")["Outputs"]
        return {o["Export"]["Name"] for o in outputs.values() if "Export" in o}

    # The variant switches the chat endpoint on and uses an existing topic: the shared exports remain.
    assert exports(variant) <= exports(dev)
    assert len(exports(dev)) == 5  # key, repository ARN and name, bucket ARN and name; not the topic


def test_outputs_tell_operators_where_things_are(synth: Synthesized) -> None:
    foundation = synth.template_json("Foundation")["Outputs"]
    assert {"ModelBucketName", "ModelUploadUri", "ImageRepositoryUri", "AlarmTopicArn"} <= set(foundation)
    serving = synth.template_json("Serving")["Outputs"]
    for section in synth.config.decision_endpoints:
        assert serving[f"{section.capitalize()}EndpointName"]["Value"] == f"decision-{synth.environment}-{section}"
        assert f"{section.capitalize()}ImageUri" in serving
    assert "DashboardUrl" in serving


# --- cdk-nag ------------------------------------------------------------------------------------


def test_cdk_nag_runs_at_synth_and_fails_it_on_a_finding(tmp_path: Path) -> None:
    app = build_app("dev", context=cdk_context(), outdir=str(tmp_path))
    foundation = app.node.find_child("DecisionEndpoints-dev-Foundation")
    assert isinstance(foundation, Construct)
    s3.Bucket(foundation, "Careless")
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text(encoding="utf-8"))
    rules = {v["ruleName"] for plugin in report["pluginReports"] for v in plugin["violations"]}
    assert {"AwsSolutions-S1", "AwsSolutions-S10"} <= rules


def test_every_acknowledgement_is_specific_and_reasoned(synth: Synthesized) -> None:
    found = acknowledged(synth.app)
    assert found, "expected the documented acknowledgements"
    for path, rules in found.items():
        for stored, reason in rules.items():
            rule = stored.removeprefix("Annotation::")  # CDK stores unprefixed ids as annotation rules
            assert rule.startswith("AwsSolutions-"), (path, rule)
            assert rule not in {"AwsSolutions-IAM5", "AwsSolutions-IAM4"}, "acknowledge findings, not whole rules"
            assert len(reason) >= MIN_REASON_LENGTH, (path, rule, reason)


def test_placeholder_values_are_flagged_at_synth(prod: Synthesized) -> None:
    messages = [m.entry.data for m in prod.assembly.get_stack_by_name(prod.stack_name("Serving")).messages]
    for key in prod.config.placeholders():
        assert any(key in str(m) for m in messages), key
