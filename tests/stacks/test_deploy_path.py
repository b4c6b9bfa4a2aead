"""The first deployment fails fast and the updates roll out guarded (issue 12), read off the synthesized templates.

Every environment is synthesized once per session (tests/cdk_support.py); assertions follow
references instead of relying on generated logical ids.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from decision_adapter.request_log import log_rejection
from decision_adapter.serve import JsonFormatter
from decision_spec import events

from app import build_app
from stacks import image_build
from stacks.observability import RUNTIME_FAILURE_PATTERN
from stacks.placeholders import PlaceholderError
from stacks.preflight import manifest_key
from tests.cdk_support import VARIANT_TOPIC, Synthesized, cdk_context, synthesize


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


# --- point 1: placeholders stop synth -----------------------------------------------------------


def test_placeholders_stop_synth_naming_each_key_and_its_fix(tmp_path: Path) -> None:
    context = cdk_context()
    del context["allow_placeholders"]
    context["environments"]["prod"]["model"]["sha256"] = "0" * 64  # prod ships the decider: zeroed, its line shows
    with pytest.raises(PlaceholderError) as caught:
        build_app("prod", context=context, outdir=str(tmp_path))
    message = str(caught.value)
    assert (
        "environments.prod.dlc.cpu_digest: all-zero placeholder; run `.venv/bin/decisionctl pin-images --env prod`"
        in (message)
    )
    assert "environments.prod.dlc.cuda_digest: all-zero placeholder" in message
    assert "environments.prod.model.sha256: all-zero placeholder; write the sha256 of the GGUF" in message
    assert "decisionctl package-model" in message and "-c allow_placeholders=true" in message
    assert not list(tmp_path.glob("*.template.json"))  # nothing synthesized, so nothing to deploy


def test_allow_placeholders_lets_synth_through_with_the_warning(prod: Synthesized) -> None:
    messages = [str(m.entry.data) for m in prod.assembly.get_stack_by_name(prod.stack_name("Serving")).messages]
    for key in prod.config.placeholders():
        assert any(key in m and "allow_placeholders" in m for m in messages), key


def test_filled_in_values_synthesize_without_the_flag(tmp_path: Path) -> None:
    context = cdk_context()
    del context["allow_placeholders"]
    context["environments"]["dev"]["dlc"]["cpu_digest"] = "sha256:" + "ab" * 32
    assembly = build_app("dev", context=context, outdir=str(tmp_path)).synth()
    assert assembly.get_stack_by_name("DecisionEndpoints-dev-Serving").template


# --- point 4: alarms may publish to the topic ---------------------------------------------------


def topic_policy(s: Synthesized) -> list[dict[str, Any]]:
    _, policy = one(s.resources("Foundation", "AWS::SNS::TopicPolicy"))
    statements: list[dict[str, Any]] = policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


@pytest.mark.parametrize("environment", ["dev", "prod"])
def test_cloudwatch_alarms_of_this_environment_may_publish_over_tls_only(environment: str) -> None:
    s = synthesize(environment)
    statements = topic_policy(s)
    (allow,) = [st for st in statements if st["Effect"] == "Allow"]
    assert allow["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert allow["Action"] == "sns:Publish"
    assert allow["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    patterns = json.dumps(allow["Condition"]["ArnLike"]["aws:SourceArn"])
    for name in endpoint_names(s):
        assert f":alarm:{name.rsplit('-', 1)[0]}-*" in patterns, name  # e.g. decision-prod-* covers decision-prod-cpu
    assert "arn:aws:cloudwatch:us-west-2:" in patterns
    (deny,) = [st for st in statements if st["Effect"] == "Deny"]
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} and deny["Principal"] == "*"


def endpoint_names(s: Synthesized) -> list[str]:
    return [e["Properties"]["EndpointName"] for e in s.resources("Serving", "AWS::SageMaker::Endpoint").values()]


def test_every_alarm_name_is_covered_by_the_topic_policy(synth: Synthesized) -> None:
    if synth.config.alarms.topic_arn is not None:
        return  # an existing topic: its policy is its owner's
    (allow,) = [st for st in topic_policy(synth) if st["Effect"] == "Allow"]
    prefixes = [
        p["Fn::Join"][1][-1].removeprefix(":alarm:").removesuffix("*")
        for p in allow["Condition"]["ArnLike"]["aws:SourceArn"]
    ]
    alarms = [a["Properties"]["AlarmName"] for a in synth.resources("Serving", "AWS::CloudWatch::Alarm").values()]
    assert alarms
    for name in alarms:
        assert any(name.startswith(prefix) for prefix in prefixes), name


# --- point 5: retained log groups are not left behind by a failed first create ------------------


def endpoint_log_groups(s: Synthesized) -> list[dict[str, Any]]:
    return [
        g
        for g in s.resources("Serving", "AWS::Logs::LogGroup").values()
        if g["Properties"].get("LogGroupName", "").startswith("/aws/sagemaker/Endpoints/")
    ]


def test_prod_endpoint_logs_are_retained_except_on_create(prod: Synthesized) -> None:
    groups = endpoint_log_groups(prod)
    assert len(groups) == 2
    for group in groups:
        assert (group["DeletionPolicy"], group["UpdateReplacePolicy"]) == ("RetainExceptOnCreate", "Retain")


def test_dev_endpoint_logs_are_deleted() -> None:
    for group in endpoint_log_groups(synthesize("dev")):
        assert (group["DeletionPolicy"], group["UpdateReplacePolicy"]) == ("Delete", "Delete")


# --- point 8: every allowed config change deploys --------------------------------------------


def exports(template: dict[str, Any]) -> set[str]:
    return {o["Export"]["Name"] for o in template.get("Outputs", {}).values() if "Export" in o}


def imports(template: dict[str, Any]) -> set[str]:
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if "Fn::ImportValue" in value:
                found.add(value["Fn::ImportValue"])
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(template["Resources"])
    return found


@pytest.fixture(scope="module")
def dev_with_existing_topic(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """dev with only alarms.topic_arn switched from null to an ARN."""
    context = cdk_context()
    context["environments"]["dev"]["alarms"]["topic_arn"] = VARIANT_TOPIC
    outdir = tmp_path_factory.mktemp("dev-topic")
    assembly = build_app("dev", context=context, outdir=str(outdir)).synth()
    return {
        part: assembly.get_stack_by_name(f"DecisionEndpoints-dev-{part}").template for part in ("Foundation", "Serving")
    }


def test_switching_the_alarm_topic_keeps_every_import_exported(dev_with_existing_topic: dict[str, Any]) -> None:
    """Foundation deploys first: its new exports must still serve the Serving stack deployed before, both ways."""
    created = synthesize("dev")
    before, after = created.templates, dev_with_existing_topic
    assert imports(before["Serving"]) <= exports(after["Foundation"])  # null -> ARN
    assert imports(after["Serving"]) <= exports(before["Foundation"])  # ARN -> null
    assert exports(before["Foundation"]) == exports(after["Foundation"])
    assert not [i for i in imports(before["Serving"]) if "AlarmTopic" in i]


def test_alarms_name_the_topic_by_arn_not_by_import(dev_with_existing_topic: dict[str, Any]) -> None:
    created = synthesize("dev")
    _, topic = one(created.resources("Foundation", "AWS::SNS::Topic"))
    name = topic["Properties"]["TopicName"]
    for serving, expected in (
        (created.template_json("Serving"), name),
        (dev_with_existing_topic["Serving"], VARIANT_TOPIC),
    ):
        for alarm in (r for r in serving["Resources"].values() if r["Type"] == "AWS::CloudWatch::Alarm"):
            if alarm["Properties"].get("MetricName") == "NoCapacityInvocationFailures":
                continue  # scales out from zero, notifies no one (test_hosting_modes.py)
            action = json.dumps(alarm["Properties"]["AlarmActions"])
            assert expected in action and "ImportValue" not in action


def test_exports_are_the_same_under_every_shipped_configuration(synth: Synthesized) -> None:
    def unprefixed(s: Synthesized) -> set[str]:
        return {name.split(":", 1)[1] for name in exports(s.template_json("Foundation"))}

    assert unprefixed(synth) == unprefixed(synthesize("dev"))
    assert imports(synth.template_json("Serving")) <= exports(synth.template_json("Foundation"))


# --- point 9: dev destroys cleanly --------------------------------------------------------------


def test_destroyed_environments_have_no_access_log_bucket_to_fail_on() -> None:
    dev = synthesize("dev")
    (_, bucket) = one(dev.resources("Foundation", "AWS::S3::Bucket"))
    assert "LoggingConfiguration" not in bucket["Properties"]
    assert bucket["DeletionPolicy"] == "Delete"
    dev.template("Foundation").resource_count_is("Custom::S3AutoDeleteObjects", 1)


def test_retained_environments_keep_their_access_logs(prod: Synthesized) -> None:
    buckets = prod.resources("Foundation", "AWS::S3::Bucket")
    assert len(buckets) == 2
    logged = [b for b in buckets.values() if "LoggingConfiguration" in b["Properties"]]
    (model,) = logged
    target = model["Properties"]["LoggingConfiguration"]["DestinationBucketName"]["Ref"]
    assert buckets[target]["DeletionPolicy"] == "Retain"


# --- point 11: region, partition, what is kept, what the key encrypts ---------------------------


@pytest.fixture(scope="module")
def china(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    context = cdk_context()
    dev = context["environments"]["dev"]
    dev["region"] = "cn-north-1"
    dev["dlc"]["registry_account"] = "727897471807"
    # CloudFormation has no AWS::SageMaker::InferenceComponent in cn-north-1 (CDK's validation refuses it at synth)
    dev["cpu"]["hosting"] = {"mode": "instances"}
    dev["cpu"]["autoscaling"]["min_instances"] = 1
    assembly = build_app("dev", context=context, outdir=str(tmp_path_factory.mktemp("cn"))).synth()
    template: dict[str, Any] = assembly.get_stack_by_name("DecisionEndpoints-dev-Serving").template
    return template


def test_the_dashboard_link_opens_in_the_partitions_console(china: dict[str, Any], prod: Synthesized) -> None:
    assert "https://console.amazonaws.cn/cloudwatch/home?region=cn-north-1#" in json.dumps(
        china["Outputs"]["DashboardUrl"]
    )
    commercial = json.dumps(prod.template_json("Serving")["Outputs"]["DashboardUrl"])
    assert "https://console.aws.amazon.com/cloudwatch/home?region=us-west-2#" in commercial


def test_the_china_build_pulls_from_the_china_registry(china: dict[str, Any]) -> None:
    builds = [r for r in china["Resources"].values() if r["Type"] == "Custom::DecisionImage"]
    assert builds and all("727897471807.dkr.ecr.cn-north-1." in json.dumps(b["Properties"]) for b in builds)


def lifecycle(s: Synthesized) -> list[dict[str, Any]]:
    _, repo = one(s.resources("Foundation", "AWS::ECR::Repository"))
    rules: list[dict[str, Any]] = json.loads(repo["Properties"]["LifecyclePolicy"]["LifecyclePolicyText"])["rules"]
    return rules


def model_bucket(s: Synthesized) -> dict[str, Any]:
    buckets = s.resources("Foundation", "AWS::S3::Bucket").values()
    (bucket,) = [b for b in buckets if "KMSMasterKeyID" in json.dumps(b["Properties"]["BucketEncryption"])]
    return bucket["Properties"]


def test_prod_keeps_every_image_and_every_model_version(prod: Synthesized) -> None:
    assert [r["selection"]["tagStatus"] for r in lifecycle(prod)] == ["untagged"]  # only interrupted pushes expire
    assert "LifecycleConfiguration" not in model_bucket(prod)
    assert prod.config.image_repository.keep_images is None and prod.config.model.noncurrent_version_expiry_days is None


def test_dev_expires_what_is_configured() -> None:
    dev = synthesize("dev")
    keep = [r for r in lifecycle(dev) if r["selection"]["tagStatus"] == "any"]
    assert [r["selection"]["countNumber"] for r in keep] == [dev.config.image_repository.keep_images]
    (rule,) = model_bucket(dev)["LifecycleConfiguration"]["Rules"]
    assert rule["NoncurrentVersionExpiration"]["NoncurrentDays"] == dev.config.model.noncurrent_version_expiry_days


def test_the_key_description_names_only_what_it_encrypts(synth: Synthesized) -> None:
    _, key = one(synth.resources("Foundation", "AWS::KMS::Key"))
    description = key["Properties"]["Description"]
    assert "build logs" not in description
    assert "decision images (ECR)" in description and "model artifacts (S3)" in description
    assert ("alarm notifications (SNS)" in description) is (synth.config.alarms.topic_arn is None)
    configs = synth.resources("Serving", "AWS::SageMaker::EndpointConfig").values()
    assert ("endpoint storage volumes" in description) is any("KmsKeyId" in c["Properties"] for c in configs)


# --- guarded updates ----------------------------------------------------------------------------


def endpoint_parts(s: Synthesized) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Endpoint name -> (endpoint resource, its production variant)."""
    res = s.template_json("Serving")["Resources"]
    found = {}
    for endpoint in (r for r in res.values() if r["Type"] == "AWS::SageMaker::Endpoint"):
        config = res[endpoint["Properties"]["EndpointConfigName"]["Fn::GetAtt"][0]]
        found[endpoint["Properties"]["EndpointName"]] = (endpoint, config["Properties"]["ProductionVariants"][0])
    return found


def alarm_names_by_logical(s: Synthesized) -> dict[str, str]:
    return {k: a["Properties"]["AlarmName"] for k, a in s.resources("Serving", "AWS::CloudWatch::Alarm").items()}


def test_prod_cpu_shifts_a_canary_and_bakes_with_rollback_on_its_own_alarms(prod: Synthesized) -> None:
    endpoint, _ = endpoint_parts(prod)["decision-prod-cpu"]
    config = endpoint["Properties"]["DeploymentConfig"]
    assert endpoint["Properties"]["RetainDeploymentConfig"] is False
    policy = config["BlueGreenUpdatePolicy"]
    assert policy["TrafficRoutingConfiguration"] == {
        "Type": "CANARY",
        "CanarySize": {"Type": "INSTANCE_COUNT", "Value": 1},
        "WaitIntervalInSeconds": 600,
    }
    assert policy["TerminationWaitInSeconds"] == 600 and policy["MaximumExecutionTimeoutInSeconds"] == 5400
    names = alarm_names_by_logical(prod)
    rollback = [names[a["AlarmName"]["Ref"]] for a in config["AutoRollbackConfiguration"]["Alarms"]]
    assert rollback == [
        "decision-prod-cpu-5xx-rate",
        "decision-prod-cpu-model-latency-p95",
        "decision-prod-cpu-runtime-failures",
    ]
    assert {a["AlarmName"]["Ref"] for a in config["AutoRollbackConfiguration"]["Alarms"]} <= depends_on(endpoint)


def test_prod_gpu_pool_rolls_one_instance_at_a_time(prod: Synthesized) -> None:
    endpoint, variant = endpoint_parts(prod)["decision-prod-gpu"]
    config = endpoint["Properties"]["DeploymentConfig"]
    assert "BlueGreenUpdatePolicy" not in config
    assert config["RollingUpdatePolicy"] == {
        "MaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 1},
        "RollbackMaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 1},
        "WaitIntervalInSeconds": 600,
        "MaximumExecutionTimeoutInSeconds": 7200,
    }
    names = alarm_names_by_logical(prod)
    rollback = {names[a["AlarmName"]["Ref"]] for a in config["AutoRollbackConfiguration"]["Alarms"]}
    gpu = prod.config.gpu
    assert gpu is not None
    latencies = {f"model-latency-p95-{t.removeprefix('ml.')}" for t in gpu.instance_types}  # one per pool type
    assert rollback == {f"decision-prod-gpu-{s}" for s in ("5xx-rate", *latencies, "runtime-failures")}
    assert "InstancePools" in variant  # rolling is for the pool, where twice the capacity may not exist


def test_dev_updates_all_at_once_without_rollback() -> None:
    """dev hosts its model as an inference component: all at once is SageMaker's own replacement of the copies, with
    no deployment config on the component or the endpoint (which hosts no model); instances mode's is blue/green."""
    dev = synthesize("dev")
    endpoint, _ = endpoint_parts(dev)["decision-dev-cpu"]
    assert "DeploymentConfig" not in endpoint["Properties"]
    (component,) = dev.resources("Serving", "AWS::SageMaker::InferenceComponent").values()
    assert "DeploymentConfig" not in component["Properties"]
    endpoint, _ = endpoint_parts(synthesize("dev-instances"))["decision-dev-cpu"]
    assert endpoint["Properties"]["DeploymentConfig"] == {
        "BlueGreenUpdatePolicy": {
            "TrafficRoutingConfiguration": {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 0},
            "TerminationWaitInSeconds": 0,
        }
    }


def test_the_chat_endpoint_rolls_back_on_sagemakers_error_count(variant: Synthesized) -> None:
    endpoint, _ = endpoint_parts(variant)["chat-dev-cpu"]
    config = endpoint["Properties"]["DeploymentConfig"]
    assert config["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"]["Type"] == "LINEAR"
    names = alarm_names_by_logical(variant)
    rollback = {names[a["AlarmName"]["Ref"]] for a in config["AutoRollbackConfiguration"]["Alarms"]}
    assert rollback == {"chat-dev-cpu-5xx-rate", "chat-dev-cpu-model-latency-p95", "chat-dev-cpu-invocation-errors"}


def test_every_variant_has_its_instance_provisioning_timeout(synth: Synthesized) -> None:
    settings = {**synth.config.decision_endpoints}
    parts = endpoint_parts(synth)
    for section, s in settings.items():
        _, variant = parts[f"decision-{synth.environment}-{section}"]
        assert variant["VariantInstanceProvisionTimeoutInSeconds"] == s.instance_provision_timeout_seconds
    for _, variant in parts.values():
        assert 300 <= variant["VariantInstanceProvisionTimeoutInSeconds"] <= 3600


def test_runtime_failures_are_counted_from_the_adapters_log_lines(prod: Synthesized) -> None:
    filters = [f["Properties"] for f in prod.resources("Serving", "AWS::Logs::MetricFilter").values()]
    runtime = [f for f in filters if f["FilterPattern"] == RUNTIME_FAILURE_PATTERN]
    assert len(runtime) == 2
    assert {f["MetricTransformations"][0]["MetricName"] for f in runtime} == {"RuntimeFailures"}


def test_the_runtime_failure_filter_selects_the_adapters_line(caplog: pytest.LogCaptureFixture) -> None:
    """The line the adapter writes for a 500 from llama.cpp, as `serve` formats it, is what the filter selects."""
    with caplog.at_level(logging.WARNING, logger="decision_adapter.requests"):
        log_rejection("r1", "/invocations", 500, events.RUNTIME_FAILURE)
    (record,) = caplog.records
    line = json.loads(JsonFormatter().format(record))
    selects = re.fullmatch(r'\{ \$\.(\w+) = "(\w+)" \}', RUNTIME_FAILURE_PATTERN)
    assert selects is not None
    field, value = selects.groups()
    assert line[field] == value and line["status"] == 500


def test_alarms_on_a_pool_watch_the_variant_aggregate_and_the_dashboard_each_type(prod: Synthesized) -> None:
    """SageMaker publishes EndpointName+VariantName aggregates for pooled variants too, plus InstanceType ones;
    only the per-type latency alarms (test_deploy_hardening) read the latter."""
    for alarm in prod.resources("Serving", "AWS::CloudWatch::Alarm").values():
        props = alarm["Properties"]
        if "-model-latency-p95-" in props["AlarmName"]:
            continue
        metrics = (
            [props]
            if "Dimensions" in props
            else [m["MetricStat"]["Metric"] for m in props.get("Metrics", []) if "MetricStat" in m]
        )
        for metric in metrics:
            if metric.get("Namespace") == "AWS/SageMaker":
                assert {d["Name"] for d in metric["Dimensions"]} == {"EndpointName", "VariantName"}
    _, dashboard = one(prod.resources("Serving", "AWS::CloudWatch::Dashboard"))
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    gpu = prod.config.gpu
    assert gpu is not None
    for instance_type in gpu.instance_types:
        assert f'\\"InstanceType\\",\\"{instance_type}\\"' in body, instance_type
