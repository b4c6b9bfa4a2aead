"""The `github` section of cdk.json (GitHubDeploy): the repository that deploys, the subjects it trusts, its home.

`read_github` validates it; the stacks' `load_github` (stacks/github_config.py) adds the checks that need the CDK's
bootstrap defaults: no two environments on one set of bootstrap roles, no gated account the branch pipeline reaches.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from decision_spec.environment_config import BOOTSTRAP_QUALIFIER, ConfigError

GITHUB_OIDC_HOST = "token.actions.githubusercontent.com"
STS_AUDIENCE = "sts.amazonaws.com"
DEPLOY_BRANCH = "main"  # BRANCH_ENVIRONMENT deploys on every push to it
BRANCH_ENVIRONMENT = "dev"  # the one environment deployed without a GitHub environment (no approval)
APPROVAL_ENVIRONMENT = "prod"  # the GitHub environment whose required reviewers approve prod
DEPLOY_WORKFLOW = ".github/workflows/deploy.yml"  # the one workflow the roles trust (job_workflow_ref)
DIFF_SUFFIX = "-diff"  # GitHub environment of the job that diffs an approval-gated environment before approval
_ENV_NAME = r"^[a-z][a-z0-9-]{0,15}$"  # as environment_config: role names and variable names derive from it
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
        """The one OIDC `sub` claim `environment`'s role trusts (github_deploy_stack's docstring says why)."""
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


def diff_environment(environment: str) -> str:
    return f"{environment}{DIFF_SUFFIX}"


def read_github(github: object, environments: object) -> GitHubDeploy | None:
    """`context.github` validated; None while owner and repository are null (the stack is then left out). The
    stacks' load_github also checks the environments' isolation (stacks/isolation.py)."""
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
    return config


def _describe(loc: tuple[int | str, ...], message: str, targets: list[dict[str, Any]]) -> str:
    if loc[:1] == ("targets",) and len(loc) >= 3 and isinstance(loc[1], int):
        return f"environments.{targets[loc[1]]['environment']}.{loc[2]}: {message} (read for the github roles)"
    where = ".".join(str(p) for p in loc)
    if where:
        return f"github.{where}: {message}"
    text = message.removeprefix("Value error, ")
    return text if text.startswith("github.") else f"github: {text}"  # a message that names its key already
