"""`DecisionEndpoints-<env>-Foundation`: what outlives the endpoints (key, images, model artifacts, alarm topic).

Deployed first: the model bucket must exist, and hold model.tar.gz, before an endpoint can start.
In `prod` everything here is retained on `cdk destroy`; in `dev` it is emptied and deleted.

The alarm topic is not passed to Serving as an export: CloudFormation refuses to delete or change an export
that another stack imports, so switching `alarms.topic_arn` between null and an ARN would fail the
Foundation update. Serving derives the ARN instead: the configured one, or this stack's topic, which has a
fixed name (`alarm_topic_name`). Both switches then deploy in one `cdk deploy --all`: Foundation creates
or deletes its topic, Serving points its alarms at the other topic (between the two updates the alarms
notify the old topic). Environments deployed before the topic had a fixed name take a one-time two-step:
`cdk deploy -e <Serving>` first (it stops importing the old topic's export), then `cdk deploy --all`.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct
from decision_spec.environment_config import EnvironmentConfig
from decision_spec.names import BUCKET_OUTPUT, COMPONENT_LOG_GROUP_PREFIX, ENDPOINT_LOG_GROUP_PREFIX

from stacks.config import removal_policy
from stacks.data_capture import expire_captures
from stacks.model_artifacts import ModelArtifacts
from stacks.repository import ImageRepository

LOGS_ENCRYPTION_CONTEXT = "kms:EncryptionContext:aws:logs:arn"
ENDPOINT_NAME_PREFIXES = ("decision", "chat")  # every endpoint (and alarm) name is <prefix>-<environment>-...


def alarm_topic_name(environment: str) -> str:
    return f"DecisionEndpoints-{environment}-alarms"


def key_description(config: EnvironmentConfig) -> str:
    """What the key encrypts in this configuration, and nothing else."""
    uses = ["decision images (ECR)", "model artifacts (S3)", "endpoint logs (CloudWatch Logs)"]
    if config.data_capture is not None:
        uses.append("captured answers (S3)")
    endpoints = [*config.decision_endpoints.values(), *([config.chat] if config.chat is not None else [])]
    if any(e.encrypt_volume for e in endpoints):
        uses.append("endpoint storage volumes (SageMaker)")
    if config.alarms.topic_arn is None:
        uses.append("alarm notifications (SNS)")
    return f"Decision endpoints ({config.name}): " + ", ".join(uses)


class FoundationStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        env: cdk.Environment,
        synthesizer: cdk.IStackSynthesizer | None = None,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            env=env,
            synthesizer=synthesizer,
            description=f"Decision endpoints ({config.name}): key, image repository, model bucket, alarm topic",
            termination_protection=config.termination_protection,
        )
        removal = removal_policy(config)

        self.key = kms.Key(
            self,
            "Key",
            description=key_description(config),
            enable_key_rotation=True,
            removal_policy=removal,
            pending_window=cdk.Duration.days(7) if config.destroy_on_delete else cdk.Duration.days(30),
        )
        # Alarms publish to the encrypted topic through CloudWatch, which needs the key for that: this
        # environment's alarms only, not every alarm of the account.
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsOfThisEnvironment",
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                resources=["*"],
                conditions={
                    "StringEquals": {"aws:SourceAccount": self.account},
                    "ArnLike": {"aws:SourceArn": alarm_arn_patterns(self, config.name)},
                },
            )
        )
        # The endpoint log groups are encrypted with this key (stacks/endpoint.py); CloudWatch Logs may use it
        # for this environment's endpoint log groups only (the log group ARN is the encryption context).
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="LogsOfThisEnvironmentsEndpoints",
                actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
                principals=[iam.ServicePrincipal(f"logs.{self.region}.amazonaws.com")],
                resources=["*"],
                conditions={"ArnLike": {LOGS_ENCRYPTION_CONTEXT: endpoint_log_group_arn_patterns(self, config.name)}},
            )
        )

        self.images = ImageRepository(
            self,
            "Images",
            key=self.key,
            keep_images=config.image_repository.keep_images,
            untagged_expiry_days=config.image_repository.untagged_expiry_days,
            destroy_on_delete=config.destroy_on_delete,
        )
        self.artifacts = ModelArtifacts(
            self,
            "ModelArtifacts",
            key=self.key,
            model_key=config.model.s3_key,
            destroy_on_delete=config.destroy_on_delete,
            access_log_retention_days=config.log_retention_days,
            noncurrent_version_expiry_days=config.model.noncurrent_version_expiry_days,
        )
        if config.data_capture is not None:
            expire_captures(self.artifacts.bucket, config.data_capture)
        self.alarm_topic = self._alarm_topic(config)

        # Export what Serving may import under any configuration, so that switching endpoints off never
        # removes an export that the deployed Serving stack still imports (CloudFormation refuses that).
        # The same set under every allowed configuration; the alarm topic is not among them (see above).
        shared = [
            self.key.key_arn,
            self.images.repository.repository_arn,
            self.images.repository.repository_name,
            self.artifacts.bucket.bucket_arn,
            self.artifacts.bucket.bucket_name,
        ]
        for value in shared:
            self.export_value(value)

        cdk.CfnOutput(self, BUCKET_OUTPUT, value=self.artifacts.bucket.bucket_name)
        cdk.CfnOutput(
            self,
            "ModelUploadUri",
            value=self.artifacts.model_data_url,
            description="Where `decisionctl package-model ... --upload` puts model.tar.gz",
        )
        cdk.CfnOutput(self, "ImageRepositoryUri", value=self.images.repository.repository_uri)
        cdk.CfnOutput(self, "AlarmTopicArn", value=self.alarm_topic.topic_arn)

    def _alarm_topic(self, config: EnvironmentConfig) -> sns.ITopic:
        if config.alarms.topic_arn is not None:
            return sns.Topic.from_topic_arn(self, "AlarmTopic", config.alarms.topic_arn)
        topic = sns.Topic(
            self,
            "AlarmTopic",
            topic_name=alarm_topic_name(config.name),
            display_name=f"Decision endpoints {config.name} alarms",
            master_key=self.key,
            enforce_ssl=True,
        )
        # A topic policy replaces SNS's default one, and enforce_ssl writes one holding only a Deny: without
        # this Allow, CloudWatch is "not authorized to perform: SNS:Publish" and no alarm ever notifies.
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                actions=["sns:Publish"],
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                resources=[topic.topic_arn],
                conditions={
                    "StringEquals": {"aws:SourceAccount": self.account},
                    "ArnLike": {"aws:SourceArn": alarm_arn_patterns(self, config.name)},
                },
            )
        )
        for address in config.alarms.emails:
            topic.add_subscription(subscriptions.EmailSubscription(address))
        return topic


def alarm_arn_patterns(stack: cdk.Stack, environment: str) -> list[str]:
    """The ARNs of this environment's alarms: every alarm name starts with its endpoint's name."""
    return _endpoint_arn_patterns(stack, environment, service="cloudwatch", resource="alarm")


def endpoint_log_group_arn_patterns(stack: cdk.Stack, environment: str) -> list[str]:
    """The ARNs of this environment's endpoint log groups, and of its inference components' (named after their
    endpoints, stacks/hosting.py), as CloudWatch Logs puts them in the encryption context."""
    return [
        pattern
        for prefix in (ENDPOINT_LOG_GROUP_PREFIX, COMPONENT_LOG_GROUP_PREFIX)
        for pattern in _endpoint_arn_patterns(
            stack, environment, service="logs", resource="log-group", name_prefix=prefix
        )
    ]


def _endpoint_arn_patterns(
    stack: cdk.Stack, environment: str, *, service: str, resource: str, name_prefix: str = ""
) -> list[str]:
    """One ARN pattern per endpoint kind of the environment, for resources named after the endpoint."""
    return [
        stack.format_arn(
            service=service,
            resource=resource,
            resource_name=f"{name_prefix}{prefix}-{environment}-*",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        for prefix in ENDPOINT_NAME_PREFIXES
    ]
