"""What synth derives from a decision endpoint's hosting mode: the memory a component copy or a serverless variant gets.

The `hosting` block itself, its modes and what each refuses, is decision_spec.hosting_config's (the cdk.json schema).
"""

from __future__ import annotations

from decision_spec.hosting_config import (
    ComponentsHosting,
    InstancesHosting,
    ServerlessHosting,
    serverless_memory_of,
)
from decision_spec.memory import ModelFootprint, memory_needed_mb


def hosted_memory_mb(
    hosting: InstancesHosting | ComponentsHosting | ServerlessHosting,
    footprint: ModelFootprint | None,
    *,
    ctx_size: int,
    contexts: int,
    state_cache_mb: int | None = None,
) -> int | None:
    """The memory a serverless variant gets, or a component copy reserves (MinMemoryRequiredInMb); None on instances
    (the instance type's memory). The environment's validation has refused a missing footprint."""
    if isinstance(hosting, ServerlessHosting):
        return serverless_memory_of(
            hosting, footprint, ctx_size=ctx_size, contexts=contexts, state_cache_mb=state_cache_mb
        )
    if isinstance(hosting, ComponentsHosting):
        assert footprint is not None
        return memory_needed_mb(
            footprint.gguf_bytes,
            footprint.kv_bytes_per_token,
            ctx_size=ctx_size,
            contexts=contexts,
            state_cache_mb=state_cache_mb,
        )
    return None
