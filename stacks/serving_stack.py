"""`DecisionEndpoints-<env>-Serving`: image builds, endpoints, autoscaling, alarms and the dashboard.

Everything here can be destroyed and re-created without losing data: images, model artifacts and the
alarm topic live in the Foundation stack. The image digest flows inside this stack (custom resource
attribute -> model), so a rebuilt image replaces the model and config on the same deployment.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from constructs import Construct
from decision_spec.answer_settings import ANSWER_VARIABLES
from decision_spec.dlc_registry import console_domain
from decision_spec.endpoint_config import ChatEndpoint, CpuEndpoint, GpuEndpoint
from decision_spec.environment_config import IMAGE_FLAVOURS, EnvironmentConfig
from decision_spec.evaluation_record import RECORD_OUTPUT
from decision_spec.hosting_config import ComponentsHosting
from decision_spec.names import component_name, endpoint_name

from stacks.adapter_settings import answer_environment, options_environment
from stacks.async_inference import AsyncDecisionEndpoint
from stacks.autoscaling import EndpointAutoscaling
from stacks.batch_transform import BatchTransformJobs
from stacks.component_scaling import ComponentScaling, endpoint_scaling
from stacks.config import removal_policy
from stacks.dashboard import build_dashboard
from stacks.data_capture import capture_config, grant_capture
from stacks.decision_shift import DecisionShiftAlarms
from stacks.deployed_check_access import CHECK_ROLE_OUTPUT, CheckRoleTrust, DeployedCheckRole
from stacks.endpoint import ServingEndpoint
from stacks.evaluation_config import Binding
from stacks.foundation_stack import FoundationStack, alarm_topic_name
from stacks.hosting import hosted_memory_mb
from stacks.image_build import BuiltImage, ImageBuild, dlc_image, grant_dlc_pull
from stacks.invoker_access import InvokerPolicy
from stacks.observability import EndpointAlarms, log_retention, overload_namespace
from stacks.preflight import ModelPreflight
from stacks.shadow import ShadowModel

ALL_GPU_LAYERS = "999"


@dataclass(frozen=True)
class DeployedEndpoint:
    endpoint: ServingEndpoint
    scaling: EndpointAutoscaling | ComponentScaling | None
    alarms: EndpointAlarms
    decision_shift: DecisionShiftAlarms | None = None


def decision_environment(
    config: EnvironmentConfig,
    settings: CpuEndpoint | GpuEndpoint,
    image: BuiltImage,
    evaluation: Binding | None = None,
) -> dict[str, str]:
    """What the adapter reads at start: its run identity, its limits, the llama.cpp runtime, its other settings that
    leave answers alone (`<section>.adapter`) and those that change answers (the bound evaluation record's and
    `model.answer_settings`: what the artifact was evaluated under)."""
    recorded = evaluation.answer_settings if evaluation is not None and not evaluation.problems else None
    env = {
        **answer_environment(config.model.answer_settings, recorded),
        **options_environment(settings.adapter),
        "DECISION_IMAGE_DIGEST": image.digest,
        "DECISION_EXPECTED_MODEL_SHA256": config.model.sha256,
        "DECISION_INSTANCE_TYPES": ",".join(settings.instance_types),
        "DECISION_MAX_CONCURRENCY": str(settings.max_concurrency),
        "DECISION_MAX_QUEUE": str(settings.max_queue),
        # Chat has its own endpoint (the `chat` section, the stock DLC): a chat context here would only take
        # KV memory and, where the threads are split, cores from the decisions.
        "DECISION_CHAT_CONTEXTS": "0",
        "SM_LLAMA_CPP_CTX_SIZE": str(settings.ctx_size),
    }
    if isinstance(settings, CpuEndpoint):
        env["SM_LLAMA_CPP_THREADS"] = str(settings.threads)
    else:
        env["SM_LLAMA_CPP_N_GPU_LAYERS"] = ALL_GPU_LAYERS
    return env


def chat_environment(settings: ChatEndpoint) -> dict[str, str]:
    """The stock DLC entrypoint turns SM_LLAMA_CPP_FOO_BAR into llama-server's --foo-bar."""
    env = {"SM_LLAMA_CPP_CTX_SIZE": str(settings.ctx_size)}
    if settings.flavour == "cuda":
        env["SM_LLAMA_CPP_N_GPU_LAYERS"] = ALL_GPU_LAYERS
    elif settings.threads is not None:
        env["SM_LLAMA_CPP_THREADS"] = str(settings.threads)
    return env


class ServingStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        env: cdk.Environment,
        foundation: FoundationStack,
        evaluation: Binding | None = None,
        deployed_check: CheckRoleTrust | None = None,
        synthesizer: cdk.IStackSynthesizer | None = None,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            env=env,
            synthesizer=synthesizer,
            description=f"Decision endpoints ({config.name}): image builds, SageMaker endpoints, scaling, alarms",
            termination_protection=config.termination_protection,
        )
        self.config = config
        self.foundation = foundation
        self.evaluation = evaluation
        self.retention = log_retention(config.log_retention_days)
        self.endpoints: dict[str, DeployedEndpoint] = {}
        # Derived, not imported from Foundation: see foundation_stack's docstring (alarms.topic_arn switches).
        self.alarm_topic = sns.Topic.from_topic_arn(
            self,
            "AlarmTopic",
            config.alarms.topic_arn or self.format_arn(service="sns", resource=alarm_topic_name(config.name)),
        )

        decision = config.decision_endpoints
        # The committed evaluation record, where it evaluates this artifact (stacks/evaluation_binding.py).
        bound = evaluation if evaluation is not None and not evaluation.problems else None
        record = config.evaluation.record if config.evaluation is not None else None
        # First of all, in seconds: is the model artifact there and the one configured? Builds and models wait for it.
        self.preflight = ModelPreflight(
            self,
            "ModelPreflight",
            bucket=foundation.artifacts.bucket,
            key=foundation.key,
            artifact_key=config.model.s3_key,
            expected_model_sha256=config.model.sha256 if decision else None,
            image_digests={
                f"environments.{config.name}.dlc.{flavour}_digest": config.dlc.digest(flavour)
                for flavour in config.image_flavours
            },
            environment=config.name,
            log_retention=self.retention,
            evaluated_manifest_sha256=bound.manifest_sha256 if bound is not None else None,
            evaluation_record=record,
        )
        if bound is not None and bound.record_sha256 is not None:  # the prod-diff job finds the record served by it
            cdk.CfnOutput(
                self,
                RECORD_OUTPUT,
                value=bound.record_sha256,
                description=f"sha256 of {record}, the evaluation record of the artifact this stack serves",
            )
        self.image_build: ImageBuild | None = None
        images: dict[str, BuiltImage] = {}
        if decision:
            self.image_build = ImageBuild(
                self,
                "ImageBuild",
                repository=foundation.images.repository,
                key=foundation.key,
                dlc=config.dlc,
                flavours=[IMAGE_FLAVOURS[section] for section in decision],
                log_retention=self.retention,
            )
            self.image_build.node.add_dependency(self.preflight.resource)
            images = self.image_build.images
        for section, settings in decision.items():
            image = images[IMAGE_FLAVOURS[section]]
            endpoint = self._endpoint(
                section,
                endpoint_name(config.name, section),
                settings,
                image.uri,
                decision_environment(config, settings, image, evaluation),
            )
            foundation.images.repository.grant_pull(endpoint.role)
            cdk.CfnOutput(self, f"{section.capitalize()}ImageUri", value=image.uri)
        if config.chat is not None:
            chat = config.chat
            endpoint = self._endpoint(
                "chat",
                f"chat-{config.name}-{chat.flavour}",
                chat,
                dlc_image(self, config.dlc, chat.flavour),
                chat_environment(chat),
            )
            grant_dlc_pull(endpoint.role, self, config.dlc)
            endpoint.role.add_to_policy(iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"]))
        self._bulk(images)
        self.deployed_check: DeployedCheckRole | None = None
        if deployed_check is not None and decision:  # the pipeline's check-deployed, from the GitHub stack's account
            self.deployed_check = DeployedCheckRole(
                self,
                "DeployedCheck",
                environment=config.name,
                trust=deployed_check,
                endpoint_names=[self.endpoints[section].endpoint.endpoint_name for section in decision],
                component_names=self._component_names(decision),
            )
            cdk.CfnOutput(
                self,
                CHECK_ROLE_OUTPUT,
                value=self.deployed_check.role.role_arn,
                description=f"Role the deploy workflow chains to for `decisionctl check-deployed --env {config.name}`",
            )
        self.invoker: InvokerPolicy | None = None
        if config.invoker_access is not None:
            self.invoker = InvokerPolicy(
                self,
                "InvokerPolicy",
                environment=config.name,
                endpoint_names=[d.endpoint.endpoint_name for d in self.endpoints.values()],
                component_names=self._component_names(self.endpoints),
                bearer_token=config.invoker_access.bearer_token,
            )

        dashboard = build_dashboard(
            self, environment=config.name, endpoints=[d.alarms for d in self.endpoints.values()]
        )
        for deployed in self.endpoints.values():
            if deployed.decision_shift is not None:
                dashboard.add_widgets(deployed.decision_shift.widget())
        cdk.CfnOutput(
            self,
            "DashboardUrl",
            value=f"https://{console_domain(config.region)}/cloudwatch/home?region={config.region}"
            f"#dashboards:name={dashboard.dashboard_name}",
        )

    def _endpoint(
        self,
        section: str,
        name: str,
        settings: CpuEndpoint | GpuEndpoint | ChatEndpoint,
        image: str,
        env: dict[str, str],
    ) -> ServingEndpoint:
        config, foundation = self.config, self.foundation
        label = section.capitalize()
        decides = isinstance(settings, CpuEndpoint | GpuEndpoint)  # the chat endpoint's output is generated text
        capture = config.data_capture if decides else None
        shadow = None
        if isinstance(settings, CpuEndpoint | GpuEndpoint) and settings.shadow is not None:
            shadow = self._shadow_model(settings, env)
        endpoint = ServingEndpoint(
            self,
            f"{label}Endpoint",
            endpoint_name=name,
            settings=settings,
            image=image,
            environment=env,
            model_data_url=foundation.artifacts.model_data_url,
            model_download_timeout_seconds=config.model.download_timeout_seconds,
            volume_key=foundation.key,
            log_retention=self.retention,
            removal_policy=removal_policy(config),
            data_capture=capture_config(capture, bucket=foundation.artifacts.bucket, key=foundation.key)
            if capture is not None
            else None,
            shadow=shadow,
            memory_mb=hosted_memory_mb(
                settings.hosting,
                config.model.footprint,
                ctx_size=settings.ctx_size,
                contexts=settings.max_concurrency,
                state_cache_mb=settings.adapter.state_cache_mb if settings.adapter is not None else None,
            )
            if isinstance(settings, CpuEndpoint | GpuEndpoint)
            else None,
            component_name=component_name(config.name, section)
            if isinstance(getattr(settings, "hosting", None), ComponentsHosting)
            else None,
        )
        endpoint.model.node.add_dependency(self.preflight.resource)
        # Read exactly the model object (and a shadow candidate's), decrypting only through S3 and ECR.
        objects = [foundation.artifacts.model_object_arn]
        if shadow is not None:
            objects.append(foundation.artifacts.bucket.arn_for_objects(shadow.candidate.s3_key))
        endpoint.role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=objects))
        if capture is not None:
            grant_capture(endpoint.role, capture, bucket=foundation.artifacts.bucket, key=foundation.key)
        endpoint.role.add_to_policy(
            iam.PolicyStatement(
                actions=["kms:Decrypt"],
                resources=[foundation.key.key_arn],
                conditions={
                    "StringEquals": {
                        # AWS::URLSuffix: amazonaws.com, or amazonaws.com.cn in the China partition
                        "kms:ViaService": [f"{svc}.{self.region}.{self.url_suffix}" for svc in ("s3", "ecr")]
                    }
                },
            )
        )
        scaling = endpoint_scaling(self, f"{label}Scaling", endpoint=endpoint, settings=settings.autoscaling)
        if endpoint.component_name is not None:  # callers name it on every invocation
            cdk.CfnOutput(self, f"{label}InferenceComponentName", value=endpoint.component_name)
        alarms = EndpointAlarms(
            self,
            f"{label}Alarms",
            endpoint=endpoint,
            thresholds=config.alarms,
            latency_p95_ms=settings.model_latency_p95_ms,
            topic=self.alarm_topic,
            counts_overload=section != "chat",
            counts_actions=section != "chat",  # only the adapter writes decision lines
        )
        rollback = alarms.rollback_alarms
        shift = None
        if decides and config.decision_shift is not None:
            shift = DecisionShiftAlarms(
                self,
                f"{label}DecisionShift",
                endpoint_name=name,
                log_group=endpoint.container_log_group,
                namespace=overload_namespace(name),
                shift=config.decision_shift,
                period=alarms.period,
                evaluation_periods=alarms.evaluation_periods,
                datapoints_to_alarm=alarms.datapoints_to_alarm,
            )
            for alarm in shift.rollback_alarms:
                alarm.add_alarm_action(actions.SnsAction(self.alarm_topic))
                alarm.add_ok_action(actions.SnsAction(self.alarm_topic))
            rollback = [*rollback, *shift.rollback_alarms]
        endpoint.guard_updates(rollback)
        self.endpoints[section] = DeployedEndpoint(endpoint, scaling, alarms, shift)
        cdk.CfnOutput(self, f"{label}EndpointName", value=name)
        return endpoint

    def _component_names(self, sections: Iterable[str]) -> list[str]:
        """The inference components of these sections' endpoints (components hosting), for the grants to invoke."""
        found = (self.endpoints[section].endpoint.component_name for section in sections)
        return [name for name in found if name is not None]

    def _shadow_model(self, settings: CpuEndpoint | GpuEndpoint, env: dict[str, str]) -> ShadowModel:
        """The candidate's artifact with the production settings; the adapter checks the candidate's GGUF and adopts
        the answer settings its manifest records (the production artifact's are not the candidate's)."""
        candidate = settings.shadow
        assert candidate is not None
        shadow_env = {
            **{name: value for name, value in env.items() if name not in ANSWER_VARIABLES},
            "DECISION_EXPECTED_MODEL_SHA256": candidate.sha256,
            "DECISION_INSTANCE_TYPES": candidate.instance_type or settings.instance_type,
        }
        bucket = self.foundation.artifacts.bucket
        return ShadowModel(candidate, f"s3://{bucket.bucket_name}/{candidate.s3_key}", shadow_env)

    def _bulk(self, images: dict[str, BuiltImage]) -> None:
        """Batch Transform on a decision endpoint's Model, and an asynchronous endpoint, where configured."""
        config, foundation = self.config, self.foundation
        self.batch: BatchTransformJobs | None = None
        self.async_endpoint: AsyncDecisionEndpoint | None = None
        if config.batch is not None:
            runs_on = self.endpoints[config.batch.model].endpoint
            self.batch = BatchTransformJobs(
                self,
                "Batch",
                environment=config.name,
                settings=config.batch,
                model_name=runs_on.model.attr_model_name,
                model_role=runs_on.role,
                bucket=foundation.artifacts.bucket,
                key=foundation.key,
                alarm_topic=self.alarm_topic,
                alarm_period=cdk.Duration.seconds(config.alarms.period_seconds),
                log_retention=self.retention,
            )
        if config.async_inference is not None:
            section = config.async_inference.model
            base = config.decision_endpoints[section]
            image = images[IMAGE_FLAVOURS[section]]
            self.async_endpoint = AsyncDecisionEndpoint(
                self,
                "AsyncEndpoint",
                endpoint_name=f"decision-{config.name}-async",
                settings=config.async_inference,
                base=base,
                image=image.uri,
                environment=decision_environment(config, base, image, self.evaluation),
                model_data_url=foundation.artifacts.model_data_url,
                model_object_arn=foundation.artifacts.model_object_arn,
                model_download_timeout_seconds=config.model.download_timeout_seconds,
                bucket=foundation.artifacts.bucket,
                repository=foundation.images.repository,
                key=foundation.key,
                log_retention=self.retention,
                removal_policy=removal_policy(config),
            )
            self.async_endpoint.model.node.add_dependency(self.preflight.resource)
