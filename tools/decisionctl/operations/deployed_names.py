"""What an environment's deployed resources are called, from cdk.json: its region, its decision endpoints and their
inference components, log groups, alarms and Serving stack. The stacks name them so (stacks/serving_stack.py,
stacks/hosting.py, stacks/endpoint.py, stacks/observability.py); tests/decisionctl/test_day_two_names.py checks that
both sides agree."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decision_spec.names import COMPONENT_LOG_GROUP_PREFIX, ENDPOINT_LOG_GROUP_PREFIX

ClientFor = Callable[[str, str], Any]  # (AWS service, region) -> a boto3 client
DECISION_SECTIONS = ("cpu", "gpu")
STACK_PREFIX = "DecisionEndpoints"


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
        return f"{STACK_PREFIX}-{self.environment}-Serving"

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


def endpoint_name(environment: str, section: str) -> str:
    return f"decision-{environment}-{section}"


def component_name(environment: str, section: str) -> str:
    return f"decision-{environment}-{section}-model"


def load(cdk_json: Path, environment: str) -> Deployed:
    """The environment's names from cdk.json; ValueError names what is missing."""
    try:
        environments: dict[str, Any] = json.loads(cdk_json.read_text(encoding="utf-8"))["context"]["environments"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{cdk_json}: no context.environments to read ({exc})") from exc
    raw = environments.get(environment)
    if not isinstance(raw, dict):
        raise ValueError(f"{cdk_json}: no environment {environment!r} (known: {', '.join(environments)})")
    sections = []
    for name in DECISION_SECTIONS:
        block = raw.get(name) or {}
        if not block.get("enabled"):
            continue
        hosting = (block.get("hosting") or {}).get("mode", "instances")
        component = component_name(environment, name) if hosting == "components" else None
        sections.append(Section(name, endpoint_name(environment, name), component, hosting))
    record = (raw.get("evaluation") or {}).get("record")
    return Deployed(environment, str(raw["region"]), tuple(sections), record, cdk_json.resolve().parent)
