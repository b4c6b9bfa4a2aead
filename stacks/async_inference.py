"""An asynchronous decision endpoint: requests from S3, answers to S3, SNS on completion, scaled down to zero.

It runs the image, artifact and adapter settings of one decision endpoint section, as a Model of its own
(so its role holds only its own grants). A caller puts a request body (one decision body, or JSON Lines
of them) under `async/input/` and calls InvokeEndpointAsync with that InputLocation; SageMaker queues it,
writes the answer to `async/output/` (or the error to `async/failure/`) and notifies the success or error
topic. With no backlog the variant scales in to zero instances; a request arriving then raises
HasBacklogWithoutCapacity, whose alarm adds the first instance back.
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from constructs import Construct
from decision_spec.bulk_config import AsyncEndpointConfig
from decision_spec.endpoint_config import CpuEndpoint, GpuEndpoint
from decision_spec.instance_types import has_local_nvme

from stacks.autoscaling import variant_scalable_target
from stacks.endpoint import SageMakerEndpoint, decision_model
from stacks.nag import acknowledge, object_finding

INPUT_PREFIX = "async/input/"
OUTPUT_PREFIX = "async/output/"
FAILURE_PREFIX = "async/failure/"
SAGEMAKER = "AWS/SageMaker"
BACKLOG_PER_INSTANCE = "ApproximateBacklogSizePerInstance"
BACKLOG_WITHOUT_CAPACITY = "HasBacklogWithoutCapacity"


class AsyncDecisionEndpoint(SageMakerEndpoint):
    """Role, log group, model, endpoint config with AsyncInferenceConfig, endpoint, topics and scaling."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        settings: AsyncEndpointConfig,
        base: CpuEndpoint | GpuEndpoint,
        image: str,
        environment: Mapping[str, str],
        model_data_url: str,
        model_object_arn: str,
        model_download_timeout_seconds: int,
        bucket: s3.IBucket,
        repository: ecr.IRepository,
        key: kms.IKey,
        log_retention: logs.RetentionDays,
        removal_policy: cdk.RemovalPolicy,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            endpoint_name=endpoint_name,
            log_retention=log_retention,
            removal_policy=removal_policy,
            log_key=key,
        )
        self.settings = settings
        self.input_uri = f"s3://{bucket.bucket_name}/{INPUT_PREFIX}"
        self.output_uri = f"s3://{bucket.bucket_name}/{OUTPUT_PREFIX}"
        self.failure_uri = f"s3://{bucket.bucket_name}/{FAILURE_PREFIX}"
        self.success_topic = self._topic("SuccessTopic", f"{endpoint_name}: answers written", key)
        self.error_topic = self._topic("ErrorTopic", f"{endpoint_name}: requests failed", key)
        self.role = self.execution_role(f"SageMaker execution role of the {endpoint_name} asynchronous endpoint")
        self._grant(bucket, model_object_arn, repository, key)

        self.model = decision_model(
            self,
            self.role,
            image=image,
            model_data_url=model_data_url,
            # The run identity names the instance type this endpoint runs on, not the section's.
            environment={**environment, "DECISION_INSTANCE_TYPES": settings.instance_type},
        )
        self.config = sagemaker.CfnEndpointConfig(
            self,
            "Config",
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=self.variant_name,
                    model_name=self.model.attr_model_name,
                    # An endpoint starts with one instance; autoscaling takes it to zero when idle.
                    initial_instance_count=1,
                    initial_variant_weight=1.0,
                    instance_type=settings.instance_type,
                    inference_ami_version=getattr(base, "inference_ami_version", None),
                    container_startup_health_check_timeout_in_seconds=base.startup_health_check_timeout_seconds,
                    model_data_download_timeout_in_seconds=model_download_timeout_seconds,
                )
            ],
            kms_key_id=None if has_local_nvme(settings.instance_type) else key.key_arn,
            async_inference_config=sagemaker.CfnEndpointConfig.AsyncInferenceConfigProperty(
                # Answers are encrypted by the bucket's default SSE-KMS with the environment key.
                output_config=sagemaker.CfnEndpointConfig.AsyncInferenceOutputConfigProperty(
                    s3_output_path=self.output_uri,
                    s3_failure_path=self.failure_uri,
                    notification_config=sagemaker.CfnEndpointConfig.AsyncInferenceNotificationConfigProperty(
                        success_topic=self.success_topic.topic_arn,
                        error_topic=self.error_topic.topic_arn,
                    ),
                ),
                client_config=sagemaker.CfnEndpointConfig.AsyncInferenceClientConfigProperty(
                    max_concurrent_invocations_per_instance=settings.max_concurrent_invocations_per_instance
                ),
            ),
        )
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_name=endpoint_name,
            endpoint_config_name=self.config.attr_endpoint_config_name,
            # Keep the instance count autoscaling chose (zero, often) when a deployment swaps the config.
            retain_all_variant_properties=True,
        )
        self.endpoint.node.add_dependency(self.log_group)
        self._scale()

        for output_id, value in (
            ("AsyncEndpointName", endpoint_name),
            ("AsyncInputUri", self.input_uri),
            ("AsyncOutputUri", self.output_uri),
            ("AsyncSuccessTopicArn", self.success_topic.topic_arn),
            ("AsyncErrorTopicArn", self.error_topic.topic_arn),
        ):
            cdk.CfnOutput(self, output_id, value=value).override_logical_id(output_id)

    def _topic(self, construct_id: str, display_name: str, key: kms.IKey) -> sns.Topic:
        return sns.Topic(self, construct_id, display_name=display_name, master_key=key, enforce_ssl=True)

    def metric(self, name: str, statistic: str) -> cloudwatch.Metric:
        # The asynchronous queue metrics carry the endpoint only, not the variant.
        return cloudwatch.Metric(
            namespace=SAGEMAKER,
            metric_name=name,
            dimensions_map={"EndpointName": self.endpoint_name},
            statistic=statistic,
            period=cdk.Duration.minutes(1),
        )

    def _scale(self) -> None:
        s = self.settings
        self.scaling_target = variant_scalable_target(
            self, "ScalingTarget", self, min_capacity=0, max_capacity=s.max_instances
        )
        # Scales out with the queue and in to zero once it is empty; it cannot scale out from zero, since
        # a backlog per instance needs an instance.
        self.backlog_policy = self.scaling_target.scale_to_track_metric(
            "BacklogPerInstance",
            target_value=s.target_backlog_per_instance,
            custom_metric=self.metric(BACKLOG_PER_INSTANCE, "Average"),
            scale_in_cooldown=cdk.Duration.seconds(s.scale_in_cooldown_seconds),
            scale_out_cooldown=cdk.Duration.seconds(s.scale_out_cooldown_seconds),
        )
        self.wake_action = appscaling.StepScalingAction(
            self,
            "WakeFromZero",
            scaling_target=self.scaling_target,
            adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
            cooldown=cdk.Duration.seconds(s.scale_out_cooldown_seconds),
            metric_aggregation_type=appscaling.MetricAggregationType.MAXIMUM,
        )
        self.wake_action.add_adjustment(adjustment=1, lower_bound=0)
        self.wake_alarm = cloudwatch.Alarm(
            self,
            "BacklogWithoutCapacity",
            alarm_name=f"{self.endpoint_name}-backlog-without-capacity",
            alarm_description=f"{self.endpoint_name} has queued requests and no instance: add one",
            metric=self.metric(BACKLOG_WITHOUT_CAPACITY, "Average"),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.wake_alarm.add_alarm_action(actions.ApplicationScalingAction(self.wake_action))

    def _grant(self, bucket: s3.IBucket, model_object_arn: str, repository: ecr.IRepository, key: kms.IKey) -> None:
        stack = cdk.Stack.of(self)

        def via(*services: str) -> dict[str, dict[str, list[str]]]:
            return {
                "StringEquals": {"kms:ViaService": [f"{svc}.{stack.region}.{stack.url_suffix}" for svc in services]}
            }

        statements = [
            iam.PolicyStatement(
                actions=["s3:GetObject"], resources=[model_object_arn, bucket.arn_for_objects(f"{INPUT_PREFIX}*")]
            ),
            iam.PolicyStatement(
                actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                resources=[bucket.arn_for_objects(f"{OUTPUT_PREFIX}*"), bucket.arn_for_objects(f"{FAILURE_PREFIX}*")],
            ),
            iam.PolicyStatement(actions=["kms:Decrypt"], resources=[key.key_arn], conditions=via("s3", "ecr", "sns")),
            iam.PolicyStatement(actions=["kms:GenerateDataKey"], resources=[key.key_arn], conditions=via("s3", "sns")),
            iam.PolicyStatement(
                actions=["sns:Publish"], resources=[self.success_topic.topic_arn, self.error_topic.topic_arn]
            ),
        ]
        for statement in statements:
            self.role.add_to_policy(statement)
        repository.grant_pull(self.role)
        for prefix in (INPUT_PREFIX, OUTPUT_PREFIX, FAILURE_PREFIX):
            acknowledge(
                self.role,
                f"AwsSolutions-IAM5[Resource::{object_finding(bucket, prefix + '*')}]",
                "Asynchronous requests are read from async/input/ and answered under async/output/ and "
                "async/failure/ with object names chosen per request, so each grant is one prefix",
            )
