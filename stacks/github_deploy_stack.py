"""The one-time account set-up for .github/workflows/deploy.yml: GitHub's OIDC provider, a deploy role per environment.

The workflow holds no AWS keys: GitHub issues each job an OIDC token, STS exchanges it for the short-lived
credentials of that job's environment's role, and each role can do nothing but assume the CDK bootstrap roles
(deploy, file publishing, lookup) of its own environment's account and region (dev's and prod's: their check roles
too, below) and read that bootstrap's version. What a deployment may change is what the bootstrap's CloudFormation
execution role allows, as for any `cdk deploy`.

Which token may take which role (the `sub` claim GitHub puts in a job's token):

- `dev` is trusted only by `repo:OWNER/REPO:ref:refs/heads/main`, the subject of a job that runs on `main`
  and references no GitHub environment. Not `environment:dev`: a job that references an environment gets
  `environment:NAME` on whatever branch it runs, so any collaborator who can push a branch could name
  `environment: dev` in a workflow there and take the role; only the GitHub environment's deployment-branch
  rule, a repository setting this template can neither see nor enforce, would stop it. The ref subject
  confines the role, in the trust policy itself, to what was merged into `main` (and so to its branch
  protection).
- Every other environment (`prod`) is trusted only by `repo:OWNER/REPO:environment:NAME`: that subject is
  issued only once the GitHub environment's protection rules pass (its required reviewers approved), and a
  job on `main` without the environment gets the ref subject, which this role refuses. So no run on `main`
  reaches `prod` without the approval.
- Every role also requires the token's `ref` claim to be `refs/heads/main` and its `job_workflow_ref` claim to
  be deploy.yml on `main` (AWS STS checks GitHub's claims as condition keys). The environment subject carries
  no ref, so without these a job of a pushed branch naming `environment: prod` would need only an approval,
  and the GitHub environment's deployment-branch rule, a setting this template cannot see, was the only
  thing tying prod to main. Now the trust policy says it.
- Beside each approval-gated environment's deploy role, a diff role (`...-github-diff-prod`), trusted by the
  GitHub environment `prod-diff` (no reviewers) on main in deploy.yml, may only read that environment's own
  stacks (`DescribeStacks`, `GetTemplate`, `ListStackResources` on `DecisionEndpoints-prod-*`): the job before
  the approval runs `cdk diff --no-change-set` with it, so reviewers approve a diff they have read. Not the
  bootstrap lookup role: its ReadOnlyAccess reads the whole account, the endpoints' decision lines included
  (CloudWatch Logs decrypts them for any reader), from a job nobody approved. The CLI, refused the lookup role,
  proceeds with the diff role's own credentials, which are in the stacks' account (this stack lives there). An
  approval-gated environment in another account than this stack's still diffs through its lookup role.

The dev and prod deploy roles may also assume `decision-<env>-deployed-check` of their environment's account (its
Serving stack makes it) for `decisionctl check-deployed` after the deploy: SageMaker invokes only the caller's account's
endpoints (stacks/deployed_check_access.py).

Each role assumes only its environment's bootstrap roles, `cdk-<qualifier>-*` of its own qualifier;
stacks/isolation.py refuses environments that would share them, and, once this stack is configured, any
approval-gated environment not pinned to an account of its own (check_pipeline_accounts).

The stack is pinned to the account and region of its home (github_config's `home_target`) and deploys through that
environment's bootstrap: prod (APPROVAL_ENVIRONMENT), or where no environment is prod the approval-gated one
`github.home` names; synth refuses to guess. Whoever administers the home account could rewrite every role's trust:
a branch-deployed environment's bootstrap, or another approval-gated environment's pipeline (demo's approval would
then be prod's).
Each role carries its own environment's tags, whatever `-c env` synthesizes it.
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct
from decision_spec.github_config import (
    BRANCH_ENVIRONMENT,
    GITHUB_OIDC_HOST,
    STS_AUDIENCE,
    DeployTarget,
    GitHubDeploy,
    diff_environment,
)
from decision_spec.names import stack_name

from stacks.deployed_check_access import CHECKED_ENVIRONMENTS, assume_check_role_statement
from stacks.isolation import qualifier_of
from stacks.nag import acknowledge

GITHUB_DEPLOY_STACK = "DecisionEndpoints-GitHubDeploy"
ROLE_NAME_PREFIX = "decision-endpoints-github-deploy-"
DIFF_ROLE_NAME_PREFIX = "decision-endpoints-github-diff-"
# The bootstrap roles a `cdk deploy` / `cdk diff` of these stacks assumes: no Docker image assets, so no
# image-publishing role; lookup is what `cdk diff` reads the deployed templates with.
BOOTSTRAP_ROLES = ("deploy-role", "file-publishing-role", "lookup-role")
DIFF_BOOTSTRAP_ROLES = ("lookup-role",)  # for an approval-gated environment in another account than this stack's
# What `cdk diff --no-change-set` calls on the deployed stacks (describe, template, nested stacks' resources).
DIFF_STACK_ACTIONS = (
    "cloudformation:DescribeStacks",
    "cloudformation:GetTemplate",
    "cloudformation:ListStackResources",
)
# Image builds wait up to 55 minutes inside one deployment, and the CLI re-assumes the bootstrap roles
# with these credentials while it watches: the session must outlast a first deployment.
SESSION_HOURS = 3
# Above the app-wide tags of the environment being synthesized (cdk.Tags' default priority 100, removal 200), so
# that this stack's tags do not depend on `-c env`.
TAG_PRIORITY = 300
ENVIRONMENT_TAG = "environment"


def environment_stacks(environment: str) -> str:
    """The names of an environment's stacks (decision_spec.names.stack_name), as a pattern."""
    return stack_name(environment, "*")


def role_name(environment: str) -> str:
    return f"{ROLE_NAME_PREFIX}{environment}"


def role_variable(environment: str) -> str:
    """The GitHub Actions variable deploy.yml reads `environment`'s role ARN from."""
    return f"AWS_DEPLOY_ROLE_ARN_{environment.upper().replace('-', '_')}"


def diff_role_name(environment: str) -> str:
    return f"{DIFF_ROLE_NAME_PREFIX}{environment}"


def diff_role_variable(environment: str) -> str:
    """The variable (of GitHub environment `<env>-diff`) deploy.yml reads the diff role's ARN from."""
    return f"AWS_DIFF_ROLE_ARN_{environment.upper().replace('-', '_')}"


def _camel(environment: str) -> str:
    return "".join(part.capitalize() for part in environment.split("-"))


class GitHubDeployStack(cdk.Stack):
    """GitHub's OIDC provider (or the existing one) and each environment's deploy role; account-wide, deployed once."""

    def __init__(self, scope: Construct, construct_id: str, *, config: GitHubDeploy, **kwargs: Any) -> None:
        home = config.home_target
        super().__init__(
            scope,
            construct_id,
            description="GitHub Actions deploy roles (OIDC, no keys, one per environment) for the decision endpoints",
            termination_protection=True,  # the CI's only way in: removing it is a deliberate act
            env=cdk.Environment(account=home.account, region=home.region),
            # A bootstrap the docs create (not CDK's default qualifier): the home environment's own.
            synthesizer=cdk.DefaultStackSynthesizer(qualifier=qualifier_of(home.qualifier)),
            **kwargs,
        )
        if config.create_oidc_provider:
            provider: iam.IOidcProvider = iam.OidcProviderNative(
                self, "GitHubOidc", url=f"https://{GITHUB_OIDC_HOST}", client_ids=[STS_AUDIENCE]
            )
        else:
            provider = iam.OidcProviderNative.from_oidc_provider_arn(
                self,
                "GitHubOidc",
                f"arn:{self.partition}:iam::{self.account}:oidc-provider/{GITHUB_OIDC_HOST}",
            )
        self.provider = provider
        self.roles: dict[str, iam.Role] = {
            target.environment: self._deploy_role(config, target, provider) for target in config.targets
        }
        self.diff_roles: dict[str, iam.Role] = {
            target.environment: self._diff_role(config, target, provider)
            for target in config.targets
            if target.environment != BRANCH_ENVIRONMENT
        }
        self._tag(config)

    def _tag(self, config: GitHubDeploy) -> None:
        """No tag of the environment being synthesized; each environment's roles carry that environment's tags."""
        keys = {ENVIRONMENT_TAG, *(key for target in config.targets for key in target.tags)}
        for key in sorted(keys):
            cdk.Tags.of(self).remove(key, priority=TAG_PRIORITY)
        for target in config.targets:
            tags = {**target.tags, ENVIRONMENT_TAG: target.environment}
            roles = (self.roles.get(target.environment), self.diff_roles.get(target.environment))
            for role in (r for r in roles if r is not None):
                for key, value in sorted(tags.items()):
                    cdk.Tags.of(role).add(key, value, priority=TAG_PRIORITY + 1)

    def _deploy_role(self, config: GitHubDeploy, target: DeployTarget, provider: iam.IOidcProvider) -> iam.Role:
        environment = target.environment
        role = iam.Role(
            self,
            f"DeployRole{_camel(environment)}",
            role_name=role_name(environment),
            description=(
                f"{config.owner}/{config.repository} deploy workflow, {environment} only: "
                "assumes that environment's CDK bootstrap roles"
            ),
            max_session_duration=cdk.Duration.hours(SESSION_HOURS),
            assumed_by=iam.FederatedPrincipal(
                provider.oidc_provider_arn,
                {"StringEquals": config.trust(config.subject(environment))},
                "sts:AssumeRoleWithWebIdentity",
            ),
        )
        self._grant_bootstrap(role, target, BOOTSTRAP_ROLES)
        if environment in CHECKED_ENVIRONMENTS:  # decisionctl check-deployed chains to a role of its own account
            role.add_to_policy(assume_check_role_statement(self.partition, target.account or self.account, environment))
        # dev's job references no GitHub environment (its trust above), so only a repository variable reaches it.
        where = (
            "a repository variable"
            if environment == BRANCH_ENVIRONMENT
            else f"a variable of GitHub environment {environment}"
        )
        cdk.CfnOutput(
            self,
            f"DeployRoleArn{_camel(environment)}",
            value=role.role_arn,
            description=f"{environment}'s deploy role: set it as {role_variable(environment)}, {where}",
        )
        return role

    def _diff_role(self, config: GitHubDeploy, target: DeployTarget, provider: iam.IOidcProvider) -> iam.Role:
        environment = target.environment
        role = iam.Role(
            self,
            f"DiffRole{_camel(environment)}",
            role_name=diff_role_name(environment),
            description=(
                f"{config.owner}/{config.repository} deploy workflow, {environment}'s diff before approval: "
                "reads that environment's stacks only"
            ),
            max_session_duration=cdk.Duration.hours(1),
            assumed_by=iam.FederatedPrincipal(
                provider.oidc_provider_arn,
                {"StringEquals": config.trust(config.diff_subject(environment))},
                "sts:AssumeRoleWithWebIdentity",
            ),
        )
        if target.account is None or target.account == self.account:
            self._grant_stack_reads(role, target)
        else:  # another account's stacks are read through a role of that account
            self._grant_bootstrap(role, target, DIFF_BOOTSTRAP_ROLES)
        cdk.CfnOutput(
            self,
            f"DiffRoleArn{_camel(environment)}",
            value=role.role_arn,
            description=f"{environment}'s diff role: set it as {diff_role_variable(environment)}, a variable of "
            f"GitHub environment {diff_environment(environment)}",
        )
        return role

    def _grant_stack_reads(self, role: iam.Role, target: DeployTarget) -> None:
        """Read the target environment's own stacks, and its bootstrap's version: nothing else of the account."""
        stacks = (
            f"arn:{self.partition}:cloudformation:{target.region}:{self.account}:stack/"
            f"{environment_stacks(target.environment)}/*"
        )
        role.add_to_policy(
            iam.PolicyStatement(sid="ReadEnvironmentStacks", actions=list(DIFF_STACK_ACTIONS), resources=[stacks])
        )
        finding = stacks
        for token, pseudo in ((self.partition, "<AWS::Partition>"), (self.account, "<AWS::AccountId>")):
            if cdk.Token.is_unresolved(token):
                finding = finding.replace(token, pseudo)
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::{finding}]",
            "A stack ARN ends in the stack's generated id; the pattern names this environment's stacks "
            "(DecisionEndpoints-<env>-*) and the actions only read them",
        )
        self._grant_bootstrap(role, target, ())

    def _grant_bootstrap(self, role: iam.Role, target: DeployTarget, roles: tuple[str, ...]) -> None:
        """Assume exactly `roles` (maybe none) of the target's own bootstrap (its qualifier), and read its version."""
        # A pinned account may be another one than this stack's: its bootstrap must trust this account
        # (cdk bootstrap --trust, docs/deploy.md).
        account = target.account or self.account
        qualifier = qualifier_of(target.qualifier)
        if roles:
            role.add_to_policy(
                iam.PolicyStatement(
                    sid="AssumeCdkBootstrapRoles",
                    actions=["sts:AssumeRole"],
                    resources=[
                        f"arn:{self.partition}:iam::{account}:role/cdk-{qualifier}-{name}-{account}-{target.region}"
                        for name in roles
                    ],
                )
            )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadCdkBootstrapVersion",
                actions=["ssm:GetParameter"],
                resources=[
                    f"arn:{self.partition}:ssm:{target.region}:{account}:parameter/cdk-bootstrap/{qualifier}/version"
                ],
            )
        )
