"""What the branch environment's GitHub deploy role may call for `decisionctl check-deployed` after its deployment:
describe and invoke that environment's decision endpoints, by exact name, and nothing else.

SageMaker addresses an endpoint by name within the caller's own account and honours no endpoint policy for a direct
InvokeEndpoint (an endpoint policy admits other accounts only through an inference router), so the statement
reaches the endpoints only where they are in the role's account; an environment pinned to another account than
the GitHub stack's needs credentials there for the check.
"""

from __future__ import annotations

from aws_cdk import aws_iam as iam

from stacks.config import IMAGE_FLAVOURS

CHECK_DEPLOYED_ACTIONS = ("sagemaker:DescribeEndpoint", "sagemaker:InvokeEndpoint")
SID = "CheckDeployedEndpoints"


def decision_endpoint_names(environment: str) -> list[str]:
    """Every decision endpoint an environment may have, as serving_stack.py names them (decision-<env>-<section>);
    not the chat endpoint, which answers no decision, nor the asynchronous one, which InvokeEndpoint cannot call."""
    return [f"decision-{environment}-{section}" for section in IMAGE_FLAVOURS]


def check_deployed_statement(partition: str, region: str, account: str, environment: str) -> iam.PolicyStatement:
    """Describe and invoke exactly `environment`'s decision endpoints in `account` and `region`."""
    return iam.PolicyStatement(
        sid=SID,
        actions=list(CHECK_DEPLOYED_ACTIONS),
        resources=[
            f"arn:{partition}:sagemaker:{region}:{account}:endpoint/{name}"
            for name in decision_endpoint_names(environment)
        ],
    )
