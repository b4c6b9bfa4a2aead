"""SageMaker instance types' memory (and GPU memory), for synth's check that a model, its contexts and the runtime fit.

Source: the EC2 instance-type pages, https://aws.amazon.com/ec2/instance-types/ (an `ml.` type runs on the EC2 type of
the same name and size; https://aws.amazon.com/sagemaker/pricing/ lists vCPUs and memory per `ml.` type). Written from
those pages, not fetched by any test; add a type here before synth can size a model on it.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB_MB = 1024
# Memory the instance's own processes (the OS, SageMaker's agents) keep from the container: an allowance, not a
# measurement (AWS publishes no figure).
HOST_RESERVED_MB = 1024


@dataclass(frozen=True)
class InstanceMemory:
    memory_gib: int
    gpu_memory_gib: int | None = None  # all the instance's GPUs together; None on CPU types

    @property
    def usable_mb(self) -> int:
        return self.memory_gib * GIB_MB - HOST_RESERVED_MB


# size -> vCPUs; CPU families' memory is vCPUs x GiB per vCPU (c: 2, m: 4, r: 8)
_VCPUS = {
    "large": 2,
    "xlarge": 4,
    "2xlarge": 8,
    "4xlarge": 16,
    "8xlarge": 32,
    "9xlarge": 36,
    "12xlarge": 48,
    "16xlarge": 64,
    "18xlarge": 72,
    "24xlarge": 96,
    "32xlarge": 128,
    "48xlarge": 192,
}
_CPU_FAMILIES: dict[str, tuple[int, tuple[str, ...]]] = {
    "c5": (2, ("large", "xlarge", "2xlarge", "4xlarge", "9xlarge", "18xlarge")),
    "c5d": (2, ("large", "xlarge", "2xlarge", "4xlarge", "9xlarge", "18xlarge")),
    "c6i": (2, ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge")),
    "c6id": (2, ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge")),
    "c7i": (2, ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge")),
    "m5": (4, ("large", "xlarge", "2xlarge", "4xlarge", "12xlarge", "24xlarge")),
    "m5d": (4, ("large", "xlarge", "2xlarge", "4xlarge", "12xlarge", "24xlarge")),
    "m6i": (4, ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge")),
    "m6id": (4, ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge")),
    "m7i": (4, ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge")),
    "r5": (8, ("large", "xlarge", "2xlarge", "4xlarge", "12xlarge", "24xlarge")),
    "r6i": (8, ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge")),
    "r7i": (8, ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge")),
}
# GPU families: size -> (memory GiB, GPUs); per-GPU memory GiB beside the family
_GPU_FAMILIES: dict[str, tuple[int, dict[str, tuple[int, int]]]] = {
    "g4dn": (16, {"xlarge": (16, 1), "2xlarge": (32, 1), "4xlarge": (64, 1), "8xlarge": (128, 1),
                  "12xlarge": (192, 4), "16xlarge": (256, 1)}),
    "g5": (24, {"xlarge": (16, 1), "2xlarge": (32, 1), "4xlarge": (64, 1), "8xlarge": (128, 1), "12xlarge": (192, 4),
                "16xlarge": (256, 1), "24xlarge": (384, 4), "48xlarge": (768, 8)}),
    "g6": (24, {"xlarge": (16, 1), "2xlarge": (32, 1), "4xlarge": (64, 1), "8xlarge": (128, 1), "12xlarge": (192, 4),
                "16xlarge": (256, 1), "24xlarge": (384, 4), "48xlarge": (768, 8)}),
    "g6e": (48, {"xlarge": (32, 1), "2xlarge": (64, 1), "4xlarge": (128, 1), "8xlarge": (256, 1),
                 "12xlarge": (384, 4), "16xlarge": (512, 1), "24xlarge": (768, 4), "48xlarge": (1536, 8)}),
    "p3": (16, {"2xlarge": (61, 1), "8xlarge": (244, 4), "16xlarge": (488, 8)}),
    "p4d": (40, {"24xlarge": (1152, 8)}),
    "p4de": (80, {"24xlarge": (1152, 8)}),
    "p5": (80, {"48xlarge": (2048, 8)}),
}  # fmt: skip


def _table() -> dict[str, InstanceMemory]:
    table: dict[str, InstanceMemory] = {}
    for family, (per_vcpu, sizes) in _CPU_FAMILIES.items():
        for size in sizes:
            table[f"ml.{family}.{size}"] = InstanceMemory(_VCPUS[size] * per_vcpu)
    for family, (per_gpu, gpu_sizes) in _GPU_FAMILIES.items():
        for size, (memory, gpus) in gpu_sizes.items():
            table[f"ml.{family}.{size}"] = InstanceMemory(memory, per_gpu * gpus)
    return table


INSTANCE_MEMORY = _table()


def memory_of(instance_type: str) -> InstanceMemory | None:
    return INSTANCE_MEMORY.get(instance_type)


def smallest_fitting(instance_type: str, needed_mb: int, gpu_needed_mb: int | None) -> str | None:
    """The smallest type in the table that holds `needed_mb` (and `gpu_needed_mb` of GPU memory): of the same family
    where one does, else of the same kind (CPU or GPU); None where none does."""
    family = instance_type.split(".")[1]

    def fits(memory: InstanceMemory) -> bool:
        if memory.usable_mb < needed_mb:
            return False
        if gpu_needed_mb is None:
            return memory.gpu_memory_gib is None
        return memory.gpu_memory_gib is not None and memory.gpu_memory_gib * GIB_MB >= gpu_needed_mb

    candidates = sorted((memory.memory_gib, name) for name, memory in INSTANCE_MEMORY.items() if fits(memory))
    same_family = [name for _, name in candidates if name.split(".")[1] == family]
    if same_family:
        return same_family[0]
    return candidates[0][1] if candidates else None
