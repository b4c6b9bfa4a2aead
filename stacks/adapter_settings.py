"""The adapter settings as the container environment writes them, and the answer settings an evaluation record holds.

The models (`ArtifactAnswerSettings`: `model.answer_settings`; `AdapterOptions`: `<section>.adapter`) are
decision_spec.adapter_options' (the cdk.json schema), which says which setting is of which kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from decision_spec.adapter_options import AdapterOptions
from decision_spec.answer_settings import ArtifactAnswerSettings, shown, variable
from pydantic import ValidationError

__all__ = ["answer_environment", "environment", "options_environment", "read_recorded"]


def environment(values: Mapping[str, Any]) -> dict[str, str]:
    """Settings as the container environment writes them."""
    return {variable(name): shown(value) for name, value in values.items()}


def options_environment(options: AdapterOptions | None) -> dict[str, str]:
    return environment(options.model_dump(exclude_none=True)) if options is not None else {}


def read_recorded(block: object) -> tuple[ArtifactAnswerSettings | None, str]:
    """An evaluation record's `answer_settings` (absent in a record written before it held them: none stated), or
    (None, what is wrong with it)."""
    if block is None:
        return ArtifactAnswerSettings(), ""
    try:
        return ArtifactAnswerSettings.model_validate(block, strict=False), ""
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        return None, f"answer_settings.{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"


def answer_environment(
    expected: ArtifactAnswerSettings | None, recorded: ArtifactAnswerSettings | None
) -> dict[str, str]:
    """The answer settings a decision model's container gets: those the bound evaluation record holds and those
    cdk.json states (synth has refused where they contradict each other)."""
    stated = {**(recorded.recorded() if recorded else {}), **(expected.recorded() if expected else {})}
    return environment(stated)
