"""Finding the GGUF in the model directory and verifying it against its manifest."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from .manifest import MANIFEST_NAME, ChecksumMismatch, Manifest, read_manifest, sha256_file

log = logging.getLogger("decision_adapter.model")


class ModelNotFound(FileNotFoundError):
    pass


@dataclass(frozen=True)
class ModelFile:
    path: Path
    sha256: str
    manifest: Manifest | None


def find_gguf(model_dir: Path, explicit: str | None = None) -> Path:
    """SM_LLAMA_CPP_MODEL (absolute, or relative to the model directory), else the first *.gguf at most
    two levels deep, in sorted order (what the stock DLC entrypoint does)."""
    if explicit:
        path = Path(explicit)
        path = path if path.is_absolute() else model_dir / path
        if not path.is_file():
            raise ModelNotFound(f"SM_LLAMA_CPP_MODEL names {path}, which does not exist")
        return path
    if not model_dir.is_dir():
        raise ModelNotFound(f"model directory {model_dir} does not exist (set DECISION_MODEL_DIR for local runs)")
    for pattern in ("*.gguf", "*/*.gguf"):
        found = sorted(p for p in model_dir.glob(pattern) if p.is_file())
        if found:
            return found[0]
    raise ModelNotFound(f"no *.gguf file in {model_dir} or its subdirectories")


def verify_model(path: Path, expected_sha256: str = "") -> ModelFile:
    """Checksum the GGUF and compare it with manifest.json beside it (and with an expected value the
    stack passes). Raises ChecksumMismatch naming the file and both checksums."""
    manifest_path = path.parent / MANIFEST_NAME
    manifest = read_manifest(manifest_path) if manifest_path.is_file() else None
    actual = sha256_file(path)
    if manifest is not None:
        if manifest.model_file != path.name:
            event = {"event": "manifest_names_other_file", "manifest_file": manifest.model_file, "file": path.name}
            log.warning(json.dumps(event))
        if manifest.sha256 != actual:
            raise ChecksumMismatch(path, manifest.sha256, actual)
    else:
        log.warning(json.dumps({"event": "no_manifest", "file": str(path), "sha256": actual}))
    if expected_sha256 and expected_sha256 != actual:
        raise ChecksumMismatch(path, expected_sha256, actual)
    return ModelFile(path, actual, manifest)
