"""`DecisionEndpoints-<env>-Foundation`: what outlives the endpoints (key, images, model artifacts, alarm topic).

Deployed first: the model bucket must exist, and hold model.tar.gz, before an endpoint can start.
In `prod` everything here is retained on `cdk destroy`; in `dev` it is emptied and deleted.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from stacks.config import EnvironmentConfig
from stacks.model_artifacts import ModelArtifacts
from stacks.repository import ImageRepository


class FoundationStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: EnvironmentConfig, env: cdk.Environment) -> None:
        super().__init__(
            scope,
            construct_id,
            env=env,
            description=f"Decision endpoints ({config.name}): key, image repository, model bucket, alarm topic",
            termination_protection=config.termination_protection,
        )
        removal = config.cdk_removal_policy

        self.key = kms.Key(
            self,
            "Key",
            description=f"Decision endpoints ({config.name}): images, model artifacts, build logs, alarms",
            enable_key_rotation=True,
            removal_policy=removal,
            pending_window=cdk.Duration.days(7) if config.destroy_on_delete else cdk.Duration.days(30),
        )
        # Alarms publish to the encrypted topic through CloudWatch, which needs the key for that.
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                resources=["*"],
                conditions={"StringEquals": {"aws:SourceAccount": self.account}},
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
        )
        self.alarm_topic = self._alarm_topic(config)

        # Export what Serving may import under any configuration, so that switching endpoints off never
        # removes an export that the deployed Serving stack still imports (CloudFormation refuses that).
        shared = [
            self.key.key_arn,
            self.images.repository.repository_arn,
            self.images.repository.repository_name,
            self.artifacts.bucket.bucket_arn,
            self.artifacts.bucket.bucket_name,
        ]
        if config.alarms.topic_arn is None:
            shared.append(self.alarm_topic.topic_arn)
        for value in shared:
            self.export_value(value)

        cdk.CfnOutput(self, "ModelBucketName", value=self.artifacts.bucket.bucket_name)
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
            display_name=f"Decision endpoints {config.name} alarms",
            master_key=self.key,
            enforce_ssl=True,
        )
        for address in config.alarms.emails:
            topic.add_subscription(subscriptions.EmailSubscription(address))
        return topic
