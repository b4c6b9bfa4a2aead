"""Memory sizing, one definition: the KV bytes one token of state takes and the state cache's budget (the adapter
sizes its cache with them, package-model writes the first into the manifest), the memory a decision model needs on
SageMaker and the serverless memory it is given (synth and `decisionctl cost`)."""

from __future__ import annotations

import math

from pydantic import Field

from decision_spec.config_base import FrozenConfig

KV_CACHE_BYTES_PER_ELEMENT = 2  # llama.cpp's default KV cache type, f16 (type_k and type_v), which the adapter keeps
MIB = 1 << 20
# The default state cache (DECISION_STATE_CACHE_MB unset): this many full contexts' worth of KV, at most 1 GiB.
STATE_CACHE_CONTEXTS = 2
STATE_CACHE_CAP_BYTES = 1 << 30


def kv_bytes_per_token(*, block_count: int, head_count_kv: int, key_length: int, value_length: int) -> int:
    """K and V of every layer for one token: block_count x head_count_kv x (key_length + value_length) x 2 (f16)."""
    return block_count * head_count_kv * (key_length + value_length) * KV_CACHE_BYTES_PER_ELEMENT


def state_cache_bytes(state_cache_mb: int | None, kv_per_token: int, *, n_ctx: int) -> int:
    """The state cache's budget: DECISION_STATE_CACHE_MB where set, else STATE_CACHE_CONTEXTS contexts of KV, capped."""
    if state_cache_mb is not None:
        return state_cache_mb * MIB
    return min(STATE_CACHE_CAP_BYTES, STATE_CACHE_CONTEXTS * kv_per_token * n_ctx)


SERVERLESS_MEMORY_STEP_MB = 1024
SERVERLESS_MEMORY_MB = (1024, 6144)  # ServerlessConfig.MemorySizeInMB's range, in 1 GB steps
# The adapter's resident memory beyond the GGUF and its KV caches (Python, FastAPI, llama.cpp's compute buffers):
# measured 100-188 MB on the bundled model and 184 MB on Gemma 3 270M (BENCHMARKS.md, "Cold start"), taken with
# headroom for larger models' compute buffers.
RUNTIME_OVERHEAD_MB = 512
MISSING_FOOTPRINT = (
    "hosting.mode serverless sizes memory from the model: set model.footprint (gguf_bytes: manifest.json's "
    "size_bytes; kv_bytes_per_token: manifest.json's kv_bytes_per_token, which package-model writes and prints)"
)


class ModelFootprint(FrozenConfig):
    """What memory sizing reads of the served model: `model.footprint` in cdk.json."""

    gguf_bytes: int = Field(gt=0, description="The GGUF's size (manifest.json's size_bytes).")
    kv_bytes_per_token: int = Field(
        gt=0,
        description="K and V in f16 for every layer per context token: block_count x head_count_kv x (key_length + "
        "value_length) x 2 from the GGUF's metadata (decision_spec.memory; manifest.json's "
        "kv_bytes_per_token).",
    )


def memory_needed_mb(
    gguf_bytes: int, kv_bytes_per_token: int, *, ctx_size: int, contexts: int, state_cache_mb: int | None = None
) -> int:
    """The adapter's resident memory, MB: the GGUF, one KV cache per decision context, the state cache (the
    configured DECISION_STATE_CACHE_MB, else the adapter's default) and the runtime's own (RUNTIME_OVERHEAD_MB)."""
    cache = state_cache_bytes(state_cache_mb, kv_bytes_per_token, n_ctx=ctx_size)
    total = gguf_bytes + contexts * kv_bytes_per_token * ctx_size + cache
    return math.ceil(total / MIB) + RUNTIME_OVERHEAD_MB


def gpu_memory_needed_mb(gguf_bytes: int, kv_bytes_per_token: int, *, ctx_size: int, contexts: int) -> int:
    """What a GPU holds with every layer offloaded: the GGUF and one KV cache per context, and RUNTIME_OVERHEAD_MB for
    the compute buffers (the state cache's snapshots stay in host memory)."""
    return math.ceil((gguf_bytes + contexts * kv_bytes_per_token * ctx_size) / MIB) + RUNTIME_OVERHEAD_MB


def needed_parts(
    gguf_bytes: int, kv_bytes_per_token: int, *, ctx_size: int, contexts: int, state_cache_mb: int | None = None
) -> str:
    """What memory_needed_mb adds up, in words with the numbers, for a refusal to name."""
    context_mb = math.ceil(kv_bytes_per_token * ctx_size / MIB)
    cache_mb = math.ceil(state_cache_bytes(state_cache_mb, kv_bytes_per_token, n_ctx=ctx_size) / MIB)
    cache = (
        f"the configured state cache {cache_mb} MB"
        if state_cache_mb is not None
        else f"the default state cache {cache_mb} MB ({STATE_CACHE_CONTEXTS} contexts, at most 1 GiB)"
    )
    return (
        f"GGUF {math.ceil(gguf_bytes / MIB)} MB, {contexts} decision context(s) of {ctx_size} tokens at "
        f"{kv_bytes_per_token} bytes a token {contexts * context_mb} MB, {cache}, runtime {RUNTIME_OVERHEAD_MB} MB"
    )


def serverless_memory_mb(
    memory_mb: int | None,
    gguf_bytes: int,
    kv_bytes_per_token: int,
    *,
    ctx_size: int,
    contexts: int,
    state_cache_mb: int | None = None,
) -> int:
    """MemorySizeInMB: the configured `memory_mb`, or the smallest 1 GB step the model fits; ValueError with the
    numbers and the fix where it cannot fit."""
    needed = memory_needed_mb(
        gguf_bytes, kv_bytes_per_token, ctx_size=ctx_size, contexts=contexts, state_cache_mb=state_cache_mb
    )
    low, high = SERVERLESS_MEMORY_MB
    if needed > high:
        parts = needed_parts(
            gguf_bytes, kv_bytes_per_token, ctx_size=ctx_size, contexts=contexts, state_cache_mb=state_cache_mb
        )
        raise ValueError(
            f"the model needs about {needed} MB ({parts}), more than serverless "
            f"inference's {high} MB: lower ctx_size or max_concurrency, or set hosting.mode to components (scales "
            "to zero on instances) or instances"
        )
    if memory_mb is None:
        return max(low, SERVERLESS_MEMORY_STEP_MB * math.ceil(needed / SERVERLESS_MEMORY_STEP_MB))
    if memory_mb < needed:
        raise ValueError(
            f"hosting.memory_mb {memory_mb} is below the {needed} MB the model needs (GGUF, "
            f"{contexts} context(s) and the state cache at ctx_size {ctx_size}, runtime): raise it to "
            f"{SERVERLESS_MEMORY_STEP_MB * math.ceil(needed / SERVERLESS_MEMORY_STEP_MB)} or leave it null"
        )
    return memory_mb
