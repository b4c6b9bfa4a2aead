"""cdk.json context -> EnvironmentConfig: every wrong or missing value is refused with its full key named."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from decision_spec.dlc_registry import DLC_REGISTRY_ACCOUNTS
from decision_spec.environment_config import ConfigError, EnvironmentConfig, load_environment
from decision_spec.instance_types import has_local_nvme

from app import build_app
from tests.cdk_support import cdk_context


@pytest.fixture()
def environments() -> dict[str, Any]:
    envs: dict[str, Any] = cdk_context()["environments"]
    return envs


def load(envs: dict[str, Any], name: str = "dev") -> EnvironmentConfig:
    return load_environment(copy.deepcopy(envs), name)


def refused(envs: dict[str, Any], name: str = "dev") -> str:
    with pytest.raises(ConfigError) as caught:
        load_environment(envs, name)
    return str(caught.value)


def test_every_environment_in_cdk_json_is_valid(environments: dict[str, Any]) -> None:
    assert {"dev", "prod"} <= set(environments)
    for name in environments:
        config = load(environments, name)
        assert config.name == name
        assert config.decision_endpoints or config.chat is not None


def test_shipped_environments_differ_where_they_should(environments: dict[str, Any]) -> None:
    dev, prod = load(environments, "dev"), load(environments, "prod")
    assert (dev.removal_policy, prod.removal_policy) == ("destroy", "retain")
    assert (dev.termination_protection, prod.termination_protection) == (False, True)
    assert set(dev.decision_endpoints) == {"cpu"}
    assert set(prod.decision_endpoints) == {"cpu", "gpu"}
    assert prod.gpu is not None and prod.gpu.instance_types[0] == "ml.g6e.xlarge"
    assert len(prod.gpu.instance_types) > 1  # the guide's instance pool, in priority order


def test_config_objects_are_frozen(environments: dict[str, Any]) -> None:
    config = load(environments)
    with pytest.raises(ValueError, match="frozen"):
        config.region = "eu-west-1"


@pytest.mark.parametrize(
    ("path", "value", "key", "message"),
    [
        (("gpu",), {"enabled": True, "instance_type": "ml.c6i.xlarge"}, "environments.dev.gpu.instance_type", "GPU"),
        (("cpu", "instance_type"), "c6i.xlarge", "environments.dev.cpu.instance_type", "pattern"),
        (("cpu", "instance_type"), "ml.g5.xlarge", "environments.dev.cpu.instance_type", "CPU"),
        (("cpu", "threads"), "4", "environments.dev.cpu.threads", "integer"),
        (("cpu", "startup_health_check_timeout_seconds"), 300, "startup_health_check_timeout_seconds", "600"),
        (("cpu", "autoscaling", "max_instances"), 0, "environments.dev.cpu.autoscaling.max_instances", "greater than"),
        (("cpu", "autoscaling", "min_instances"), 3, "dev.cpu.autoscaling.max_instances", ">= min_instances"),
        (("cpu", "max_concurrency"), 0, "environments.dev.cpu.max_concurrency", "greater than or equal to 1"),
        (("cpu", "fallback_instance_types"), ["ml.c6i.xlarge"], "cpu.fallback_instance_types", "distinct"),
        (("cpu", "fallback_instance_types"), ["ml.c5.xlarge"] * 5, "cpu.fallback_instance_types", "at most 4"),
        (("model", "sha256"), "abc", "environments.dev.model.sha256", "pattern"),
        (("model", "s3_key"), "/models/x/model.tar.gz", "environments.dev.model.s3_key", "relative"),
        (("dlc", "cpu_digest"), "server-sagemaker-cpu-v1", "environments.dev.dlc.cpu_digest", "pattern"),
        (("region",), "Oregon", "environments.dev.region", "pattern"),
        (("account",), "1234", "environments.dev.account", "pattern"),
        (("removal_policy",), "snapshot", "environments.dev.removal_policy", "destroy"),
        (("log_retention_days",), 10, "environments.dev.log_retention_days", "CloudWatch"),
        (("alarms", "topic_arn"), "my-topic", "environments.dev.alarms.topic_arn", "pattern"),
        (("cpu", "instnace_type"), "ml.c6i.xlarge", "environments.dev.cpu.instnace_type", "Extra inputs"),
    ],
)
def test_a_wrong_value_is_refused_with_its_key(
    environments: dict[str, Any], path: tuple[str, ...], value: object, key: str, message: str
) -> None:
    target = environments["dev"]
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    error = refused(environments)
    line = next(line for line in error.splitlines() if key in line)
    assert message in line


@pytest.mark.parametrize(
    ("path", "key"),
    [
        (("region",), "environments.dev.region"),
        (("model", "sha256"), "environments.dev.model.sha256"),
        (("cpu", "autoscaling"), "environments.dev.cpu.autoscaling"),
        (("cpu", "threads"), "environments.dev.cpu.threads"),
        (("cpu", "autoscaling", "enabled"), "environments.dev.cpu.autoscaling.enabled"),
        (("gpu",), "environments.dev.gpu"),
        (("alarms", "period_seconds"), "environments.dev.alarms.period_seconds"),
    ],
)
def test_a_missing_value_is_refused_with_its_key(environments: dict[str, Any], path: tuple[str, ...], key: str) -> None:
    target = environments["dev"]
    for part in path[:-1]:
        target = target[part]
    del target[path[-1]]
    assert f"{key}:" in refused(environments)


def test_unknown_environment_lists_the_known_ones(environments: dict[str, Any]) -> None:
    error = refused(environments, "qa")
    assert "environments.qa" in error and "dev" in error and "prod" in error and "-c env=" in error


def test_an_environment_with_nothing_enabled_is_refused(environments: dict[str, Any]) -> None:
    environments["dev"]["cpu"]["enabled"] = False
    assert "environments.dev: no endpoint is enabled" in refused(environments)


def test_enabled_must_be_a_boolean(environments: dict[str, Any]) -> None:
    environments["dev"]["gpu"]["enabled"] = "yes"
    assert "environments.dev.gpu.enabled: must be true or false" in refused(environments)


def test_a_disabled_endpoint_may_keep_its_settings(environments: dict[str, Any]) -> None:
    prod_gpu = copy.deepcopy(environments["prod"]["gpu"])
    environments["dev"]["gpu"] = {**prod_gpu, "enabled": False}
    assert load(environments).gpu is None


def test_chat_flavour_must_match_its_instances(environments: dict[str, Any]) -> None:
    environments["dev"]["chat"] = {
        "enabled": True,
        "flavour": "cuda",
        "instance_type": "ml.c6i.xlarge",
        "inference_ami_version": "al2-ami-sagemaker-inference-gpu-3-1",
        "ctx_size": 4096,
        "startup_health_check_timeout_seconds": 900,
        "model_latency_p95_ms": 2000,
        "autoscaling": environments["dev"]["cpu"]["autoscaling"],
    }
    assert "environments.dev.chat.flavour: the cuda image needs GPU" in refused(environments)
    environments["dev"]["chat"]["instance_type"] = "ml.g5.xlarge"
    del environments["dev"]["chat"]["inference_ami_version"]
    assert "environments.dev.chat.inference_ami_version: is required for the cuda flavour" in refused(environments)


@pytest.mark.parametrize(
    ("instance_type", "nvme"),
    [
        ("ml.c6i.8xlarge", False),
        ("ml.m5.xlarge", False),
        ("ml.c5d.xlarge", True),
        ("ml.m6id.2xlarge", True),
        ("ml.g4dn.xlarge", True),
        ("ml.g5.xlarge", True),
        ("ml.g6e.xlarge", True),
        ("ml.p4d.24xlarge", True),
    ],
)
def test_local_nvme_rule(instance_type: str, nvme: bool) -> None:
    assert has_local_nvme(instance_type) is nvme


def test_volume_key_only_without_nvme_anywhere_in_the_pool(environments: dict[str, Any]) -> None:
    prod = load(environments, "prod")
    assert prod.cpu is not None and prod.cpu.encrypt_volume
    assert prod.gpu is not None and not prod.gpu.encrypt_volume


def test_placeholders_are_reported_only_where_used(environments: dict[str, Any]) -> None:
    assert load(environments, "dev").placeholders() == ["environments.dev.dlc.cpu_digest"]
    environments["dev"]["dlc"]["cpu_digest"] = "sha256:" + "ab" * 32
    assert load(environments, "dev").placeholders() == []
    prod = load(environments, "prod").placeholders()
    assert "environments.prod.model.sha256" not in prod and "environments.prod.dlc.cuda_digest" in prod  # the decider
    environments["prod"]["model"]["sha256"] = "0" * 64  # an all-zero sha256 is still a placeholder
    assert "environments.prod.model.sha256" in load(environments, "prod").placeholders()


def test_a_wrong_config_fails_the_app_before_synth() -> None:
    context = cdk_context()
    context["environments"]["dev"]["gpu"] = {"enabled": True, "instance_type": "ml.c6i.xlarge"}
    with pytest.raises(ConfigError, match=r"environments\.dev\.gpu\.instance_type"):
        build_app("dev", context=context)


def test_env_context_selects_the_environment() -> None:
    context = cdk_context()
    context["env"] = "nope"
    with pytest.raises(ConfigError, match=r"environments\.nope: no such environment"):
        build_app(context=context)


# --- issue 12: registry per region, guardrails that fit the fleet ---------------------------------


@pytest.mark.parametrize(("region", "account"), sorted(DLC_REGISTRY_ACCOUNTS.items()))
def test_each_listed_region_takes_its_own_registry(environments: dict[str, Any], region: str, account: str) -> None:
    environments["dev"]["region"] = region
    environments["dev"]["dlc"]["registry_account"] = account
    assert load(environments).dlc.registry_account == account


def test_the_default_registry_in_a_region_with_its_own_is_refused(environments: dict[str, Any]) -> None:
    environments["dev"]["region"] = "ap-east-1"
    line = next(line for line in refused(environments).splitlines() if "environments.dev.dlc" in line)
    assert "registry_account 763104351884 is not the DLC registry of ap-east-1: use 871362719292" in line


def test_a_region_without_a_dlc_registry_is_refused(environments: dict[str, Any]) -> None:
    environments["dev"]["region"] = "us-gov-west-1"
    assert "environments.dev.dlc: no DLC registry is published in us-gov-west-1" in refused(environments)


def test_the_exceptions_named_in_the_issue_are_in_the_table() -> None:
    assert DLC_REGISTRY_ACCOUNTS["us-west-2"] == "763104351884"
    assert {r: DLC_REGISTRY_ACCOUNTS[r] for r in ("ap-east-1", "me-south-1", "af-south-1", "eu-south-1")} == {
        "ap-east-1": "871362719292",
        "me-south-1": "217643126080",
        "af-south-1": "626614931356",
        "eu-south-1": "692866216735",
    }
    assert DLC_REGISTRY_ACCOUNTS["cn-north-1"] == DLC_REGISTRY_ACCOUNTS["cn-northwest-1"] == "727897471807"


def test_prod_ships_guarded_and_dev_all_at_once(environments: dict[str, Any]) -> None:
    prod, dev = load(environments, "prod"), load(environments, "dev")
    assert prod.cpu is not None and prod.gpu is not None and dev.cpu is not None
    assert (prod.cpu.deployment.strategy, prod.gpu.deployment.strategy) == ("canary", "rolling")
    assert prod.cpu.deployment.rollback_on_alarms and prod.gpu.deployment.rollback_on_alarms
    assert dev.cpu.deployment.strategy == "all_at_once" and not dev.cpu.deployment.rollback_on_alarms


@pytest.mark.parametrize(
    ("deployment", "message"),
    [
        ({"strategy": "canary", "wait_seconds": 600, "rollback_on_alarms": True}, "canary needs batch_instances"),
        (
            {"strategy": "all_at_once", "batch_instances": 1, "wait_seconds": 0, "rollback_on_alarms": False},
            "batch_instances is for canary, linear and rolling",
        ),
        (
            {
                "strategy": "rolling",
                "batch_instances": 1,
                "wait_seconds": 600,
                "termination_wait_seconds": 60,
                "rollback_on_alarms": True,
            },
            "a rolling update has no old fleet",
        ),
        (
            {"strategy": "canary", "batch_instances": 2, "wait_seconds": 600, "rollback_on_alarms": True},
            "needs at least 4 instances (a step may be at most half the fleet), but the variant may run 2",
        ),
        (
            {
                "strategy": "canary",
                "batch_instances": 1,
                "wait_seconds": 600,
                "max_execution_seconds": 600,
                "rollback_on_alarms": True,
            },
            "max_execution_seconds must exceed",
        ),
    ],
)
def test_a_deployment_that_cannot_run_is_refused(
    environments: dict[str, Any], deployment: dict[str, Any], message: str
) -> None:
    environments["prod"]["cpu"]["deployment"] = deployment
    line = next(
        line for line in refused(environments, "prod").splitlines() if "environments.prod.cpu.deployment" in line
    )
    assert message in line


def test_a_rolling_batch_too_small_for_the_largest_fleet_is_refused(environments: dict[str, Any]) -> None:
    environments["prod"]["gpu"]["autoscaling"]["max_instances"] = 40
    assert "rolling steps must be at least 5% of the fleet: batch_instances 1 is less at 40" in refused(
        environments, "prod"
    )


def test_canary_on_a_single_instance_is_refused(environments: dict[str, Any]) -> None:
    environments["prod"]["cpu"]["autoscaling"]["min_instances"] = 1
    assert "raise autoscaling.min_instances" in refused(environments, "prod")


def test_a_bake_shorter_than_the_alarm_window_is_refused(environments: dict[str, Any]) -> None:
    environments["prod"]["alarms"]["period_seconds"] = 300  # 5 periods of 300 s: 1500 s to fire, bakes are 600 s
    error = refused(environments, "prod")
    assert "environments.prod.alarms: cpu.deployment bakes 600 s, less than the 1500 s" in error


def test_the_provisioning_timeout_is_within_sagemakers_range(environments: dict[str, Any]) -> None:
    environments["dev"]["cpu"]["instance_provision_timeout_seconds"] = 120
    assert "environments.dev.cpu.instance_provision_timeout_seconds" in refused(environments)


def test_each_accepted_retention_period_is_cdks_of_that_many_days() -> None:
    """The periods validation accepts are written once (decision_spec, no CDK), each with its name in CDK's enum: the
    value synth writes for it is that many days."""
    import aws_cdk as cdk
    from aws_cdk import assertions
    from aws_cdk import aws_logs as logs
    from decision_spec.environment_sections import LOG_RETENTION_PERIODS

    from stacks.log_retention import LOG_RETENTION

    assert set(LOG_RETENTION) == set(LOG_RETENTION_PERIODS) and len(LOG_RETENTION_PERIODS) == 22
    stack = cdk.Stack(cdk.App(), "Retention")
    for days, value in LOG_RETENTION.items():
        logs.LogGroup(stack, f"G{days}", retention=value)
    written = [g["Properties"]["RetentionInDays"] for g in assertions.Template.from_stack(stack).find_resources(
        "AWS::Logs::LogGroup").values()]  # fmt: skip
    assert sorted(written) == sorted(LOG_RETENTION_PERIODS)


def test_synth_refuses_exactly_what_the_shared_loader_refuses() -> None:
    """The one function that reads an environment lives in decision_spec, pure, so decisionctl can call it: synth
    refuses a wrong environment with that function's very message."""
    context = cdk_context()
    context["environments"]["dev"]["gpu"] = {"enabled": True, "instance_type": "ml.c6i.xlarge"}
    context["environments"]["dev"]["alarms"]["period_seconds"] = 30
    with pytest.raises(ConfigError) as shared:
        load_environment(copy.deepcopy(context["environments"]), "dev")
    with pytest.raises(ConfigError) as synth:
        build_app("dev", context=context)
    assert str(synth.value) == str(shared.value)
    assert str(shared.value).count("\n  environments.dev.") >= 2  # every key at fault, each on its line
