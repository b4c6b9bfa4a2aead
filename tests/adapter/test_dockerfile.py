"""containers/Dockerfile: hadolint-clean, and built the way the buildspec and SageMaker expect."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import aws_cdk as cdk
import pytest

from stacks.image_build import CONTAINERS, dockerignore_patterns
from tests.conftest import tool

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = CONTAINERS / "Dockerfile"


@pytest.fixture(scope="module")
def text() -> str:
    return DOCKERFILE.read_text(encoding="utf-8")


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", text)
    out = []
    for line in joined.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            word, _, rest = stripped.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def final_stage(text: str) -> list[tuple[str, str]]:
    steps = instructions(text)
    last_from = max(i for i, (word, _) in enumerate(steps) if word == "FROM")
    return steps[last_from:]


def test_hadolint_is_clean() -> None:
    result = subprocess.run(
        [tool("hadolint"), "--failure-threshold", "info", "--no-color", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_base_image_is_an_argument_pinned_by_digest(text: str) -> None:
    default = re.search(r"^ARG BASE_IMAGE=(\S+)$", text, re.MULTILINE)
    assert default is not None
    assert re.fullmatch(r"public\.ecr\.aws/deep-learning-containers/llama-cpp:[\w.-]+@sha256:[0-9a-f]{64}", default[1])
    froms = [args for word, args in instructions(text) if word == "FROM"]
    assert froms and all(args.split()[0] == "${BASE_IMAGE}" for args in froms)


def test_bindings_match_the_project_pin_and_compile_nothing(text: str) -> None:
    requirements = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    pinned = re.search(r"^llama-cpp-python==(\S+)$", requirements, re.MULTILINE)
    assert pinned is not None
    assert f"ARG LLAMA_CPP_PYTHON_VERSION={pinned[1]}" in text
    assert re.search(r"^ARG LLAMA_CPP_PYTHON_SHA256=[0-9a-f]{64}$", text, re.MULTILINE)
    assert 'CMAKE_ARGS="-DLLAMA_BUILD=OFF' in text
    assert "--require-hashes" in text
    # The runtime stage installs wheels only: no compiler ships in the image.
    runtime_runs = " ".join(args for word, args in final_stage(text) if word == "RUN")
    assert "--only-binary=:all:" in runtime_runs and "dnf install" not in runtime_runs


def test_runtime_uses_the_dlc_library_and_the_adapter_entrypoint(text: str) -> None:
    stage = final_stage(text)
    env = " ".join(args for word, args in stage if word == "ENV")
    assert "LLAMA_CPP_LIB_PATH=/opt/decision/llama-lib" in env
    assert "DECISION_LLAMA_CPP_BUILD=${LLAMA_CPP_BUILD}" in env
    runs = " ".join(args for word, args in stage if word == "RUN")
    assert "-name libllama.so" in runs and "exit 1" in runs  # the build fails without the DLC's library
    assert ("ENTRYPOINT", '["serve"]') in stage
    assert ("CMD", "[]") in stage  # the base image's llama-server arguments must not reach serve
    assert ("EXPOSE", "8080") in stage
    users = [args for word, args in stage if word == "USER"]
    assert users[-1] not in ("root", "0", "0:0")


def test_copied_sources_exist_in_the_build_context(text: str) -> None:
    for word, args in instructions(text):
        if word == "COPY" and "--from=" not in args:
            source = args.split()[0]
            assert (CONTAINERS / source).exists(), f"COPY {source}: missing from containers/"


def test_dockerignore_keeps_caches_out_of_the_image_and_the_source_hash(tmp_path: Path) -> None:
    patterns = dockerignore_patterns()
    assert "**/__pycache__" in patterns
    copy = tmp_path / "containers"
    shutil.copytree(CONTAINERS, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))

    def fingerprint() -> str:
        return cdk.FileSystem.fingerprint(str(copy), exclude=patterns, ignore_mode=cdk.IgnoreMode.DOCKER)

    before = fingerprint()
    cache = copy / "decision_adapter" / "__pycache__"
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "stray.cpython-311.pyc").write_bytes(b"\0")
    assert fingerprint() == before
    (copy / "decision_adapter" / "new_module.py").write_text("x = 1\n", encoding="utf-8")
    assert fingerprint() != before
