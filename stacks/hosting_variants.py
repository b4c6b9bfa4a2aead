"""The CloudFormation shapes of the components and serverless hosting modes (decision_spec/hosting_config.py says
what each is).

A components endpoint's variant names an instance type and managed instance scaling, and no model: the model is an
`AWS::SageMaker::InferenceComponent` on the variant, with the compute it reserves per copy, its startup timeouts and
its copy count; the execution role moves from the model to the endpoint config. A serverless variant names its
model and a ServerlessConfig (memory, concurrency) instead of instances.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct
from decision_spec.deployment_config import Deployment
from decision_spec.endpoint_config import CpuEndpoint, GpuEndpoint
from decision_spec.hosting_config import ComponentsHosting, ServerlessHosting

CfnVariant = sagemaker.CfnEndpointConfig.ProductionVariantProperty
ROUTING = "LEAST_OUTSTANDING_REQUESTS"  # a copy busy with a long prefill is not handed the next request


def component_variant(settings: CpuEndpoint | GpuEndpoint, *, variant_name: str, provision_timeout: int) -> CfnVariant:
    """The variant a components endpoint's copies run on: one instance type, managed instance scaling from
    `autoscaling.min_instances` (0: instances follow the copies to zero) to `max_instances`."""
    scaling = settings.autoscaling
    largest = scaling.max_instances if scaling.enabled else max(1, scaling.min_instances)
    return CfnVariant(
        variant_name=variant_name,
        instance_type=settings.instance_type,
        initial_instance_count=max(1, scaling.min_instances),  # CloudFormation needs at least one to start with
        managed_instance_scaling=sagemaker.CfnEndpointConfig.ManagedInstanceScalingProperty(
            status="ENABLED", min_instance_count=scaling.min_instances, max_instance_count=largest
        ),
        routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(routing_strategy=ROUTING),
        inference_ami_version=getattr(settings, "inference_ami_version", None),
        variant_instance_provision_timeout_in_seconds=provision_timeout,
    )


def serverless_variant(hosting: ServerlessHosting, *, variant_name: str, model_name: str, memory_mb: int) -> CfnVariant:
    """A serverless variant: memory (sized at synth, stacks/hosting.py) and concurrency, no instances."""
    return CfnVariant(
        variant_name=variant_name,
        model_name=model_name,
        serverless_config=sagemaker.CfnEndpointConfig.ServerlessConfigProperty(
            max_concurrency=hosting.max_concurrency, memory_size_in_mb=memory_mb
        ),
    )


def inference_component(
    scope: Construct,
    *,
    name: str,
    endpoint: sagemaker.CfnEndpoint,
    variant_name: str,
    model: sagemaker.CfnModel,
    settings: CpuEndpoint | GpuEndpoint,
    memory_mb: int,
    download_timeout: int,
) -> sagemaker.CfnInferenceComponent:
    """The model as a component of the endpoint: the memory and cores (or one GPU) a copy reserves, its startup
    timeouts, and one copy to start with (CloudFormation waits for it: a deployment proves the container starts)."""
    hosting = settings.hosting
    assert isinstance(hosting, ComponentsHosting)
    cfn = sagemaker.CfnInferenceComponent
    gpu = isinstance(settings, GpuEndpoint)
    component = cfn(
        scope,
        "InferenceComponent",
        inference_component_name=name,
        endpoint_name=endpoint.attr_endpoint_name,
        variant_name=variant_name,
        specification=cfn.InferenceComponentSpecificationProperty(
            model_name=model.attr_model_name,
            compute_resource_requirements=cfn.InferenceComponentComputeResourceRequirementsProperty(
                min_memory_required_in_mb=memory_mb,
                number_of_cpu_cores_required=hosting.cpu_cores_per_copy,
                number_of_accelerator_devices_required=1 if gpu else None,
            ),
            startup_parameters=cfn.InferenceComponentStartupParametersProperty(
                container_startup_health_check_timeout_in_seconds=settings.startup_health_check_timeout_seconds,
                model_data_download_timeout_in_seconds=download_timeout,
            ),
        ),
        runtime_config=cfn.InferenceComponentRuntimeConfigProperty(
            copy_count=max(1, settings.autoscaling.min_instances)
        ),
    )
    return component  # after the endpoint: it names the endpoint's name attribute


def component_deployment(
    deployment: Deployment, rollback_alarms: Sequence[str]
) -> sagemaker.CfnInferenceComponent.InferenceComponentDeploymentConfigProperty | None:
    """A rolling update of the copies, batch_instances copies at a time, rolled back on the alarms where configured;
    None for all_at_once (SageMaker replaces the copies). Canary and linear are refused at synth (hosting.py)."""
    if deployment.strategy != "rolling":
        return None
    cfn = sagemaker.CfnInferenceComponent
    assert deployment.batch_instances is not None
    batch = cfn.InferenceComponentCapacitySizeProperty(type="COPY_COUNT", value=deployment.batch_instances)
    return cfn.InferenceComponentDeploymentConfigProperty(
        rolling_update_policy=cfn.InferenceComponentRollingUpdatePolicyProperty(
            maximum_batch_size=batch,
            wait_interval_in_seconds=deployment.wait_seconds,
            maximum_execution_timeout_in_seconds=deployment.max_execution_seconds,
            rollback_maximum_batch_size=batch,
        ),
        auto_rollback_configuration=cfn.AutoRollbackConfigurationProperty(
            alarms=[cfn.AlarmProperty(alarm_name=name) for name in rollback_alarms]
        )
        if deployment.rollback_on_alarms
        else None,
    )
