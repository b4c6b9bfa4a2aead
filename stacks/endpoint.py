"""One SageMaker real-time endpoint: execution role, log group, model, endpoint config, endpoint.

Models and endpoint configs get CloudFormation-generated names: every change to the image digest,
environment or instance settings creates a new model and config beside the old ones and then
updates the endpoint, so replacements never collide. The endpoint keeps a stable name that callers
and the log group (`/aws/sagemaker/Endpoints/<name>`) use.

Updates roll out as `settings.deployment` says (stacks/guardrails.py), watched by the endpoint's own
rollback alarms. A retained log group is kept on update and delete but not on a failed first create
(RETAIN_ON_UPDATE_OR_DELETE): a rolled-back create must not leave `/aws/sagemaker/Endpoints/<name>` behind,
or the retry fails with "already exists".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct
from decision_spec.endpoint_config import ChatEndpoint, CpuEndpoint, GpuEndpoint
from decision_spec.hosting_config import DEFAULT_HOSTING, ComponentsHosting, ServerlessHosting
from decision_spec.instance_types import has_local_nvme
from decision_spec.loop_config import ShadowCandidate
from decision_spec.names import COMPONENT_LOG_GROUP_PREFIX, ENDPOINT_LOG_GROUP_PREFIX

from stacks.guardrails import deployment_config
from stacks.hosting_variants import component_deployment, component_variant, inference_component, serverless_variant
from stacks.nag import acknowledge
from stacks.shadow import ShadowModel, shadow_variant

VARIANT_NAME = "AllTraffic"
# The namespaces SageMaker's agent writes an endpoint's (and its components') instance metrics to.
METRIC_NAMESPACES = ("/aws/sagemaker/Endpoints", "/aws/sagemaker/InferenceComponents")
EndpointSettings = CpuEndpoint | GpuEndpoint | ChatEndpoint


def log_group_removal_policy(removal_policy: cdk.RemovalPolicy) -> cdk.RemovalPolicy:
    """Retained log groups are retained on update and delete, not when their first create rolls back."""
    if removal_policy == cdk.RemovalPolicy.RETAIN:
        return cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE
    return removal_policy


def endpoint_log_group(
    scope: Construct,
    endpoint_name: str,
    retention: logs.RetentionDays,
    removal_policy: cdk.RemovalPolicy,
    key: kms.IKey,
    *,
    prefix: str = ENDPOINT_LOG_GROUP_PREFIX,
    construct_id: str = "Logs",
) -> logs.LogGroup:
    """`/aws/sagemaker/Endpoints/<name>`, where SageMaker writes the endpoint's container logs (every decision
    line), or a component's `/aws/sagemaker/InferenceComponents/<name>`, encrypted with the environment key (its policy
    lets CloudWatch Logs use it for these groups only)."""
    return logs.LogGroup(
        scope,
        construct_id,
        log_group_name=f"{prefix}{endpoint_name}",
        retention=retention,
        removal_policy=log_group_removal_policy(removal_policy),
        encryption_key=key,
    )


def logs_and_metrics_statements(scope: Construct, log_group: logs.LogGroup) -> list[iam.PolicyStatement]:
    """What an endpoint's container needs to write its log group and its metrics."""
    group_arn = cdk.Stack.of(scope).format_arn(
        service="logs",
        resource="log-group",
        resource_name=log_group.log_group_name,
        arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
    )
    return [
        iam.PolicyStatement(actions=["logs:CreateLogGroup"], resources=[group_arn]),
        iam.PolicyStatement(
            actions=["logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"],
            resources=[log_group.log_group_arn],
        ),
        # PutMetricData has no resource-level permissions; the namespace condition scopes it instead.
        iam.PolicyStatement(
            actions=["cloudwatch:PutMetricData"],
            resources=["*"],
            conditions={"StringEquals": {"cloudwatch:namespace": list(METRIC_NAMESPACES)}},
        ),
    ]


def acknowledge_unscoped_actions(role: iam.Role) -> None:
    acknowledge(
        role,
        "AwsSolutions-IAM5[Resource::*]",
        "cloudwatch:PutMetricData and ecr:GetAuthorizationToken have no resource-level permissions (AWS requires "
        "Resource *); PutMetricData is limited by a cloudwatch:namespace condition",
    )


def decision_model(
    scope: Construct,
    role: iam.Role,
    *,
    image: str,
    model_data_url: str,
    environment: Mapping[str, str],
    construct_id: str = "Model",
    network_isolation: bool = True,
) -> sagemaker.CfnModel:
    """The SageMaker model of the adapter image over the artifact, network-isolated (but where serverless hosting
    cannot be), created after the role's policy: SageMaker uses the policy (added to by the stack's grants) as soon as
    the model exists."""
    model = sagemaker.CfnModel(
        scope,
        construct_id,
        execution_role_arn=role.role_arn,
        enable_network_isolation=network_isolation,
        primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
            image=image,
            model_data_url=model_data_url,
            environment=dict(sorted(environment.items())),
            mode="SingleModel",
        ),
    )
    policy = role.node.try_find_child("DefaultPolicy")
    if policy is not None:
        model.node.add_dependency(policy)
    return model


class SageMakerEndpoint(Construct):
    """The opening every endpoint construct shares: its stable name, its one variant, its log group, and
    (`execution_role`) the role its container runs as. Subclasses set `endpoint`."""

    endpoint: sagemaker.CfnEndpoint

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        log_retention: logs.RetentionDays,
        removal_policy: cdk.RemovalPolicy,
        log_key: kms.IKey,
    ) -> None:
        super().__init__(scope, construct_id)
        self.endpoint_name = endpoint_name
        self.variant_name = VARIANT_NAME
        self.log_group = endpoint_log_group(self, endpoint_name, log_retention, removal_policy, log_key)

    def execution_role(self, description: str) -> iam.Role:
        """SageMaker's role for the container, allowed its log group and metrics; callers add their grants."""
        role = iam.Role(
            self, "ExecutionRole", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"), description=description
        )
        for statement in logs_and_metrics_statements(self, self.log_group):
            role.add_to_policy(statement)
        acknowledge_unscoped_actions(role)
        return role


class ServingEndpoint(SageMakerEndpoint):
    """The stack grants the role its model object, repository and key; this construct wires the rest."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        settings: EndpointSettings,
        image: str,
        environment: Mapping[str, str],
        model_data_url: str,
        model_download_timeout_seconds: int,
        volume_key: kms.IKey,
        log_retention: logs.RetentionDays,
        removal_policy: cdk.RemovalPolicy,
        data_capture: sagemaker.CfnEndpointConfig.DataCaptureConfigProperty | None = None,
        shadow: ShadowModel | None = None,
        memory_mb: int | None = None,
        component_name: str | None = None,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            endpoint_name=endpoint_name,
            log_retention=log_retention,
            removal_policy=removal_policy,
            log_key=volume_key,
        )
        self.settings = settings
        self.hosting = getattr(settings, "hosting", DEFAULT_HOSTING)  # the chat section is hosted on instances
        components = isinstance(self.hosting, ComponentsHosting)
        assert components == (component_name is not None), "a components section's endpoint names its component"
        self.component_name = component_name
        self.container_log_group = self.log_group  # where the container's lines (every decision line) land
        if self.component_name is not None:
            self.container_log_group = endpoint_log_group(
                self,
                self.component_name,
                log_retention,
                removal_policy,
                volume_key,
                prefix=COMPONENT_LOG_GROUP_PREFIX,
                construct_id="ComponentLogs",
            )
        self.role = self.execution_role(f"SageMaker execution role of the {endpoint_name} endpoint")
        if self.component_name is not None:
            for statement in logs_and_metrics_statements(self, self.container_log_group):
                self.role.add_to_policy(statement)
        serverless = isinstance(self.hosting, ServerlessHosting)
        self.model = decision_model(
            self,
            self.role,
            image=image,
            model_data_url=model_data_url,
            environment=environment,
            network_isolation=not serverless,
        )
        self.shadow_model: sagemaker.CfnModel | None = None
        shadow_variants = None
        if shadow is not None:
            self.shadow_model = decision_model(
                self,
                self.role,
                image=image,
                model_data_url=shadow.model_data_url,
                environment=shadow.environment,
                construct_id="ShadowModel",
            )
            shadow_variants = [self._shadow_variant(shadow.candidate, model_download_timeout_seconds)]
        self.config = sagemaker.CfnEndpointConfig(
            self,
            "Config",
            production_variants=[self._variant(model_download_timeout_seconds, memory_mb)],
            shadow_production_variants=shadow_variants,
            data_capture_config=data_capture,
            # A components endpoint's config, not its model, names the role its copies run as.
            execution_role_arn=self.role.role_arn if components else None,
            # Instance types with local NVMe reject a volume key: their instance storage is always encrypted; a
            # serverless variant has no volume of ours.
            kms_key_id=volume_key.key_arn
            if settings.encrypt_volume and self._shadow_encryptable(shadow) and not serverless
            else None,
        )
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_name=endpoint_name,
            endpoint_config_name=self.config.attr_endpoint_config_name,
            # Keep the instance count autoscaling chose when a deployment swaps the config; without
            # autoscaling the configured count applies.
            retain_all_variant_properties=settings.autoscaling.enabled,
        )
        self.endpoint.node.add_dependency(self.log_group)
        self.component: sagemaker.CfnInferenceComponent | None = None
        if self.component_name is not None:
            assert memory_mb is not None and isinstance(settings, CpuEndpoint | GpuEndpoint)
            self.component = inference_component(
                self,
                name=self.component_name,
                endpoint=self.endpoint,
                variant_name=VARIANT_NAME,
                model=self.model,
                settings=settings,
                memory_mb=memory_mb,
                download_timeout=model_download_timeout_seconds,
            )
            self.component.node.add_dependency(self.container_log_group)

    @property
    def metric_dimensions(self) -> dict[str, str]:
        """What SageMaker's invocation metrics of this endpoint's model are published under: the component's name,
        or the endpoint and variant."""
        if self.component_name is not None:
            return {"InferenceComponentName": self.component_name}
        return {"EndpointName": self.endpoint_name, "VariantName": self.variant_name}

    def guard_updates(self, rollback_alarms: Sequence[cloudwatch.Alarm]) -> None:
        """Deployment guardrails from the settings; the alarms exist before SageMaker is told to watch them. A
        component's copies roll under the component's own deployment config (the endpoint hosts no model)."""
        names = [alarm.alarm_name for alarm in rollback_alarms]
        guarded: cdk.CfnResource = self.endpoint
        if self.component is not None:
            self.component.deployment_config = component_deployment(self.settings.deployment, names)
            guarded = self.component
        else:
            self.endpoint.deployment_config = deployment_config(self.settings.deployment, names)
            self.endpoint.retain_deployment_config = False  # every update uses the configuration in cdk.json
        for alarm in rollback_alarms:
            guarded.node.add_dependency(alarm)
        if self.settings.deployment.rollback_on_alarms:
            # SageMaker reads the rollback alarms' state with the execution role (deployment guardrails guide).
            self.role.add_to_policy(
                iam.PolicyStatement(
                    actions=["cloudwatch:DescribeAlarms"], resources=[alarm.alarm_arn for alarm in rollback_alarms]
                )
            )

    def _shadow_encryptable(self, shadow: ShadowModel | None) -> bool:
        """The config's volume key covers the shadow's instances too: none with local NVMe."""
        if shadow is None:
            return True
        return not has_local_nvme(shadow.candidate.instance_type or self.settings.instance_type)

    def _shadow_variant(
        self, candidate: ShadowCandidate, download_timeout: int
    ) -> sagemaker.CfnEndpointConfig.ProductionVariantProperty:
        s, model = self.settings, self.shadow_model
        assert model is not None
        return shadow_variant(
            candidate,
            model_name=model.attr_model_name,
            production_instance_type=s.instance_type,
            startup_timeout=s.startup_health_check_timeout_seconds,
            download_timeout=download_timeout,
            provision_timeout=s.instance_provision_timeout_seconds,
            inference_ami_version=getattr(s, "inference_ami_version", None),
        )

    def _variant(
        self, download_timeout: int, memory_mb: int | None
    ) -> sagemaker.CfnEndpointConfig.ProductionVariantProperty:
        s = self.settings
        if isinstance(s, CpuEndpoint | GpuEndpoint) and isinstance(s.hosting, ComponentsHosting):
            return component_variant(
                s, variant_name=VARIANT_NAME, provision_timeout=s.instance_provision_timeout_seconds
            )
        if isinstance(s, CpuEndpoint) and isinstance(s.hosting, ServerlessHosting):
            assert memory_mb is not None
            return serverless_variant(
                s.hosting, variant_name=VARIANT_NAME, model_name=self.model.attr_model_name, memory_mb=memory_mb
            )
        pooled = len(s.instance_types) > 1
        return sagemaker.CfnEndpointConfig.ProductionVariantProperty(
            variant_name=VARIANT_NAME,
            model_name=self.model.attr_model_name,
            initial_instance_count=s.autoscaling.min_instances,
            initial_variant_weight=1.0,
            instance_type=None if pooled else s.instance_type,
            instance_pools=[
                sagemaker.CfnEndpointConfig.InstancePoolProperty(instance_type=t, priority=i)
                for i, t in enumerate(s.instance_types, start=1)
            ]
            if pooled
            else None,
            inference_ami_version=getattr(s, "inference_ami_version", None),
            container_startup_health_check_timeout_in_seconds=s.startup_health_check_timeout_seconds,
            model_data_download_timeout_in_seconds=download_timeout,
            variant_instance_provision_timeout_in_seconds=s.instance_provision_timeout_seconds,
        )
