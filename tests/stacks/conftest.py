"""The synthesized apps the stack tests read: each variant of tests/cdk_support.py, synthesized once per session."""

from __future__ import annotations

import pytest

from tests.cdk_support import VARIANTS, Synthesized, synthesize


@pytest.fixture(scope="module", params=VARIANTS)
def synth(request: pytest.FixtureRequest) -> Synthesized:
    """Each variant in turn (dev, prod, variant)."""
    return synthesize(str(request.param))


@pytest.fixture(scope="module")
def dev() -> Synthesized:
    return synthesize("dev")


@pytest.fixture(scope="module")
def prod() -> Synthesized:
    return synthesize("prod")


@pytest.fixture(scope="module")
def variant() -> Synthesized:
    return synthesize("variant")
