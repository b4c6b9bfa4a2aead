"""How `decisionctl check-deployed` reaches an environment's decision endpoints after the pipeline deployed it.

SageMaker addresses an endpoint by name within the caller's own account and honours no endpoint policy for a direct
InvokeEndpoint (an endpoint policy admits other accounts only through an inference router), so a GitHub role, which
lives in the GitHub stack's account (prod's), cannot describe or invoke the endpoints of another account itself.
Instead each environment deploy.yml deploys and then checks (dev, then prod: CHECKED_ENVIRONMENTS) gets, from its
Serving stack where `context.github` is set, a role of its own account, `decision-<env>-deployed-check`
(`DeployedCheckRole`): trusted by the GitHub stack's account only for that environment's GitHub deploy role
(`aws:PrincipalArn`), for an hour, allowed to describe and invoke exactly that environment's decision endpoints by
name and nothing else. The GitHub role may assume exactly that role besides its bootstrap roles
(`assume_check_role_statement`), and the workflow chains to it (aws-actions/configure-aws-credentials,
`role-chaining: true`, `role-skip-session-tagging: true`: neither side allows sts:TagSession) with the ARN the
Serving stack outputs as `DeployedCheckRoleArn`. prod's role is in the GitHub stack's own account, and goes through
the same chain so that its deploy role gains no SageMaker permission. Nothing here may change an endpoint, read its
logs or its data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct
from decision_spec.github_config import APPROVAL_ENVIRONMENT, BRANCH_ENVIRONMENT

from stacks.invoker_access import sagemaker_arns

CHECK_DEPLOYED_ACTIONS = ("sagemaker:DescribeEndpoint", "sagemaker:InvokeEndpoint")
SID = "CheckDeployedEndpoints"
ASSUME_SID = "AssumeDeployedCheckRole"
CHECK_ROLE_OUTPUT = "DeployedCheckRoleArn"  # the workflow reads it from cdk deploy's outputs file
# deploy.yml checks each after its deploy: dev before prod's diff, prod once it serves (its record on AWS's build)
CHECKED_ENVIRONMENTS = (BRANCH_ENVIRONMENT, APPROVAL_ENVIRONMENT)
SESSION_HOURS = 1  # the most a chained role session may last; the check takes minutes


def check_role_name(environment: str) -> str:
    """Fixed, so that the GitHub stack can name the role's ARN without a reference across accounts."""
    return f"decision-{environment}-deployed-check"


def assume_check_role_statement(partition: str, account: str, environment: str) -> iam.PolicyStatement:
    """For the GitHub role: assume exactly `environment`'s deployed-check role in `account`, the environment's own."""
    return iam.PolicyStatement(
        sid=ASSUME_SID,
        actions=["sts:AssumeRole"],
        resources=[f"arn:{partition}:iam::{account}:role/{check_role_name(environment)}"],
    )


@dataclass(frozen=True)
class CheckRoleTrust:
    """Who may assume an environment's deployed-check role: `github_role` of the GitHub stack's account `account`
    (None: the environment's own account, where the GitHub stack then lives too; github_config.home_target)."""

    account: str | None
    github_role: str


class DeployedCheckRole(Construct):
    """`decision-<env>-deployed-check`: the environment's GitHub role describes and invokes its decision endpoints
    through it (the module docstring says why a role of the environment's own account)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        environment: str,
        trust: CheckRoleTrust,
        endpoint_names: Sequence[str],
        component_names: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        account = trust.account or stack.account
        # The account as principal, narrowed to the one role by aws:PrincipalArn: an ArnPrincipal of the role itself
        # would make IAM reject this trust policy while the GitHub stack (and so the role) does not exist yet.
        self.role = iam.Role(
            self,
            "Role",
            role_name=check_role_name(environment),
            description=f"decisionctl check-deployed from the GitHub deploy workflow: {environment}'s decision "
            "endpoints, describe and invoke only",
            max_session_duration=cdk.Duration.hours(SESSION_HOURS),
            assumed_by=iam.AccountPrincipal(account).with_conditions(
                {"ArnEquals": {"aws:PrincipalArn": f"arn:{stack.partition}:iam::{account}:role/{trust.github_role}"}}
            ),
        )
        # the endpoints the stack made and their components, by name, as the invoker policy names them
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid=SID,
                actions=list(CHECK_DEPLOYED_ACTIONS),
                resources=sagemaker_arns(self, endpoint_names, component_names),
            )
        )
