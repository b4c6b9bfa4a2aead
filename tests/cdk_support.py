"""Synthesize each CDK app once per test session (synth costs ~8 s here) and share the result.

Variants: the two environments of cdk.json as they are, and "variant": dev with the stock chat
endpoint switched on, an existing alarm topic and a pinned (fictitious) account, so that the
optional paths are synthesized and checked by cdk-nag and cfn-lint too. HOSTING_VARIANTS synthesize each hosting
mode (decision_spec/hosting_config.py) of dev and prod, and "prod-full": prod's sections as components with every
optional part that mode takes on (batch, async, decision shift, invoker access with bearer tokens, the GitHub stack).
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
from decision_spec.environment_config import EnvironmentConfig, load_environment

from app import build_app

ROOT = Path(__file__).resolve().parents[1]
VARIANT_ACCOUNT = "123456789012"
VARIANT_TOPIC = f"arn:aws:sns:us-west-2:{VARIANT_ACCOUNT}:existing-alarms"
VARIANTS = ("dev", "prod", "variant")
HOSTING_VARIANTS = (
    "dev-instances",
    "dev-components",
    "dev-serverless",
    "prod-components",
    "prod-serverless",
    "prod-full",
)
# A stand-in for prod's model (Qwen3-4B's shape, Q4_K_M): prod's cdk.json names no footprint (its sha is a placeholder)
PROD_FOOTPRINT = {"gguf_bytes": 2_497_280_256, "kv_bytes_per_token": 147_456}


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


def hosting_context(variant: str) -> dict[str, Any]:
    """One of HOSTING_VARIANTS: `<env>-<mode>`, or prod-full."""
    context = cdk_context()
    environment, mode = variant.split("-", 1)
    env = context["environments"][environment]
    env["model"].setdefault("footprint", dict(PROD_FOOTPRINT))
    env["invoker_access"] = {"enabled": True, "bearer_token": mode == "full"}
    sections = [s for s in ("cpu", "gpu") if env[s].get("enabled")]
    for section in sections:
        settings = env[section]
        if mode == "instances":
            settings["hosting"] = {"mode": "instances"}
            settings["autoscaling"]["min_instances"] = max(1, settings["autoscaling"]["min_instances"])
        elif mode in ("components", "full"):
            settings["hosting"] = {"mode": "components"}
            if section == "cpu":
                settings["hosting"]["cpu_cores_per_copy"] = settings["threads"] / 2
            settings["fallback_instance_types"] = []
            settings.pop("model_latency_p95_ms_by_instance_type", None)
            # dev's cpu and prod's gpu reach zero; prod's cpu keeps its two copies
            settings["autoscaling"]["min_instances"] = 2 if (environment, section) == ("prod", "cpu") else 0
            if settings["deployment"]["strategy"] in ("canary", "linear"):
                settings["deployment"] = {**settings["deployment"], "strategy": "rolling"}
                settings["deployment"].pop("termination_wait_seconds", None)
        elif section == "cpu":  # serverless: the cpu section only (CPU only)
            settings["hosting"] = {"mode": "serverless", "max_concurrency": 8, "network_isolation": False}
            settings["autoscaling"]["enabled"] = False
            deployment = settings["deployment"]
            settings["deployment"] = {
                "strategy": "all_at_once",
                "wait_seconds": deployment["wait_seconds"],
                "rollback_on_alarms": deployment["rollback_on_alarms"],
            }
    if mode == "full":
        env["decision_shift"] = loop_context()["environments"]["prod"]["decision_shift"]
        env["batch"], env["async"] = copy.deepcopy(BATCH), copy.deepcopy(ASYNC)
    if mode in ("full", "components"):  # the pipeline: dev's deployed-check role invokes dev's component
        context["github"] = {"owner": "example-org", "repository": "decision-endpoints", "create_oidc_provider": True}
        context["environments"]["prod"]["account"] = "111122223333"
        context["environments"]["dev"]["account"] = "444455556666"
    return context


# Batch Transform and the asynchronous endpoint as the "bulk" variant (tests/stacks/test_bulk_stacks.py) turns them on
BATCH = {
    "enabled": True,
    "instance_type": "ml.c6i.2xlarge",
    "instance_count": 2,
    "max_concurrent_transforms": 2,
    "max_payload_mb": 1,
    "schedule": {"expression": "cron(0 2 * * ? *)", "timezone": "Europe/Berlin", "run": "nightly"},
}
ASYNC = {
    "enabled": True,
    "instance_type": "ml.c6i.xlarge",
    "max_instances": 3,
    "max_concurrent_invocations_per_instance": 1,
    "target_backlog_per_instance": 4,
    "scale_in_cooldown_seconds": 600,
    "scale_out_cooldown_seconds": 60,
}


def bulk_context() -> dict[str, Any]:
    context = cdk_context()
    dev = context["environments"]["dev"]
    dev["batch"], dev["async"] = copy.deepcopy(BATCH), copy.deepcopy(ASYNC)
    return context


# The production loop (tests/stacks/test_production_loop_stacks.py): answer capture, decision-shift alarms, a shadow
ROUTING = "0123456789abcdef"
POLICY = "fedcba9876543210"
CANDIDATE = "models/candidate-calibration/model.tar.gz"
CERTIFIED = {
    "cases": 40,
    "actions": {"automate": 0.5, "review": 0.3, "abstain": 0.2},
    "questions": {
        ROUTING: {
            "type": "choice",
            "cases": 20,
            "options": ["Billing", "Technical", "Sales"],
            "shares": [0.5, 0.3, 0.2],
        }
    },
}


def loop_context() -> dict[str, Any]:
    context = cdk_context()
    prod = context["environments"]["prod"]
    prod["data_capture"] = {"enabled": True, "sampling_percent": 25, "prefix": "capture", "expiry_days": 90}
    prod["decision_shift"] = {
        "enabled": True,
        "policy_version": POLICY,
        "certified": CERTIFIED,
        "routing_questions": [ROUTING],
        "action_band_points": 15,
        "option_band_points": 20,
        "min_answers": 30,
        "min_mean_label_mass": 0.5,
    }
    prod["cpu"]["shadow"] = {
        "s3_key": CANDIDATE,
        "sha256": "a" * 64,
        "sampling_percent": 20,
        "instance_type": "ml.c5d.9xlarge",  # local NVMe: the config may then hold no volume key
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
    if variant in HOSTING_VARIANTS:
        context, environment = hosting_context(variant), variant.split("-", maxsplit=1)[0]
    else:
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


# Reading templates: references followed, statements gathered
def by_ref(resources: dict[str, dict[str, Any]], value: Any) -> dict[str, Any]:
    """The resource that a {"Ref": ...} or {"Fn::GetAtt": [...]} value points at."""
    logical = value["Ref"] if "Ref" in value else value["Fn::GetAtt"][0]
    return resources[logical]


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def role_statements(s: Synthesized, role_resource: dict[str, Any]) -> list[dict[str, Any]]:
    res = s.template_json("Serving")["Resources"]
    logical = next(k for k, v in res.items() if v is role_resource)
    statements = []
    for policy in (v for v in res.values() if v["Type"] == "AWS::IAM::Policy"):
        if {"Ref": logical} in policy["Properties"]["Roles"]:
            statements += policy["Properties"]["PolicyDocument"]["Statement"]
    return statements
