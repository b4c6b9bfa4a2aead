"""A GGUF's Q4_1 tensors rewritten as Q4_0, every other tensor and every metadata key kept (package-model's
--requantize q4_0).

Why: llama.cpp repacks Q4_0 weights for its AVX2 and AVX-512 CPU kernels and does not repack Q4_1, so the same
weights as Q4_0 prefill in about 0.6 of the time on the team's 2-core machines (BENCHMARKS.md, "The test suite's time
and its floor"); the answers move a little, as any requantization moves them. How: llama.cpp's reference dequantizer
and quantizer (ggml-quants.c, `dequantize_row_q4_1` and `quantize_row_q4_0_ref`) written in numpy, one ufunc per
operation, so that the bytes are the same on every machine (no compiler contracts a multiply and an add there). The
header is the source's byte for byte but for each rewritten tensor's type and every tensor's offset (fields of fixed
width) and general.file_type; the data is laid out again at the source's alignment.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import BinaryIO

import numpy as np

from decisionctl.release.footprint import FootprintError, GgufHeader

TARGETS = ("q4_0",)  # what --requantize accepts
Q4_0, Q4_1 = 2, 3  # ggml_type
MOSTLY_Q4_0 = 2  # llama_ftype, general.file_type's value
BLOCK = 32  # weights per Q4_0 and Q4_1 block
Q4_0_BYTES, Q4_1_BYTES = 18, 20  # bytes per block: f16 scale (and f16 minimum), 16 bytes of nibbles
_UINT32 = 4
_DEFAULT_ALIGNMENT = 32


class RequantizeError(Exception):
    pass


@dataclass(frozen=True)
class _Tensor:
    name: str
    elements: int
    kind: int
    kind_at: int  # where its type field is in the header
    offset: int  # in the source's data section


def requantized_name(name: str) -> str:
    """The copy's file name: the source's with its Q4_1 tag as Q4_0 (`x.Q4_1.gguf` -> `x.Q4_0.gguf`), else `.Q4_0`
    before the suffix."""
    for tag in ("Q4_1", "q4_1"):
        if tag in name:
            return name.replace(tag, tag[:-1] + "0")
    return f"{name.removesuffix('.gguf')}.Q4_0.gguf"


def q4_1_to_q4_0(blocks: np.ndarray) -> np.ndarray:
    """Q4_1 blocks (n x 20 bytes) as Q4_0 blocks (n x 18 bytes): dequantized (d * q + m) and quantized again by
    llama.cpp's reference rule (the value of largest magnitude maps to -8)."""
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
    m = blocks[:, 2:4].copy().view(np.float16).astype(np.float32)
    nibbles = blocks[:, 4:].reshape(-1, 1, 1, BLOCK // 2) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    weights = (d * (nibbles & np.uint8(0x0F)).reshape(-1, BLOCK).astype(np.float32)) + m
    largest = np.take_along_axis(weights, abs(weights).argmax(axis=-1, keepdims=True), axis=-1)
    scale = largest / -8
    with np.errstate(divide="ignore"):
        inverse = np.where(scale == 0, 0, 1 / scale)
    q = np.trunc((weights * inverse) + np.float32(8.5), dtype=np.float32).astype(np.uint8).clip(0, 15)
    q = q.reshape(-1, 2, BLOCK // 2)
    packed = q[:, 0, :] | (q[:, 1, :] << np.uint8(4))
    return np.concatenate([scale.astype(np.float16).view(np.uint8), packed], axis=-1)


def _read_layout(stream: BinaryIO) -> tuple[list[_Tensor], int | None, int, int]:
    """The tensors, where general.file_type's value is (None: no such key), the alignment and the header's end."""
    header = GgufHeader(stream)
    if stream.read(4) != b"GGUF" or header.take("I") not in (2, 3):
        raise RequantizeError("not a GGUF file of version 2 or 3")
    count, keys = header.take("Q"), header.take("Q")
    file_type_at, alignment = None, _DEFAULT_ALIGNMENT
    for _ in range(keys):
        name, kind = header.string(), header.take("I")
        at = stream.tell()
        value = header.value(kind)
        if name == "general.file_type" and kind in (4, 5):  # u32 or i32
            file_type_at = at
        elif name == "general.alignment" and isinstance(value, int):
            alignment = value
    tensors = []
    for _ in range(count):
        name = header.string()
        dims = [header.take("Q") for _ in range(header.take("I"))]
        kind_at = stream.tell()
        kind, offset = header.take("I"), header.take("Q")
        tensors.append(_Tensor(name, int(np.prod(dims, dtype=np.int64)), kind, kind_at, offset))
    return tensors, file_type_at, alignment, stream.tell()


def _aligned(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


def requantize_q4_0(source: Path, target: Path) -> int:
    """Write `target`: `source` with each Q4_1 tensor as Q4_0 and general.file_type Q4_0's. Returns the number of
    tensors rewritten; RequantizeError, before anything is written, where the source has none or cannot be read."""
    with source.open("rb") as src:
        try:
            tensors, file_type_at, alignment, header_end = _read_layout(src)
        except FootprintError as exc:
            raise RequantizeError(f"{source.name}: {exc}") from None
        rewritten = sum(1 for t in tensors if t.kind == Q4_1)
        if not rewritten:
            raise RequantizeError(f"{source.name} holds no Q4_1 tensor: --requantize q4_0 rewrites Q4_1 tensors only")
        if any(b.offset <= a.offset for a, b in pairwise(tensors)):  # each tensor's bytes run to the next one's
            raise RequantizeError(f"{source.name}: its tensors' data is not laid out in the order of their infos")
        src.seek(0)
        header = bytearray(src.read(header_end))
        data_start, end = _aligned(header_end, alignment), source.stat().st_size
        spans = [b.offset - a.offset for a, b in pairwise(tensors)]
        spans.append(end - data_start - tensors[-1].offset)
        if file_type_at is not None:
            header[file_type_at : file_type_at + _UINT32] = MOSTLY_Q4_0.to_bytes(_UINT32, "little")
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("wb") as out:
            out.write(bytes(data_start))  # the header, written again below once the offsets are known
            for tensor, span in zip(tensors, spans, strict=True):
                src.seek(data_start + tensor.offset)
                at = out.tell() - data_start
                if tensor.kind == Q4_1:
                    blocks = np.frombuffer(src.read(tensor.elements // BLOCK * Q4_1_BYTES), dtype=np.uint8)
                    data = q4_1_to_q4_0(blocks.reshape(-1, Q4_1_BYTES)).tobytes()
                    data += bytes(_aligned(len(data), alignment) - len(data))
                    header[tensor.kind_at : tensor.kind_at + _UINT32] = Q4_0.to_bytes(_UINT32, "little")
                else:
                    data = src.read(span)  # its bytes and the padding after them, as the source has them
                out.write(data)
                header[tensor.kind_at + _UINT32 : tensor.kind_at + _UINT32 + 8] = at.to_bytes(8, "little")
            out.seek(0)
            out.write(header)
    return rewritten
