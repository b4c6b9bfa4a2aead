"""The memory a decision model needs on SageMaker and the serverless memory it is given: plain values, one
definition read by synth (stacks/hosting.py) and by decisionctl cost."""

from __future__ import annotations

import math

from pydantic import Field

from decisionctl.config_section import FrozenConfig

MIB = 1 << 20
SERVERLESS_MEMORY_STEP_MB = 1024
SERVERLESS_MEMORY_MB = (1024, 6144)  # ServerlessConfig.MemorySizeInMB's range, in 1 GB steps
# The adapter's resident memory beyond the GGUF and its KV caches (Python, FastAPI, llama.cpp's compute buffers):
# measured 100-188 MB on the bundled model and 184 MB on Gemma 3 270M (BENCHMARKS.md, "Cold start"), taken with
# headroom for larger models' compute buffers.
RUNTIME_OVERHEAD_MB = 512
# The adapter's default state cache holds this many contexts' worth of KV (decision_adapter.loading, capped 1 GiB).
STATE_CACHE_CONTEXTS = 2
STATE_CACHE_CAP_BYTES = 1 << 30
MISSING_FOOTPRINT = (
    "hosting.mode serverless sizes memory from the model: set model.footprint (gguf_bytes: manifest.json's "
    "size_bytes; kv_bytes_per_token: from the GGUF's metadata, docs/deploy.md)"
)


class ModelFootprint(FrozenConfig):
    """What memory sizing reads of the served model: `model.footprint` in cdk.json."""

    gguf_bytes: int = Field(gt=0, description="The GGUF's size (manifest.json's size_bytes).")
    kv_bytes_per_token: int = Field(
        gt=0,
        description="K and V in f16 for every layer per context token: 2 x block_count x head_count_kv x "
        "(embedding_length / head_count) x 2 from the GGUF's metadata (decision_adapter.gguf_metadata).",
    )


def memory_needed_mb(gguf_bytes: int, kv_bytes_per_token: int, *, ctx_size: int, contexts: int) -> int:
    """The adapter's resident memory, MB: the GGUF, one KV cache per decision context, the default state cache and
    the runtime's own (RUNTIME_OVERHEAD_MB)."""
    kv_context = kv_bytes_per_token * ctx_size
    cache = min(STATE_CACHE_CAP_BYTES, STATE_CACHE_CONTEXTS * kv_context)
    total = gguf_bytes + contexts * kv_context + cache
    return math.ceil(total / MIB) + RUNTIME_OVERHEAD_MB


def serverless_memory_mb(
    memory_mb: int | None, gguf_bytes: int, kv_bytes_per_token: int, *, ctx_size: int, contexts: int
) -> int:
    """MemorySizeInMB: the configured `memory_mb`, or the smallest 1 GB step the model fits; ValueError with the
    numbers and the fix where it cannot fit."""
    needed = memory_needed_mb(gguf_bytes, kv_bytes_per_token, ctx_size=ctx_size, contexts=contexts)
    low, high = SERVERLESS_MEMORY_MB
    if needed > high:
        raise ValueError(
            f"the model needs about {needed} MB (GGUF {math.ceil(gguf_bytes / MIB)} MB, {contexts} "
            f"decision context(s) and a {STATE_CACHE_CONTEXTS}-context state cache of {ctx_size} tokens at "
            f"{kv_bytes_per_token} bytes a token, {RUNTIME_OVERHEAD_MB} MB runtime), more than serverless "
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
