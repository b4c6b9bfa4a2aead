"""Application Auto Scaling for one endpoint variant: instance count tracks concurrent requests per instance."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_iam as iam
from constructs import Construct
from decision_spec.endpoint_config import Autoscaling

from stacks.endpoint import SageMakerEndpoint, ServingEndpoint

SERVICE_LINKED_ROLE = (
    "aws-service-role/sagemaker.application-autoscaling.amazonaws.com/"
    "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint"
)


def service_linked_role(scope: Construct) -> iam.IRole:
    """Application Auto Scaling acts for SageMaker through its service-linked role (created on first use), not
    through a role of ours: naming it stops CDK from adding an unused one."""
    return iam.Role.from_role_arn(
        scope,
        "ServiceLinkedRole",
        cdk.Stack.of(scope).format_arn(service="iam", region="", resource="role", resource_name=SERVICE_LINKED_ROLE),
        mutable=False,
    )


def variant_scalable_target(
    scope: Construct, construct_id: str, endpoint: SageMakerEndpoint, *, min_capacity: int, max_capacity: int
) -> appscaling.ScalableTarget:
    """The endpoint variant's instance count as a scalable target, registered once the endpoint exists."""
    target = appscaling.ScalableTarget(
        scope,
        construct_id,
        service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
        resource_id=f"endpoint/{endpoint.endpoint_name}/variant/{endpoint.variant_name}",
        scalable_dimension="sagemaker:variant:DesiredInstanceCount",
        min_capacity=min_capacity,
        max_capacity=max_capacity,
        role=service_linked_role(scope),
    )
    # The variant exists only once the endpoint is in service.
    target.node.add_dependency(endpoint.endpoint)
    return target


class EndpointAutoscaling(Construct):
    """Min/max from config; target tracking on the variant's concurrent requests per model, with cooldowns.

    SageMakerVariantConcurrentRequestsPerModelHighResolution counts the requests inside the container,
    running and queued, every 10 seconds; invocations per minute, the older metric, trails requests that take
    seconds and hides a queue building up. One model runs per instance here, so per model is per instance.

    Changing the instance type of a variant that has a scalable target fails in SageMaker: see
    docs/deploy.md for the two-step change.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, endpoint: ServingEndpoint, settings: Autoscaling
    ) -> None:
        super().__init__(scope, construct_id)
        self.target = variant_scalable_target(
            self, "Target", endpoint, min_capacity=settings.min_instances, max_capacity=settings.max_instances
        )
        self.policy = self.target.scale_to_track_metric(
            "ConcurrentRequestsPerModel",
            target_value=settings.target_concurrent_requests_per_instance,
            predefined_metric=appscaling.PredefinedMetric.SAGEMAKER_VARIANT_CONCURRENT_REQUESTS_PER_MODEL_HIGH_RESOLUTION,
            scale_in_cooldown=cdk.Duration.seconds(settings.scale_in_cooldown_seconds),
            scale_out_cooldown=cdk.Duration.seconds(settings.scale_out_cooldown_seconds),
        )
