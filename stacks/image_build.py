"""CodeBuild turns containers/ into the CPU and CUDA decision images; a custom resource waits for each build.

The source is the containers/ folder as an S3 asset (a zip: no Docker at synth). Each image's tag is
derived from the source hash, the base digest and the buildspec, and the custom resource's properties
carry that tag, so an image is rebuilt only when one of those changes. The resource
returns the pushed digest; the SageMaker model pins `<repository uri>@<digest>`.

The images are built one after the other (CPU, then CUDA: each resource depends on the one before), so
one concurrent CodeBuild build is all the account needs; see image_build_handler/index.py for the quota.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import yaml
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import custom_resources as cr
from constructs import Construct
from decision_spec.environment_sections import DlcImages

from stacks.nag import acknowledge, arn_finding, arn_prefix, ref_finding

ROOT = Path(__file__).resolve().parents[1]
CONTAINERS = ROOT / "containers"
BUILDSPEC = ROOT / "buildspec" / "image.yml"
HANDLER = Path(__file__).resolve().parent / "image_build_handler"
HANDLER_RUNTIME = lambda_.Runtime.PYTHON_3_14
PULL_ACTIONS = ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]
KEY_ACTIONS = ["kms:Decrypt", "kms:Encrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*"]  # CDK's grantEncryptDecrypt
# CloudFormation fails a custom resource after one hour whatever the provider is told, so the build (queue
# included) must end, and the waiter give up with the build's log link, inside it.
CUSTOM_RESOURCE_LIMIT_MINUTES = 60
QUEUED_MINUTES = 10
BUILD_MINUTES = 45
WAIT_MINUTES = 55
# onEvent retries a start that CodeBuild refuses for the account's build quota (handler START_RETRY_DELAYS)
# before the waiter begins, so its timeout counts against the same hour.
START_TIMEOUT_SECONDS = 240
CHECK_TIMEOUT_SECONDS = 30


@dataclass(frozen=True)
class BuiltImage:
    """One pushed image: its digest and digest-pinned URI (CloudFormation tokens)."""

    digest: str
    uri: str


def dockerignore_patterns(folder: Path = CONTAINERS) -> list[str]:
    path = folder / ".dockerignore"
    if not path.is_file():
        return []
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def image_tag(flavour: str, source_hash: str, base_image: str, recipe: str) -> str:
    """Content-derived: the same container source, base and build recipe always give the same tag."""
    digest = hashlib.sha256(f"{source_hash}\n{base_image}\n{recipe}".encode()).hexdigest()
    return f"{flavour}-{digest[:20]}"


def buildspec() -> dict[str, Any]:
    spec: dict[str, Any] = yaml.safe_load(BUILDSPEC.read_text(encoding="utf-8"))
    return spec


def recipe_hash() -> str:
    """The buildspec's steps are part of what makes an image (build arguments, labels); comments are not."""
    return hashlib.sha256(json.dumps(buildspec(), sort_keys=True).encode()).hexdigest()


def dlc_repository_arn(scope: Construct, dlc: DlcImages) -> str:
    stack = cdk.Stack.of(scope)
    return f"arn:{stack.partition}:ecr:{stack.region}:{dlc.registry_account}:repository/{dlc.repository}"


def grant_dlc_pull(principal: iam.IGrantable, scope: Construct, dlc: DlcImages) -> None:
    """Pull from the DLC repository only (the caller adds ecr:GetAuthorizationToken where nothing else does)."""
    iam.Grant.add_to_principal(grantee=principal, actions=PULL_ACTIONS, resource_arns=[dlc_repository_arn(scope, dlc)])


def dlc_image(scope: Construct, dlc: DlcImages, flavour: str) -> str:
    """The regional DLC registry, which SageMaker and CodeBuild can pull from (the public mirror is for laptops)."""
    stack = cdk.Stack.of(scope)
    return f"{dlc.registry_account}.dkr.ecr.{stack.region}.{stack.url_suffix}/{dlc.repository}@{dlc.digest(flavour)}"


class ImageBuild(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        repository: ecr.IRepository,
        key: kms.IKey,
        dlc: DlcImages,
        flavours: Iterable[str],
        log_retention: logs.RetentionDays,
    ) -> None:
        super().__init__(scope, construct_id)
        self.source = s3_assets.Asset(
            self,
            "Source",
            path=str(CONTAINERS),
            exclude=dockerignore_patterns(),
            ignore_mode=cdk.IgnoreMode.DOCKER,
        )
        self.log_group = logs.LogGroup(self, "Logs", retention=log_retention, removal_policy=cdk.RemovalPolicy.DESTROY)
        self.project = codebuild.Project(
            self,
            "Project",
            description="Builds the decision images from containers/ on the llama.cpp DLC bases (buildspec/image.yml)",
            source=codebuild.Source.s3(bucket=self.source.bucket, path=self.source.s3_object_key),
            build_spec=codebuild.BuildSpec.from_object_to_yaml(buildspec()),
            environment=codebuild.BuildEnvironment(
                build_image=codebuild.LinuxBuildImage.STANDARD_7_0,
                compute_type=codebuild.ComputeType.LARGE,  # room for the multi-GB CUDA base layers
                privileged=True,
            ),
            environment_variables={
                "REPOSITORY_URI": codebuild.BuildEnvironmentVariable(value=repository.repository_uri),
                "REPOSITORY_NAME": codebuild.BuildEnvironmentVariable(value=repository.repository_name),
            },
            logging=codebuild.LoggingOptions(cloud_watch=codebuild.CloudWatchLoggingOptions(log_group=self.log_group)),
            timeout=cdk.Duration.minutes(BUILD_MINUTES),
            queued_timeout=cdk.Duration.minutes(QUEUED_MINUTES),
        )
        self._encrypt_with(key)
        repository.grant_pull_push(self.project)
        self.project.add_to_role_policy(
            iam.PolicyStatement(actions=["ecr:DescribeImages"], resources=[repository.repository_arn])
        )
        grant_dlc_pull(self.project, self, dlc)

        self.provider = self._provider(log_retention)
        self._acknowledge()
        self.images: dict[str, BuiltImage] = {}
        self.builds: list[cdk.CustomResource] = []
        recipe = recipe_hash()
        for flavour in sorted(flavours):  # "cpu" before "cuda": the small image fails first if the recipe is wrong
            base = dlc_image(self, dlc, flavour)
            pinned = f"{dlc.registry_account}/{dlc.repository}@{dlc.digest(flavour)}"
            tag = image_tag(flavour, self.source.asset_hash, pinned, recipe)
            resource = cdk.CustomResource(
                self,
                f"{flavour.capitalize()}Image",
                service_token=self.provider.service_token,
                resource_type="Custom::DecisionImage",
                properties={
                    "ProjectName": self.project.project_name,
                    "RepositoryUri": repository.repository_uri,
                    "ImageTag": tag,
                    "BuildEnvironment": {
                        "IMAGE_TAG": tag,
                        "BASE_IMAGE": base,
                        "FLAVOUR": flavour,
                        "SOURCE_HASH": self.source.asset_hash,
                    },
                },
            )
            if self.builds:
                resource.node.add_dependency(self.builds[-1])
            self.builds.append(resource)
            self.images[flavour] = BuiltImage(
                digest=resource.get_att_string("ImageDigest"),
                uri=resource.get_att_string("ImageUri"),
            )

    def _encrypt_with(self, key: kms.IKey) -> None:
        """The project's output encryption key, usable by its role only through S3 (what CodeBuild encrypts with it).

        Not the L2 `encryption_key`: its grant lets the role call KMS directly, and the build runs privileged Docker
        on third-party base images, so a build step holding the role's credentials could decrypt anything under the
        environment key (model artifacts, captured answers, endpoint logs). kms:ViaService keeps it to S3 requests.
        """
        project = self.project.node.default_child
        assert isinstance(project, codebuild.CfnProject)
        project.encryption_key = key.key_arn
        self.project.add_to_role_policy(
            iam.PolicyStatement(
                actions=KEY_ACTIONS,
                resources=[key.key_arn],
                conditions={"StringEquals": {"kms:ViaService": f"s3.{cdk.Stack.of(self).region}.amazonaws.com"}},
            )
        )

    def _provider(self, log_retention: logs.RetentionDays) -> cr.Provider:
        code = lambda_.Code.from_asset(str(HANDLER), exclude=["__pycache__", "*.pyc"])
        self.start = self._handler("Start", code, "index.on_event", log_retention, START_TIMEOUT_SECONDS)
        self.check = self._handler("Check", code, "index.is_complete", log_retention, CHECK_TIMEOUT_SECONDS)
        self.start.add_to_role_policy(
            iam.PolicyStatement(actions=["codebuild:StartBuild"], resources=[self.project.project_arn])
        )
        self.check.add_to_role_policy(
            iam.PolicyStatement(actions=["codebuild:BatchGetBuilds"], resources=[self.project.project_arn])
        )
        # Our own roles for the framework's functions, so no AWS-managed basic execution policy. Two of
        # them, as CDK's defaults: onEvent starts the waiter, which runs isComplete (one role would be a cycle).
        framework_logs = logs.LogGroup(
            self, "ProviderLogs", retention=log_retention, removal_policy=cdk.RemovalPolicy.DESTROY
        )
        on_event_role = iam.Role(self, "ProviderOnEventRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        waiter_role = iam.Role(self, "ProviderWaiterRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        framework_logs.grant_write(on_event_role)
        framework_logs.grant_write(waiter_role)
        return cr.Provider(
            self,
            "Provider",
            on_event_handler=self.start,
            is_complete_handler=self.check,
            query_interval=cdk.Duration.seconds(30),
            total_timeout=cdk.Duration.minutes(WAIT_MINUTES),
            log_group=framework_logs,
            framework_on_event_role=on_event_role,
            framework_complete_and_timeout_role=waiter_role,
        )

    def _handler(
        self, name: str, code: lambda_.Code, handler: str, log_retention: logs.RetentionDays, timeout_seconds: int
    ) -> lambda_.Function:
        log_group = logs.LogGroup(
            self, f"{name}Logs", retention=log_retention, removal_policy=cdk.RemovalPolicy.DESTROY
        )
        role = iam.Role(self, f"{name}Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        log_group.grant_write(role)
        return lambda_.Function(
            self,
            name,
            runtime=HANDLER_RUNTIME,
            handler=handler,
            code=code,
            role=role,
            log_group=log_group,
            timeout=cdk.Duration.seconds(timeout_seconds),
            description=f"Custom::DecisionImage {handler.split('.')[1]}: CodeBuild image build",
        )

    def _acknowledge(self) -> None:
        project = self.project.node.default_child
        assert project is not None
        for action in ("s3:GetBucket*", "s3:GetObject*", "s3:List*"):
            acknowledge(
                self.project,
                f"AwsSolutions-IAM5[Action::{action}]",
                "CDK's read grant on the build source: the one source zip in the CDK asset bucket, wildcards are the "
                "read action family of that grant",
            )
        for action in ("kms:GenerateDataKey*", "kms:ReEncrypt*"):
            acknowledge(
                self.project,
                f"AwsSolutions-IAM5[Action::{action}]",
                "CodeBuild encrypts its outputs with the environment key; the grant names that one key and holds only "
                "through S3 (kms:ViaService)",
            )
        acknowledge(
            self.project,
            "AwsSolutions-IAM5[Resource::*]",
            "ecr:GetAuthorizationToken has no resource-level permissions (AWS requires Resource *); pushes and pulls "
            "are limited to the image repository and the DLC repository",
        )
        name = ref_finding(project)
        acknowledge(
            self.project,
            f"AwsSolutions-IAM5[Resource::{arn_prefix(self, 'logs')}:log-group:/aws/codebuild/{name}:*]",
            "CodeBuild's default log group grant (log streams of this project only); builds log to the explicit group",
        )
        acknowledge(
            self.project,
            f"AwsSolutions-IAM5[Resource::{arn_prefix(self, 'codebuild')}:report-group/{name}-*]",
            "CDK's default grant for this project's own test-report groups (name prefix of the project)",
        )
        acknowledge(
            self.project,
            "AwsSolutions-CB3",
            "Privileged mode runs the Docker daemon that builds and smoke-tests the image; the project builds only "
            "this repository's containers/ source",
        )
        provider = self.provider
        framework = [provider.node.find_child(f"framework-{step}") for step in ("isComplete", "onTimeout")]
        for function in (self.start, self.check, *framework):
            acknowledge(
                self,
                f"AwsSolutions-IAM5[Resource::{arn_finding(function, ':*')}]",
                "The provider framework invokes this one function; `:*` covers its versions and aliases "
                "(CDK's grantInvoke)",
            )
        acknowledge(
            provider,
            "AwsSolutions-SF1",
            "CDK's waiter state machine only polls isComplete; each poll logs in the provider's Lambda log group",
        )
        acknowledge(
            provider,
            "AwsSolutions-SF2",
            "X-Ray tracing of CDK's internal waiter state machine cannot be configured and adds nothing to build logs",
        )
