"""What an environment's deployed resources are called, from cdk.json: its region, its decision endpoints and their
inference components, log groups, alarms and Serving stack, named by decision_spec.names as the stacks name them."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decision_spec.environment_config import load_environment
from decision_spec.names import (
    COMPONENT_LOG_GROUP_PREFIX,
    ENDPOINT_LOG_GROUP_PREFIX,
    component_name,
    endpoint_name,
    stack_name,
)

ClientFor = Callable[[str, str], Any]  # (AWS service, region) -> a boto3 client


@dataclass(frozen=True)
class Section:
    """One decision endpoint of the environment as cdk.json configures it."""

    name: str  # cpu or gpu
    endpoint: str
    component: str | None  # the inference component, where hosting.mode is components
    hosting: str

    @property
    def log_group(self) -> str:
        """Where the adapter's lines land: the component's group on a components endpoint, else the endpoint's."""
        if self.component is not None:
            return COMPONENT_LOG_GROUP_PREFIX + self.component
        return ENDPOINT_LOG_GROUP_PREFIX + self.endpoint


@dataclass(frozen=True)
class Deployed:
    environment: str
    region: str
    sections: tuple[Section, ...]
    record: str | None  # evaluation.record, relative to `root`
    root: Path

    @property
    def serving_stack(self) -> str:
        return stack_name(self.environment, "Serving")

    @property
    def alarm_prefix(self) -> str:
        return f"decision-{self.environment}-"

    def section(self, name: str | None) -> list[Section]:
        """All sections, or the one named; ValueError for one the environment does not enable."""
        if name is None:
            return list(self.sections)
        found = [s for s in self.sections if s.name == name]
        if not found:
            raise ValueError(f"environments.{self.environment}.{name} is not an enabled decision endpoint")
        return found


def load(cdk_json: Path, environment: str) -> Deployed:
    """The environment's names from cdk.json, validated as synth validates it (decision_spec/environment_config.py);
    ValueError names what is missing or wrong."""
    try:
        environments: dict[str, Any] = json.loads(cdk_json.read_text(encoding="utf-8"))["context"]["environments"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{cdk_json}: no context.environments to read ({exc})") from exc
    config = load_environment(environments, environment)  # ConfigError, a ValueError, with synth's message
    sections = tuple(
        Section(
            name,
            endpoint_name(environment, name),
            component_name(environment, name) if section.hosting.mode == "components" else None,
            section.hosting.mode,
        )
        for name, section in config.decision_endpoints.items()
    )
    record = config.evaluation.record if config.evaluation else None
    return Deployed(environment, config.region, sections, record, cdk_json.resolve().parent)
