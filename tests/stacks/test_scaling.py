"""Autoscaling on concurrent requests: the synthesized target tracking policies and the config that sets them."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from decision_spec.endpoint_config import Autoscaling, CpuEndpoint, GpuEndpoint
from decision_spec.environment_config import ConfigError, load_environment

from tests.cdk_support import Synthesized, cdk_context

# The CloudFormation value, spelt out: the SageMaker guide's name for the high-resolution (10 s) variant metric.
CONCURRENCY_METRIC = "SageMakerVariantConcurrentRequestsPerModelHighResolution"
COPY_CONCURRENCY_METRIC = "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"  # per copy


def _scaled_sections(synth: Synthesized) -> dict[str, Any]:
    """Endpoint name -> the settings of each endpoint with autoscaling on."""
    sections: dict[str, Any] = {
        f"decision-{synth.environment}-{section}": settings
        for section, settings in synth.config.decision_endpoints.items()
    }
    if synth.config.chat is not None:
        sections[f"chat-{synth.environment}-{synth.config.chat.flavour}"] = synth.config.chat
    return {name: s for name, s in sections.items() if s.autoscaling.enabled}


def test_each_variant_tracks_its_concurrent_requests_with_the_configured_target_and_cooldowns(
    synth: Synthesized,
) -> None:
    targets = synth.resources("Serving", "AWS::ApplicationAutoScaling::ScalableTarget")
    policies = synth.resources("Serving", "AWS::ApplicationAutoScaling::ScalingPolicy")
    # ResourceId is endpoint/<name>/variant/<variant>, or a components endpoint's inference-component/<name>-model
    endpoint_of = {
        logical_id: t["Properties"]["ResourceId"].split("/")[1].removesuffix("-model")
        for logical_id, t in targets.items()
    }
    expected = _scaled_sections(synth)
    assert sorted(endpoint_of.values()) == sorted(expected)
    tracking = {k: p for k, p in policies.items() if p["Properties"]["PolicyType"] == "TargetTrackingScaling"}
    assert len(tracking) == len(targets)  # one per variant or component, none left on invocations per minute
    # the rest: a components endpoint's step policy out of zero (tests/stacks/test_hosting_modes.py)
    assert all(p["Properties"]["PolicyType"] == "StepScaling" for k, p in policies.items() if k not in tracking)
    for policy in tracking.values():
        props = policy["Properties"]
        target = props["ScalingTargetId"]["Ref"]
        settings = expected[endpoint_of[target]].autoscaling
        component = targets[target]["Properties"]["ResourceId"].startswith("inference-component/")
        metric = COPY_CONCURRENCY_METRIC if component else CONCURRENCY_METRIC
        assert props["TargetTrackingScalingPolicyConfiguration"] == {
            "PredefinedMetricSpecification": {"PredefinedMetricType": metric},
            "TargetValue": settings.target_concurrent_requests_per_instance,
            "ScaleInCooldown": settings.scale_in_cooldown_seconds,
            "ScaleOutCooldown": settings.scale_out_cooldown_seconds,
        }


def _dev_cpu(**changes: Any) -> dict[str, Any]:
    environments: dict[str, Any] = copy.deepcopy(cdk_context()["environments"])
    environments["dev"]["cpu"].update(changes)
    return environments


def test_a_target_above_what_an_instance_admits_is_refused_at_its_key() -> None:
    environments = _dev_cpu(max_concurrency=1, max_queue=2)
    environments["dev"]["cpu"]["autoscaling"]["target_concurrent_requests_per_instance"] = 3
    assert load_environment(copy.deepcopy(environments), "dev").cpu is not None  # 1 running + 2 queued hold 3
    environments["dev"]["cpu"]["autoscaling"]["target_concurrent_requests_per_instance"] = 3.5
    with pytest.raises(ConfigError) as caught:
        load_environment(environments, "dev")
    message = str(caught.value)
    assert "environments.dev.cpu.max_queue: max_concurrency + max_queue (3) is below" in message
    assert "autoscaling.target_concurrent_requests_per_instance (3.5)" in message


def test_the_invocations_target_of_earlier_configs_is_named_as_unknown() -> None:
    environments = _dev_cpu()
    scaling = environments["dev"]["cpu"]["autoscaling"]
    scaling["target_invocations_per_instance"] = scaling.pop("target_concurrent_requests_per_instance")
    with pytest.raises(ConfigError) as caught:
        load_environment(environments, "dev")
    message = str(caught.value)
    assert "environments.dev.cpu.autoscaling.target_invocations_per_instance: Extra inputs are not permitted" in message
    assert "environments.dev.cpu.autoscaling.target_concurrent_requests_per_instance: Field required" in message


def test_decisionctl_names_the_config_key_the_stacks_read() -> None:
    from decisionctl.load.runs import SCALING_KEY

    section, field = SCALING_KEY.split(".")
    assert section in CpuEndpoint.model_fields and section in GpuEndpoint.model_fields
    assert field in Autoscaling.model_fields
