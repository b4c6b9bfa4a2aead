"""The `<section>.hosting` block of cdk.json (one of three modes) and what each mode refuses, with the reason.

- `instances` (the default when `hosting` is absent): the model on the variant, at least one instance always running,
  instance count scaled by Application Auto Scaling (stacks/autoscaling.py).
- `components`: the model as an inference component (`AWS::SageMaker::InferenceComponent`) on a variant with managed
  instance scaling. With `autoscaling.min_instances` 0 copies, then instances, scale to zero; an alarm on
  `NoCapacityInvocationFailures` drives a step policy that brings one copy back (stacks/component_scaling.py). Here the
  `autoscaling` counts are copies and its target is concurrent requests per copy.
- `serverless`: a serverless variant (CPU only, 1,024-6,144 MB in 1 GB steps, at most 200 concurrent requests), paid
  per request; memory is sized from the model at synth, and a model that cannot fit is refused with the numbers.

What a mode cannot do is refused at synth with the reason and the alternative (`refusals`), never dropped: SageMaker
serverless inference excludes GPUs, network isolation, data capture, multiple production variants (a shadow) and
rolling updates ("Feature exclusions" of the serverless guide; deployment guardrails' exclusions); the components mode
here builds one Specification for one instance type, hosts no shadow and no data capture, and updates copies in
rolling batches only.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from decision_spec.config_base import FrozenConfig
from decision_spec.memory import (
    MISSING_FOOTPRINT,
    SERVERLESS_MEMORY_MB,
    SERVERLESS_MEMORY_STEP_MB,
    ModelFootprint,
    serverless_memory_mb,
)

# The memory sizing (what the model needs, serverless's 1 GB steps, the runtime's allowance) is
# decision_spec.memory's: decisionctl cost prices what synth builds.
SERVERLESS_MAX_CONCURRENCY = 200


class InstancesHosting(FrozenConfig):
    mode: Literal["instances"] = Field(description="The model on the variant; instances always run (min 1).")


class ComponentsHosting(FrozenConfig):
    mode: Literal["components"] = Field(
        description="The model as an inference component: copies and instances can reach zero (autoscaling counts "
        "copies)."
    )
    cpu_cores_per_copy: float | None = Field(
        default=None,
        ge=0.25,
        le=1024,
        description="NumberOfCpuCoresRequired: cores SageMaker reserves for one copy (required on CPU sections; "
        "copies that share an instance share its cores, so reserve what SM_LLAMA_CPP_THREADS uses).",
    )


class ServerlessHosting(FrozenConfig):
    mode: Literal["serverless"] = Field(description="A serverless variant: CPU only, paid per request.")
    max_concurrency: int = Field(
        ge=1, le=SERVERLESS_MAX_CONCURRENCY, description="ServerlessConfig.MaxConcurrency: invocations at once."
    )
    memory_mb: int | None = Field(
        default=None,
        ge=SERVERLESS_MEMORY_MB[0],
        le=SERVERLESS_MEMORY_MB[1],
        multiple_of=SERVERLESS_MEMORY_STEP_MB,
        description="ServerlessConfig.MemorySizeInMB; null: the smallest 1 GB step the model fits (synth refuses "
        "a value below what the model needs).",
    )
    network_isolation: Literal[False] = Field(
        description="Must be written false: SageMaker serverless inference does not run network-isolated containers, "
        "so the model's container may reach the network (the other modes keep it isolated)."
    )


Hosting = Annotated[InstancesHosting | ComponentsHosting | ServerlessHosting, Field(discriminator="mode")]
DEFAULT_HOSTING = InstancesHosting(mode="instances")


def serverless_memory_of(
    hosting: ServerlessHosting,
    footprint: ModelFootprint | None,
    *,
    ctx_size: int,
    contexts: int,
    state_cache_mb: int | None = None,
) -> int:
    """MemorySizeInMB: the configured value, or the smallest 1 GB step the model fits; ValueError with the numbers
    and the fix where it cannot fit (or where there is no footprint to size from)."""
    if footprint is None:
        raise ValueError(MISSING_FOOTPRINT)
    return serverless_memory_mb(
        hosting.memory_mb,
        footprint.gguf_bytes,
        footprint.kv_bytes_per_token,
        ctx_size=ctx_size,
        contexts=contexts,
        state_cache_mb=state_cache_mb,
    )


def refusals(
    hosting: InstancesHosting | ComponentsHosting | ServerlessHosting,
    *,
    gpu: bool,
    pooled: bool,
    shadow: bool,
    strategy: str,
    rollback_on_alarms: bool,
    scaling_enabled: bool,
    min_instances: int,
) -> list[str]:
    """Why this section's other settings cannot be hosted in its mode: one sentence each, with the alternative."""
    found: list[str] = []
    if hosting.mode == "instances":
        if min_instances == 0:
            found.append(
                "autoscaling.min_instances 0: a variant that hosts its model keeps at least one instance; "
                "scaling to zero needs hosting.mode components (or serverless)"
            )
        return found
    mode = hosting.mode
    if pooled:
        found.append(
            f"fallback_instance_types: {mode} hosting here runs one instance type"
            + (" (serverless has none)" if mode == "serverless" else " (one component Specification)")
            + "; remove the fallbacks, or use hosting.mode instances for an instance pool"
        )
    if shadow:
        found.append(
            "shadow: a shadow variant needs a model on the variant (serverless allows one production variant, and a "
            "component endpoint's variant hosts no model); run the candidate with hosting.mode instances"
        )
    if mode == "serverless":
        if gpu:
            found.append(
                "serverless inference is CPU only (no GPU): use hosting.mode components, whose GPU copies scale "
                "to zero, or instances"
            )
        if scaling_enabled:
            found.append(
                "autoscaling.enabled: a serverless endpoint scales itself up to hosting.max_concurrency; set "
                "autoscaling.enabled to false"
            )
        if strategy != "all_at_once":
            found.append(
                f"deployment.strategy {strategy}: a serverless endpoint has no instances to step traffic by and "
                "cannot roll; use all_at_once (rollback alarms still apply)"
            )
        return found
    if strategy in ("canary", "linear"):
        found.append(
            f"deployment.strategy {strategy}: an inference component updates its copies in rolling batches; use "
            "rolling (batch_instances counts copies) or all_at_once"
        )
    elif strategy == "all_at_once" and rollback_on_alarms:
        found.append(
            "deployment.rollback_on_alarms with all_at_once: an inference component watches rollback alarms only "
            "during a rolling update of its copies; use strategy rolling, or set rollback_on_alarms to false"
        )
    if not scaling_enabled and min_instances == 0:
        found.append(
            "autoscaling.min_instances 0 with autoscaling.enabled false: no copy would ever start; enable "
            "autoscaling (its step policy scales out from zero) or keep at least one copy"
        )
    if not gpu and isinstance(hosting, ComponentsHosting) and hosting.cpu_cores_per_copy is None:
        found.append("hosting.cpu_cores_per_copy is required on a CPU section: the cores SageMaker reserves a copy")
    return found


def require_footprint(
    hosting: InstancesHosting | ComponentsHosting | ServerlessHosting,
    footprint: ModelFootprint | None,
    *,
    ctx_size: int,
    contexts: int,
    state_cache_mb: int | None = None,
) -> None:
    """For the environment's validation: components and serverless hosting size memory from model.footprint, and a
    serverless model must fit (ValueError with the numbers and the fix)."""
    if isinstance(hosting, ServerlessHosting):
        serverless_memory_of(hosting, footprint, ctx_size=ctx_size, contexts=contexts, state_cache_mb=state_cache_mb)
    elif isinstance(hosting, ComponentsHosting) and footprint is None:
        raise ValueError(
            "hosting.mode components reserves memory per copy from the model: set model.footprint (gguf_bytes: "
            "manifest.json's size_bytes; kv_bytes_per_token: from the GGUF's metadata, docs/deploy.md)"
        )


def refuse_capture(section: str, mode: str) -> None:
    """data_capture is the environment's: every decision section must be able to capture."""
    if mode == "instances":
        return
    why = (
        "SageMaker serverless inference excludes data capture"
        if mode == "serverless"
        else "capture is per variant, and a component endpoint's variant hosts no model (not built here, unverified "
        "on AWS)"
    )
    raise ValueError(
        f"{section} is hosted as {mode}: {why}; turn data_capture off (enabled false) or set {section}.hosting.mode "
        "to instances"
    )


def refuse_batch(section: str, hosting: object) -> None:
    """Batch Transform runs the section's own model, which serverless hosting builds without network isolation."""
    if isinstance(hosting, ServerlessHosting):
        raise ValueError(
            f"model {section!r} is hosted serverless, whose model runs without network isolation: run batch from a "
            "section hosted as instances or components"
        )
