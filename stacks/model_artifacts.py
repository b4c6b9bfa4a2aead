"""The model bucket: `model.tar.gz` (GGUF + manifest.json) uploaded by `decisionctl package-model --upload`.

Server access logs go to a bucket of their own only where buckets are retained. S3 delivers access logs
best-effort, often hours late, so a log bucket that `cdk destroy` empties receives the logs of that very
destroy afterwards and its deletion fails with BucketNotEmpty; stopping the logging first does not help
with records already on their way. Environments that are destroyed have no access-log bucket.

Emptying the bucket on destroy is CDK's auto-delete custom resource, a Lambda function that Lambda would
give a log group of its own on first run: never expiring, and left behind by `cdk destroy`. The stack
creates that log group instead, with the environment's retention, and deletes it after the custom resource.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.config import removal_policy_of
from stacks.log_retention import LOG_RETENTION
from stacks.nag import acknowledge

AUTO_DELETE_PROVIDER = "Custom::S3AutoDeleteObjectsCustomResourceProvider"  # CDK's singleton in the stack


class ModelArtifacts(Construct):
    """SSL only, no public access, versioned, KMS-encrypted; server access logs to a separate bucket if retained."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        key: kms.IKey,
        model_key: str,
        destroy_on_delete: bool,
        access_log_retention_days: int,
        noncurrent_version_expiry_days: int | None,
    ) -> None:
        super().__init__(scope, construct_id)
        removal = removal_policy_of(destroy_on_delete)
        self.model_key = model_key
        self.access_logs = None if destroy_on_delete else self._access_log_bucket(access_log_retention_days)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=key,
            bucket_key_enabled=True,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            versioned=True,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="model-bucket/" if self.access_logs is not None else None,
            # Every version is kept unless an expiry is configured: decisions name the model they ran on.
            lifecycle_rules=[
                s3.LifecycleRule(noncurrent_version_expiration=cdk.Duration.days(noncurrent_version_expiry_days))
            ]
            if noncurrent_version_expiry_days is not None
            else None,
            removal_policy=removal,
            auto_delete_objects=destroy_on_delete,
        )
        if destroy_on_delete:
            self._auto_delete_logs(access_log_retention_days)
        if self.access_logs is None:
            acknowledge(
                self.bucket,
                "AwsSolutions-S1",
                "This environment is destroyed with its buckets: S3 delivers access logs hours late, into a log "
                "bucket destroy has already emptied, and its deletion then fails (BucketNotEmpty)",
            )

    def _auto_delete_logs(self, retention_days: int) -> None:
        stack = cdk.Stack.of(self)
        provider = stack.node.find_child(AUTO_DELETE_PROVIDER)
        handler = provider.node.find_child("Handler")
        assert isinstance(handler, cdk.CfnResource)
        self.auto_delete_logs = logs.LogGroup(
            self,
            "AutoDeleteLogs",
            log_group_name=cdk.Fn.join("", ["/aws/lambda/", handler.ref]),
            retention=LOG_RETENTION[retention_days],
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        # Deleted after the custom resource whose delete runs the function (it would recreate the group).
        self.bucket.node.find_child("AutoDeleteObjectsCustomResource").node.add_dependency(self.auto_delete_logs)

    def _access_log_bucket(self, retention_days: int) -> s3.Bucket:
        bucket = s3.Bucket(
            self,
            "AccessLogs",
            # Server access logging can only deliver to SSE-S3 buckets.
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            versioned=True,
            lifecycle_rules=[
                s3.LifecycleRule(
                    expiration=cdk.Duration.days(retention_days),
                    noncurrent_version_expiration=cdk.Duration.days(1),
                )
            ],
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        acknowledge(
            bucket,
            "AwsSolutions-S1",
            "This is the access-log destination of the model bucket; logging it into itself would loop",
        )
        return bucket

    @property
    def model_object_arn(self) -> str:
        return self.bucket.arn_for_objects(self.model_key)

    @property
    def model_data_url(self) -> str:
        return f"s3://{self.bucket.bucket_name}/{self.model_key}"
