"""The GitHub stack's config read for synth: `context.github` validated (decision_spec.github_config), then the
environments' isolation that the roles it makes depend on (stacks/isolation.py, which needs the CDK's bootstrap
defaults)."""

from __future__ import annotations

from decision_spec.github_config import BRANCH_ENVIRONMENT, GitHubDeploy, read_github

from stacks.isolation import check_isolation, check_pipeline_accounts


def load_github(github: object, environments: object) -> GitHubDeploy | None:
    """`context.github` validated; None while owner and repository are null (the stack is then left out)."""
    config = read_github(github, environments)
    if config is None:
        return None
    check_isolation(environments)  # two roles on one set of bootstrap roles would make the approval moot
    # nor may the unapproved pipeline administer a gated account; the fix names this stack's home
    check_pipeline_accounts(environments, BRANCH_ENVIRONMENT, config.home_target.environment)
    return config
