"""DecisionEndpoints-GitHubDeploy: the OIDC provider and each environment's deploy role, synthesized by the real app.

The app is built for prod with the shipped cdk.json context plus a `github` block, and dev and prod pinned to
accounts of their own (prod in another region too), so that each role's bootstrap grants are seen to follow
its own environment, and prod's own templates (its key policy) are read beside the roles. cdk-nag
(registered by build_app) fails the synth on any unacknowledged finding in this stack as in the others.
"""

from __future__ import annotations

import atexit
import copy
import json
import re
import shutil
import tempfile
from collections.abc import Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template
from cfnlint.api import ManualArgs, lint_file  # type: ignore[import-untyped]
from decision_spec.environment_config import ConfigError
from decision_spec.names import stack_name

from app import build_app
from stacks.github_config import load_github
from stacks.github_deploy_stack import GITHUB_DEPLOY_STACK, GitHubDeployStack, environment_stacks
from stacks.nag import acknowledged
from tests.cdk_support import ROOT, as_list, cdk_context
from tests.github_stack_support import (
    CHECK_ROLE_ARN,
    DEV_ACCOUNT,
    HOST,
    OWNER,
    PROD_ACCOUNT,
    PROD_REGION,
    REPO,
    arn_text,
    attached_statements,
    check_roles,
    deploy_roles,
    github_context,
    resources_of,
)

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


@pytest.fixture(scope="module")
def synthesized() -> tuple[cdk.App, dict[str, Any], Path]:
    """The GitHub stack synthesized with -c env=prod: its roles must not follow the environment synthesized."""
    outdir = Path(tempfile.mkdtemp(prefix="cdk-github-"))
    atexit.register(shutil.rmtree, outdir, True)
    app = build_app("prod", context=github_context(), outdir=str(outdir))
    app.synth()  # raises on any cdk-nag finding
    path = outdir / f"{GITHUB_DEPLOY_STACK}.template.json"
    return app, json.loads(path.read_text(encoding="utf-8")), path


def test_each_environment_has_a_role_trusting_exactly_its_one_subject(synthesized) -> None:
    _, template, _ = synthesized
    ((provider_id, provider),) = resources_of(template, "AWS::IAM::OIDCProvider").items()
    assert provider["Properties"]["Url"] == f"https://{HOST}"
    assert provider["Properties"]["ClientIdList"] == ["sts.amazonaws.com"]
    roles = deploy_roles(template)
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
            f"arn:aws:iam::{account}:role/cdk-{qualifier}-{role}-{account}-{region}" for role in roles
        ),
        "ReadCdkBootstrapVersion": [f"arn:aws:ssm:{region}:{account}:parameter/cdk-bootstrap/{qualifier}/version"],
    }


def test_each_role_may_only_assume_its_own_environments_bootstrap_roles(synthesized) -> None:
    _, template, _ = synthesized
    assert resources_of(template, "AWS::IAM::ManagedPolicy") == {}
    # Each deploy role only its own qualifier's bootstrap roles (cdk-<qualifier>-*); the diff role none: it reads
    # prod's own stacks itself (the lookup role's ReadOnlyAccess would read the whole account, decision lines too).
    version = {"ReadCdkBootstrapVersion": _bootstrap(PROD_ACCOUNT, PROD_REGION, "decprod")["ReadCdkBootstrapVersion"]}
    expected = {
        "decision-endpoints-github-deploy-dev": {
            **_bootstrap(DEV_ACCOUNT, "us-west-2", "decdev"),
            # check-deployed after dev's deployment: the role of dev's account that may call dev's endpoints
            "AssumeDeployedCheckRole": [CHECK_ROLE_ARN],
        },
        "decision-endpoints-github-deploy-prod": {
            **_bootstrap(PROD_ACCOUNT, PROD_REGION, "decprod"),
            # check-deployed after prod's deployment, through prod's own check role
            "AssumeDeployedCheckRole": [f"arn:aws:iam::{PROD_ACCOUNT}:role/decision-prod-deployed-check"],
        },
        "decision-endpoints-github-diff-prod": {
            "ReadEnvironmentStacks": [
                f"arn:aws:cloudformation:{PROD_REGION}:{PROD_ACCOUNT}:stack/DecisionEndpoints-prod-*/*"
            ],
            **version,
        },
    }
    reads = {"cloudformation:DescribeStacks", "cloudformation:GetTemplate", "cloudformation:ListStackResources"}
    for name, (role_id, role) in deploy_roles(template).items():
        assert "ManagedPolicyArns" not in role["Properties"]
        statements = attached_statements(template, role_id)
        actions = {s["Sid"]: set(as_list(s["Action"])) for s in statements}
        if "-diff-" in name:
            assert actions == {"ReadEnvironmentStacks": reads, "ReadCdkBootstrapVersion": {"ssm:GetParameter"}}
        else:
            checks = {"AssumeDeployedCheckRole": {"sts:AssumeRole"}}
            assert actions == {
                "AssumeCdkBootstrapRoles": {"sts:AssumeRole"},
                "ReadCdkBootstrapVersion": {"ssm:GetParameter"},
                **checks,  # each deploy role checks its environment's endpoints after the deploy
            }
        assert all(s["Effect"] == "Allow" for s in statements)
        resources = {s["Sid"]: sorted(arn_text(r) for r in as_list(s["Resource"])) for s in statements}
        assert resources == expected[name], name
    # Every inline policy belongs to exactly one role.
    assert all(len(p["Properties"]["Roles"]) == 1 for p in resources_of(template, "AWS::IAM::Policy").values())


def test_the_diff_roles_stacks_are_prods_and_only_prods() -> None:
    pattern = f"arn:aws:cloudformation:{PROD_REGION}:{PROD_ACCOUNT}:stack/{environment_stacks('prod')}/*"
    stack = f"arn:aws:cloudformation:{PROD_REGION}:{PROD_ACCOUNT}:stack/{{}}/0b1c2d3e"
    assert all(fnmatchcase(stack.format(stack_name("prod", part)), pattern) for part in ("Foundation", "Serving"))
    for other in (stack_name("dev", "Serving"), GITHUB_DEPLOY_STACK, "CDKToolkit-decprod"):
        assert not fnmatchcase(stack.format(other), pattern), other


def test_each_deploy_role_may_assume_besides_its_bootstrap_roles_only_its_environments_check_role(synthesized) -> None:
    """check-deployed runs with decision-<env>-deployed-check of the environment's account (SageMaker invokes only
    the caller's account's endpoints): each deploy role may assume exactly its own besides its bootstrap roles, the
    diff role none."""
    _, template, _ = synthesized
    assumable = {
        name: {
            arn_text(r)
            for s in attached_statements(template, role_id)
            if "sts:AssumeRole" in as_list(s["Action"])
            for r in as_list(s["Resource"])
        }
        for name, (role_id, _) in deploy_roles(template).items()
    }
    bootstrap = {
        name: set(_bootstrap(account, region, qualifier)["AssumeCdkBootstrapRoles"])
        for name, (account, region, qualifier) in {
            "decision-endpoints-github-deploy-dev": (DEV_ACCOUNT, "us-west-2", "decdev"),
            "decision-endpoints-github-deploy-prod": (PROD_ACCOUNT, PROD_REGION, "decprod"),
        }.items()
    }
    assert assumable["decision-endpoints-github-deploy-dev"] - bootstrap["decision-endpoints-github-deploy-dev"] == {
        CHECK_ROLE_ARN
    }
    assert assumable["decision-endpoints-github-deploy-prod"] - bootstrap["decision-endpoints-github-deploy-prod"] == {
        f"arn:aws:iam::{PROD_ACCOUNT}:role/decision-prod-deployed-check"
    }
    assert assumable["decision-endpoints-github-diff-prod"] == set()
    # No role calls an endpoint itself: from this account it could not reach dev's.
    assert not any(
        "sagemaker:" in json.dumps(s["Action"])
        for role_id, _ in deploy_roles(template).values()
        for s in attached_statements(template, role_id)
    )


def test_prods_check_role_is_trusted_by_the_prod_github_role_and_invokes_prods_endpoints_only(synthesized) -> None:
    """After prod's deploy, deploy.yml checks prod's variants (where prod's model first meets AWS's build) through
    prod's own check role, reached from prod's deploy role, which gains no SageMaker permission itself."""
    app, github, _ = synthesized
    serving = json.loads((Path(app.outdir) / "DecisionEndpoints-prod-Serving.template.json").read_text())
    ((role_id, role),) = check_roles(serving).values()
    assert role["Properties"]["RoleName"] == "decision-prod-deployed-check"
    (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"AWS": f"arn:aws:iam::{PROD_ACCOUNT}:root"}
    assert trust["Condition"] == {
        "ArnEquals": {"aws:PrincipalArn": f"arn:aws:iam::{PROD_ACCOUNT}:role/decision-endpoints-github-deploy-prod"}
    }
    (statement,) = attached_statements(serving, role_id)
    assert set(as_list(statement["Action"])) == {"sagemaker:DescribeEndpoint", "sagemaker:InvokeEndpoint"}
    assert sorted(arn_text(r) for r in as_list(statement["Resource"])) == [
        f"arn:aws:sagemaker:{PROD_REGION}:{PROD_ACCOUNT}:endpoint/decision-prod-cpu",
        f"arn:aws:sagemaker:{PROD_REGION}:{PROD_ACCOUNT}:endpoint/decision-prod-gpu",
    ]
    assert serving["Outputs"]["DeployedCheckRoleArn"]["Value"] == {"Fn::GetAtt": [role_id, "Arn"]}
    prod_id, _ = deploy_roles(github)["decision-endpoints-github-deploy-prod"]
    prod_statements = attached_statements(github, prod_id)
    (assume,) = [s for s in prod_statements if s["Sid"] == "AssumeDeployedCheckRole"]
    assert as_list(assume["Resource"]) == [f"arn:aws:iam::{PROD_ACCOUNT}:role/decision-prod-deployed-check"]
    assert not [a for s in prod_statements for a in as_list(s["Action"]) if a.startswith("sagemaker:")]


def test_an_approval_gated_environment_in_another_account_diffs_through_its_lookup_role() -> None:
    """The diff role lives in prod's account; a staging account's stacks are read through staging's own role."""
    context = github_context()
    context["environments"]["staging"] = {
        **context["environments"]["prod"],
        "account": "777788889999",
        "bootstrap_qualifier": "decstage",
    }
    config = load_github(context["github"], context["environments"])
    assert config is not None and config.home_target.environment == "prod"
    template = Template.from_stack(GitHubDeployStack(cdk.App(), "GitHubDeploy", config=config)).to_json()
    role_id, _ = deploy_roles(template)["decision-endpoints-github-diff-staging"]
    (assume,) = [s for s in attached_statements(template, role_id) if s["Sid"] == "AssumeCdkBootstrapRoles"]
    assert arn_text(assume["Resource"]).endswith(":role/cdk-decstage-lookup-role-777788889999-eu-west-1")


def test_each_roles_arn_is_an_output_naming_its_github_variable(synthesized) -> None:
    _, template, _ = synthesized
    roles = {role_id: name for name, (role_id, _) in deploy_roles(template).items()}
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


def test_nag_clean_with_one_acknowledgement_and_cfn_lint_clean(synthesized) -> None:
    app, _, path = synthesized
    stack = app.node.find_child(GITHUB_DEPLOY_STACK)
    # One: the diff role's stack pattern (a stack ARN ends in a generated id).
    stacks = f"arn:aws:cloudformation:{PROD_REGION}:{PROD_ACCOUNT}:stack/DecisionEndpoints-prod-*/*"
    assert {path: {r.removeprefix("Annotation::") for r in rules} for path, rules in acknowledged(stack).items()} == {
        f"{GITHUB_DEPLOY_STACK}/DiffRoleProd": {f"AwsSolutions-IAM5[Resource::{stacks}]"}
    }
    assert isinstance(stack, cdk.Stack) and stack.termination_protection
    errors = [m for m in lint_file(path, ManualArgs(regions=["us-west-2"])) if m.rule.id.startswith("E")]
    assert errors == []


def test_an_existing_provider_is_referenced_not_created() -> None:
    context = github_context(create_oidc_provider=False)
    config = load_github(context["github"], context["environments"])
    assert config is not None
    app = cdk.App()
    template = Template.from_stack(GitHubDeployStack(app, "GitHubDeploy", config=config)).to_json()
    assert resources_of(template, "AWS::IAM::OIDCProvider") == {}
    roles = deploy_roles(template)
    assert len(roles) == 3
    for _, role in roles.values():
        principal = role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]["Federated"]
        assert arn_text(principal) == f"arn:${{AWS::Partition}}:iam::{PROD_ACCOUNT}:oidc-provider/{HOST}"  # pinned


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
        load_github(github_context()["github"], environments)
    assert "environments.prod.account:" in str(caught.value)
    assert "environments.prod.region:" in str(caught.value)


def test_environments_sharing_bootstrap_roles_get_no_github_roles() -> None:
    """Both shipped environments unpinned in one region: without their own qualifiers one role could deploy both."""
    environments = cdk_context()["environments"]
    for env in environments.values():
        env.pop("bootstrap_qualifier")
    with pytest.raises(ConfigError, match=re.escape("environments.dev and environments.prod: both may deploy")):
        load_github(github_context()["github"], environments)


def test_immutable_subjects_name_the_owner_and_repository_ids() -> None:
    """Repositories created from 15 July 2026 on issue repo:OWNER@ID/REPO@ID subjects (configure-aws-credentials)."""
    context = github_context(owner_id=123456, repository_id=789012)
    config = load_github(context["github"], context["environments"])
    assert config is not None
    prefix = f"repo:{OWNER}@123456/{REPO}@789012"
    assert config.subject("dev") == f"{prefix}:ref:refs/heads/main"
    assert config.subject("prod") == f"{prefix}:environment:prod"
    assert config.diff_subject("prod") == f"{prefix}:environment:prod-diff"
    # The id as a claim STS checks too; the name-only configuration has none (a renamed repository's name is free).
    template = Template.from_stack(GitHubDeployStack(cdk.App(), "GitHubDeploy", config=config)).to_json()
    for name, (_, role) in deploy_roles(template).items():
        (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert trust["Condition"]["StringEquals"][f"{HOST}:repository_id"] == "789012", name
        assert not any("owner_id" in key for key in trust["Condition"]["StringEquals"])  # STS has no such key
    plain = load_github(github_context()["github"], context["environments"])
    assert plain is not None and f"{HOST}:repository_id" not in plain.trust(plain.subject("dev"))
    with pytest.raises(ConfigError, match="set both"):
        load_github(github_context(owner_id=123456)["github"], context["environments"])


# --- issue 29: the dev pipeline cannot reach prod -------------------------------------------------------------


def test_the_stack_lives_in_prods_account_and_deploys_through_prods_bootstrap(synthesized) -> None:
    """Not CDK's default qualifier (the docs bootstrap none), nor an account dev's bootstrap administers."""
    app, template, _ = synthesized
    stack = app.node.find_child(GITHUB_DEPLOY_STACK)
    assert isinstance(stack, cdk.Stack)
    assert (stack.account, stack.region) == (PROD_ACCOUNT, PROD_REGION)
    assert template["Parameters"]["BootstrapVersion"]["Default"] == "/cdk-bootstrap/decprod/version"
    artifact = app.synth().get_stack_by_name(GITHUB_DEPLOY_STACK)
    assert artifact.assume_role_arn == (
        f"arn:${{AWS::Partition}}:iam::{PROD_ACCOUNT}:role/cdk-decprod-deploy-role-{PROD_ACCOUNT}-{PROD_REGION}"
    )


def _tags(resource: Mapping[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in resource["Properties"].get("Tags", [])}


def test_each_role_carries_its_own_environments_tags_whatever_env_synthesizes_it(synthesized) -> None:
    _, template, _ = synthesized  # synthesized with -c env=prod
    shipped = cdk_context()["environments"]
    for name, (_, role) in deploy_roles(template).items():
        environment = name.rsplit("-", 1)[1]
        assert _tags(role) == {
            "project": "decision-endpoints",
            "environment": environment,
            **shipped[environment]["tags"],
        }, name
    ((_, provider),) = resources_of(template, "AWS::IAM::OIDCProvider").items()
    assert _tags(provider) == {"project": "decision-endpoints"}  # shared by every environment: none of theirs


def _principals(template: Mapping[str, Any]) -> list[str]:
    """Every principal an Allow of a resource or trust policy of `template` names, as text (a Deny grants none)."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if "Principal" in value and value.get("Effect") == "Allow":
                for kind, who in value["Principal"].items() if isinstance(value["Principal"], dict) else []:
                    found.extend(f"{kind}:{arn_text(w)}" for w in as_list(who))
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(template["Resources"])
    return found


def test_no_principal_the_dev_pipeline_can_become_acts_on_prod(synthesized) -> None:
    """The dev pipeline is the dev role (trusted by main, no approval). It may become only the bootstrap roles it
    may assume, all in dev's account (and what they pass: dev's execution role, in dev's account too). Prod's
    stacks, resources and key are in prod's account, where every policy trusts prod's own account, its OIDC
    provider or an AWS service bound to prod's own resources: nothing of dev's account."""
    app, template, _ = synthesized
    roles = deploy_roles(template)
    dev_id, _ = roles["decision-endpoints-github-deploy-dev"]
    for statement in attached_statements(template, dev_id):
        for arn in (arn_text(r) for r in as_list(statement["Resource"])):
            assert f":{DEV_ACCOUNT}:" in arn and PROD_ACCOUNT not in arn and "decprod" not in arn, arn
            assert "-prod-" not in arn, arn  # check-deployed: dev's check role only, not prod's name in dev's account
    assumable = {
        arn_text(r)
        for s in attached_statements(template, dev_id)
        if s["Action"] == "sts:AssumeRole"
        for r in as_list(s["Resource"])
    }
    assert assumable and all(arn.split(":")[4] == DEV_ACCOUNT for arn in assumable)

    prod = {
        part: json.loads((Path(app.outdir) / f"DecisionEndpoints-prod-{part}.template.json").read_text())
        for part in ("Foundation", "Serving")
    }
    for name, tpl in (*prod.items(), ("GitHubDeploy", template)):
        for principal in _principals(tpl):
            kind, who = principal.split(":", 1)
            if kind == "AWS":
                assert who.replace("${AWS::Partition}", "aws") == f"arn:aws:iam::{PROD_ACCOUNT}:root", (name, principal)
            elif kind == "Federated":
                assert who.endswith(f"{PROD_ACCOUNT}:oidc-provider/{HOST}") or who.startswith("${"), (name, principal)
            else:
                assert kind == "Service", (name, principal)
            assert DEV_ACCOUNT not in who, (name, principal)
    # prod's key: administered by prod's account; the services only for prod's own alarms and endpoint log groups.
    (key,) = [r for r in prod["Foundation"]["Resources"].values() if r["Type"] == "AWS::KMS::Key"]
    for statement in key["Properties"]["KeyPolicy"]["Statement"]:
        conditions = json.dumps(statement.get("Condition", {}))
        if "Service" in statement["Principal"]:
            assert PROD_ACCOUNT in conditions and "-prod-" in conditions and "-dev-" not in conditions, statement


@pytest.mark.parametrize(
    ("accounts", "named"),
    [
        ({"dev": None, "prod": None}, "environments.prod.account is unpinned"),
        ({"dev": None, "prod": PROD_ACCOUNT}, f"environments.dev may deploy to its account {PROD_ACCOUNT}"),
        ({"dev": PROD_ACCOUNT, "prod": PROD_ACCOUNT}, f"environments.dev may deploy to its account {PROD_ACCOUNT}"),
    ],
)
def test_a_pipeline_deployed_prod_sharing_an_account_is_refused_with_the_fix(
    accounts: dict[str, str | None], named: str
) -> None:
    """Own qualifiers (decdev, decprod, as shipped) are not enough: dev's execution role administers the account."""
    context = github_context()
    for environment, account in accounts.items():
        context["environments"][environment]["account"] = account
    with pytest.raises(ConfigError) as caught:
        load_github(context["github"], context["environments"])
    message = str(caught.value)
    assert "environments are not isolated from the pipeline" in message and named in message
    assert "Fix: pin environments.prod.account to an account of its own" in message
    assert "deploy the GitHub stack into prod's account (docs/deploy.md, Isolating environments)" in message


def test_synth_of_any_environment_refuses_the_shipped_shared_account_once_the_pipeline_is_set() -> None:
    context = cdk_context()
    context["github"] = {"owner": OWNER, "repository": REPO, "create_oidc_provider": True}
    with pytest.raises(
        ConfigError, match=re.escape("environments.prod is deployed by the pipeline behind an approval")
    ):
        build_app("dev", context=context, outdir=tempfile.mkdtemp(prefix="cdk-refused-"))


def _bootstrap_commands() -> list[str]:
    """Every `bin/cdk bootstrap` command of docs/deploy.md's bash blocks, continuation lines joined."""
    text = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    commands: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        commands += [line.strip() for line in joined.splitlines() if line.strip().startswith("bin/cdk bootstrap")]
    return commands


def test_the_documented_bootstrap_commands_match_the_isolation() -> None:
    """Each environment's qualifier and toolkit stack; only dev's bootstrap trusts another account, prod's."""
    commands = _bootstrap_commands()
    shipped = cdk_context()["environments"]
    for environment in ("dev", "prod"):
        qualifier = shipped[environment]["bootstrap_qualifier"]
        mine = [c for c in commands if f"--qualifier {qualifier} " in c]
        assert mine, environment
        assert all(f"--toolkit-stack-name CDKToolkit-{qualifier}" in c for c in mine), mine
    trusting = [c for c in commands if "--trust" in c]
    assert trusting and all("--qualifier decdev" in c and "--trust <prod-account-id>" in c for c in trusting)
    assert all("--cloudformation-execution-policies" in c for c in trusting)  # the CLI refuses --trust without


# --- issue 36: the pipeline's home is prod's account, or the one github.home names; never a guess --------------

DEMO_ACCOUNT = "777788889999"


def _with(context: dict[str, Any], *names: str) -> dict[str, Any]:
    """`context` plus approval-gated environments `names`: copies of prod, each in an account of its own."""
    for i, name in enumerate(names):
        context["environments"][name] = {
            **copy.deepcopy(context["environments"]["prod"]),
            "account": DEMO_ACCOUNT if i == 0 else f"{i}{DEMO_ACCOUNT[1:]}",
            "bootstrap_qualifier": f"dec{name}"[:10],
            "tags": {"cost-center": f"decision-endpoints-{name}"},
        }
    return context


@pytest.fixture(scope="module")
def with_demo() -> tuple[cdk.App, dict[str, Any]]:
    """dev, demo and prod, synthesized with -c env=demo: demo sorts before prod, and is not the home."""
    outdir = Path(tempfile.mkdtemp(prefix="cdk-github-demo-"))
    atexit.register(shutil.rmtree, outdir, True)
    app = build_app("demo", context=_with(github_context(), "demo"), outdir=str(outdir))
    app.synth()  # raises on any cdk-nag finding
    return app, json.loads((outdir / f"{GITHUB_DEPLOY_STACK}.template.json").read_text(encoding="utf-8"))


def test_with_demo_beside_prod_the_stack_lives_in_prods_account(with_demo) -> None:
    app, template = with_demo
    stack = app.node.find_child(GITHUB_DEPLOY_STACK)
    assert isinstance(stack, cdk.Stack)
    assert (stack.account, stack.region) == (PROD_ACCOUNT, PROD_REGION)
    assert template["Parameters"]["BootstrapVersion"]["Default"] == "/cdk-bootstrap/decprod/version"
    artifact = app.synth().get_stack_by_name(GITHUB_DEPLOY_STACK)
    assert artifact.assume_role_arn == (
        f"arn:${{AWS::Partition}}:iam::{PROD_ACCOUNT}:role/cdk-decprod-deploy-role-{PROD_ACCOUNT}-{PROD_REGION}"
    )


def test_with_demo_beside_prod_each_role_trusts_and_assumes_as_before(with_demo) -> None:
    """prod's roles as with dev and prod alone; demo's deploy role its own bootstrap in demo's account (demo's
    bootstrap trusts prod's account, as dev's does), and its diff role demo's lookup role (another account)."""
    _, template = with_demo
    roles = deploy_roles(template)
    trusted = {
        **TRUSTED,
        "decision-endpoints-github-deploy-demo": f"repo:{OWNER}/{REPO}:environment:demo",
        "decision-endpoints-github-diff-demo": f"repo:{OWNER}/{REPO}:environment:demo-diff",
    }
    assert set(roles) == set(trusted)
    for name, (_, role) in roles.items():
        (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert trust["Condition"] == {
            "StringEquals": {f"{HOST}:aud": "sts.amazonaws.com", f"{HOST}:sub": trusted[name], **BOUND}
        }, name
    resources = {
        name: {
            s["Sid"]: sorted(arn_text(r) for r in as_list(s["Resource"]))
            for s in attached_statements(template, role_id)
        }
        for name, (role_id, _) in roles.items()
    }
    assert resources["decision-endpoints-github-deploy-prod"] == {
        **_bootstrap(PROD_ACCOUNT, PROD_REGION, "decprod"),
        "AssumeDeployedCheckRole": [f"arn:aws:iam::{PROD_ACCOUNT}:role/decision-prod-deployed-check"],
    }
    assert resources["decision-endpoints-github-diff-prod"] == {
        "ReadEnvironmentStacks": [
            f"arn:aws:cloudformation:{PROD_REGION}:{PROD_ACCOUNT}:stack/DecisionEndpoints-prod-*/*"
        ],
        "ReadCdkBootstrapVersion": [
            f"arn:aws:ssm:{PROD_REGION}:{PROD_ACCOUNT}:parameter/cdk-bootstrap/decprod/version"
        ],
    }
    # deploy.yml deploys and checks dev and prod only: demo's deploy role gets no check role
    assert resources["decision-endpoints-github-deploy-demo"] == _bootstrap(DEMO_ACCOUNT, PROD_REGION, "decdemo")
    assert resources["decision-endpoints-github-diff-demo"] == _bootstrap(
        DEMO_ACCOUNT, PROD_REGION, "decdemo", ("lookup-role",)
    )


def test_without_prod_github_home_names_the_home() -> None:
    context = _with(github_context(), "demo", "staging")
    del context["environments"]["prod"]
    config = load_github({**context["github"], "home": "staging"}, context["environments"])
    assert config is not None and config.home_target.environment == "staging"
    # Naming prod itself, where it exists, is allowed: it is the home anyway.
    context = _with(github_context(), "demo")
    config = load_github({**context["github"], "home": "prod"}, context["environments"])
    assert config is not None and config.home_target.account == PROD_ACCOUNT


@pytest.mark.parametrize(
    ("gated", "home", "message"),
    [
        # No prod: neither of two approval-gated environments, nor a lone one, is guessed.
        (
            ("demo", "staging"),
            None,
            "the GitHub stack's home is ambiguous: no environment is prod, and the approval-"
            "gated environments are demo, staging; its account holds every deploy role",
        ),
        (("demo",), None, "Fix: set github.home to one of demo (docs/deploy.md, The one-time GitHub set-up)"),
        (
            ("demo", "staging"),
            "qa",
            "github.home is qa, which is not an approval-gated environment of cdk.json. "
            "Fix: set github.home to one of demo, staging",
        ),
        (("demo", "staging"), "dev", "github.home is dev, the branch environment: its pipeline needs no approval"),
        (("demo", "staging"), "Demo", "github.home: String should match pattern"),
    ],
)
def test_without_prod_an_unsettled_home_is_refused_naming_github_home(
    gated: tuple[str, ...], home: str | None, message: str
) -> None:
    context = _with(github_context(), *gated)
    del context["environments"]["prod"]
    github = {**context["github"], **({"home": home} if home is not None else {})}
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_github(github, context["environments"])


def test_beside_prod_github_home_may_not_move_the_stack_elsewhere() -> None:
    context = _with(github_context(), "demo")
    with pytest.raises(ConfigError) as caught:
        load_github({**context["github"], "home": "demo"}, context["environments"])
    assert str(caught.value) == (
        "invalid cdk.json context:\n  github.home is demo, but environments.prod exists: the GitHub stack lives in "
        "prod's account (in demo's account, whoever deploys demo could rewrite prod's deploy role). "
        "Fix: remove github.home"
    )


@pytest.mark.parametrize(("prod", "home"), [(True, "prod"), (False, "staging")])
def test_an_unpinned_gated_environment_is_told_the_stacks_home_not_its_own_account(prod: bool, home: str) -> None:
    context = _with(github_context(), "demo", "staging")
    context["environments"]["demo"]["account"] = None
    github = context["github"]
    if not prod:
        del context["environments"]["prod"]
        github = {**github, "home": home}
    with pytest.raises(ConfigError) as caught:
        load_github(github, context["environments"])
    message = str(caught.value)
    assert "Fix: pin environments.demo.account to an account of its own" in message
    assert f"deploy the GitHub stack into {home}'s account (docs/deploy.md, Isolating environments)" in message
    assert "into demo's account" not in message


def test_synth_refuses_an_ambiguous_home_naming_the_key() -> None:
    context = _with(github_context(), "demo", "staging")
    del context["environments"]["prod"]
    with pytest.raises(ConfigError, match=re.escape("Fix: set github.home to one of demo, staging")):
        build_app("dev", context=context, outdir=tempfile.mkdtemp(prefix="cdk-refused-"))
