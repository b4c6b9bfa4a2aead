"""DecisionEndpoints-GitHubDeploy: the OIDC provider and the role deploy.yml assumes, synthesized by the real app.

The app is built with the shipped cdk.json context plus a `github` block, so cdk-nag (registered by
build_app) fails the synth on any unacknowledged finding in this stack as in the others.
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
SUBJECTS = [f"repo:{OWNER}/{REPO}:ref:refs/heads/main", f"repo:{OWNER}/{REPO}:environment:prod"]
HOST = "token.actions.githubusercontent.com"


def _context(**github: Any) -> dict[str, Any]:
    context = cdk_context()
    context["github"] = {"owner": OWNER, "repository": REPO, "create_oidc_provider": True, **github}
    return context


@pytest.fixture(scope="module")
def synthesized() -> tuple[cdk.App, dict[str, Any], Path]:
    outdir = Path(tempfile.mkdtemp(prefix="cdk-github-"))
    app = build_app("dev", context=_context(), outdir=str(outdir))
    app.synth()  # raises on any cdk-nag finding
    path = outdir / f"{GITHUB_DEPLOY_STACK}.template.json"
    return app, json.loads(path.read_text(encoding="utf-8")), path


def _of(template: Mapping[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r for r in template["Resources"].values() if r["Type"] == kind]


def _text(value: Any) -> str:
    """An ARN as CloudFormation would join it, pseudo parameters kept as ${...}."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_text(part) for part in parts)
    if "Ref" in value:
        return f"${{{value['Ref']}}}"
    raise AssertionError(f"unexpected intrinsic {value}")


def test_the_role_trusts_exactly_main_and_the_prod_environment(synthesized) -> None:
    _, template, _ = synthesized
    (provider,) = _of(template, "AWS::IAM::OIDCProvider")
    assert provider["Properties"]["Url"] == f"https://{HOST}"
    assert provider["Properties"]["ClientIdList"] == ["sts.amazonaws.com"]
    (role,) = _of(template, "AWS::IAM::Role")
    provider_id = next(k for k, v in template["Resources"].items() if v["Type"] == "AWS::IAM::OIDCProvider")
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"] == [
        {
            "Action": "sts:AssumeRoleWithWebIdentity",
            "Effect": "Allow",
            "Principal": {"Federated": {"Ref": provider_id}},
            "Condition": {"StringEquals": {f"{HOST}:aud": "sts.amazonaws.com", f"{HOST}:sub": SUBJECTS}},
        }
    ]
    assert role["Properties"]["MaxSessionDuration"] == 3 * 3600


def test_the_role_may_only_assume_the_bootstrap_roles_and_read_their_version(synthesized) -> None:
    _, template, _ = synthesized
    assert _of(template, "AWS::IAM::ManagedPolicy") == []
    (role,) = _of(template, "AWS::IAM::Role")
    assert "ManagedPolicyArns" not in role["Properties"]
    statements = [
        s for policy in _of(template, "AWS::IAM::Policy") for s in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    actions = {s["Sid"]: s["Action"] for s in statements}
    assert actions == {"AssumeCdkBootstrapRoles": "sts:AssumeRole", "ReadCdkBootstrapVersion": "ssm:GetParameter"}
    assert all(s["Effect"] == "Allow" and "*" not in s["Action"] for s in statements)
    resources = {s["Sid"]: sorted(_text(r) for r in _as_list(s["Resource"])) for s in statements}
    account = "${AWS::AccountId}"
    assert resources["AssumeCdkBootstrapRoles"] == sorted(
        f"arn:${{AWS::Partition}}:iam::{account}:role/cdk-hnb659fds-{role}-{account}-us-west-2"
        for role in ("deploy-role", "file-publishing-role", "lookup-role")
    )
    assert resources["ReadCdkBootstrapVersion"] == [
        f"arn:${{AWS::Partition}}:ssm:us-west-2:{account}:parameter/cdk-bootstrap/hnb659fds/version"
    ]
    assert not any("*" in arn for arns in resources.values() for arn in arns)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


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
    assert _of(template, "AWS::IAM::OIDCProvider") == []
    (role,) = _of(template, "AWS::IAM::Role")
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
