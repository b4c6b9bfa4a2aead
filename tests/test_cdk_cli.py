"""`cdk synth -c env=<name>` through the real CLI and cdk.json, offline and without AWS credentials."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.cdk_support import ROOT

CDK = ROOT / "node_modules" / ".bin" / "cdk"


@pytest.mark.slow
@pytest.mark.parametrize("environment", ["dev"])
def test_cli_synth_offline_without_credentials(environment: str, tmp_path: Path) -> None:
    if not CDK.exists():
        pytest.fail("node_modules/.bin/cdk is missing: run ./dev setup (npm ci)")
    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.fail("cdk.json runs .venv/bin/python: run ./dev setup")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and not k.startswith("CDK_")}
    env |= {
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": str(tmp_path / "no-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-credentials"),
        "CDK_DISABLE_VERSION_CHECK": "1",
    }
    out = tmp_path / "cdk.out"
    result = subprocess.run(
        [str(CDK), "synth", "-c", f"env={environment}", "--quiet", "--no-notices", "-o", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert sorted(p.name for p in out.glob("*.template.json")) == [
        f"DecisionEndpoints-{environment}-Foundation.template.json",
        f"DecisionEndpoints-{environment}-Serving.template.json",
    ]
