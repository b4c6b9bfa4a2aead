"""DecisionEndpoints-GitHubDeploy: the OIDC provider and each environment's deploy role, synthesized by the real app.

The app is built with the shipped cdk.json context plus a `github` block, and prod pinned to another
account and region than dev's, so that each role's bootstrap grants are seen to follow its own
environment. cdk-nag (registered by build_app) fails the synth on any unacknowledged finding in this
stack as in the others.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template
from cfnlint.api import ManualArgs, lint_file  # type: ignore[import-untyped]

from app import build_app
from stacks.config import ConfigError
from stacks.github_deploy_stack import (
    GITHUB_DEPLOY_STACK,
    GitHubDeployStack,
    load_github,
)
from stacks.nag import acknowledged
from tests.cdk_support import cdk_context

OWNER, REPO = "example-org", "decision-endpoints"
HOST = "token.actions.githubusercontent.com"
PROD_ACCOUNT, PROD_REGION = "111122223333", "eu-west-1"
ACCOUNT = "${AWS::AccountId}"  # dev's account is not pinned: the account the stack is deployed in
# The one subject each role trusts: dev only a job on main without a GitHub environment, prod only a job
# of the GitHub environment prod (which its reviewers approved). One role trusting both let any run on
# main take prod's credentials without the approval.
TRUSTED = {
    "decision-endpoints-github-deploy-dev": f"repo:{OWNER}/{REPO}:ref:refs/heads/main",
    "decision-endpoints-github-deploy-prod": f"repo:{OWNER}/{REPO}:environment:prod",
    "decision-endpoints-github-diff-prod": f"repo:{OWNER}/{REPO}:environment:prod-diff",
}
# The environment subject carries no ref: every role also requires the ref and the workflow on it.
BOUND = {
    f"{HOST}:ref": "refs/heads/main",
    f"{HOST}:job_workflow_ref": f"{OWNER}/{REPO}/.github/workflows/deploy.yml@refs/heads/main",
}


def _context(**github: Any) -> dict[str, Any]:
    context = cdk_context()
    context["github"] = {"owner": OWNER, "repository": REPO, "create_oidc_provider": True, **github}
    context["environments"]["prod"].update(account=PROD_ACCOUNT, region=PROD_REGION)
    return context


@pytest.fixture(scope="module")
def synthesized() -> tuple[cdk.App, dict[str, Any], Path]:
    outdir = Path(tempfile.mkdtemp(prefix="cdk-github-"))
    app = build_app("dev", context=_context(), outdir=str(outdir))
    app.synth()  # raises on any cdk-nag finding
    path = outdir / f"{GITHUB_DEPLOY_STACK}.template.json"
    return app, json.loads(path.read_text(encoding="utf-8")), path


def _of(template: Mapping[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def _roles(template: Mapping[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Role name -> (logical id, role)."""
    return {r["Properties"]["RoleName"]: (k, r) for k, r in _of(template, "AWS::IAM::Role").items()}


def _statements(template: Mapping[str, Any], role_id: str) -> list[dict[str, Any]]:
    """Every statement of the inline policies attached to the role `role_id`."""
    return [
        statement
        for policy in _of(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _text(value: Any) -> str:
    """An ARN as CloudFormation would join it, pseudo parameters kept as ${...}."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_text(part) for part in parts)
    if "Ref" in value:
        return f"${{{value['Ref']}}}"
    if "Fn::GetAtt" in value:
        return f"${{{'.'.join(value['Fn::GetAtt'])}}}"
    raise AssertionError(f"unexpected intrinsic {value}")


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_each_environment_has_a_role_trusting_exactly_its_one_subject(synthesized) -> None:
    _, template, _ = synthesized
    ((provider_id, provider),) = _of(template, "AWS::IAM::OIDCProvider").items()
    assert provider["Properties"]["Url"] == f"https://{HOST}"
    assert provider["Properties"]["ClientIdList"] == ["sts.amazonaws.com"]
    roles = _roles(template)
    assert set(roles) == set(TRUSTED)
    for name, (_, role) in roles.items():
        assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"] == [
            {
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Effect": "Allow",
                "Principal": {"Federated": {"Ref": provider_id}},
                "Condition": {
                    "StringEquals": {f"{HOST}:aud": "sts.amazonaws.com", f"{HOST}:sub": TRUSTED[name], **BOUND}
                },
            }
        ], name
        assert role["Properties"]["MaxSessionDuration"] == (3600 if "-diff-" in name else 3 * 3600)


def _bootstrap(
    account: str,
    region: str,
    qualifier: str,
    roles: tuple[str, ...] = ("deploy-role", "file-publishing-role", "lookup-role"),
) -> dict[str, list[str]]:
    return {
        "AssumeCdkBootstrapRoles": sorted(
            f"arn:${{AWS::Partition}}:iam::{account}:role/cdk-{qualifier}-{role}-{account}-{region}" for role in roles
        ),
        "ReadCdkBootstrapVersion": [
            f"arn:${{AWS::Partition}}:ssm:{region}:{account}:parameter/cdk-bootstrap/{qualifier}/version"
        ],
    }


def test_each_role_may_only_assume_its_own_environments_bootstrap_roles(synthesized) -> None:
    _, template, _ = synthesized
    assert _of(template, "AWS::IAM::ManagedPolicy") == {}
    # Each role only its own qualifier's bootstrap roles (cdk-<qualifier>-*); the diff role only the lookup role.
    expected = {
        "decision-endpoints-github-deploy-dev": _bootstrap(ACCOUNT, "us-west-2", "decdev"),
        "decision-endpoints-github-deploy-prod": _bootstrap(PROD_ACCOUNT, PROD_REGION, "decprod"),
        "decision-endpoints-github-diff-prod": _bootstrap(PROD_ACCOUNT, PROD_REGION, "decprod", ("lookup-role",)),
    }
    for name, (role_id, role) in _roles(template).items():
        assert "ManagedPolicyArns" not in role["Properties"]
        statements = _statements(template, role_id)
        actions = {s["Sid"]: s["Action"] for s in statements}
        assert actions == {"AssumeCdkBootstrapRoles": "sts:AssumeRole", "ReadCdkBootstrapVersion": "ssm:GetParameter"}
        assert all(s["Effect"] == "Allow" for s in statements)
        resources = {s["Sid"]: sorted(_text(r) for r in _as_list(s["Resource"])) for s in statements}
        assert resources == expected[name], name
    # Every inline policy belongs to exactly one role.
    assert all(len(p["Properties"]["Roles"]) == 1 for p in _of(template, "AWS::IAM::Policy").values())


def test_each_roles_arn_is_an_output_naming_its_github_variable(synthesized) -> None:
    _, template, _ = synthesized
    roles = {role_id: name for name, (role_id, _) in _roles(template).items()}
    outputs = {
        roles[output["Value"]["Fn::GetAtt"][0]]: output["Description"] for output in template["Outputs"].values()
    }
    assert outputs == {
        "decision-endpoints-github-deploy-dev": (
            "dev's deploy role: set it as AWS_DEPLOY_ROLE_ARN_DEV, a repository variable"
        ),
        "decision-endpoints-github-deploy-prod": (
            "prod's deploy role: set it as AWS_DEPLOY_ROLE_ARN_PROD, a variable of GitHub environment prod"
        ),
        "decision-endpoints-github-diff-prod": (
            "prod's diff role: set it as AWS_DIFF_ROLE_ARN_PROD, a variable of GitHub environment prod-diff"
        ),
    }


def test_nag_clean_without_acknowledgements_and_cfn_lint_clean(synthesized) -> None:
    app, _, path = synthesized
    stack = app.node.find_child(GITHUB_DEPLOY_STACK)
    assert acknowledged(stack) == {}
    assert isinstance(stack, cdk.Stack) and stack.termination_protection
    errors = [m for m in lint_file(path, ManualArgs(regions=["us-west-2"])) if m.rule.id.startswith("E")]
    assert errors == []


def test_an_existing_provider_is_referenced_not_created() -> None:
    config = load_github(_context(create_oidc_provider=False)["github"], cdk_context()["environments"])
    assert config is not None
    app = cdk.App()
    template = Template.from_stack(GitHubDeployStack(app, "GitHubDeploy", config=config)).to_json()
    assert _of(template, "AWS::IAM::OIDCProvider") == {}
    roles = _roles(template)
    assert len(roles) == 3
    for _, role in roles.values():
        principal = role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]["Federated"]
        assert _text(principal) == f"arn:${{AWS::Partition}}:iam::${{AWS::AccountId}}:oidc-provider/{HOST}"


def test_the_shipped_cdk_json_leaves_the_stack_out_until_github_is_set() -> None:
    shipped = cdk_context()
    assert shipped["github"] == {"owner": None, "repository": None, "create_oidc_provider": True}
    assert load_github(shipped["github"], shipped["environments"]) is None


@pytest.mark.parametrize(
    ("github", "message"),
    [
        ({"owner": "has space", "repository": REPO, "create_oidc_provider": True}, "github.owner"),
        ({"owner": OWNER, "repository": None, "create_oidc_provider": True}, "github.repository"),
        ({"owner": OWNER, "repository": REPO}, "github.create_oidc_provider"),
        ({"owner": OWNER, "repository": REPO, "create_oidc_provider": True, "branch": "x"}, "github.branch"),
    ],
)
def test_a_wrong_github_block_names_its_key(github: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_github(github, cdk_context()["environments"])


def test_a_wrong_environment_account_or_region_names_its_key() -> None:
    environments = cdk_context()["environments"]
    environments["prod"].update(account="1234", region="Europe")
    with pytest.raises(ConfigError) as caught:
        load_github(_context()["github"], environments)
    assert "environments.prod.account:" in str(caught.value)
    assert "environments.prod.region:" in str(caught.value)


def test_environments_sharing_bootstrap_roles_get_no_github_roles() -> None:
    """Both shipped environments unpinned in one region: without their own qualifiers one role could deploy both."""
    environments = cdk_context()["environments"]
    for env in environments.values():
        env.pop("bootstrap_qualifier")
    with pytest.raises(ConfigError, match=re.escape("environments.dev and environments.prod: both may deploy")):
        load_github(_context()["github"], environments)


def test_same_account_environments_assume_only_their_own_qualifiers_roles() -> None:
    """The shipped cdk.json: dev and prod unpinned in us-west-2, kept apart by their qualifiers."""
    config = load_github(_context()["github"], cdk_context()["environments"])
    assert config is not None
    template = Template.from_stack(GitHubDeployStack(cdk.App(), "GitHubDeploy", config=config)).to_json()
    for name, (role_id, _) in _roles(template).items():
        qualifier = "decdev" if name.endswith("-dev") else "decprod"
        resources = [
            _text(r)
            for s in _statements(template, role_id)
            if s["Sid"] == "AssumeCdkBootstrapRoles"
            for r in _as_list(s["Resource"])
        ]
        assert resources and all(f":role/cdk-{qualifier}-" in r for r in resources), name


def test_immutable_subjects_name_the_owner_and_repository_ids() -> None:
    """Repositories created from 15 July 2026 on issue repo:OWNER@ID/REPO@ID subjects (configure-aws-credentials)."""
    config = load_github(_context(owner_id=123456, repository_id=789012)["github"], cdk_context()["environments"])
    assert config is not None
    prefix = f"repo:{OWNER}@123456/{REPO}@789012"
    assert config.subject("dev") == f"{prefix}:ref:refs/heads/main"
    assert config.subject("prod") == f"{prefix}:environment:prod"
    assert config.diff_subject("prod") == f"{prefix}:environment:prod-diff"
    with pytest.raises(ConfigError, match="set both"):
        load_github(_context(owner_id=123456)["github"], cdk_context()["environments"])
