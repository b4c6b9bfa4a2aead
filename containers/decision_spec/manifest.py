"""The model manifest: `manifest.json` beside the GGUF, written by packaging, verified at start-up; and finding the
GGUF in the model directory and verifying it against its manifest.

One schema shared by the packaging tool (`decisionctl package-model`), the calibration fitter
(`decisionctl evaluate --fit-calibration`) and the adapter, so there is one definition of what a
model artifact promises.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from decision_spec.answer_settings import AnswerSettings, merged, reported
from decision_spec.contract import MAX_INTERCEPT, QuestionType
from decision_spec.names import MANIFEST_NAME
from decision_spec.policy import Policy, canonical_sha256

SCHEMA = "decision-model-manifest/1"
_CHUNK = 8 * 1024 * 1024
log = logging.getLogger("decision_adapter.model")


class SlotPrior(BaseModel):
    """The model's prior over option slots per option count, for choice questions: the mean slot distribution
    over every rotation of unlabeled questions (`decisionctl fit-prior`). The adapter divides each order's
    distribution by it. Bound to the model file and prompt template it was fitted under."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Literal["rotation-average"] = "rotation-average"
    model_sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="The GGUF the prior was fitted on.")
    prompt_template: str = Field(min_length=1, description="The prompt template it was fitted under (x_run's).")
    slots: dict[str, list[float]] = Field(description="Option count -> the prior of each slot, first to last.")
    fitted_on: dict[str, Any] = Field(
        default_factory=dict, description="Provenance: input file sha256, requests, questions per option count."
    )

    @field_validator("slots")
    @classmethod
    def _distributions(cls, v: dict[str, list[float]]) -> dict[str, list[float]]:
        for key, prior in v.items():
            if not key.isdigit() or int(key) != len(prior) or len(prior) < 2:
                raise ValueError(f"slots[{key!r}] must hold one probability per slot of {key} options")
            if not all(0 < p < 1 for p in prior) or abs(sum(prior) - 1) > 1e-6:
                raise ValueError(f"slots[{key!r}] must be positive and sum to 1, got {prior}")
        return v


class Calibration(BaseModel):
    """Per-type temperature: probabilities are softmax(score / T). Identity (T = 1) when absent. Optionally a
    slot prior, divided out of each order's distribution before the temperature applies, and for yes/no an
    intercept added to the log-odds of yes after the temperature."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Literal["temperature"] = "temperature"
    temperature: dict[QuestionType, float] = Field(default_factory=dict)
    fitted_on: dict[str, Any] = Field(
        default_factory=dict, description="Provenance: data set, sizes, ECE before/after."
    )
    slot_prior: SlotPrior | None = None
    # None, not an empty dict, when unset: a manifest without one serializes (and hashes) as it did before
    intercept: dict[Literal["noul"], float] | None = Field(
        None,
        description=f"Yes/no only: b added to the log-odds of yes after the temperature, p_yes = sigmoid(z / T + b), "
        f"z the combined log-odds of yes over no (|b| <= {MAX_INTERCEPT:g}; absent: 0). Fitted with the temperature "
        "by `decisionctl evaluate --fit-calibration` where it lowers the held-out ECE.",
    )

    @field_validator("temperature")
    @classmethod
    def _positive(cls, v: dict[str, float]) -> dict[str, float]:
        for qtype, t in v.items():
            if not (t > 0 and t < 1e6):
                raise ValueError(f"temperature for {qtype} must be a positive finite number, got {t}")
        return v

    @field_validator("intercept")
    @classmethod
    def _bounded(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        for qtype, b in (v or {}).items():
            if not (math.isfinite(b) and abs(b) <= MAX_INTERCEPT):
                raise ValueError(
                    f"intercept for {qtype} must be a finite number with |b| <= {MAX_INTERCEPT:g}, got {b}"
                )
        return v

    def for_type(self, qtype: str) -> float:
        return float(self.temperature.get(qtype, 1.0))  # type: ignore[call-overload]

    def intercept_for(self, qtype: str) -> float:
        """The log-odds shift of yes for this type (0 for every type but noul, and where none is set)."""
        return float((self.intercept or {}).get(qtype, 0.0))  # type: ignore[call-overload]


class Manifest(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    schema_: str = Field(SCHEMA, alias="schema")
    model_file: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size_bytes: int = Field(ge=0)
    kv_bytes_per_token: int | None = Field(
        None, ge=1, description="KV bytes one context token takes (package-model, from the GGUF; memory sizing)."
    )
    source: str = ""
    license: str = ""
    calibration: Calibration | None = None
    policy: Policy | None = None
    answer_settings: AnswerSettings | None = Field(
        None, description="The settings that change answers the artifact was measured under (package-model)."
    )

    def recorded_answer_settings(self) -> AnswerSettings:
        """What the artifact's answers were measured under, which the adapter adopts at start: its answer_settings
        block, and where that is silent, the debias mode, tolerance, state boundary and option labels its policy was
        measured under."""
        return merged(self.answer_settings or AnswerSettings(), policy_answer_settings(self.policy))

    def calibration_sha256(self) -> str:
        """The hash a policy is bound to: of the calibration block as written (identity when absent)."""
        return calibration_sha256(self.calibration)

    def dump(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


def policy_answer_settings(policy: Policy | None) -> AnswerSettings:
    """The answer settings a policy records it was measured under (none without a policy)."""
    return reported(policy.model_dump()) if policy is not None else AnswerSettings()


def calibration_sha256(calibration: Calibration | None) -> str:
    block = calibration.model_dump(mode="json", exclude_none=True) if calibration is not None else None
    return canonical_sha256(block)


class ChecksumMismatch(Exception):
    def __init__(self, path: Path, expected: str, actual: str) -> None:
        super().__init__(f"checksum mismatch for {path}: expected sha256 {expected}, got {actual}")
        self.path, self.expected, self.actual = path, expected, actual


def sha256_file(path: Path, on_chunk: Callable[[int], object] | None = None) -> str:
    """The file's sha256; `on_chunk(n)` after each chunk read (a progress bar's update)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            if on_chunk is not None:
                on_chunk(len(chunk))
    return digest.hexdigest()


def read_manifest(path: Path) -> Manifest:
    return Manifest.model_validate(json.loads(path.read_text(encoding="utf-8")))


def write_manifest(manifest: Manifest, path: Path) -> None:
    path.write_text(json.dumps(manifest.dump(), indent=2, sort_keys=True) + "\n", encoding="utf-8")


def verify(gguf: Path, manifest: Manifest) -> str:
    """The file's sha256 if it matches the manifest; ChecksumMismatch otherwise."""
    actual = sha256_file(gguf)
    if actual != manifest.sha256:
        raise ChecksumMismatch(gguf, manifest.sha256, actual)
    return actual


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
