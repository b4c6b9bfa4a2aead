"""A GGUF's memory footprint read from the file itself: its size and the KV bytes one token of context takes."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from decision_spec.gguf_metadata import ModelMetadata

# the metadata keys the footprint reads; the tokenizer's arrays (most of the header) are not converted
_SHAPE_KEYS = ("general.architecture", "general.name")
_SHAPE_SUFFIXES = (
    ".block_count",
    ".embedding_length",
    ".context_length",
    ".attention.head_count",
    ".attention.head_count_kv",
    ".attention.key_length",
    ".attention.value_length",
)


class FootprintError(ValueError):
    """The GGUF's metadata does not give the model's shape; the message names the file and the key."""


@dataclass(frozen=True)
class Footprint:
    gguf_bytes: int
    kv_bytes_per_token: int
    block_count: int
    head_count_kv: int
    key_length: int
    value_length: int

    def describe(self) -> str:
        return (
            f"footprint: gguf_bytes {self.gguf_bytes}, kv_bytes_per_token {self.kv_bytes_per_token} "
            f"({self.block_count} layers x {self.head_count_kv} KV heads x ({self.key_length} + "
            f"{self.value_length}) x 2 bytes, f16)"
        )


# GGUF value types (ggml's gguf.h): the scalar ones by their struct format; 8 is a string, 9 an array
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
_MAX_KEYS = 1 << 16  # a header with more keys than this is not a model's


class GgufHeader:
    """Reads the GGUF header's key-value section (version 2 and 3, little-endian), nothing of the tensors."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream

    def take(self, fmt: str) -> Any:
        size = struct.calcsize("<" + fmt)
        data = self._stream.read(size)
        if len(data) != size:
            raise FootprintError("the GGUF header ends early")
        return struct.unpack("<" + fmt, data)[0]

    def string(self) -> str:
        length = self.take("Q")
        data = self._stream.read(length)
        if len(data) != length:
            raise FootprintError("the GGUF header ends early")
        return data.decode("utf-8", errors="replace")

    def value(self, kind: int) -> Any:
        """A scalar or a string; an array is skipped (None): no shape key the footprint reads is one."""
        if kind in _SCALARS:
            return self.take(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind != _ARRAY:
            raise FootprintError(f"a value of unknown type {kind}")
        item, count = self.take("I"), self.take("Q")
        if item in _SCALARS:  # the tokenizer's scores and token types: passed over, not read
            self._stream.seek(count * struct.calcsize("<" + _SCALARS[item]), 1)
        else:  # the vocabulary, the merges: each string's length must be read to pass it
            for _ in range(count):
                self.value(item)
        return None


def shape_metadata(path: Path) -> dict[str, str]:
    """The GGUF's architecture and shape keys as strings, the way llama.cpp's metadata dict gives them."""
    found: dict[str, str] = {}
    with path.open("rb") as stream:
        header = GgufHeader(stream)
        if stream.read(4) != b"GGUF":
            raise FootprintError(f"{path}: no GGUF magic")
        try:
            version = header.take("I")
            if version not in (2, 3):
                raise FootprintError(f"GGUF version {version} (this reads 2 and 3)")
            header.take("Q")  # tensors
            keys = header.take("Q")
            if keys > _MAX_KEYS:
                raise FootprintError(f"{keys} metadata keys")
            for _ in range(keys):
                name = header.string()
                wanted = name in _SHAPE_KEYS or name.endswith(_SHAPE_SUFFIXES)
                value = header.value(header.take("I"))
                if wanted and value is not None:
                    found[name] = value if isinstance(value, str) else str(int(value))
        except FootprintError as exc:
            raise FootprintError(f"{path}: the GGUF header cannot be read ({exc})") from None
    return found


def read_footprint(path: Path) -> Footprint:
    """The file's size and KV bytes per token (decision_spec.memory's formula, as the adapter sizes its
    cache); FootprintError where a shape key the formula needs is missing (llama.cpp's fallbacks would be a guess)."""
    meta = shape_metadata(path)
    arch = meta.get("general.architecture")
    if arch is None:
        raise FootprintError(f"{path}: no general.architecture in the GGUF's metadata")
    for key in ("block_count", "embedding_length", "attention.head_count"):
        if f"{arch}.{key}" not in meta:
            raise FootprintError(f"{path}: no {arch}.{key} in the GGUF's metadata: its KV size cannot be read")
    shape = ModelMetadata.read(meta)
    return Footprint(
        gguf_bytes=path.stat().st_size,
        kv_bytes_per_token=shape.kv_bytes_per_token(),
        block_count=shape.block_count,
        head_count_kv=shape.head_count_kv,
        key_length=shape.key_length,
        value_length=shape.value_length,
    )


def footprint_or_note(path: Path) -> tuple[Footprint | None, str]:
    """The footprint, or None and a note saying why it could not be read and what that leaves unchecked."""
    try:
        return read_footprint(path), ""
    except FootprintError as exc:
        return None, (
            f"note: {exc}; the manifest names no kv_bytes_per_token, so synth cannot check model.footprint against it"
        )
