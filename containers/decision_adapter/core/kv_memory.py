"""What a loaded model holds beyond its weights: the KV bytes one token of state takes, and the state cache's budget.

One definition, read by the adapter (loading.py), by decisionctl's memory sizing (load/model_memory.py, which synth and
`decisionctl cost` use) and by package-model, which writes the GGUF's KV bytes per token into the manifest.
"""

from __future__ import annotations

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
