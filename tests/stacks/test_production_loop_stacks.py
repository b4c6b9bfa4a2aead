"""Issue 22, must-show 1: the production loop in the synthesized templates, and the combinations synth refuses.

"loop" is prod with answer capture on, decision-shift alarms on both decision endpoints (the GPU one with its
four-type pool, so its rollback list holds nine alarms), and a candidate in shadow on the CPU endpoint (a
canary, blue/green; the GPU endpoint rolls and could not take one). It is synthesized once with cdk-nag
registered (a synthesis that returns has no unacknowledged finding) and linted with cfn-lint.
"""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint_file  # type: ignore[import-untyped]
from decision_spec.deployment_config import MAX_ROLLBACK_ALARMS
from decision_spec.environment_config import ConfigError, load_environment
from decision_spec.loop_config import MAX_ALARM_METRICS, rollback_alarm_count

from app import build_app
from tests.cdk_support import CANDIDATE, POLICY, ROUTING, cdk_context, loop_context, variant_context


@pytest.fixture(scope="module")
def loop() -> dict[str, Any]:
    outdir = Path(tempfile.mkdtemp(prefix="cdk-loop-"))
    build_app("prod", context=loop_context(), outdir=str(outdir)).synth()
    return {
        part: json.loads((outdir / f"DecisionEndpoints-prod-{part}.template.json").read_text(encoding="utf-8"))
        for part in ("Foundation", "Serving")
    } | {"outdir": outdir}


def of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v["Properties"] for k, v in template["Resources"].items() if v["Type"] == kind}


def endpoint_config(serving: dict[str, Any], section: str) -> dict[str, Any]:
    (config,) = [p for k, p in of_type(serving, "AWS::SageMaker::EndpointConfig").items() if k.startswith(section)]
    return config


def test_each_decision_endpoint_captures_its_answers_only_encrypted_under_the_prefix(loop: dict[str, Any]) -> None:
    serving = loop["Serving"]
    for section in ("CpuEndpoint", "GpuEndpoint"):
        capture = endpoint_config(serving, section)["DataCaptureConfig"]
        assert capture["CaptureOptions"] == [{"CaptureMode": "Output"}]  # never the request: it holds the text
        assert capture["EnableCapture"] is True and capture["InitialSamplingPercentage"] == 25
        assert capture["CaptureContentTypeHeader"] == {
            "JsonContentTypes": ["application/json", "application/jsonlines"]
        }
        assert "Foundation:ExportsOutputFnGetAttKey" in json.dumps(capture["KmsKeyId"])
        uri = capture["DestinationS3Uri"]["Fn::Join"][1]
        assert uri[0] == "s3://" and "ModelArtifactsBucket" in json.dumps(uri[1]) and uri[2] == "/capture"
    chat_free = [k for k in of_type(serving, "AWS::SageMaker::EndpointConfig") if k.startswith("Async")]
    assert chat_free == []


def test_the_execution_roles_may_put_captures_under_the_prefix_and_encrypt_only_through_s3(
    loop: dict[str, Any],
) -> None:
    policies = [json.dumps(p["PolicyDocument"]) for p in of_type(loop["Serving"], "AWS::IAM::Policy").values()]
    decision = [p for p in policies if "s3:PutObject" in p]
    assert len(decision) == 2  # the two decision endpoints' roles, nothing else writes captures
    for text in decision:
        statements = json.loads(text)["Statement"]
        put = next(s for s in statements if s["Action"] == "s3:PutObject")
        assert json.dumps(put["Resource"]).endswith('"/capture/*"]]}')
        encrypt = next(s for s in statements if s["Action"] == ["kms:Encrypt", "kms:GenerateDataKey"])
        assert list(encrypt["Condition"]["StringEquals"]) == ["kms:ViaService"]
        assert "s3." in json.dumps(encrypt["Condition"])


def test_captured_answers_expire_with_their_old_versions(loop: dict[str, Any]) -> None:
    buckets = of_type(loop["Foundation"], "AWS::S3::Bucket").values()
    (bucket,) = [b for b in buckets if "ExpireCapturedAnswers" in json.dumps(b.get("LifecycleConfiguration"))]
    assert "ModelArtifacts" in json.dumps(bucket["BucketEncryption"]) or "KMSMasterKeyID" in json.dumps(bucket)
    rules = {r.get("Id"): r for r in bucket["LifecycleConfiguration"]["Rules"]}
    rule = rules["ExpireCapturedAnswers"]
    assert (rule["Prefix"], rule["ExpirationInDays"], rule["Status"]) == ("capture/", 90, "Enabled")
    assert rule["NoncurrentVersionExpiration"] == {"NoncurrentDays": 1}
    (key,) = of_type(loop["Foundation"], "AWS::KMS::Key").values()
    assert "captured answers (S3)" in key["Description"]


def test_the_candidate_runs_as_the_one_shadow_variant_of_the_cpu_endpoint(loop: dict[str, Any]) -> None:
    serving = loop["Serving"]
    cpu = endpoint_config(serving, "CpuEndpoint")
    assert len(cpu["ProductionVariants"]) == 1
    (shadow,) = cpu["ShadowProductionVariants"]
    assert shadow["VariantName"] == "Shadow" and shadow["InitialVariantWeight"] == 0.2
    assert shadow["InstanceType"] == "ml.c5d.9xlarge" and shadow["InitialInstanceCount"] == 1
    assert "KmsKeyId" not in cpu  # SageMaker rejects a volume key for the shadow's NVMe instances
    assert shadow["ModelName"]["Fn::GetAtt"][0].startswith("CpuEndpointShadowModel")
    assert "ShadowProductionVariants" not in endpoint_config(serving, "GpuEndpoint")
    models = of_type(serving, "AWS::SageMaker::Model")
    candidate = models[shadow["ModelName"]["Fn::GetAtt"][0]]["PrimaryContainer"]
    assert candidate["Environment"]["DECISION_EXPECTED_MODEL_SHA256"] == "a" * 64
    assert candidate["Environment"]["DECISION_INSTANCE_TYPES"] == "ml.c5d.9xlarge"
    assert json.dumps(candidate["ModelDataUrl"]).endswith(f'"/{CANDIDATE}"]]}}')
    reads = [p for p in map(json.dumps, (x["PolicyDocument"] for x in of_type(serving, "AWS::IAM::Policy").values()))]
    assert sum(CANDIDATE in p for p in reads) == 1  # only the CPU endpoint's role reads the candidate


def test_decision_lines_become_metrics_per_policy_and_shift_alarms_join_the_rollback_list(loop: dict[str, Any]) -> None:
    serving = loop["Serving"]
    names = {k: a["AlarmName"] for k, a in of_type(serving, "AWS::CloudWatch::Alarm").items()}
    alarms = {a["AlarmName"]: a for a in of_type(serving, "AWS::CloudWatch::Alarm").values()}
    filters = [p for p in of_type(serving, "AWS::Logs::MetricFilter").values() if "Dimensions" in json.dumps(p)]
    for endpoint, pool in (("decision-prod-cpu", 1), ("decision-prod-gpu", 4)):
        mine = [
            f for f in filters if f["MetricTransformations"][0]["MetricNamespace"] == f"DecisionEndpoints/{endpoint}"
        ]
        by_name = {f["MetricTransformations"][0]["MetricName"]: f for f in mine}
        assert set(by_name) == {
            "AutomatedAnswers", "ReviewedAnswers", "AbstainedAnswers", "LabelMassSum", "LabelMassAnswers",
            *(f"Picked-{ROUTING}-{i}" for i in range(3)),
        }  # fmt: skip
        for f in mine:
            assert f["MetricTransformations"][0]["Dimensions"] == [{"Key": "Policy", "Value": "$.policy"}]
        assert by_name[f"Picked-{ROUTING}-2"]["FilterPattern"] == (
            f'{{ $.event = "decision" && $.picked.q{ROUTING}_2 >= 1 }}'
        )
        (ep,) = [e for e in of_type(serving, "AWS::SageMaker::Endpoint").values() if e["EndpointName"] == endpoint]
        rollback = [names[a["AlarmName"]["Ref"]] for a in ep["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]]
        shift = [
            f"{endpoint}-decision-shift-actions",
            f"{endpoint}-decision-shift-options",
            f"{endpoint}-label-mass-low",
        ]
        assert rollback[-3:] == shift and len(rollback) == 2 + pool + 3 <= MAX_ROLLBACK_ALARMS
        for name in shift:
            alarm = alarms[name]
            # M of N as every alarm of prod (2 of 5 one-minute periods): fires within a 600 s bake
            assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (5, 2)
            assert alarm["TreatMissingData"] == "notBreaching" and alarm["AlarmActions"] and alarm["OKActions"]
            stats = [m["MetricStat"] for m in alarm["Metrics"] if "MetricStat" in m]
            assert len(stats) <= MAX_ALARM_METRICS
            for stat in stats:
                assert stat["Metric"]["Dimensions"] == [{"Name": "Policy", "Value": POLICY}]
                assert stat["Period"] == 60 and stat["Stat"] == "Sum"
        actions = alarms[f"{endpoint}-decision-shift-actions"]
        assert actions["Threshold"] == 15 and actions["ComparisonOperator"] == "GreaterThanThreshold"
        expression = next(
            m["Expression"] for m in actions["Metrics"] if m.get("ReturnData", True) and "Expression" in m
        )
        assert expression.startswith("IF(automate + review + abstain >= 30, MAX([ABS(100 * automate")
        assert "- 50)" in expression and "- 30)" in expression and "- 20)" in expression
        mass = alarms[f"{endpoint}-label-mass-low"]
        assert (mass["Threshold"], mass["ComparisonOperator"]) == (0.5, "LessThanThreshold")


def test_the_dashboard_shows_each_endpoints_decisions_under_the_watched_policy(loop: dict[str, Any]) -> None:
    (dashboard,) = of_type(loop["Serving"], "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["DashboardBody"])
    for endpoint in ("decision-prod-cpu", "decision-prod-gpu"):
        assert f"{endpoint}: decisions under policy {POLICY}" in body
    assert "automate (% of answers; certified 50.0)" in body


def test_the_loop_templates_have_no_cfn_lint_errors(loop: dict[str, Any]) -> None:
    for path in sorted(Path(loop["outdir"]).glob("*.template.json")):
        matches = lint_file(path, ManualArgs(regions=["us-west-2"]))
        errors = [f"{m.rule.id} {m.path_string}: {m.message}" for m in matches if m.rule.id.startswith("E")]
        assert errors == [], f"{path.name}:\n" + "\n".join(errors)


def test_the_shipped_environments_have_the_loop_off() -> None:
    environments = cdk_context()["environments"]
    for name in environments:
        config = load_environment(environments, name)
        assert config.data_capture is None and config.decision_shift is None
        assert all(s.shadow is None for s in config.decision_endpoints.values())


def refused(mutate: Any) -> str:
    environments = copy.deepcopy(loop_context()["environments"])
    mutate(environments["prod"])
    with pytest.raises(ConfigError) as error:
        load_environment(environments, "prod")
    return str(error.value)


def test_a_shadow_on_a_rolling_endpoint_is_refused_with_the_fix() -> None:
    message = refused(
        lambda p: p["gpu"].update(shadow={"s3_key": CANDIDATE, "sha256": "a" * 64, "sampling_percent": 5})
    )
    assert "environments.prod.gpu.shadow:" in message
    assert "set deployment.strategy to canary, linear or all_at_once" in message


@pytest.mark.parametrize(
    ("mutate", "key", "fix"),
    [
        (lambda p: p["cpu"]["shadow"].update(instance_type="ml.g6.xlarge"), "cpu.shadow", "is not a CPU"),
        (lambda p: p["cpu"]["shadow"].update(sampling_percent=0), "cpu.shadow.sampling_percent", ""),
        (lambda p: p["chat"].update(enabled=True, flavour="cpu", shadow={}), "chat", ""),
        (lambda p: p["data_capture"].update(prefix="models/capture"), "data_capture.prefix", "expire model artifacts"),
        (lambda p: p["data_capture"].update(sampling_percent=101), "data_capture.sampling_percent", ""),
        (lambda p: p["decision_shift"].update(routing_questions=["ffffffffffffffff"]), "decision_shift", "copy the"),
        (
            lambda p: p["decision_shift"]["certified"]["actions"].update(automate=0.9),
            "decision_shift.certified",
            "summing to 1",
        ),
    ],
)
def test_unsupported_loop_settings_are_refused(mutate: Any, key: str, fix: str) -> None:
    message = refused(mutate)
    assert f"environments.prod.{key}" in message and fix in message


@pytest.mark.parametrize("section", ["data_capture", "decision_shift"])
def test_the_loop_needs_a_decision_endpoint(section: str) -> None:
    def chat_only(prod: dict[str, Any]) -> None:
        prod["cpu"], prod["gpu"] = {"enabled": False}, {"enabled": False}
        prod["chat"] = variant_context()["environments"]["dev"]["chat"]

    assert f"environments.prod.{section}: needs a decision endpoint (cpu or gpu)" in refused(chat_only)


def test_routing_options_past_what_one_alarm_reads_are_refused() -> None:
    wide = {"type": "choice", "cases": 10, "options": [f"o{i}" for i in range(11)], "shares": [1 / 11] * 11}

    def mutate(prod: dict[str, Any]) -> None:
        prod["decision_shift"]["certified"]["questions"]["1111111111111111"] = wide
        prod["decision_shift"]["routing_questions"] = ["1111111111111111"]

    assert "name fewer routing_questions" in refused(mutate)


def test_the_rollback_alarm_count_stays_within_what_sagemaker_watches() -> None:
    """The largest pool (five types) with every shift alarm is exactly SageMaker's ten; the check counts them."""
    shift = load_environment(loop_context()["environments"], "prod").decision_shift
    assert shift is not None and shift.alarm_count == 3
    assert rollback_alarm_count(["a", "b", "c", "d", "e"], shift) == MAX_ROLLBACK_ALARMS
    assert rollback_alarm_count(["a"], shift) == 6
