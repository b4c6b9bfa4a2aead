"""Every shell script the repository holds (found by its bash or sh first line: ./dev, .ci/run, bin/, the benchmarks'
GPU scripts) passes shellcheck at its strictest severity: scripts that run where nothing else checks them (CI's
machine, the GPU machine) fail on quoting and word splitting there, not here."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import tool

ROOT = Path(__file__).resolve().parents[1]


def shell_scripts() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    found = []
    for name in listed:
        path = ROOT / name
        if not path.is_file() or path.suffix in {".py", ".md", ".json", ".jsonl", ".txt", ".yml", ".yaml"}:
            continue
        with path.open("rb") as f:
            first = f.readline(200)
        if first.startswith(b"#!") and (b"bash" in first or first.rstrip().endswith(b"/sh")):
            found.append(path)
    return sorted(found)


def test_the_scripts_are_found() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in shell_scripts()}
    assert {"dev", ".ci/run", "benchmarks/gpu_run.sh", "benchmarks/gpu_stage.sh", "benchmarks/gpu_wheel.sh"} <= names


def test_every_shell_script_passes_shellcheck() -> None:
    scripts = shell_scripts()
    result = subprocess.run(
        [tool("shellcheck"), "--shell=bash", "--severity=style", "--format=gcc", *map(str, scripts)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
