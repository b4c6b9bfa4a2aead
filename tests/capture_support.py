"""SageMaker's data capture writer, stood in for: a response body wrapped in a capture record, files laid out
as SageMaker lays them out (<endpoint>/<variant>/yyyy/mm/dd/hh/<name>.jsonl). SageMaker itself cannot run here.

The record shape is the one SageMaker documents for endpoint data capture: captureData.endpointOutput with
observedContentType, mode, data and encoding; eventMetadata with eventId, inferenceId (when the caller passed
one) and inferenceTime; eventVersion "0". Output-only capture has no endpointInput.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HOUR = ("2026", "12", "01", "17")
INFERENCE_TIME = "2026-12-01T17:20:00Z"


def record(
    body: bytes,
    *,
    inference_id: str | None = None,
    event_id: str | None = None,
    content_type: str = "application/json",
    encoding: str = "JSON",
    request: bytes | None = None,
) -> dict[str, Any]:
    """One capture line for a response `body`; `request` adds the endpointInput an InputAndOutput capture holds."""

    def part(data: bytes, mode: str) -> dict[str, Any]:
        text = data.decode("utf-8") if encoding == "JSON" else base64.b64encode(data).decode("ascii")
        return {"observedContentType": content_type, "mode": mode, "data": text, "encoding": encoding}

    capture: dict[str, Any] = {"endpointOutput": part(body, "OUTPUT")}
    if request is not None:
        capture = {"endpointInput": part(request, "INPUT"), **capture}
    meta: dict[str, Any] = {"eventId": event_id or str(uuid.uuid4()), "inferenceTime": INFERENCE_TIME}
    if inference_id is not None:
        meta["inferenceId"] = inference_id
    return {"captureData": capture, "eventMetadata": meta, "eventVersion": "0"}


def key(endpoint: str, variant: str, name: str = "capture-0") -> str:
    """Where SageMaker puts a capture file of `variant`, relative to the capture destination."""
    return "/".join((endpoint, variant, *HOUR, f"{name}.jsonl"))


def write(root: Path, endpoint: str, variant: str, records: Sequence[dict[str, Any]], name: str = "capture-0") -> Path:
    path = root / key(endpoint, variant, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path
