"""SageMaker instance-type facts: the name's form, its family, GPU or CPU, local NVMe, and the DLC's CUDA coverage.

CUDA coverage: the DLC (aws/deep-learning-containers, docker/llama_cpp/Dockerfile.gpu, llama.cpp b10433 on
CUDA 13.0.2) configures llama.cpp with `-DGGML_CUDA=ON -DGGML_NATIVE=OFF` and no CMAKE_CUDA_ARCHITECTURES, so
ggml's own default list applies (ggml/src/ggml-cuda/CMakeLists.txt): on CUDA 13 that is 75-virtual, 80-virtual,
86-real, 89-real, 90-virtual, 120a-real and 121a-real. A `-real` architecture ships machine code for exactly that
compute capability; a `-virtual` one ships PTX, which the driver compiles on first load for that capability
and any later one. CUDA 13 has dropped everything below 7.5. So a GPU is covered when its capability has
machine code, or is at least that of a PTX architecture; PTX-only GPUs (T4, A100, H100) JIT-compile every
kernel when the model first loads, which lengthens the first start.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field

InstanceType = Annotated[str, Field(pattern=r"^ml\.[a-z][a-z0-9-]*\.[a-z0-9]+$")]

# Families whose instances carry local NVMe instance storage. SageMaker rejects an endpoint config
# with a KmsKeyId (volume encryption) for them: their storage is hardware-encrypted instead. Families
# with a "d" after the generation (m5d, c6id, g4dn, ...) have it too; see `has_local_nvme`.
_NVME_FAMILIES = frozenset(
    {"g5", "g6", "g6e", "g7e", "p4d", "p4de", "p5", "p5e", "p5en", "p6", "trn1", "trn1n", "trn2"}
)
_D_SUFFIX = re.compile(r"^[a-z]+\d+[a-z]*d[a-z]*$")


def instance_family(instance_type: str) -> str:
    return instance_type.split(".")[1]


def is_gpu_instance(instance_type: str) -> bool:
    return instance_family(instance_type)[0] in ("g", "p")


def instance_kind(gpu: bool) -> str:
    """How a refusal names the kind of instance type a section needs."""
    return "a GPU (ml.g*/ml.p*)" if gpu else "a CPU (not ml.g*/ml.p*)"


def has_local_nvme(instance_type: str) -> bool:
    family = instance_family(instance_type)
    return family in _NVME_FAMILIES or _D_SUFFIX.match(family) is not None


REAL_ARCHITECTURES = frozenset({86, 89, 120, 121})
VIRTUAL_ARCHITECTURES = frozenset({75, 80, 90})

# SageMaker GPU instance family -> (its NVIDIA GPU, compute capability x 10)
GPU_FAMILIES: dict[str, tuple[str, int]] = {
    "g4dn": ("T4", 75),
    "g5": ("A10G", 86),
    "g6": ("L4", 89),
    "g6e": ("L40S", 89),
    "g7e": ("RTX PRO 6000 Blackwell", 120),
    "p3": ("V100", 70),
    "p3dn": ("V100", 70),
    "p4d": ("A100", 80),
    "p4de": ("A100", 80),
    "p5": ("H100", 90),
    "p5e": ("H200", 90),
    "p5en": ("H200", 90),
}

Coverage = Literal["native", "ptx"]


def cuda_coverage(instance_type: str) -> Coverage:
    """How the DLC's CUDA build runs on `instance_type`; ValueError for a GPU it does not cover or is not known."""
    family = instance_family(instance_type)
    if family not in GPU_FAMILIES:
        known = ", ".join(sorted(GPU_FAMILIES))
        raise ValueError(
            f"{instance_type}: the GPU of the {family} family is not in containers/decision_spec/instance_types.py "
            f"(known: {known}); add its compute capability there once the DLC's CUDA build is shown to cover it"
        )
    gpu, capability = GPU_FAMILIES[family]
    if capability in REAL_ARCHITECTURES:
        return "native"
    if any(virtual <= capability for virtual in VIRTUAL_ARCHITECTURES):
        return "ptx"
    raise ValueError(
        f"{instance_type}: its {gpu} is compute capability {capability / 10:.1f}, which the DLC's CUDA 13 build of "
        "llama.cpp does not cover (lowest: 7.5); use g4dn or a newer family"
    )


def check_cuda_coverage(instance_types: tuple[str, ...]) -> None:
    """Raise ValueError naming the first pool type the CUDA build does not run on."""
    for instance_type in instance_types:
        cuda_coverage(instance_type)
