"""Environment isolation: environments that could share one account's CDK bootstrap roles are refused at synth.

A `cdk deploy` (and the GitHub deploy roles, stacks/github_deploy_stack.py) acts through the bootstrap roles
`cdk-<qualifier>-<role>-<account>-<region>`. Two environments that resolve to one account and region with one
qualifier therefore share those roles: whoever may deploy one may deploy the other, and an approval gate on
one protects nothing. An unpinned account (`account: null`) is the account of whoever deploys, so it may be
any account, a pinned one included. Such a pair is refused unless each environment names its own bootstrap
qualifier, which gives it bootstrap roles of its own.

Own roles are not enough for an environment behind an approval that a pipeline deploys (`check_pipeline_accounts`).
A bootstrap's CloudFormation execution role holds AdministratorAccess in its account unless narrowed, so
`cdk-<dev's qualifier>-cfn-exec-role` could change prod's stacks, bucket policy, key and GitHub role, and decrypt
prod's data, whenever the two share an account; the dev pipeline (every merge to main, no approval) deploys
through it. With the GitHub stack configured, every environment but the branch-deployed one must therefore be
pinned to an account that no other environment may deploy to: accounts are the boundary, qualifiers only
keep the roles apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations

import aws_cdk as cdk
from decision_spec.environment_config import ConfigError

DEFAULT_QUALIFIER: str = cdk.DefaultStackSynthesizer.DEFAULT_QUALIFIER


def qualifier_of(configured: str | None) -> str:
    """The bootstrap qualifier an environment deploys through: its own, else CDK's default."""
    return configured or DEFAULT_QUALIFIER


def bootstrap_stack_name(qualifier: str) -> str:
    """The toolkit stack a second bootstrap in one account and region needs (CDKToolkit is taken by the first)."""
    return "CDKToolkit" if qualifier == DEFAULT_QUALIFIER else f"CDKToolkit-{qualifier}"


@dataclass(frozen=True)
class Placement:
    """Where one environment of cdk.json deploys, as written (validated elsewhere)."""

    environment: str
    account: str | None
    region: str
    qualifier: str | None

    def may_share_roles_with(self, other: Placement) -> bool:
        if self.region != other.region:
            return False
        if self.account is not None and other.account is not None and self.account != other.account:
            return False
        own = self.qualifier is not None and other.qualifier is not None and self.qualifier != other.qualifier
        return not own


def placements(environments: Mapping[str, object]) -> list[Placement]:
    found = []
    for name, raw in sorted(environments.items()):
        env = raw if isinstance(raw, Mapping) else {}
        account, qualifier = env.get("account"), env.get("bootstrap_qualifier")
        found.append(
            Placement(
                environment=str(name),
                account=None if account is None else str(account),
                region=str(env.get("region")),
                qualifier=None if qualifier is None else str(qualifier),
            )
        )
    return found


def check_isolation(environments: object) -> None:
    """Raise ConfigError naming every pair of environments that could deploy through the same bootstrap roles."""
    if not isinstance(environments, Mapping):
        return
    problems = []
    for a, b in combinations(placements(environments), 2):
        if not a.may_share_roles_with(b):
            continue
        if a.account is not None and a.account == b.account:
            where = f"account {a.account}"
        elif a.account is None and b.account is None:
            where = "the same unknown account (both unpinned: whichever account the credentials are in)"
        else:
            where = "the same account (an unpinned account is whichever account the credentials are in)"
        shared = qualifier_of(a.qualifier if a.qualifier == b.qualifier else None)
        problems.append(
            f"environments.{a.environment} and environments.{b.environment}: both may deploy to {where} in "
            f"{a.region} through the same CDK bootstrap roles (cdk-{shared}-*), so whoever may deploy one may deploy "
            f"the other and prod's approval protects nothing. Fix: pin each to its own account "
            f"(environments.<env>.account, recommended), or give each its own environments.<env>.bootstrap_qualifier "
            f"(e.g. {a.environment} and {b.environment} as qualifiers) and bootstrap each with "
            "`cdk bootstrap --qualifier <q> --toolkit-stack-name CDKToolkit-<q>` "
            "(docs/deploy.md, Isolating environments)"
        )
    if problems:
        raise ConfigError("environments are not isolated:\n  " + "\n  ".join(problems))


def check_pipeline_accounts(environments: object, branch_environment: str, home: str) -> None:
    """Raise ConfigError naming every approval-gated environment (all but `branch_environment`) that is not pinned
    to an account of its own: another environment's bootstrap could administer the account it lives in. `home` is
    the environment whose account holds the GitHub stack (github_config's home_target), which the fix names."""
    if not isinstance(environments, Mapping):
        return
    found = placements(environments)
    problems = []
    for gated in found:
        if gated.environment == branch_environment:
            continue
        others = [o for o in found if o.environment != gated.environment]
        if gated.account is None:
            reason = f"environments.{gated.environment}.account is unpinned (whichever account the credentials are in)"
        else:
            sharing = [o.environment for o in others if o.account is None or o.account == gated.account]
            if not sharing:
                continue
            reason = (
                f"{', '.join(f'environments.{name}' for name in sharing)} may deploy to its account "
                f"{gated.account} (an unpinned account is whichever account the credentials are in)"
            )
        problems.append(
            f"environments.{gated.environment} is deployed by the pipeline behind an approval (context.github), but "
            f"{reason}. In a shared account another environment's CDK bootstrap CloudFormation execution role "
            f"(AdministratorAccess unless narrowed) administers the account {gated.environment} lives in, and its "
            f"pipeline, which needs no approval, deploys through it. Fix: pin environments.{gated.environment}.account "
            "to an account of its own and every other environment's account to another one "
            "(environments.<env>.account), bootstrap each, and deploy the GitHub stack into "
            f"{home}'s account (docs/deploy.md, Isolating environments)"
        )
    if problems:
        raise ConfigError("environments are not isolated from the pipeline:\n  " + "\n  ".join(problems))
