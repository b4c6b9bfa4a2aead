"""Invoker access (cdk.json `invoker_access`, off when absent): one managed policy per environment that may invoke
exactly its real-time endpoints and their inference components (an invocation of a components endpoint names the
component, and IAM checks both ARNs), and where `bearer_token` is on also mint SageMaker's bearer tokens for its
OpenAI-compatible route; the policy's ARN is exported for applications to attach to their own roles.

The section's model is decision_spec.environment_sections.InvokerAccess (the cdk.json schema).
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from stacks.nag import acknowledge

INVOKE = "sagemaker:InvokeEndpoint"
CALL_WITH_BEARER_TOKEN = "sagemaker:CallWithBearerToken"  # noqa: S105 - an IAM action, not a secret


def sagemaker_arns(scope: Construct, endpoint_names: Sequence[str], component_names: Sequence[str]) -> list[str]:
    """The endpoints' ARNs, then their inference components' (`inference-component/<name>`)."""
    stack = cdk.Stack.of(scope)
    named = [("endpoint", name) for name in endpoint_names] + [("inference-component", n) for n in component_names]
    return [stack.format_arn(service="sagemaker", resource=kind, resource_name=name) for kind, name in named]


def policy_name(environment: str) -> str:
    return f"decision-{environment}-invoke"


def export_name(environment: str) -> str:
    return f"DecisionEndpoints-{environment}-InvokerPolicyArn"


class InvokerPolicy(Construct):
    """The managed policy; `policy` is it, `endpoint_arns` what it may invoke."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        environment: str,
        endpoint_names: Sequence[str],
        bearer_token: bool,
        component_names: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        self.endpoint_arns = sagemaker_arns(self, endpoint_names, component_names)
        statements = [iam.PolicyStatement(sid="InvokeTheEndpoints", actions=[INVOKE], resources=self.endpoint_arns)]
        if bearer_token:
            statements.append(
                iam.PolicyStatement(sid="MintBearerTokens", actions=[CALL_WITH_BEARER_TOKEN], resources=["*"])
            )
        self.policy = iam.ManagedPolicy(
            self,
            "Policy",
            managed_policy_name=policy_name(environment),
            description=f"Invoke the decision endpoints of {environment}, and nothing else",
            statements=statements,
        )
        if bearer_token:
            acknowledge(
                self.policy,
                "AwsSolutions-IAM5[Resource::*]",
                "sagemaker:CallWithBearerToken has no resource-level scoping, so * is the only resource it takes "
                "(AWS documents it so for the OpenAI-compatible route). A token carries the permissions of the "
                "identity that signed it, not only this policy's, for at most 12 hours: attach the policy to roles "
                "whose every permission a token may carry",
            )
        cdk.CfnOutput(
            cdk.Stack.of(self),
            "InvokerPolicyArn",
            value=self.policy.managed_policy_arn,
            export_name=export_name(environment),
            description="Attach to an application's role to invoke this environment's decision endpoints",
        )
