"""A decision reply read as the adapter's response models read it, and where a reply or a record departs from them
(never the offending value: it may quote input)."""

from __future__ import annotations

from typing import Any

from decision_spec.schemas import DecisionResponse
from pydantic import ValidationError


def describe_invalid(exc: ValidationError) -> str:
    """Where a reply departs from the response models and how; never the offending value (it may quote input)."""
    error = exc.errors()[0]
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return ".".join(str(part) for part in error["loc"]) + f": {error['msg']}{more}"


def read_response(body: Any) -> DecisionResponse:
    """A decision reply as the adapter's response models read it; a ValueError says where it departs from them."""
    try:
        return DecisionResponse.model_validate(body)
    except ValidationError as exc:
        raise ValueError(describe_invalid(exc)) from exc
