"""Synth's check that the model fits where it runs: its footprint taken from the evaluated manifest (a cdk.json
`model.footprint` that contradicts it is refused), and each decision section's instance types checked against the
memory the model, its decision contexts, the state cache and the runtime need (stacks/instance_memory.py)."""

from __future__ import annotations

from decision_spec.endpoint_config import CpuEndpoint, GpuEndpoint
from decision_spec.environment_config import ConfigError, EnvironmentConfig
from decision_spec.hosting_config import ServerlessHosting
from decision_spec.instance_types import is_gpu_instance
from decision_spec.memory import (
    RUNTIME_OVERHEAD_MB,
    ModelFootprint,
    gpu_memory_needed_mb,
    memory_needed_mb,
    needed_parts,
)

from stacks.evaluation_config import Binding
from stacks.instance_memory import HOST_RESERVED_MB, memory_of, smallest_fitting


class FootprintContradicted(ConfigError):
    """cdk.json's model.footprint is not the footprint of the manifest the bound record evaluated."""


class InstanceTooSmall(ConfigError):
    """An instance type's memory cannot hold the model, its contexts and the runtime."""


def fit_model(config: EnvironmentConfig, binding: Binding | None) -> EnvironmentConfig:
    """The environment with the footprint in force (the bound record's, which is its manifest's, else cdk.json's),
    every decision section's instance types checked against it; ConfigError naming the numbers where not."""
    key = f"environments.{config.name}.model.footprint"
    recorded = binding.footprint if binding is not None and not binding.problems else None
    stated = config.model.footprint
    if recorded is not None and stated is not None and recorded != stated:
        record = config.evaluation.record if config.evaluation is not None else "the evaluation record"
        raise FootprintContradicted(
            f"{key} is gguf_bytes {stated.gguf_bytes}, kv_bytes_per_token {stated.kv_bytes_per_token}, but the "
            f"manifest {record} evaluated (model {config.model.sha256[:12]}) has gguf_bytes {recorded.gguf_bytes}, "
            f"kv_bytes_per_token {recorded.kv_bytes_per_token}: memory would be sized for another model; remove "
            f"{key} (synth takes the manifest's) or write the manifest's numbers"
        )
    footprint = recorded or stated
    if footprint is None:
        return config
    problems = [
        problem
        for section, settings in config.decision_endpoints.items()
        for problem in section_problems(f"environments.{config.name}.{section}", settings, footprint)
    ]
    if problems:
        raise InstanceTooSmall("the model does not fit the instance type's memory:\n  " + "\n  ".join(problems))
    if stated is None:
        return config.model_copy(update={"model": config.model.model_copy(update={"footprint": footprint})})
    return config


def section_problems(key: str, settings: CpuEndpoint | GpuEndpoint, footprint: ModelFootprint) -> list[str]:
    """One sentence per instance type of the section (the pool's fallbacks too) that cannot hold the model."""
    if isinstance(settings.hosting, ServerlessHosting):
        return []  # sized from the footprint at validation (decision_spec/hosting_config.py)
    cache_mb = settings.adapter.state_cache_mb if settings.adapter is not None else None
    contexts, ctx = settings.max_concurrency, settings.ctx_size
    needed = memory_needed_mb(
        footprint.gguf_bytes, footprint.kv_bytes_per_token, ctx_size=ctx, contexts=contexts, state_cache_mb=cache_mb
    )
    parts = needed_parts(
        footprint.gguf_bytes, footprint.kv_bytes_per_token, ctx_size=ctx, contexts=contexts, state_cache_mb=cache_mb
    )
    found = []
    for instance_type in settings.instance_types:
        gpu_needed = (
            gpu_memory_needed_mb(footprint.gguf_bytes, footprint.kv_bytes_per_token, ctx_size=ctx, contexts=contexts)
            if is_gpu_instance(instance_type)
            else None
        )
        memory = memory_of(instance_type)
        if memory is None:
            found.append(
                f"{key}: {instance_type} is not in stacks/instance_memory.py's table, so the model's {needed} MB "
                "cannot be checked against it: add its memory there (from the EC2 instance-type page)"
            )
            continue
        short_host = memory.usable_mb < needed
        short_gpu = gpu_needed is not None and (memory.gpu_memory_gib or 0) * 1024 < gpu_needed
        if not (short_host or short_gpu):
            continue
        fits = smallest_fitting(instance_type, needed, gpu_needed)
        where = f"the smallest type that fits is {fits}" if fits else "no type in the table holds it"
        if short_host:
            found.append(
                f"{key}: {instance_type} has {memory.memory_gib} GiB ({memory.usable_mb} MB after "
                f"{HOST_RESERVED_MB} MB for the instance's own processes), and the model needs {needed} MB ({parts}): "
                f"{where}; or lower ctx_size, max_concurrency or adapter.state_cache_mb"
            )
        else:
            found.append(
                f"{key}: {instance_type}'s GPU memory is {memory.gpu_memory_gib} GiB, and the GGUF with "
                f"{contexts} context(s) of {ctx} tokens and {RUNTIME_OVERHEAD_MB} MB of compute buffers needs "
                f"{gpu_needed} MB: {where}; or lower ctx_size or max_concurrency"
            )
    return found
