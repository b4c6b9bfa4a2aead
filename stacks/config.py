"""What synth makes of an environment's config for the CDK: the removal policy of its stateful resources.

The cdk.json schema (`EnvironmentConfig` and its sections) and the function that reads and validates one environment
(`load_environment`, raising `ConfigError`) are decision_spec.environment_config's, shared with decisionctl; the
names below are imported from there for the callers that still name this module.
"""

from __future__ import annotations

import aws_cdk as cdk
from decision_spec.environment_config import EnvironmentConfig

# decision_spec.environment_config's names, for the callers that still import them from here
__all__ = [
    "removal_policy",
    "removal_policy_of",
]


def removal_policy_of(destroy_on_delete: bool) -> cdk.RemovalPolicy:
    """What `cdk destroy` does with a stateful resource: delete it, or leave it in the account."""
    return cdk.RemovalPolicy.DESTROY if destroy_on_delete else cdk.RemovalPolicy.RETAIN


def removal_policy(config: EnvironmentConfig) -> cdk.RemovalPolicy:
    """The environment's removal policy (cdk.json `removal_policy`) as the CDK's value."""
    return removal_policy_of(config.destroy_on_delete)
