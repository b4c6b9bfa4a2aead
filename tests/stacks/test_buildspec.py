"""buildspec/image.yml: valid CodeBuild 0.2, every shell step passes shellcheck, and the steps keep their order."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import llama_cpp
import pytest
import yaml

from stacks.image_build import BUILDSPEC
from tests.conftest import tool

# This machine's llama.cpp libraries (llama-cpp-python's CPU build): a stand-in for a CPU image's DLC libraries.
CPU_LLAMA_LIBS = Path(llama_cpp.__file__).parent / "lib"
# Set by CodeBuild itself, by the project (stacks/image_build.py) or per build by Custom::DecisionImage.
PROVIDED = {"AWS_REGION", "REPOSITORY_URI", "REPOSITORY_NAME", "IMAGE_TAG", "BASE_IMAGE", "FLAVOUR", "SOURCE_HASH"}


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(BUILDSPEC.read_text(encoding="utf-8"))
    return data


def commands(spec: dict[str, Any]) -> list[str]:
    """Every command, in the order CodeBuild runs them (one shell for the whole build in version 0.2)."""
    phases = [spec["phases"].get(name, {}) for name in ("install", "pre_build", "build", "post_build")]
    return [cmd for phase in phases for cmd in phase.get("commands", [])]


def test_structure(spec: dict[str, Any]) -> None:
    assert str(spec["version"]) == "0.2"
    assert spec["env"]["shell"] == "bash"
    assert spec["env"]["exported-variables"] == ["IMAGE_DIGEST"]
    assert set(spec["phases"]) <= {"install", "pre_build", "build", "post_build"}
    assert all(isinstance(cmd, str) for cmd in commands(spec))


def test_shell_steps_pass_shellcheck(spec: dict[str, Any], tmp_path: Path) -> None:
    script = tmp_path / "image-build.sh"
    exports = "".join(f'export {k}="{v}"\n' for k, v in spec["env"].get("variables", {}).items())
    script.write_text("#!/usr/bin/env bash\n" + exports + "\n".join(commands(spec)) + "\n", encoding="utf-8")
    result = subprocess.run(
        [tool("shellcheck"), "--shell=bash", "--severity=style", "--format=gcc", str(script)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_variable_is_provided_or_assigned(spec: dict[str, Any]) -> None:
    text = "\n".join(commands(spec))
    used = set(re.findall(r"\$\{?([A-Z][A-Z0-9_]*)", text))
    assigned = set(re.findall(r"(?:^|[\s;|&])([A-Z][A-Z0-9_]*)=", text)) | set(spec["env"].get("variables", {}))
    assert used - assigned <= PROVIDED, used - assigned - PROVIDED


def _index(steps: list[str], needle: str) -> int:
    return next(i for i, cmd in enumerate(steps) if needle in cmd)


def test_logs_in_builds_on_the_pinned_base_smoke_tests_then_pushes(spec: dict[str, Any]) -> None:
    steps = commands(spec)
    login_repo = _index(steps, 'docker login --username AWS --password-stdin "${REPOSITORY_URI%%/*}"')
    login_dlc = _index(steps, 'docker login --username AWS --password-stdin "${BASE_IMAGE%%/*}"')
    build = _index(steps, "docker build")
    smoke = _index(steps, "serve --check")
    push = _index(steps, "docker push")
    digest = max(i for i, cmd in enumerate(steps) if cmd.startswith("IMAGE_DIGEST="))
    assert max(login_repo, login_dlc) < build < smoke < push < digest
    assert '--build-arg "BASE_IMAGE=${BASE_IMAGE}"' in steps[build]
    assert "--file Dockerfile" in steps[build]
    assert "--network none" in steps[smoke]  # endpoints run with network isolation too
    assert '"$IMAGE_URI"' in steps[push] and "${IMAGE_TAG}" in steps[_index(steps, "IMAGE_URI=")]


def test_an_existing_tag_is_reused_not_rebuilt(spec: dict[str, Any]) -> None:
    steps = commands(spec)
    for needle in ("docker build", "serve --check", "docker push"):
        assert steps[_index(steps, needle)].startswith('[[ -n "$IMAGE_DIGEST" ]] ||'), needle
    assert any("sha256:[0-9a-f]{64}" in cmd for cmd in steps)  # the published digest is checked


CUDA_CHECK = re.compile(r"<<'CUDA_CHECK'\n(?P<script>.*)\nCUDA_CHECK$", re.DOTALL)


def _cuda_check(spec: dict[str, Any]) -> tuple[int, str, str]:
    steps = commands(spec)
    index = _index(steps, "<<'CUDA_CHECK'")
    match = CUDA_CHECK.search(steps[index])
    assert match is not None
    return index, steps[index], match.group("script")


def test_the_cuda_image_is_checked_for_its_backend_before_it_is_pushed(spec: dict[str, Any]) -> None:
    steps = commands(spec)
    index, step, script = _cuda_check(spec)
    assert _index(steps, "serve --check") < index < _index(steps, "docker push")
    # only for a fresh CUDA build, offline, running the image's own Python on the image's own libraries
    assert step.startswith('[[ -n "$IMAGE_DIGEST" || "$FLAVOUR" != cuda ]] || docker run --rm -i --network none')
    assert '--entrypoint python "$IMAGE_URI" -' in step
    assert 'ggml_backend_reg_by_name(b"CUDA")' in script and "libggml-cuda.so" in script
    assert "llama_supports_gpu_offload" in script


def _run_cuda_check(script: str, lib_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "LLAMA_CPP_LIB_PATH": str(lib_dir)}
    return subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_the_cuda_check_fails_an_image_without_a_cuda_backend(spec: dict[str, Any], tmp_path: Path) -> None:
    """Run as the build runs it, on a library folder like a CPU image's (this machine's llama.cpp build)."""
    _, _, script = _cuda_check(spec)
    for library in CPU_LLAMA_LIBS.glob("*.so*"):
        (tmp_path / library.name).symlink_to(library)
    result = _run_cuda_check(script, tmp_path)
    assert result.returncode == 1
    assert f"no CUDA backend (libggml-cuda.so) beside libllama in {tmp_path}" in result.stderr


def test_the_cuda_check_fails_a_backend_that_is_not_cuda(spec: dict[str, Any], tmp_path: Path) -> None:
    """A libggml-cuda.so that loads but is some other backend (here the CPU one renamed) is caught."""
    _, _, script = _cuda_check(spec)
    for library in CPU_LLAMA_LIBS.glob("*.so*"):
        (tmp_path / library.name).symlink_to(library)
    shutil.copy(CPU_LLAMA_LIBS / "libggml-cpu.so", tmp_path / "libggml-cuda.so")
    result = _run_cuda_check(script, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "libggml-cuda.so loads but registers no CUDA backend with ggml" in result.stderr
