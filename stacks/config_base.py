"""The base of every cdk.json section's model: decisionctl.config_section's FrozenConfig (frozen, strict, no key the
schema does not name), defined there because the sections decisionctl reads share it and decisionctl imports no
stacks module."""

from __future__ import annotations

from decisionctl.config_section import FrozenConfig

__all__ = ["FrozenConfig"]
