"""The GitHub deploy stack's context and readers of its templates, shared by tests/stacks/test_github_deploy_stack.py
and tests/stacks/test_deployed_check_role.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.cdk_support import cdk_context

OWNER, REPO = "example-org", "decision-endpoints"
HOST = "token.actions.githubusercontent.com"
PROD_ACCOUNT, PROD_REGION = "111122223333", "eu-west-1"
DEV_ACCOUNT = "444455556666"  # with the pipeline, every environment has an account of its own (stacks/isolation.py)
CHECK_ROLE_ARN = f"arn:aws:iam::{DEV_ACCOUNT}:role/decision-dev-deployed-check"  # dev's Serving stack makes it


def github_context(**github: Any) -> dict[str, Any]:
    context = cdk_context()
    context["github"] = {"owner": OWNER, "repository": REPO, "create_oidc_provider": True, **github}
    context["environments"]["prod"].update(account=PROD_ACCOUNT, region=PROD_REGION)
    context["environments"]["dev"].update(account=DEV_ACCOUNT)
    return context


def resources_of(template: Mapping[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def deploy_roles(template: Mapping[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Role name -> (logical id, role)."""
    return {r["Properties"]["RoleName"]: (k, r) for k, r in resources_of(template, "AWS::IAM::Role").items()}


def check_roles(template: Mapping[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Role name -> (logical id, role), of a Serving stack's deployed-check roles (its other roles have no name)."""
    roles = resources_of(template, "AWS::IAM::Role").items()
    return {
        r["Properties"]["RoleName"]: (k, r) for k, r in roles if "deployed-check" in r["Properties"].get("RoleName", "")
    }


def attached_statements(template: Mapping[str, Any], role_id: str) -> list[dict[str, Any]]:
    """Every statement of the inline policies attached to the role `role_id`."""
    return [
        statement
        for policy in resources_of(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def arn_text(value: Any) -> str:
    """An ARN as CloudFormation would join it, pseudo parameters kept as ${...}."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(arn_text(part) for part in parts)
    if "Ref" in value:
        return f"${{{value['Ref']}}}"
    if "Fn::GetAtt" in value:
        return f"${{{'.'.join(value['Fn::GetAtt'])}}}"
    raise AssertionError(f"unexpected intrinsic {value}")
