"""Application Auto Scaling of an inference component's copies, down to zero and back (SageMaker guide, "Scale an
endpoint to zero instances").

Three pieces, all needed: the component's copy count as a scalable target (`inference-component/<name>`,
`sagemaker:inference-component:DesiredCopyCount`, minimum `autoscaling.min_instances`, 0 to reach zero); target
tracking on concurrent requests per copy (SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution, 10 s
resolution), which moves copies between one and the maximum and scales the last copy in; and, because target
tracking cannot leave zero (it divides by the copies), a step policy that adds one copy when an alarm sees
`NoCapacityInvocationFailures` (SageMaker counts each invocation it turned away for want of a copy). Managed
instance scaling (stacks/hosting_variants.py) then starts or releases instances for the copies.

The scale-out alarm fires by design while the endpoint is at zero: its only action is the step policy, never the
alarm topic, and it is no rollback alarm.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from constructs import Construct
from decision_spec.endpoint_config import Autoscaling

from stacks.autoscaling import EndpointAutoscaling, service_linked_role
from stacks.endpoint import ServingEndpoint

COPY_DIMENSION = "sagemaker:inference-component:DesiredCopyCount"
NO_CAPACITY_METRIC = "NoCapacityInvocationFailures"
COMPONENT_DIMENSION = "InferenceComponentName"
WAKE_PERIOD_S = 60  # the guide's period; one turned-away invocation in it starts a copy
WAKE_COOLDOWN_S = 60


def component_resource_id(component_name: str) -> str:
    return f"inference-component/{component_name}"


class ComponentScaling(Construct):
    """Copies between `settings.min_instances` and `max_instances`: target tracking, and the scale-out-from-zero
    step policy with its alarm (`wake_alarm`) where the minimum is zero."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        component_name: str,
        component: cdk.CfnResource,
        endpoint_name: str,
        settings: Autoscaling,
    ) -> None:
        super().__init__(scope, construct_id)
        self.target = appscaling.ScalableTarget(
            self,
            "Target",
            service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
            resource_id=component_resource_id(component_name),
            scalable_dimension=COPY_DIMENSION,
            min_capacity=settings.min_instances,
            max_capacity=settings.max_instances,
            role=service_linked_role(self),
        )
        self.target.node.add_dependency(component)  # the component exists once CloudFormation has created it
        self.policy = self.target.scale_to_track_metric(
            "ConcurrentRequestsPerCopy",
            target_value=settings.target_concurrent_requests_per_instance,
            predefined_metric=appscaling.PredefinedMetric.SAGEMAKER_INFERENCE_COMPONENT_CONCURRENT_REQUESTS_PER_COPY_HIGH_RESOLUTION,
            scale_in_cooldown=cdk.Duration.seconds(settings.scale_in_cooldown_seconds),
            scale_out_cooldown=cdk.Duration.seconds(settings.scale_out_cooldown_seconds),
        )
        self.wake_alarm: cloudwatch.Alarm | None = None
        if settings.min_instances == 0:
            self.wake_alarm = self._scale_out_from_zero(component_name, endpoint_name)

    def _scale_out_from_zero(self, component_name: str, endpoint_name: str) -> cloudwatch.Alarm:
        step = appscaling.StepScalingAction(
            self,
            "ScaleOutFromZero",
            scaling_target=self.target,
            adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
            metric_aggregation_type=appscaling.MetricAggregationType.MAXIMUM,
            cooldown=cdk.Duration.seconds(WAKE_COOLDOWN_S),
        )
        step.add_adjustment(adjustment=1, lower_bound=0)
        alarm = cloudwatch.Alarm(
            self,
            "NoCapacityAlarm",
            alarm_name=f"{endpoint_name}-scale-out-from-zero",
            alarm_description=f"{component_name} turned an invocation away for want of a copy (scaled to zero): add "
            "one copy. Scaling, not a fault: it notifies no one",
            metric=cloudwatch.Metric(
                namespace="AWS/SageMaker",
                metric_name=NO_CAPACITY_METRIC,
                dimensions_map={COMPONENT_DIMENSION: component_name},
                statistic="Sum",
                period=cdk.Duration.seconds(WAKE_PERIOD_S),
            ),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            datapoints_to_alarm=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        alarm.add_alarm_action(actions.ApplicationScalingAction(step))
        return alarm


def endpoint_scaling(
    scope: Construct, construct_id: str, *, endpoint: ServingEndpoint, settings: Autoscaling
) -> EndpointAutoscaling | ComponentScaling | None:
    """How an endpoint scales where autoscaling is on: its component's copies, or its variant's instances."""
    if not settings.enabled:
        return None
    if endpoint.component is not None and endpoint.component_name is not None:
        return ComponentScaling(
            scope,
            construct_id,
            component_name=endpoint.component_name,
            component=endpoint.component,
            endpoint_name=endpoint.endpoint_name,
            settings=settings,
        )
    return EndpointAutoscaling(scope, construct_id, endpoint=endpoint, settings=settings)
