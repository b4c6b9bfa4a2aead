"""CDK app: `cdk synth|deploy|destroy -c env=<name>` (default dev), environments from cdk.json.

Only wiring: load the environment's config, build its two stacks, register cdk-nag, tag, synth.
Importing this module does nothing; tests call `build_app` with their own context.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
from decision_spec.environment_config import DEFAULT_ENVIRONMENT, ConfigError, EnvironmentConfig, load_environment
from decision_spec.github_config import GitHubDeploy
from decision_spec.names import stack_name

from stacks.deployed_check_access import CHECKED_ENVIRONMENTS, CheckRoleTrust
from stacks.evaluation_binding import check_evaluation, warn_unbound
from stacks.foundation_stack import FoundationStack
from stacks.github_config import load_github
from stacks.github_deploy_stack import GITHUB_DEPLOY_STACK, GitHubDeployStack, role_name
from stacks.isolation import check_isolation
from stacks.model_fit import fit_model
from stacks.placeholders import ALLOW_PLACEHOLDERS, allowed, refuse_placeholders
from stacks.serving_stack import ServingStack

ROOT = Path(__file__).resolve().parent  # where cdk.json is; the paths it names are relative to it


def build_app(
    env_name: str | None = None,
    *,
    context: Mapping[str, Any] | None = None,
    outdir: str | None = None,
    root: Path | None = None,
) -> cdk.App:
    """The app for one environment: `env_name`, else the `env` context value, else dev.

    `root` is where the files cdk.json names (the evaluation suite and record) are read from: this directory.
    """
    app = cdk.App(context=dict(context) if context is not None else None, outdir=outdir)
    name = env_name or app.node.try_get_context("env") or DEFAULT_ENVIRONMENT
    config = load_environment(app.node.try_get_context("environments"), str(name))
    refuse_placeholders(config, allow=allowed(app.node.try_get_context(ALLOW_PLACEHOLDERS)))
    check_isolation(app.node.try_get_context("environments"))  # one environment's deployer must not reach another
    evaluation = check_evaluation(config, root or ROOT)  # the committed record evaluates the deployed artifact
    config = fit_model(config, evaluation)  # the evaluated manifest's footprint, and instances that hold it
    # Account-agnostic unless pinned: synth needs no credentials, deploy uses the caller's account.
    env = cdk.Environment(account=config.account, region=config.region)
    github = load_github(app.node.try_get_context("github"), app.node.try_get_context("environments"))

    foundation = FoundationStack(
        app, stack_name(config.name, "Foundation"), config=config, env=env, synthesizer=_synthesizer(config)
    )
    serving = ServingStack(
        app,
        stack_name(config.name, "Serving"),
        config=config,
        env=env,
        foundation=foundation,
        evaluation=evaluation,
        deployed_check=_deployed_check(github, config.name),
        synthesizer=_synthesizer(config),
    )
    _warn_placeholders(config, serving)
    warn_unbound(serving, evaluation)
    if github is not None:  # the account's one-time CI set-up (docs/deploy.md); environment-agnostic
        GitHubDeployStack(app, GITHUB_DEPLOY_STACK, config=github)

    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    tags = cdk.Tags.of(app)
    tags.add("project", "decision-endpoints")
    tags.add("environment", config.name)
    for key, value in sorted(config.tags.items()):
        tags.add(key, value)
    return app


def _deployed_check(github: GitHubDeploy | None, environment: str) -> CheckRoleTrust | None:
    """Who may assume the environment's deployed-check role: each environment deploy.yml deploys and then checks
    (the branch-deployed one and the approval-gated one) has one, for its GitHub role in the GitHub stack's account
    (stacks/deployed_check_access.py)."""
    if github is None or environment not in CHECKED_ENVIRONMENTS:
        return None
    # Unpinned only where the environment is itself the GitHub stack's home: then both are in one account.
    return CheckRoleTrust(account=github.home_target.account, github_role=role_name(environment))


def _synthesizer(config: EnvironmentConfig) -> cdk.IStackSynthesizer | None:
    """Deploy through the environment's own bootstrap roles where it has a qualifier (stacks/isolation.py)."""
    if config.bootstrap_qualifier is None:
        return None
    return cdk.DefaultStackSynthesizer(qualifier=config.bootstrap_qualifier)


def _warn_placeholders(config: EnvironmentConfig, serving: cdk.Stack) -> None:
    for key in config.placeholders():
        cdk.Annotations.of(serving).add_warning_v2(
            "decision-endpoints:placeholder",
            f"{key} is still the all-zero placeholder (synthesized with -c {ALLOW_PLACEHOLDERS}=true): a deployment "
            "stops at the model preflight. See docs/deploy.md.",
        )


def main() -> None:
    try:
        app = build_app()
    except ConfigError as e:  # the message names every key and its fix; a traceback would only bury it
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(1) from None
    app.synth()


if __name__ == "__main__":
    main()
