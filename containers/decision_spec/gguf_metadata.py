"""What the adapter reads from a GGUF's metadata: the model's shape, tokenizer and chat-template keys, and the
decision metadata a decision-tuned GGUF carries (scheme, systemone template, temperatures), each key read here only.

Decision keys are those llama.cpp's tools/server/server-decision.cpp reads (b11434). They are checked once at
start-up: a GGUF that declares a scheme this adapter does not serve, or a temperature that is not a positive
number, stops start-up with a message naming the key, because serving such a model with a guessed prompt or
calibration would answer wrongly and silently.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass

from decision_spec.contract import QUESTION_TYPES
from decision_spec.memory import kv_bytes_per_token

log = logging.getLogger("decision_adapter.gguf_metadata")

TEMPLATE_KEY = "tokenizer.chat_template.systemone"
SUPPORTED_TYPES = ("openjev", "lev")
# Declared by llama.cpp but not served here: each has its own label or pass semantics.
KNOWN_UNSUPPORTED_TYPES = ("nimble", "kev", "laya", "clef")
BUCKETS = ("2", "3_5", "6_10", "11")


class DecisionMetadataError(ValueError):
    """The GGUF's decision metadata cannot be served as declared; start-up must stop."""


class UnsupportedDecisionScheme(DecisionMetadataError):
    def __init__(self, key: str, declared: str) -> None:
        known = "declared by llama.cpp but not served here" if declared in KNOWN_UNSUPPORTED_TYPES else "unknown"
        super().__init__(
            f"the GGUF declares {key} = {declared!r}, a decision scheme this adapter does not serve ({known}; "
            f"supported: {', '.join(SUPPORTED_TYPES)}); refusing to start rather than ask the model with a wrong prompt"
        )
        self.key, self.declared = key, declared


class InvalidDecisionMetadata(DecisionMetadataError):
    """A decision key is present but unusable; the message names it."""


def bucket_of(n_options: int) -> str:
    """llama.cpp's option-count bucket: 2, 3-5, 6-10, 11 or more."""
    if n_options <= 2:
        return "2"
    if n_options <= 5:
        return "3_5"
    if n_options <= 10:
        return "6_10"
    return "11"


@dataclass(frozen=True)
class Temperatures:
    """Per question type, optionally per bucket: `choice` and `choice.3_5`; a bucket value wins."""

    values: dict[str, float]

    def of(self, qtype: str, n_options: int) -> float:
        by_bucket = self.values.get(f"{qtype}.{bucket_of(n_options)}")
        return by_bucket if by_bucket is not None else self.values.get(qtype, 1.0)

    def describe(self) -> dict[str, float]:
        """Every question type's value (1.0 where absent) and each bucket value the GGUF sets."""
        out = {qtype: self.values.get(qtype, 1.0) for qtype in QUESTION_TYPES}
        out.update({k: v for k, v in sorted(self.values.items()) if "." in k})
        return out


@dataclass(frozen=True)
class DecisionMetadata:
    type: str  # "openjev" or "lev"
    template: str  # the systemone Jinja template's source
    temperatures: Temperatures
    type_key: str  # where the type was read, for messages


def architecture(meta: Mapping[str, str]) -> str:
    """The prefix of the model's own keys (`llama` in `llama.context_length`)."""
    return meta.get("general.architecture", "llama")


@dataclass(frozen=True)
class ModelMetadata:
    """The GGUF's general keys the adapter uses, with llama.cpp's defaults where a key is absent."""

    name: str | None
    context_length: int  # the training context
    block_count: int
    head_count: int
    head_count_kv: int
    embedding_length: int
    add_bos_token: bool
    chat_template: str | None
    key_length: int = 0  # per head; absent from the GGUF: embedding_length / head_count (llama.cpp's default)
    value_length: int = 0

    @classmethod
    def read(cls, meta: Mapping[str, str]) -> ModelMetadata:
        arch = architecture(meta)
        head_count_kv = int(meta.get(f"{arch}.attention.head_count_kv", meta.get(f"{arch}.attention.head_count", 8)))
        head_count = int(meta.get(f"{arch}.attention.head_count", head_count_kv))
        head_dim = int(meta.get(f"{arch}.embedding_length", 4096)) // max(1, head_count)
        return cls(
            name=meta.get("general.name"),
            context_length=int(meta.get(f"{arch}.context_length", 4096)),
            block_count=int(meta.get(f"{arch}.block_count", 32)),
            head_count=int(meta.get(f"{arch}.attention.head_count", head_count_kv)),
            head_count_kv=head_count_kv,
            embedding_length=int(meta.get(f"{arch}.embedding_length", 4096)),
            add_bos_token=meta.get("tokenizer.ggml.add_bos_token", "true") != "false",
            chat_template=meta.get("tokenizer.chat_template"),
            key_length=int(meta.get(f"{arch}.attention.key_length", head_dim)),
            value_length=int(meta.get(f"{arch}.attention.value_length", head_dim)),
        )

    def kv_bytes_per_token(self) -> int:
        """K and V in f16 for every layer: what one token of evaluated state holds (memory.kv_bytes_per_token)."""
        head_dim = self.embedding_length // max(1, self.head_count)
        return kv_bytes_per_token(
            block_count=self.block_count,
            head_count_kv=self.head_count_kv,
            key_length=self.key_length or head_dim,
            value_length=self.value_length or head_dim,
        )


def read_decision_metadata(meta: Mapping[str, str]) -> DecisionMetadata | None:
    """The GGUF's decision metadata; None when it declares no decision type (the generic prompt applies).
    Raises UnsupportedDecisionScheme or InvalidDecisionMetadata, each naming the key."""
    arch = architecture(meta)
    type_key = f"{arch}.decision.type"
    declared = meta.get(type_key)
    if declared is None:
        return None
    kind = declared.strip().lower()
    if kind not in SUPPORTED_TYPES:
        raise UnsupportedDecisionScheme(type_key, declared)
    template = meta.get(TEMPLATE_KEY)
    if not template:
        raise InvalidDecisionMetadata(
            f"the GGUF declares {type_key} = {declared!r} but has no {TEMPLATE_KEY}: the prompt it was trained "
            f"with is unknown, so it is not served"
        )
    return DecisionMetadata(kind, template, read_temperatures(meta, arch), type_key)


def read_temperatures(meta: Mapping[str, str], arch: str) -> Temperatures:
    prefix = f"{arch}.decision.temperature."
    values: dict[str, float] = {}
    for key, raw in meta.items():
        if not key.startswith(prefix):
            continue
        name = key[len(prefix) :]
        qtype, _, bucket = name.partition(".")
        if qtype not in QUESTION_TYPES or (bucket and bucket not in BUCKETS):
            # A key from a newer scheme revision: not applied, and said so once at start.
            log.warning(json.dumps({"event": "decision_metadata_ignored", "key": key}))
            continue
        values[name] = _temperature(key, raw)
    return Temperatures(values)


def _temperature(key: str, raw: str) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise InvalidDecisionMetadata(f"{key} = {raw!r} is not a number; a temperature must be > 0") from None
    if not math.isfinite(value) or value <= 0:
        raise InvalidDecisionMetadata(f"{key} = {raw!r} is invalid; a temperature must be a finite number > 0")
    return value
