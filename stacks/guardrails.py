"""How an endpoint update reaches traffic: the endpoint's DeploymentConfig, from `<endpoint>.deployment` in cdk.json.

The block, its strategies and the fleet each needs are decision_spec.deployment_config's (the cdk.json schema).
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_sagemaker as sagemaker
from decision_spec.deployment_config import MAX_ROLLBACK_ALARMS, Deployment

_TRAFFIC_TYPES = {"all_at_once": "ALL_AT_ONCE", "canary": "CANARY", "linear": "LINEAR"}


def deployment_config(
    deployment: Deployment, rollback_alarms: Sequence[str]
) -> sagemaker.CfnEndpoint.DeploymentConfigProperty:
    """The endpoint's DeploymentConfig; rollback on `rollback_alarms` (alarm names) where configured."""
    if len(rollback_alarms) > MAX_ROLLBACK_ALARMS:
        raise ValueError(
            f"{len(rollback_alarms)} rollback alarms, SageMaker watches at most {MAX_ROLLBACK_ALARMS} "
            "(AutoRollbackConfiguration.Alarms): shorten the pool or combine alarms"
        )
    cfn = sagemaker.CfnEndpoint
    rollback = (
        cfn.AutoRollbackConfigProperty(alarms=[cfn.AlarmProperty(alarm_name=name) for name in rollback_alarms])
        if deployment.rollback_on_alarms
        else None
    )
    batch = (
        cfn.CapacitySizeProperty(type="INSTANCE_COUNT", value=deployment.batch_instances)
        if deployment.batch_instances is not None
        else None
    )
    if deployment.strategy == "rolling":
        assert batch is not None
        return cfn.DeploymentConfigProperty(
            rolling_update_policy=cfn.RollingUpdatePolicyProperty(
                maximum_batch_size=batch,
                wait_interval_in_seconds=deployment.wait_seconds,
                maximum_execution_timeout_in_seconds=deployment.max_execution_seconds,
                # back batch by batch too: the default brings the whole old fleet back at once
                rollback_maximum_batch_size=batch,
            ),
            auto_rollback_configuration=rollback,
        )
    return cfn.DeploymentConfigProperty(
        blue_green_update_policy=cfn.BlueGreenUpdatePolicyProperty(
            traffic_routing_configuration=cfn.TrafficRoutingConfigProperty(
                type=_TRAFFIC_TYPES[deployment.strategy],
                wait_interval_in_seconds=deployment.wait_seconds,
                canary_size=batch if deployment.strategy == "canary" else None,
                linear_step_size=batch if deployment.strategy == "linear" else None,
            ),
            termination_wait_in_seconds=deployment.termination_wait_seconds,
            maximum_execution_timeout_in_seconds=deployment.max_execution_seconds,
        ),
        auto_rollback_configuration=rollback,
    )
