"""The GitHub Actions workflows, which cannot run here: actionlint (with shellcheck on every run: script) and
the properties deploy.yml must keep (OIDC and no keys, dev then approved prod, preflight before credentials,
each job on its own environment's role, whose trust accepts that job's token and no other job's).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from decision_spec.github_config import APPROVAL_ENVIRONMENT, DEPLOY_BRANCH, diff_environment

from stacks.github_config import load_github
from stacks.github_deploy_stack import diff_role_variable, role_variable
from tests.cdk_support import cdk_context

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
BIN = Path(sys.executable).parent
PINNED = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}$")


def _load(name: str) -> dict[Any, Any]:
    loaded: dict[Any, Any] = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    return loaded


@pytest.fixture(scope="module")
def deploy() -> dict[Any, Any]:
    return _load("deploy.yml")


def test_actionlint_finds_nothing() -> None:
    files = sorted(str(p) for p in WORKFLOWS.glob("*.yml"))
    assert {Path(f).name for f in files} >= {"synth.yml", "deploy.yml"}
    result = subprocess.run(
        [str(BIN / "actionlint"), "-shellcheck", str(BIN / "shellcheck"), "-pyflakes=", "-no-color", *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dev_deploys_on_main_and_prod_after_approval(deploy: dict[Any, Any]) -> None:
    # PyYAML reads the key `on` as True.
    assert deploy[True]["push"] == {"branches": [DEPLOY_BRANCH]}
    dev, diff, prod = deploy["jobs"]["dev"], deploy["jobs"]["prod-diff"], deploy["jobs"]["prod"]
    # The dev role trusts `ref:refs/heads/main`, the prod role `environment:prod` (github_deploy_stack).
    assert "environment" not in dev
    assert diff["environment"] == diff_environment(APPROVAL_ENVIRONMENT)
    assert prod["environment"] == APPROVAL_ENVIRONMENT
    # The diff runs before the approval-gated job: reviewers approve a diff they have seen.
    assert diff["needs"] == "dev" and prod["needs"] == "prod-diff"
    for job in (dev, diff, prod):
        assert job["if"] == f"github.ref == 'refs/heads/{DEPLOY_BRANCH}'"
    assert deploy["concurrency"]["cancel-in-progress"] is False


# job -> (its environment, the role variable it assumes, the steps it runs in order)
JOBS = {
    "dev": ("dev", role_variable("dev"), ["synth", "credentials", "diff", "deploy", "chained"]),
    "prod-diff": ("prod", diff_role_variable("prod"), ["synth", "credentials", "diff", "artifact"]),
    "prod": ("prod", role_variable("prod"), ["synth", "credentials", "deploy", "chained"]),
}


@pytest.mark.parametrize("job_name", sorted(JOBS))
def test_each_job_preflights_then_assumes_its_role(deploy: dict[Any, Any], job_name: str) -> None:
    environment, variable, expected = JOBS[job_name]
    job = deploy["jobs"][job_name]
    assert job["env"] == {"DEPLOY_ENV": environment}
    assert job["permissions"] == {"contents": "read", "id-token": "write"}
    kinds = []
    for step in job["steps"]:
        uses, run = step.get("uses", ""), step.get("run", "")
        if uses.startswith("aws-actions/configure-aws-credentials@") and step["with"].get("role-chaining"):
            # the deployed-variant check's role in the environment's account, chained from the deploy role's session
            kinds.append("chained")
            assert step["with"]["role-to-assume"] == "${{ steps.check-role.outputs.arn }}"
            assert step["with"]["role-skip-session-tagging"] is True  # its trust grants no sts:TagSession
            assert not {"aws-access-key-id", "aws-secret-access-key"} & set(step["with"])
        elif uses.startswith("aws-actions/configure-aws-credentials@"):
            kinds.append("credentials")
            assert step["with"]["role-to-assume"].startswith(f"${{{{ vars.{variable} }}}}")
            assert not {"aws-access-key-id", "aws-secret-access-key"} & set(step["with"])
        elif uses.startswith("actions/upload-artifact@"):
            kinds.append("artifact")
            assert "cdk-diff.txt" in step["with"]["path"]
        elif "bin/cdk synth" in run:
            kinds.append("synth")
        elif "bin/cdk diff" in run:
            kinds.append("diff")
            assert "$GITHUB_STEP_SUMMARY" in run
        elif "bin/cdk deploy" in run:
            kinds.append("deploy")
            assert "--require-approval never" in run
            assert '"DecisionEndpoints-${DEPLOY_ENV}-*"' in run  # never the GitHubDeploy stack
    assert kinds == expected


def test_prod_diffs_read_only_and_deploys_only_the_templates_it_diffed(deploy: dict[Any, Any]) -> None:
    diff_job, prod = deploy["jobs"]["prod-diff"], deploy["jobs"]["prod"]
    (diff,) = [s["run"] for s in diff_job["steps"] if "bin/cdk diff" in s.get("run", "")]
    assert "--no-change-set" in diff  # reads only: the diff role may not assume the deploy role
    assert diff_job["outputs"]["templates-sha256"] == "${{ steps.synth.outputs.templates-sha256 }}"
    (synth,) = [s for s in prod["steps"] if "bin/cdk synth" in s.get("run", "")]
    assert synth["env"]["DIFFED"] == "${{ needs.prod-diff.outputs.templates-sha256 }}"
    assert '"$synthesized" != "$DIFFED"' in synth["run"] and "exit 1" in synth["run"]


def _job_subject(job: dict[Any, Any], owner: str, repository: str) -> str:
    """The `sub` claim GitHub gives the job's OIDC token: its environment's when it references one, else its ref."""
    environment = job.get("environment")
    if environment is not None:
        name = environment["name"] if isinstance(environment, dict) else environment
        return f"repo:{owner}/{repository}:environment:{name}"
    assert job["if"] == f"github.ref == 'refs/heads/{DEPLOY_BRANCH}'"  # runs on main only
    return f"repo:{owner}/{repository}:ref:refs/heads/{DEPLOY_BRANCH}"


def test_each_jobs_token_is_trusted_by_its_own_role_only(deploy: dict[Any, Any]) -> None:
    context = cdk_context()
    owner, repository = "example-org", "decision-endpoints"
    github = {"owner": owner, "repository": repository, "create_oidc_provider": True}
    for environment, account in zip(sorted(context["environments"]), ("111122223333", "444455556666"), strict=True):
        context["environments"][environment]["account"] = account  # the pipeline needs an account each
    config = load_github(github, context["environments"])
    assert config is not None
    environments = [target.environment for target in config.targets]
    # Every role's subject: the deploy role's by environment, and the diff role's of each approval-gated one.
    subjects = {env: config.subject(env) for env in environments}
    subjects |= {diff_environment(env): config.diff_subject(env) for env in environments if env != "dev"}
    assert sorted(deploy["jobs"]) == sorted(subjects)
    for job_name, job in deploy["jobs"].items():
        subject = _job_subject(job, owner, repository)
        trusting = [role for role, trusted in subjects.items() if trusted == subject]
        assert trusting == [job_name], (job_name, subject)


def test_no_stored_keys_and_third_party_actions_pinned_by_commit(deploy: dict[Any, Any]) -> None:
    text = (WORKFLOWS / "deploy.yml").read_text(encoding="utf-8")
    assert "secrets." not in text
    composite = yaml.safe_load((ROOT / ".github" / "actions" / "setup-cdk" / "action.yml").read_text())
    steps = [s for job in deploy["jobs"].values() for s in job["steps"]] + composite["runs"]["steps"]
    uses = [s["uses"] for s in steps if "uses" in s and not s["uses"].startswith("./")]
    assert uses
    assert [u for u in uses if not PINNED.match(u)] == []


def _index(steps: list[dict[str, Any]], found: str) -> int:
    """The index of the one step whose `run:` (or `uses:`) holds `found`."""
    (index,) = [i for i, s in enumerate(steps) if found in s.get("run", s.get("uses", ""))]
    return index


def test_prod_waits_for_the_deployed_check_and_the_decision_diff(deploy: dict[Any, Any]) -> None:
    jobs = deploy["jobs"]
    assert jobs["prod"]["needs"] == "prod-diff" and jobs["prod-diff"]["needs"] == "dev"
    assert "decision diff" in (WORKFLOWS / "deploy.yml").read_text().split("\nname:")[0]  # the header says so
    # dev: the check runs after Deploy, on success only, and its failure fails the job (so prod-diff never starts)
    dev = jobs["dev"]["steps"]
    check = _index(dev, ".venv/bin/decisionctl check-deployed")
    role = _index(dev, "DeployedCheckRoleArn")
    assert _index(dev, "bin/cdk deploy") < role < check
    chained = [i for i, s in enumerate(dev) if s.get("with", {}).get("role-chaining")]
    assert chained == [check - 1] and dev[role]["id"] == "check-role"  # the check runs as dev's check role
    step = dev[check]
    assert "continue-on-error" not in step and "if" not in step
    assert step["env"]["REGION"] == "${{ steps.synth.outputs.region }}"
    assert '--outputs cdk-outputs.json --region "$REGION"' in step["run"] and '--env "$DEPLOY_ENV"' in step["run"]
    assert "|| status=$?" in step["run"] and 'exit "$status"' in step["run"]
    assert step["run"].index('>> "$GITHUB_STEP_SUMMARY"') < step["run"].index('exit "$status"')


def test_prod_runs_devs_check_once_it_serves(deploy: dict[Any, Any]) -> None:
    """prod's model meets AWS's build only in prod (dev serves another model): after its Deploy, prod runs the check
    steps dev runs, the same text, as the last steps of its job."""
    dev, prod = deploy["jobs"]["dev"]["steps"], deploy["jobs"]["prod"]["steps"]
    role, check = _index(prod, "DeployedCheckRoleArn"), _index(prod, ".venv/bin/decisionctl check-deployed")
    assert _index(prod, "bin/cdk deploy") < role < check == len(prod) - 1
    assert prod[role:] == dev[_index(dev, "DeployedCheckRoleArn") :]
    assert "decisionctl rollback --env" in prod[check]["run"]


def test_prod_diff_diffs_the_served_record_before_the_approval(deploy: dict[Any, Any]) -> None:
    steps = deploy["jobs"]["prod-diff"]["steps"]
    assert steps[0]["uses"].startswith("actions/checkout@") and steps[0]["with"]["fetch-depth"] == 0
    template, served, decided = (
        _index(steps, "bin/cdk diff"),
        _index(steps, ".venv/bin/decisionctl served-record"),
        _index(steps, ".venv/bin/decisionctl decision-diff"),
    )
    upload = _index(steps, "actions/upload-artifact@")
    assert template < served < decided < upload
    assert (
        steps[served]["id"] == "served" and '--stack "DecisionEndpoints-${DEPLOY_ENV}-Serving"' in steps[served]["run"]
    )
    run = steps[decided]["run"]
    assert 'served-record.json "$RECORD" --env "$DEPLOY_ENV" --missing-base new' in run
    assert steps[decided]["env"]["RECORD"] == "${{ steps.served.outputs.record }}"
    assert 'exit "$status"' in run and '>> "$GITHUB_STEP_SUMMARY"' in run
    for step in (steps[served], steps[decided]):
        assert "continue-on-error" not in step and "if" not in step
    assert {"decision-diff.json", "decision-diff.md", "served-record.json"} <= set(
        steps[upload]["with"]["path"].split()
    )
    assert steps[upload]["if"] == "${{ !cancelled() && steps.diff.outcome == 'success' }}"
    assert steps[template]["id"] == "diff"


def test_pr_decision_diff_is_in_the_comment_and_a_failed_gate_fails_the_job() -> None:
    synth = _load("synth.yml")
    assert "evaluation/**" in synth[True]["pull_request"]["paths"]
    steps = synth["jobs"]["synth"]["steps"]
    template = _index(steps, "npx cdk diff")
    decisions = _index(steps, ".venv/bin/decisionctl decision-diff")
    comment = _index(steps, "gh pr comment")
    gate = _index(steps, "exit 1\n")
    upload = _index(steps, "actions/upload-artifact@")
    assert template < decisions < comment < gate
    step = steps[decisions]
    assert step["id"] == "decisions" and "continue-on-error" not in step and "if" not in step
    run = step["run"]
    assert '"$base/$base_record" "$record" --env "$env" --missing-base new' in run
    assert "cat decision-diff.md >> cdk-diff.md" in run and 'cat decision-diff.md >> "$GITHUB_STEP_SUMMARY"' in run
    assert 'echo "failed=${failed[*]}" >> "$GITHUB_OUTPUT"' in run
    # the gate step runs whenever an environment failed, even where the comment step is skipped (forks)
    assert steps[gate]["if"] == "steps.decisions.outputs.failed != ''" and "continue-on-error" not in steps[gate]
    assert steps[upload]["if"] == "always()" and "decision-diff-*.json" in steps[upload]["with"]["path"]
