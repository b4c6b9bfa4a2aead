"""The base of every cdk.json section's model, frozen, strict and with no key the schema does not name: one
definition that the stacks' config classes and the sections decisionctl reads too (evaluation_record.py, memory.py)
share."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class FrozenConfig(BaseModel):
    """A validated cdk.json section: immutable once loaded, strict types, unknown keys refused."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)
