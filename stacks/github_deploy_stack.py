"""The one-time account set-up for .github/workflows/deploy.yml: GitHub's OIDC provider and the deploy role.

The workflow holds no AWS keys: GitHub issues the job an OIDC token, STS exchanges it for this role's
short-lived credentials, and the role can do nothing but assume the CDK bootstrap roles (deploy, file
publishing, lookup) of the regions in cdk.json and read the bootstrap version. What a deployment may
change is what the bootstrap's CloudFormation execution role allows, as for any `cdk deploy`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from stacks.config import ConfigError

GITHUB_DEPLOY_STACK = "DecisionEndpoints-GitHubDeploy"
GITHUB_OIDC_HOST = "token.actions.githubusercontent.com"
STS_AUDIENCE = "sts.amazonaws.com"
DEPLOY_BRANCH = "main"  # dev deploys on every push to it
APPROVAL_ENVIRONMENT = "prod"  # the GitHub environment whose required reviewers approve prod
# The bootstrap roles a `cdk deploy` / `cdk diff` of these stacks assumes: no Docker image assets, so no
# image-publishing role; lookup is what `cdk diff` reads the deployed templates with.
BOOTSTRAP_ROLES = ("deploy-role", "file-publishing-role", "lookup-role")
# Image builds wait up to 55 minutes inside one deployment, and the CLI re-assumes the bootstrap roles
# with these credentials while it watches: the session must outlast a first deployment.
SESSION_HOURS = 3
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d$")


class GitHubDeploy(BaseModel):
    """cdk.json `context.github`: the repository whose workflows may deploy, and the regions they deploy to."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    owner: str = Field(pattern=r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$", description="GitHub user or organization.")
    repository: str = Field(pattern=r"^[A-Za-z0-9._-]{1,100}$", description="Repository name, without the owner.")
    create_oidc_provider: bool = Field(
        description="Create the account's GitHub OIDC provider (false: one exists; an account holds one per URL)."
    )
    regions: tuple[str, ...] = Field(min_length=1, description="Regions of the environments in cdk.json.")

    @property
    def subjects(self) -> tuple[str, str]:
        """The OIDC `sub` claims the role trusts: a job on main (dev), a job in the prod environment."""
        repo = f"repo:{self.owner}/{self.repository}"
        return (f"{repo}:ref:refs/heads/{DEPLOY_BRANCH}", f"{repo}:environment:{APPROVAL_ENVIRONMENT}")


def load_github(github: object, environments: object) -> GitHubDeploy | None:
    """`context.github` validated; None while owner and repository are null (the stack is then left out)."""
    if github is None:
        return None
    if not isinstance(github, Mapping):
        raise ConfigError(f"github: must be an object with owner, repository, create_oidc_provider; got {github!r}")
    if github.get("owner") is None and github.get("repository") is None:
        return None
    envs = environments.values() if isinstance(environments, Mapping) else []
    found = [env.get("region") if isinstance(env, Mapping) else None for env in envs]
    regions = sorted({region for region in found if isinstance(region, str) and _REGION.match(region)})
    if len(regions) != len(set(map(str, found))):
        raise ConfigError(f"github: the environments' regions must be region names, got {found!r}")
    try:
        return GitHubDeploy.model_validate({**github, "regions": tuple(regions)})
    except ValidationError as e:
        lines = [f"github.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors(include_url=False)]
        raise ConfigError("invalid cdk.json context:\n  " + "\n  ".join(lines)) from None


class GitHubDeployStack(cdk.Stack):
    """GitHub's OIDC provider (or the existing one) and the role deploy.yml assumes; account-wide, deployed once."""

    def __init__(self, scope: Construct, construct_id: str, *, config: GitHubDeploy, **kwargs: Any) -> None:
        super().__init__(
            scope,
            construct_id,
            description="GitHub Actions deploy role (OIDC, no keys) for the decision endpoints",
            termination_protection=True,  # the CI's only way in: removing it is a deliberate act
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
        self.role = iam.Role(
            self,
            "DeployRole",
            role_name="decision-endpoints-github-deploy",
            description=f"{config.owner}/{config.repository} deploy workflow: assumes the CDK bootstrap roles only",
            max_session_duration=cdk.Duration.hours(SESSION_HOURS),
            assumed_by=iam.FederatedPrincipal(
                provider.oidc_provider_arn,
                {
                    "StringEquals": {
                        f"{GITHUB_OIDC_HOST}:aud": STS_AUDIENCE,
                        f"{GITHUB_OIDC_HOST}:sub": list(config.subjects),
                    }
                },
                "sts:AssumeRoleWithWebIdentity",
            ),
        )
        qualifier = cdk.DefaultStackSynthesizer.DEFAULT_QUALIFIER
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="AssumeCdkBootstrapRoles",
                actions=["sts:AssumeRole"],
                resources=[
                    f"arn:{self.partition}:iam::{self.account}:role/cdk-{qualifier}-{role}-{self.account}-{region}"
                    for region in config.regions
                    for role in BOOTSTRAP_ROLES
                ],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadCdkBootstrapVersion",
                actions=["ssm:GetParameter"],
                resources=[
                    f"arn:{self.partition}:ssm:{region}:{self.account}:parameter/cdk-bootstrap/{qualifier}/version"
                    for region in config.regions
                ],
            )
        )
        cdk.CfnOutput(
            self, "DeployRoleArn", value=self.role.role_arn, description="GitHub variable AWS_DEPLOY_ROLE_ARN"
        )
