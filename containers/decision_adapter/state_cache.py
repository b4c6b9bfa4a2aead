"""A memory-bounded LRU of evaluated state prefixes (the model's KV state after header + state).

Keys are everything that determines those tokens: the model file's checksum, the prompt-template
version and the exact prefix tokens. Values are llama.cpp sequence-state bytes, which restore into any
context of the same model: the loaded model's contexts share one cache (it is thread-safe), and it is
dropped with the model, so entries never outlive a model reload.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass


def prefix_key(model_sha256: str, template_version: str, tokens: Sequence[int]) -> str:
    digest = hashlib.sha256(f"{model_sha256}\0{template_version}\0".encode())
    digest.update(b"".join(t.to_bytes(4, "little", signed=True) for t in tokens))
    return digest.hexdigest()


@dataclass(frozen=True)
class Snapshot:
    tokens: tuple[int, ...]
    data: bytes


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    rejected_too_large: int = 0


class StateCache:
    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._items: OrderedDict[str, Snapshot] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.stats = CacheStats()

    @property
    def bytes_held(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: str, tokens: Sequence[int]) -> Snapshot | None:
        with self._lock:
            snap = self._items.get(key)
            if snap is None or snap.tokens != tuple(tokens):  # a hash collision must never serve a wrong state
                self.stats.misses += 1
                return None
            self._items.move_to_end(key)
            self.stats.hits += 1
            return snap

    def put(self, key: str, snapshot: Snapshot) -> bool:
        size = len(snapshot.data)
        with self._lock:
            if size > self.budget_bytes:
                self.stats.rejected_too_large += 1
                return False
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= len(old.data)
            while self._items and self._bytes + size > self.budget_bytes:
                _, evicted = self._items.popitem(last=False)
                self._bytes -= len(evicted.data)
                self.stats.evictions += 1
            self._items[key] = snapshot
            self._bytes += size
            return True

    def counters(self) -> dict[str, int]:
        return {
            "entries": len(self._items),
            "bytes_held": self._bytes,
            "budget_bytes": self.budget_bytes,
            "hits": self.stats.hits,
            "misses": self.stats.misses,
            "evictions": self.stats.evictions,
            "rejected_too_large": self.stats.rejected_too_large,
        }
