"""Run identity: what produced a decision (model file, runtime build, image, hardware, prompt
template, calibration). Computed once at start; every response and log line carries it."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from decision_spec.contract import DebiasMode, StateBoundary
from decision_spec.schemas import CalibrationInForce, Gpu, Hardware, RunIdentity

from . import __version__


def _package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def nvidia_smi(*args: str) -> list[list[str]]:
    """nvidia-smi's CSV rows for `args` (a --query-... and --format=csv,noheader), each field stripped; [] where there
    is no nvidia-smi or it fails."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        out = subprocess.run([exe, *args], capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [[field.strip() for field in line.split(",")] for line in out.strip().splitlines() if line.strip()]


def gpus() -> list[Gpu]:
    """GPU names and memory from nvidia-smi where present (the container cannot be told its instance type)."""
    rows = nvidia_smi("--query-gpu=name,memory.total", "--format=csv,noheader")
    return [Gpu(name=r[0], memory=r[1] if len(r) > 1 else "") for r in rows]


def hardware(threads: int | None) -> Hardware:
    return Hardware(
        cpu=cpu_model(),
        logical_cpus=os.cpu_count() or 0,
        threads=threads or 0,
        machine=platform.machine(),
        gpus=gpus(),
    )


def build_identity(
    *,
    model_file: str,
    model_sha256: str,
    model_name: str,
    image_digest: str,
    llama_cpp_build: str,
    instance_types: str,
    threads: int | None,
    gpu_layers: int,
    calibration: CalibrationInForce,
    order_debias: bool,
    scheme: str,
    order_debias_mode: DebiasMode | None = None,
    order_debias_tolerance: float | None = None,
    policy: str | None = None,
    state_boundary: StateBoundary | None = None,
    served: Mapping[str, Any] | None = None,
) -> RunIdentity:
    """`served`: the other answer settings in force (RunIdentity's option_labels, out_of_scope, min_label_mass,
    rotation_max_options, debias_max_options)."""
    return RunIdentity(
        model_file=model_file,
        model_sha256=model_sha256,
        model_name=model_name,
        llama_cpp_python=_package_version("llama-cpp-python"),
        llama_cpp_build=llama_cpp_build or "bundled-with-llama-cpp-python",
        adapter=__version__,
        image_digest=image_digest or "unset",
        instance_types=instance_types or "unset",
        hardware=hardware(threads),
        n_gpu_layers=gpu_layers,
        prompt_template=scheme,
        order_debias=order_debias,
        calibration=calibration,
        order_debias_mode=order_debias_mode,
        order_debias_tolerance=order_debias_tolerance,
        policy=policy,
        state_boundary=state_boundary,
        **(served or {}),
    )
