"""Synthesize each CDK app once per test session (synth costs ~8 s here) and share the result.

Variants: the two environments of cdk.json as they are, and "variant": dev with the stock chat
endpoint switched on, an existing alarm topic and a pinned (fictitious) account, so that the
optional paths are synthesized and checked by cdk-nag and cfn-lint too.
"""

from __future__ import annotations

import atexit
import copy
import functools
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Template

from app import build_app
from stacks.config import EnvironmentConfig, load_environment

ROOT = Path(__file__).resolve().parents[1]
VARIANT_ACCOUNT = "123456789012"
VARIANT_TOPIC = f"arn:aws:sns:us-west-2:{VARIANT_ACCOUNT}:existing-alarms"
VARIANTS = ("dev", "prod", "variant")


def cdk_context() -> dict[str, Any]:
    """The context the CDK CLI would pass from cdk.json (feature flags and environments)."""
    context: dict[str, Any] = json.loads((ROOT / "cdk.json").read_text(encoding="utf-8"))["context"]
    # cdk.json ships placeholders (DLC digests, prod's model checksum) that synth refuses without this, as CI passes it
    return {**copy.deepcopy(context), "allow_placeholders": "true"}


def variant_context() -> dict[str, Any]:
    context = cdk_context()
    dev = context["environments"]["dev"]
    dev["account"] = VARIANT_ACCOUNT
    dev["alarms"]["topic_arn"] = VARIANT_TOPIC
    dev["chat"] = {
        "enabled": True,
        "flavour": "cpu",
        "instance_type": "ml.c6i.2xlarge",
        "threads": 8,
        "ctx_size": 4096,
        "startup_health_check_timeout_seconds": 900,
        "model_latency_p95_ms": 20000,
        "autoscaling": {
            "enabled": True,
            "min_instances": 2,
            "max_instances": 3,
            "target_concurrent_requests_per_instance": 4,
            "scale_in_cooldown_seconds": 600,
            "scale_out_cooldown_seconds": 120,
        },
        "instance_provision_timeout_seconds": 600,
        "deployment": {"strategy": "linear", "batch_instances": 1, "wait_seconds": 900, "rollback_on_alarms": True},
    }
    return context


@dataclass(frozen=True)
class Synthesized:
    environment: str
    config: EnvironmentConfig
    app: cdk.App
    assembly: cdk.cx_api.CloudAssembly
    outdir: Path
    templates: dict[str, dict[str, Any]]

    def stack_name(self, part: str) -> str:
        return f"DecisionEndpoints-{self.environment}-{part}"

    def template_json(self, part: str) -> dict[str, Any]:
        """The template as parsed once: the same dict on every call (tests may compare by identity)."""
        return self.templates[part]

    def template(self, part: str) -> Template:
        return Template.from_json(self.template_json(part))

    def resources(self, part: str, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template_json(part)["Resources"].items() if v["Type"] == kind}

    def template_files(self) -> list[Path]:
        return sorted(self.outdir.glob("*.template.json"))


@functools.cache
def synthesize(variant: str) -> Synthesized:
    """Raises if cdk-nag (registered by build_app) reports any unacknowledged finding."""
    context = variant_context() if variant == "variant" else cdk_context()
    environment = "dev" if variant == "variant" else variant
    outdir = Path(tempfile.mkdtemp(prefix=f"cdk-{variant}-"))
    atexit.register(shutil.rmtree, outdir, True)
    app = build_app(environment, context=context, outdir=str(outdir))
    assembly = app.synth()
    config = load_environment(context["environments"], environment)
    templates = {
        part: json.loads((outdir / f"DecisionEndpoints-{environment}-{part}.template.json").read_text(encoding="utf-8"))
        for part in ("Foundation", "Serving")
    }
    return Synthesized(environment, config, app, assembly, outdir, templates)
