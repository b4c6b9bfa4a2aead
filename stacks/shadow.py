"""A candidate served as a shadow variant of a decision endpoint: the `shadow` key of a `cpu` or `gpu` section.

The key's model, and the refusals below, are decision_spec.loop_config's (ShadowCandidate, refuse_rolling).

A candidate is another `model.tar.gz` in the model bucket: a new model, or the same GGUF with another
calibration or policy in its manifest. SageMaker copies `sampling_percent` of the production requests to it
(`ShadowProductionVariants`; the shadow's weight relative to the production variant's 1.0 is the share copied)
and returns only the production answer to the caller; both variants' answers are captured, each under its
variant name, and `decisionctl compare --shadow` pairs them (docs/loop.md).

What SageMaker refuses is refused when cdk.json is read, with the fix: at most one shadow per endpoint and then one
production variant (one `shadow` object per section; the sections have one production variant), and no rolling update
of an endpoint with more than one variant (deployment guardrails' exclusions: a rolling deployment of a
multi-variant endpoint is not supported), so a section with a shadow deploys blue/green.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import aws_sagemaker as sagemaker
from decision_spec.loop_config import ShadowCandidate

SHADOW_VARIANT_NAME = "Shadow"


@dataclass(frozen=True)
class ShadowModel:
    """What the shadow variant's SageMaker model serves: the candidate's artifact, with its own expected sha256."""

    candidate: ShadowCandidate
    model_data_url: str
    environment: Mapping[str, str]


def shadow_variant(
    candidate: ShadowCandidate,
    *,
    model_name: str,
    production_instance_type: str,
    startup_timeout: int,
    download_timeout: int,
    provision_timeout: int,
    inference_ami_version: str | None,
) -> sagemaker.CfnEndpointConfig.ProductionVariantProperty:
    """The one entry of ShadowProductionVariants."""
    return sagemaker.CfnEndpointConfig.ProductionVariantProperty(
        variant_name=SHADOW_VARIANT_NAME,
        model_name=model_name,
        initial_instance_count=candidate.instance_count,
        initial_variant_weight=candidate.sampling_percent / 100,
        instance_type=candidate.instance_type or production_instance_type,
        inference_ami_version=inference_ami_version,
        container_startup_health_check_timeout_in_seconds=startup_timeout,
        model_data_download_timeout_in_seconds=download_timeout,
        variant_instance_provision_timeout_in_seconds=provision_timeout,
    )
