"""The deployed-variant check: each production variant of a deployed decision endpoint scored on the suite, held to
the evaluation record.

A variant passes when it serves the recorded artifact (model, calibration, policy) and answers every case of the
suite within the environment's tolerance of the record: no option's probability further off than
tolerance.probability, no more picks flipped than tolerance.flips. Hardware and llama.cpp builds are expected to
differ from the record's run: they are reported, and fail only through the answers they move.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decision_spec.answer_settings import contradictions, run_answer_settings, shown
from decision_spec.evaluation_record import EvaluationTolerance
from decision_spec.names import stack_name

from decisionctl.core import scoring
from decisionctl.core.cases import case_digest, parse_suite
from decisionctl.core.labeled import Case, Run
from decisionctl.review import decision_diff
from decisionctl.review import record as records
from decisionctl.review import settings as review_settings
from decisionctl.transport import RetryPolicy, Sender

IN_SERVICE = "InService"
# The decision sections' outputs of the Serving stack (serving_stack.py: f"{section.capitalize()}EndpointName").
# ChatEndpointName is left out: the chat endpoint is llama-server generating text, with no decision route to score.
DECISION_OUTPUTS = ("CpuEndpointName", "GpuEndpointName")
# A components endpoint's inference component, which every invocation names (f"{section}InferenceComponentName").
COMPONENT_OUTPUTS = {"CpuEndpointName": "CpuInferenceComponentName", "GpuEndpointName": "GpuInferenceComponentName"}
REPORTED = ("instance_types", "hardware", "llama_cpp_build", "n_gpu_layers", "adapter")  # from x_run, per variant
MAX_ERRORS_SHOWN = 5

VariantSender = Callable[[str, str], Sender]  # (endpoint, variant) -> a sender to that variant
SenderFor = Callable[[str, str, str | None], Sender]  # (endpoint, variant, its inference component or None)


class DeployedError(ValueError):
    """What to check cannot be found: no such stack in the outputs file, or no decision endpoint in it."""


def endpoints_from_outputs(path: Path, environment: str) -> list[str]:
    """The decision endpoints' names in the file `cdk deploy --outputs-file` writes ({stack: {output: value}})."""
    try:
        outputs = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DeployedError(f"{path}: not readable as cdk deploy's outputs file ({exc})") from exc
    stack = stack_name(environment, "Serving")
    if not isinstance(outputs, dict) or not isinstance(outputs.get(stack), dict):
        known = ", ".join(sorted(outputs)) if isinstance(outputs, dict) else "none"
        raise DeployedError(f"{path}: no outputs of stack {stack} (stacks there: {known or 'none'})")
    names = [str(outputs[stack][key]) for key in DECISION_OUTPUTS if key in outputs[stack]]
    if not names:
        raise DeployedError(f"{path}: stack {stack} has no decision endpoint ({' or '.join(DECISION_OUTPUTS)})")
    return names


def components_from_outputs(path: Path, environment: str) -> dict[str, str]:
    """Endpoint name -> its inference component, for the decision endpoints hosted as components in the outputs file
    (endpoints_from_outputs has read it already)."""
    outputs = json.loads(path.read_text(encoding="utf-8"))[stack_name(environment, "Serving")]
    return {
        str(outputs[endpoint]): str(outputs[component])
        for endpoint, component in COMPONENT_OUTPUTS.items()
        if endpoint in outputs and component in outputs
    }


def component_names(
    endpoints: Sequence[str] | None, outputs: Path | None, environment: str, component: str | None
) -> dict[str, str]:
    """Endpoint -> inference component: `component` for the one endpoint given, or the outputs file's (none where
    the file cannot be read: check_environment says what is wrong with it)."""
    if component:
        assert endpoints is not None and len(endpoints) == 1  # the command refuses it otherwise
        return {endpoints[0]: component}
    if outputs:
        try:
            return components_from_outputs(outputs, environment)
        except (OSError, ValueError, KeyError):
            return {}
    return {}


def artifact_mismatches(identity: Mapping[str, Any], record: Mapping[str, Any]) -> list[str]:
    """Where the variant's run identity says it serves another artifact than the recorded one, or the artifact under
    other answer settings than those recorded (those x_run reports: debias mode, tolerance, state boundary), one
    sentence each."""
    artifact, run = record["artifact"], record.get("run") or {}
    wanted = {
        "model_sha256": artifact.get("model_sha256"),
        "calibration": run.get("calibration"),
        "policy": artifact.get("policy_version"),
    }
    found = [
        f"serves another artifact: {field} {json.dumps(identity.get(field), sort_keys=True)}, the record's "
        f"{json.dumps(value, sort_keys=True)}"
        for field, value in wanted.items()
        if identity.get(field) != value
    ]
    contradicted = contradictions(run_answer_settings(identity), records.answer_settings_of(record))
    return found + [
        f"serves other answer settings: {name} {shown(served)}, the record's {shown(recorded)}"
        for name, (served, recorded) in contradicted.items()
    ]


def compare(
    record: Mapping[str, Any],
    cases: Sequence[Case],
    scored: Run,
    tolerance: EvaluationTolerance,
) -> dict[str, Any]:
    """A scored variant against the record: its deltas, flips, run-identity changes and failures, JSON-ready."""
    identity = scored.identity or {}
    recorded = record["answers"]
    digests = {c.id: case_digest(c) for c in cases}
    answers = {p.id: records.answer(p, digests[p.id], None, None) for p in scored.predictions}
    failures: list[str] = []
    if scored.errors or len(answers) != len(cases):
        shown = "; ".join(f"{e['id']}: {e['error']}" for e in scored.errors[:MAX_ERRORS_SHOWN])
        failures.append(
            f"{len(cases) - len(answers)} of {len(cases)} cases not scored" + (f" ({shown})" if shown else "")
        )
    failures += artifact_mismatches(identity, record)
    unrecorded = [cid for cid in answers if cid not in recorded]
    if unrecorded:
        failures.append(f"{len(unrecorded)} cases of the suite are not in the record (record again): {unrecorded}")
    reworded = [cid for cid in answers if cid in recorded and recorded[cid].get("case_sha256") != digests[cid]]
    if reworded:
        failures.append(f"{len(reworded)} cases differ from the recorded ones (the suite changed): {reworded}")
    deltas: dict[str, float] = {}
    for cid, a in answers.items():
        if cid in recorded:
            d = decision_diff.max_delta(recorded[cid], a)
            if d is None:
                failures.append(f"case {cid}: its options are not the recorded ones")
            else:
                deltas[cid] = d
    past = sorted((cid for cid, d in deltas.items() if d > tolerance.probability), key=lambda c: (-deltas[c], c))
    over = [{"id": cid, "delta": deltas[cid], "hardware": scored.hardware.get(cid)} for cid in past]
    if over:
        listed = ", ".join(f"{row['id']} ({row['delta']:.4f})" for row in over)
        failures.append(
            f"{len(over)} cases moved more than {tolerance.probability:g} in one option's probability: {listed}"
        )
    every_flip = decision_diff.flips({cid: recorded[cid] for cid in deltas}, answers)
    # a recorded answer whose top two were closer than the tolerance may flip on another build or thread count
    # (BENCHMARKS.md, cross-build drift): only a flip of a clearer answer counts against tolerance.flips
    flipped = [f for f in every_flip if recorded_margin(recorded[f["id"]]) > tolerance.probability]
    within = [f["id"] for f in every_flip if f not in flipped]
    if len(flipped) > tolerance.flips:
        failures.append(
            f"{len(flipped)} answers flipped, more than {tolerance.flips}: {', '.join(f['id'] for f in flipped)}"
        )
    run = record.get("run") or {}
    return {
        **{k: identity.get(k) for k in REPORTED},
        "hardware_seen": hardware_seen(scored.hardware),
        "run_changes": {
            k: {"record": run.get(k), "variant": identity.get(k)}
            for k in records.RUN_FIELDS
            if k in run and run.get(k) != identity.get(k)
        },
        "cases": len(answers),
        "max_delta": max(deltas.values()) if deltas else None,
        "over_tolerance": over,
        "flips": flipped,
        "flips_within_tolerance": within,  # the recorded margin was at most tolerance.probability: not counted
        "errors": scored.errors,
        "failures": failures,
        "passed": not failures,
    }


def recorded_margin(answer: Mapping[str, Any]) -> float:
    """How far the recorded pick stood above the runner-up: its probability less the next one's."""
    top = sorted((float(p) for p in answer["probs"]), reverse=True)
    return top[0] - top[1] if len(top) > 1 else 1.0


def hardware_seen(by_case: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The kinds of hardware that answered a variant's cases, most cases first: a pool's variant may show several."""
    kinds: dict[str, list[str]] = {}
    for cid, hardware in by_case.items():
        kinds.setdefault(json.dumps(hardware, sort_keys=True), []).append(cid)
    ranked = sorted(kinds.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return [{"hardware": json.loads(kind), "cases": len(ids)} for kind, ids in ranked]


def check_variant(
    endpoint: str,
    variant: str,
    *,
    record: Mapping[str, Any],
    cases: Sequence[Case],
    tolerance: EvaluationTolerance,
    sender: Sender,
    out: Path,
    policy: RetryPolicy | None = None,
) -> dict[str, Any]:
    """Score the suite on one variant (TargetVariant) from scratch and compare it with the record."""
    try:
        scored = scoring.score_cases(cases, sender, out, restart=True, policy=policy)
    except scoring.IdentityChanged as exc:  # its instances serve different models or calibrations
        return {"endpoint": endpoint, "variant": variant, "failures": [str(exc)], "passed": False}
    finally:
        sender.close()
    if scored.interrupted:
        raise KeyboardInterrupt
    return {"endpoint": endpoint, "variant": variant, **compare(record, cases, scored, tolerance)}


def check_endpoint(
    endpoint: str,
    *,
    sagemaker: Any,
    variant_sender: VariantSender,
    record: Mapping[str, Any],
    cases: Sequence[Case],
    tolerance: EvaluationTolerance,
    out: Path,
    policy: RetryPolicy | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """describe_endpoint, then every production variant checked; shadow variants listed as not checked (SageMaker
    invokes them only with a copy of production traffic: InvokeEndpoint's TargetVariant cannot name them)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        described = sagemaker.describe_endpoint(EndpointName=endpoint)
    except (ClientError, BotoCoreError) as exc:
        return {"endpoint": endpoint, "status": None, "failures": [f"describe_endpoint: {exc}"], "variants": []}
    status = described.get("EndpointStatus")
    shadows = [v["VariantName"] for v in described.get("ShadowProductionVariants") or []]
    result: dict[str, Any] = {
        "endpoint": endpoint,
        "status": status,
        "endpoint_config": described.get("EndpointConfigName"),
        "not_checked": [{"variant": v, "why": "shadow variant (TargetVariant cannot invoke it)"} for v in shadows],
        "failures": [],
        "variants": [],
    }
    if status != IN_SERVICE:
        result["failures"].append(f"endpoint {endpoint} is {status}, not {IN_SERVICE}: nothing was scored")
        return result
    for variant in (v["VariantName"] for v in described.get("ProductionVariants") or []):
        say(f"{endpoint} / {variant}: scoring {len(cases)} cases")
        checked = check_variant(
            endpoint,
            variant,
            record=record,
            cases=cases,
            tolerance=tolerance,
            sender=variant_sender(endpoint, variant),
            out=out / endpoint / variant,
            policy=policy,
        )
        for failure in checked["failures"]:
            say(f"{endpoint} / {variant}: {failure}")
        result["variants"].append(checked)
    if not result["variants"]:
        result["failures"].append(f"endpoint {endpoint} has no production variant")
    return result


DIRECT = "(direct)"  # the variant named for an adapter reached by URL: no SageMaker endpoint, no variants


def check_url(
    url: str,
    *,
    sender: Sender,
    record: Mapping[str, Any],
    cases: Sequence[Case],
    tolerance: EvaluationTolerance,
    out: Path,
    policy: RetryPolicy | None = None,
) -> dict[str, Any]:
    """An adapter reached directly (a laptop's, another build's, a staging box) checked as one variant, in the shape
    check_endpoint gives an endpoint: the same test of answers, artifact and settings, without AWS."""
    checked = check_variant(
        url, DIRECT, record=record, cases=cases, tolerance=tolerance, sender=sender, out=out / "direct", policy=policy
    )
    return {"endpoint": url, "status": "reached", "not_checked": [], "failures": [], "variants": [checked]}


def check(
    endpoints: Sequence[str],
    *,
    environment: str,
    record_path: Path,
    record: Mapping[str, Any],
    cases: Sequence[Case],
    tolerance: EvaluationTolerance,
    sagemaker: Any,
    variant_sender: VariantSender,
    out: Path,
    policy: RetryPolicy | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Every endpoint's variants against the record: the full report, JSON-ready; `passed` when all pass. Without a
    SageMaker client (`sagemaker` None) the endpoints are adapters' URLs, each checked as one variant (check_url)."""
    checked = [
        check_url(
            name,
            sender=variant_sender(name, DIRECT),
            record=record,
            cases=cases,
            tolerance=tolerance,
            out=out / str(i),
            policy=policy,
        )
        if sagemaker is None
        else check_endpoint(
            name,
            sagemaker=sagemaker,
            variant_sender=variant_sender,
            record=record,
            cases=cases,
            tolerance=tolerance,
            out=out,
            policy=policy,
            say=say,
        )
        for i, name in enumerate(endpoints)
    ]
    passed = all(not e["failures"] and all(v["passed"] for v in e["variants"]) for e in checked)
    return {
        "environment": environment,
        "record": {
            "path": str(record_path),
            "sha256": records.sha256_bytes(record_path.read_bytes()),
            "artifact": record["artifact"],
            "suite": record.get("suite"),
        },
        "tolerance": {"probability": tolerance.probability, "flips": tolerance.flips},
        "endpoints": checked,
        "passed": passed,
    }


@dataclass(frozen=True)
class DeployedCheck:
    """What check-deployed checks: the environment (its suite, record and tolerance in cdk.json), the endpoints named
    or those in cdk deploy's outputs file or adapters' URLs, the one endpoint's inference component, where
    predictions go."""

    environment: str
    cdk_json: Path
    endpoints: Sequence[str] | None
    outputs: Path | None
    component: str | None
    out: Path
    retry: RetryPolicy
    urls: Sequence[str] | None = None


def check_environment(
    asked: DeployedCheck, *, sagemaker: Any, sender_for: SenderFor, say: Callable[[str], None]
) -> dict[str, Any] | None:
    """The check-deployed use case: every endpoint asked about (each components endpoint through its inference
    component), or every URL asked about (`sagemaker` None), checked against the record (`check`); None where the
    record or the endpoints cannot be read, said why."""
    environment, endpoints, outputs = asked.environment, asked.endpoints, asked.outputs
    components = component_names(endpoints, outputs, environment, asked.component)

    def variant_sender(endpoint: str, variant: str) -> Sender:
        return sender_for(endpoint, variant, components.get(endpoint))

    settings = review_settings.load(asked.cdk_json, environment)
    cases = parse_suite(settings.read_suite(), settings.suite)
    try:
        record = records.read(settings.record)
        named = asked.urls or endpoints or endpoints_from_outputs(outputs or Path(), environment)
    except (records.EvaluationRecordError, DeployedError) as exc:
        say(str(exc))
        return None
    return check(
        named,
        environment=environment,
        record_path=settings.record,
        record=record,
        cases=cases,
        tolerance=settings.evaluation.tolerance,
        sagemaker=sagemaker,
        variant_sender=variant_sender,
        out=asked.out,
        policy=asked.retry,
        say=say,
    )
