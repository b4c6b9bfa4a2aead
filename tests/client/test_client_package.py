"""The client package (clients/python) installs on its own: in a fresh virtual environment, from PyPI, with only
its declared dependencies (at the versions requirements.txt pins, as constraints), and then works there.

Needs PyPI (CI has it); pip's cache keeps a second run to seconds.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Nothing of the deployment side may come along: no CDK, no llama.cpp, no adapter stack, no boto3.
FORBIDDEN = {"aws-cdk-lib", "constructs", "cdk-nag", "jsii", "llama-cpp-python", "fastapi", "uvicorn", "boto3"}
# One call through the transport in the fresh environment, answered by botocore's Stubber (stand-in for AWS).
SMOKE = """
import io, json
import botocore.session
from botocore.response import StreamingBody
from botocore.stub import Stubber
from decision_endpoints_client import sagemaker_client
from typesafe_sdk import Noul

session = botocore.session.get_session()
session.set_credentials("AKIDEXAMPLE", "secret")
runtime = session.create_client("sagemaker-runtime", region_name="eu-west-1")
answer = json.dumps({"model": "m", "answers": {"q": {"type": "noul", "noul": 0.25}},
                     "usage": {"input_tokens": 1, "output_tokens": 0}}).encode()
with Stubber(runtime) as stub:
    stub.add_response("invoke_endpoint", {"Body": StreamingBody(io.BytesIO(answer), len(answer))})
    with sagemaker_client("decision-dev-cpu", client=runtime) as client:
        print(client.system_one(state="s", questions={"q": Noul(instructions="?")}).nouls["q"].noul)
"""


@pytest.mark.slow
def test_the_package_installs_and_works_in_a_clean_venv(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(ROOT / "clients" / "python", source, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    install = [python, "-m", "pip", "install", "--quiet", "-c", str(ROOT / "requirements.txt"), str(source)]
    done = subprocess.run(install, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format=json"], capture_output=True, text=True, check=True, timeout=120
    )
    installed = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert {"decision-endpoints-client", "botocore", "httpx2", "anyio", "typesafe-sdk"} <= installed
    assert not installed & FORBIDDEN, installed & FORBIDDEN
    smoke = subprocess.run([python, "-c", SMOKE], capture_output=True, text=True, timeout=120, check=False)
    assert smoke.returncode == 0, smoke.stderr[-3000:]
    assert smoke.stdout.strip() == "0.25"
