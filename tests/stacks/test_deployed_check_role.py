"""decision-<env>-deployed-check: the role of dev's (and prod's) own account that `decisionctl check-deployed` runs
with after the environment's deploy (issues 31 and 46).

The dev GitHub role lives in the GitHub stack's account (prod's); SageMaker invokes only the caller's account's
endpoints, so the workflow chains from it to this role, which dev's Serving stack makes where `context.github` is
set; prod's deploy role chains to prod's the same way (test_github_deploy_stack.py checks prod's). Synthesized by
the real app with the GitHub context of test_github_deploy_stack.py (dev and prod pinned to accounts of their own);
cdk-nag runs at that synth.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template
from cfnlint.api import ManualArgs, lint_file  # type: ignore[import-untyped]

from app import _deployed_check, build_app
from stacks.deployed_check_access import CheckRoleTrust, DeployedCheckRole
from stacks.github_config import load_github
from stacks.github_deploy_stack import GITHUB_DEPLOY_STACK
from tests.cdk_support import as_list, cdk_context, synthesize
from tests.github_stack_support import (
    CHECK_ROLE_ARN,
    DEV_ACCOUNT,
    PROD_ACCOUNT,
    arn_text,
    attached_statements,
    check_roles,
    deploy_roles,
    github_context,
)

CHECK_ROLE = "decision-dev-deployed-check"
DEV_GITHUB_ROLE = f"arn:aws:iam::{PROD_ACCOUNT}:role/decision-endpoints-github-deploy-dev"
# the decision endpoints dev's stack makes (the shipped dev serves cpu only): not the chat one, not gpu's name; and
# the inference component dev's cpu endpoint hosts its model as (hosting.mode components), which calls name
ENDPOINTS = [
    f"arn:aws:sagemaker:us-west-2:{DEV_ACCOUNT}:endpoint/decision-dev-cpu",
    f"arn:aws:sagemaker:us-west-2:{DEV_ACCOUNT}:inference-component/decision-dev-cpu-model",
]


@pytest.fixture(scope="module")
def dev() -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """dev synthesized with the pipeline configured: its Serving template and the GitHub stack's."""
    outdir = Path(tempfile.mkdtemp(prefix="cdk-dev-github-"))
    atexit.register(shutil.rmtree, outdir, True)
    build_app("dev", context=github_context(), outdir=str(outdir)).synth()  # raises on any cdk-nag finding
    path = outdir / "DecisionEndpoints-dev-Serving.template.json"
    github = json.loads((outdir / f"{GITHUB_DEPLOY_STACK}.template.json").read_text(encoding="utf-8"))
    return path, json.loads(path.read_text(encoding="utf-8")), github


def test_devs_check_role_is_trusted_by_the_dev_github_role_only(dev) -> None:
    """The GitHub stack's account as principal, narrowed to dev's GitHub role by aws:PrincipalArn (an ARN principal
    would make IAM refuse the trust policy while that role does not exist yet); a chained session's hour at most."""
    _, serving, _ = dev
    ((_, role),) = check_roles(serving).values()
    assert role["Properties"]["RoleName"] == CHECK_ROLE
    (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust == {
        "Action": "sts:AssumeRole",
        "Effect": "Allow",
        "Principal": {"AWS": f"arn:aws:iam::{PROD_ACCOUNT}:root"},
        "Condition": {"ArnEquals": {"aws:PrincipalArn": DEV_GITHUB_ROLE}},
    }
    assert role["Properties"]["MaxSessionDuration"] == 3600
    assert "ManagedPolicyArns" not in role["Properties"]


def test_devs_check_role_may_only_describe_and_invoke_devs_decision_endpoints(dev) -> None:
    _, serving, _ = dev
    ((role_id, _),) = check_roles(serving).values()
    (statement,) = attached_statements(serving, role_id)
    assert statement["Effect"] == "Allow" and "Condition" not in statement
    assert set(as_list(statement["Action"])) == {"sagemaker:DescribeEndpoint", "sagemaker:InvokeEndpoint"}
    assert sorted(arn_text(r) for r in as_list(statement["Resource"])) == ENDPOINTS


def test_the_role_arn_is_an_output_and_the_one_the_dev_github_role_may_assume(dev) -> None:
    _, serving, github = dev
    ((role_id, role),) = check_roles(serving).values()
    assert serving["Outputs"]["DeployedCheckRoleArn"]["Value"] == {"Fn::GetAtt": [role_id, "Arn"]}
    # Both sides name one role: the ARN the GitHub role may assume, and the trusted name the GitHub stack gives.
    assert f"arn:aws:iam::{DEV_ACCOUNT}:role/{role['Properties']['RoleName']}" == CHECK_ROLE_ARN
    dev_id, dev_role = deploy_roles(github)["decision-endpoints-github-deploy-dev"]
    assert DEV_GITHUB_ROLE.endswith(f":role/{dev_role['Properties']['RoleName']}")
    (assume,) = [s for s in attached_statements(github, dev_id) if s["Sid"] == "AssumeDeployedCheckRole"]
    assert as_list(assume["Resource"]) == [CHECK_ROLE_ARN]


def test_devs_serving_template_is_cfn_lint_clean(dev) -> None:
    path, _, _ = dev
    errors = [m for m in lint_file(path, ManualArgs(regions=["us-west-2"])) if m.rule.id.startswith("E")]
    assert errors == []


@pytest.mark.parametrize("variant", ["dev", "variant", "prod"])
def test_without_the_pipeline_no_serving_stack_has_a_check_role(variant: str) -> None:
    """The shipped cdk.json leaves context.github unset: nobody chains to a check role, so none is made."""
    serving = synthesize(variant).template_json("Serving")
    assert "deployed-check" not in json.dumps(serving)
    assert "DeployedCheckRoleArn" not in serving["Outputs"]


def test_the_environments_deploy_yml_checks_get_a_trust_and_no_other() -> None:
    context = github_context()
    github = load_github(context["github"], context["environments"])
    assert _deployed_check(github, "dev") == CheckRoleTrust(
        account=PROD_ACCOUNT, github_role="decision-endpoints-github-deploy-dev"
    )
    assert _deployed_check(github, "prod") == CheckRoleTrust(
        account=PROD_ACCOUNT, github_role="decision-endpoints-github-deploy-prod"
    )
    assert _deployed_check(github, "staging") is None  # deploy.yml deploys no such environment
    assert _deployed_check(None, "dev") is None


def test_with_dev_the_github_stacks_own_home_the_role_trusts_devs_own_account() -> None:
    """No approval-gated environment: the GitHub stack lives with dev (home_target), in whichever account both are
    deployed to, so the unknown account is dev's own, as the GitHub role's statement takes it."""
    environments = {"dev": cdk_context()["environments"]["dev"]}
    github = load_github(github_context()["github"], environments)
    trust = _deployed_check(github, "dev")
    assert trust == CheckRoleTrust(account=None, github_role="decision-endpoints-github-deploy-dev")
    stack = cdk.Stack(cdk.App(), "Serving", env=cdk.Environment(region="us-west-2"))
    DeployedCheckRole(stack, "DeployedCheck", environment="dev", trust=trust, endpoint_names=["decision-dev-cpu"])
    (role,) = Template.from_stack(stack).find_resources("AWS::IAM::Role").values()
    (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert arn_text(statement["Principal"]["AWS"]) == "arn:${AWS::Partition}:iam::${AWS::AccountId}:root"
    assert arn_text(statement["Condition"]["ArnEquals"]["aws:PrincipalArn"]) == (
        "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/decision-endpoints-github-deploy-dev"
    )
