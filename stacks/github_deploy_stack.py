"""The one-time account set-up for .github/workflows/deploy.yml: GitHub's OIDC provider, a deploy role per environment.

The workflow holds no AWS keys: GitHub issues each job an OIDC token, STS exchanges it for the short-lived
credentials of that job's environment's role, and each role can do nothing but assume the CDK bootstrap roles
(deploy, file publishing, lookup) of its own environment's account and region (dev's: its check role too, below)
and read that bootstrap's version. What a deployment may change is what the bootstrap's CloudFormation execution
role allows, as for any `cdk deploy`.

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

The dev role may also assume `decision-dev-deployed-check` of dev's account (dev's Serving stack makes it) for
`decisionctl check-deployed`: SageMaker invokes only the caller's account's endpoints (stacks/deployed_check_access.py).

Each role assumes only its environment's bootstrap roles, `cdk-<qualifier>-*` of its own qualifier;
stacks/isolation.py refuses environments that would share them, and, once this stack is configured, any
approval-gated environment not pinned to an account of its own (check_pipeline_accounts).

The stack is pinned to the account and region of its home (`home_target`) and deploys through that environment's
bootstrap: prod (APPROVAL_ENVIRONMENT), or where no environment is prod the approval-gated one `github.home` names;
synth refuses to guess. Whoever administers the home account could rewrite every role's trust: a branch-deployed
environment's bootstrap, or another approval-gated environment's pipeline (demo's approval would then be prod's).
Each role carries its own environment's tags, whatever `-c env` synthesizes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from stacks.config import BOOTSTRAP_QUALIFIER, ConfigError
from stacks.deployed_check_access import assume_check_role_statement
from stacks.isolation import check_isolation, check_pipeline_accounts, qualifier_of
from stacks.nag import acknowledge

GITHUB_DEPLOY_STACK = "DecisionEndpoints-GitHubDeploy"
GITHUB_OIDC_HOST = "token.actions.githubusercontent.com"
STS_AUDIENCE = "sts.amazonaws.com"
DEPLOY_BRANCH = "main"  # BRANCH_ENVIRONMENT deploys on every push to it
BRANCH_ENVIRONMENT = "dev"  # the one environment deployed without a GitHub environment (no approval)
APPROVAL_ENVIRONMENT = "prod"  # the GitHub environment whose required reviewers approve prod
ROLE_NAME_PREFIX = "decision-endpoints-github-deploy-"
DIFF_ROLE_NAME_PREFIX = "decision-endpoints-github-diff-"
DEPLOY_WORKFLOW = ".github/workflows/deploy.yml"  # the one workflow the roles trust (job_workflow_ref)
DIFF_SUFFIX = "-diff"  # GitHub environment of the job that diffs an approval-gated environment before approval
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
_ENV_NAME = r"^[a-z][a-z0-9-]{0,15}$"  # as stacks.config: role names and variable names derive from it
_REGION = r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$"


class DeployTarget(BaseModel):
    """Where one environment of cdk.json deploys: its account (null: the account of this stack) and region."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    environment: str = Field(pattern=_ENV_NAME)
    account: str | None = Field(pattern=r"^\d{12}$")
    region: str = Field(pattern=_REGION)
    qualifier: str | None = Field(default=None, pattern=BOOTSTRAP_QUALIFIER, description="Its bootstrap qualifier.")
    tags: dict[str, str] = Field(default_factory=dict, description="Its extra tags (environments.<env>.tags).")


class GitHubDeploy(BaseModel):
    """cdk.json `context.github`: the repository whose workflows may deploy, and the environments they deploy."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    owner: str = Field(pattern=r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$", description="GitHub user or organization.")
    repository: str = Field(pattern=r"^[A-Za-z0-9._-]{1,100}$", description="Repository name, without the owner.")
    create_oidc_provider: bool = Field(
        description="Create the account's GitHub OIDC provider (false: one exists; an account holds one per URL)."
    )
    owner_id: int | None = Field(
        default=None,
        ge=1,
        description="Numeric id of the owner, for repositories that issue immutable subjects (repo:OWNER@ID/REPO@ID).",
    )
    repository_id: int | None = Field(default=None, ge=1, description="Numeric id of the repository, with owner_id.")
    home: str | None = Field(
        default=None,
        pattern=_ENV_NAME,
        description=f"Where no environment is {APPROVAL_ENVIRONMENT}: the approval-gated one that holds this stack.",
    )
    targets: tuple[DeployTarget, ...] = Field(min_length=1, description="The environments of cdk.json.")

    @model_validator(mode="after")
    def _ids_together(self) -> GitHubDeploy:
        if (self.owner_id is None) != (self.repository_id is None):
            raise ValueError("owner_id and repository_id: set both (an immutable subject names both ids) or neither")
        return self

    @model_validator(mode="after")
    def _home_settled(self) -> GitHubDeploy:
        self._settle_home()
        return self

    @property
    def _repo(self) -> str:
        """The subject's repository part: name-only, or the immutable form GitHub issues for newer repositories."""
        if self.owner_id is not None and self.repository_id is not None:
            return f"repo:{self.owner}@{self.owner_id}/{self.repository}@{self.repository_id}"
        return f"repo:{self.owner}/{self.repository}"

    def subject(self, environment: str) -> str:
        """The one OIDC `sub` claim `environment`'s role trusts (the module docstring says why)."""
        if environment == BRANCH_ENVIRONMENT:
            return f"{self._repo}:ref:refs/heads/{DEPLOY_BRANCH}"
        return f"{self._repo}:environment:{environment}"

    def diff_subject(self, environment: str) -> str:
        """The `sub` claim of the job that diffs `environment` before its approval."""
        return f"{self._repo}:environment:{diff_environment(environment)}"

    def trust(self, subject: str) -> dict[str, str]:
        """Every claim a role requires (StringEquals): audience, subject, the ref and the workflow on that ref, and
        the repository's numeric id where configured (a deleted repository's name can be taken again; its id not)."""
        ref = f"refs/heads/{DEPLOY_BRANCH}"
        claims = {
            f"{GITHUB_OIDC_HOST}:aud": STS_AUDIENCE,
            f"{GITHUB_OIDC_HOST}:sub": subject,
            f"{GITHUB_OIDC_HOST}:ref": ref,
            f"{GITHUB_OIDC_HOST}:job_workflow_ref": f"{self.owner}/{self.repository}/{DEPLOY_WORKFLOW}@{ref}",
        }
        # STS checks GitHub's repository_id claim; it has no key for repository_owner_id, so the owner's id is
        # bound through the immutable subject above.
        if self.repository_id is not None:
            claims[f"{GITHUB_OIDC_HOST}:repository_id"] = str(self.repository_id)
        return claims

    @property
    def home_target(self) -> DeployTarget:
        """Where this stack lives: prod's account, region and bootstrap, else those of the approval-gated environment
        `home` names (else, with none gated, the branch environment's). check_pipeline_accounts keeps every other
        environment out of that account."""
        return self._settle_home()

    def _settle_home(self) -> DeployTarget:
        """home_target, or ValueError naming the candidates and `github.home`: whoever administers the home account
        can rewrite every role's trust, so it is never guessed."""
        gated = {t.environment: t for t in self.targets if t.environment != BRANCH_ENVIRONMENT}
        candidates = gated or {t.environment: t for t in self.targets}  # none gated: the branch environment alone
        names = ", ".join(candidates)
        if self.home is None:
            if APPROVAL_ENVIRONMENT in gated:
                return gated[APPROVAL_ENVIRONMENT]
            if not gated:
                return self.targets[0]
            raise ValueError(
                f"the GitHub stack's home is ambiguous: no environment is {APPROVAL_ENVIRONMENT}, and the approval-"
                f"gated environments are {names}; its account holds every deploy role, and each other environment's "
                f"bootstrap trusts it. Fix: set github.home to one of {names} (docs/deploy.md, The one-time GitHub "
                "set-up)"
            )
        if self.home not in candidates:
            why = (
                "the branch environment: its pipeline needs no approval, and an account it administers could rewrite "
                "the gated roles' trust"
                if self.home == BRANCH_ENVIRONMENT
                else "which is not an approval-gated environment of cdk.json"
            )
            raise ValueError(f"github.home is {self.home}, {why}. Fix: set github.home to one of {names}")
        if APPROVAL_ENVIRONMENT in gated and self.home != APPROVAL_ENVIRONMENT:
            raise ValueError(
                f"github.home is {self.home}, but environments.{APPROVAL_ENVIRONMENT} exists: the GitHub stack lives "
                f"in {APPROVAL_ENVIRONMENT}'s account (in {self.home}'s account, whoever deploys {self.home} could "
                f"rewrite {APPROVAL_ENVIRONMENT}'s deploy role). Fix: remove github.home"
            )
        return candidates[self.home]


def environment_stacks(environment: str) -> str:
    """The names of an environment's stacks (app.stack_name: DecisionEndpoints-<env>-<part>), as a pattern."""
    return f"DecisionEndpoints-{environment}-*"


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


def diff_environment(environment: str) -> str:
    return f"{environment}{DIFF_SUFFIX}"


def _camel(environment: str) -> str:
    return "".join(part.capitalize() for part in environment.split("-"))


def load_github(github: object, environments: object) -> GitHubDeploy | None:
    """`context.github` validated; None while owner and repository are null (the stack is then left out)."""
    if github is None:
        return None
    if not isinstance(github, Mapping):
        raise ConfigError(f"github: must be an object with owner, repository, create_oidc_provider; got {github!r}")
    if github.get("owner") is None and github.get("repository") is None:
        return None
    if not isinstance(environments, Mapping) or not environments:
        raise ConfigError("environments: missing from the cdk.json context (the github roles are made per environment)")
    targets = []
    for name, raw in sorted(environments.items()):
        env = raw if isinstance(raw, Mapping) else {}
        targets.append(
            {
                "environment": name,
                "account": env.get("account"),
                "region": env.get("region"),
                "qualifier": env.get("bootstrap_qualifier"),
                "tags": env.get("tags") or {},
            }
        )
    try:
        config = GitHubDeploy.model_validate({**github, "targets": tuple(targets)})
    except ValidationError as e:
        lines = [_describe(err["loc"], err["msg"], targets) for err in e.errors(include_url=False)]
        raise ConfigError("invalid cdk.json context:\n  " + "\n  ".join(lines)) from None
    check_isolation(environments)  # two roles on one set of bootstrap roles would make the approval moot
    check_pipeline_accounts(environments, BRANCH_ENVIRONMENT)  # nor may the unapproved pipeline administer prod's
    return config


def _describe(loc: tuple[int | str, ...], message: str, targets: list[dict[str, Any]]) -> str:
    if loc[:1] == ("targets",) and len(loc) >= 3 and isinstance(loc[1], int):
        return f"environments.{targets[loc[1]]['environment']}.{loc[2]}: {message} (read for the github roles)"
    where = ".".join(str(p) for p in loc)
    if where:
        return f"github.{where}: {message}"
    text = message.removeprefix("Value error, ")
    return text if text.startswith("github.") else f"github: {text}"  # a message that names its key already


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
        if environment == BRANCH_ENVIRONMENT:  # decisionctl check-deployed chains to a role of dev's own account
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
