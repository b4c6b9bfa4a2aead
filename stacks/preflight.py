"""`Custom::ModelPreflight`: the model artifact is checked in seconds before any image build or SageMaker model.

One check per stack (every endpoint serves the same `model.tar.gz`); the image builds and every
`AWS::SageMaker::Model` depend on it, so a missing or mismatched artifact stops the deployment before
CodeBuild runs or an endpoint waits out its health-check timeout. The handler
(`preflight_handler/index.py`) reads `manifest.json` and the tarball's metadata with `s3:GetObject`
on exactly those two keys, decrypting only through S3. Where the environment's evaluation record is bound to
the artifact (stacks/evaluation_binding.py), it also checks that the uploaded manifest.json is the evaluated one.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import custom_resources as cr
from constructs import Construct
from decision_spec.names import MANIFEST_NAME

from stacks.nag import acknowledge, arn_finding

HANDLER = Path(__file__).resolve().parent / "preflight_handler"
HANDLER_RUNTIME = lambda_.Runtime.PYTHON_3_14


def manifest_key(artifact_key: str) -> str:
    """Where `decisionctl package-model --upload` puts manifest.json: beside model.tar.gz."""
    return posixpath.join(posixpath.dirname(artifact_key), MANIFEST_NAME)


class ModelPreflight(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket: s3.IBucket,
        key: kms.IKey,
        artifact_key: str,
        expected_model_sha256: str | None,
        image_digests: Mapping[str, str],
        environment: str,
        log_retention: logs.RetentionDays,
        evaluated_manifest_sha256: str | None = None,
        evaluation_record: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        manifest = manifest_key(artifact_key)
        log_group = logs.LogGroup(self, "Logs", retention=log_retention, removal_policy=cdk.RemovalPolicy.DESTROY)
        role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        log_group.grant_write(role)
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=[bucket.arn_for_objects(manifest), bucket.arn_for_objects(artifact_key)],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["kms:Decrypt"],
                resources=[key.key_arn],
                conditions={"StringEquals": {"kms:ViaService": f"s3.{stack.region}.{stack.url_suffix}"}},
            )
        )
        self.function = lambda_.Function(
            self,
            "Check",
            runtime=HANDLER_RUNTIME,
            handler="index.on_event",
            code=lambda_.Code.from_asset(str(HANDLER), exclude=["__pycache__", "*.pyc"]),
            role=role,
            log_group=log_group,
            timeout=cdk.Duration.seconds(60),
            description="Custom::ModelPreflight: model.tar.gz and manifest.json in place, checksums as configured",
        )
        framework_logs = logs.LogGroup(
            self, "ProviderLogs", retention=log_retention, removal_policy=cdk.RemovalPolicy.DESTROY
        )
        framework_role = iam.Role(self, "ProviderRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        framework_logs.grant_write(framework_role)
        provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=self.function,
            log_group=framework_logs,
            framework_on_event_role=framework_role,
        )
        properties: dict[str, object] = {
            "Bucket": bucket.bucket_name,
            "ArtifactKey": artifact_key,
            "ManifestKey": manifest,
            "ImageDigests": dict(sorted(image_digests.items())),
            "Environment": environment,
            "ConfigKey": f"environments.{environment}",
        }
        if expected_model_sha256 is not None:
            properties["ExpectedModelSha256"] = expected_model_sha256
        if evaluated_manifest_sha256 is not None:  # the manifest.json bytes the committed record evaluated
            properties["EvaluatedManifestSha256"] = evaluated_manifest_sha256
            properties["EvaluationRecord"] = evaluation_record or "the evaluation record"
        self.resource = cdk.CustomResource(
            self,
            "Resource",
            service_token=provider.service_token,
            resource_type="Custom::ModelPreflight",
            properties=properties,
        )
        acknowledge(
            self,
            f"AwsSolutions-IAM5[Resource::{arn_finding(self.function, ':*')}]",
            "The provider framework invokes this one function; `:*` covers its versions and aliases (CDK's "
            "grantInvoke)",
        )
