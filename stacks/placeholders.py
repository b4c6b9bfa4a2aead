"""All-zero placeholders stop synth, and with it `cdk deploy`, before anything is created.

cdk.json ships all-zero DLC digests and model checksums where only the operator can know the value.
A deployment with one fails minutes later inside CodeBuild or at endpoint start, so synth refuses,
naming each key and how to fill it in. `-c allow_placeholders=true` lets synth through (CI and pull
requests synthesize without deploying); the synth warning stays, and the preflight still stops a deployment.
"""

from __future__ import annotations

from decision_spec.environment_config import ConfigError, EnvironmentConfig

ALLOW_PLACEHOLDERS = "allow_placeholders"


class PlaceholderError(ConfigError):
    """cdk.json still holds placeholders in use; the message says how to fill each one."""


def allowed(context_value: object) -> bool:
    """`-c allow_placeholders=true` arrives as the string "true"; tests may pass True."""
    return context_value is True or str(context_value).lower() == "true"


def how_to_fill(config: EnvironmentConfig, key: str) -> str:
    if key.endswith("_digest"):
        return (
            f"run `.venv/bin/decisionctl pin-images --env {config.name}` (it looks the DLC digests up through ECR "
            "and writes them into cdk.json)"
        )
    return (
        "write the sha256 of the GGUF to serve: `decisionctl package-model <model.gguf> --expected-sha256 <sha256> "
        "...` verifies it and records it in manifest.json as sha256"
    )


def refuse_placeholders(config: EnvironmentConfig, *, allow: bool) -> None:
    keys = config.placeholders()
    if not keys or allow:
        return
    lines = [f"{key}: all-zero placeholder; {how_to_fill(config, key)}" for key in keys]
    raise PlaceholderError(
        f"environments.{config.name}: cdk.json holds placeholders a deployment would fail on, minutes in:\n  "
        + "\n  ".join(lines)
        + f"\nTo synthesize anyway (CI, pull requests; nothing is deployed): -c {ALLOW_PLACEHOLDERS}=true"
    )
