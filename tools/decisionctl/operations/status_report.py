"""The status use case: what an environment runs (endpoints, variants, instances or copies, scaled to zero or not),
the model and answer settings it serves, the evaluation record in force against the committed one, alarms in ALARM
and the last deployment's result, from the SageMaker, CloudWatch and CloudFormation APIs (read only)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decision_spec.answer_settings import ANSWER_VARIABLES
from decision_spec.evaluation_record import RECORD_OUTPUT

from decisionctl.operations.deployed_names import ClientFor, Deployed, Section, load

EXPECTED_MODEL = "DECISION_EXPECTED_MODEL_SHA256"  # the model sha256 the stack passes the container


@dataclass
class Status:
    lines: list[str] = field(default_factory=list)
    healthy: bool = True  # every endpoint InService and no alarm in ALARM


def _missing(exc: Exception) -> bool:
    """A ClientError saying the resource does not exist (SageMaker's and CloudFormation's ValidationError)."""
    response = getattr(exc, "response", None)
    code = (response or {}).get("Error", {}).get("Code", "")
    return code in ("ValidationException", "ValidationError", "ResourceNotFound")


def environment_status(cdk_json: Path, environment: str, region: str | None, *, client: ClientFor) -> Status:
    """The environment's status; `client(service, region)` builds an AWS client (region: cdk.json's unless given)."""
    deployed = load(cdk_json, environment)
    region = region or deployed.region
    sagemaker, cloudwatch = client("sagemaker", region), client("cloudwatch", region)
    cloudformation = client("cloudformation", region)
    status = Status()
    status.lines.append(f"{deployed.environment} ({region})")
    _stack(deployed, cloudformation, status)
    for section in deployed.sections:
        _section(section, sagemaker, status)
    _alarms(deployed, cloudwatch, status)
    return status


def _stack(deployed: Deployed, cloudformation: Any, status: Status) -> None:
    try:
        stack = cloudformation.describe_stacks(StackName=deployed.serving_stack)["Stacks"][0]
    except Exception as exc:
        if not _missing(exc):
            raise
        status.lines.append(f"  {deployed.serving_stack}: not deployed")
        status.healthy = False
        return
    when = stack.get("LastUpdatedTime") or stack["CreationTime"]
    reason = f" ({stack['StackStatusReason']})" if stack.get("StackStatusReason") else ""
    status.lines.append(
        f"  last deployment: {deployed.serving_stack} {stack['StackStatus']} at {when:%Y-%m-%d %H:%M:%S %Z}{reason}"
    )
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    served = outputs.get(RECORD_OUTPUT)
    if deployed.record is None:
        status.lines.append("  evaluation record: none configured (cdk.json has no evaluation block)")
        return
    try:
        here = hashlib.sha256((deployed.root / deployed.record).read_bytes()).hexdigest()
    except OSError:
        here = None
    if served is None:
        status.lines.append(f"  evaluation record in force: none bound at the last deployment ({deployed.record} "
                            "did not bind: synth warned)")  # fmt: skip
    elif served == here:
        status.lines.append(f"  evaluation record in force: {deployed.record} as committed here (sha256 {served[:12]})")
    else:
        status.lines.append(
            f"  evaluation record in force: sha256 {served[:12]}; {deployed.record} here is "
            f"{here[:12] if here else 'missing'}: not what is deployed (decisionctl served-record finds the deployed "
            "one in the history)"
        )


def _section(section: Section, sagemaker: Any, status: Status) -> None:
    try:
        endpoint = sagemaker.describe_endpoint(EndpointName=section.endpoint)
    except Exception as exc:
        if not _missing(exc):
            raise
        status.lines.append(f"{section.name}  {section.endpoint}: not deployed")
        status.healthy = False
        return
    state = endpoint["EndpointStatus"]
    status.healthy = status.healthy and state == "InService"
    failure = f": {endpoint['FailureReason']}" if endpoint.get("FailureReason") else ""
    status.lines.append(
        f"{section.name}  {section.endpoint}  {state}{failure}  config {endpoint['EndpointConfigName']}  "
        f"modified {endpoint['LastModifiedTime']:%Y-%m-%d %H:%M:%S %Z}"
    )
    instances = 0
    for variant in endpoint.get("ProductionVariants", []):
        current, desired = variant.get("CurrentInstanceCount", 0), variant.get("DesiredInstanceCount", 0)
        instances += current
        managed = variant.get("ManagedInstanceScaling") or {}
        bounds = (
            f" (managed {managed.get('MinInstanceCount', 0)}-{managed.get('MaxInstanceCount', '?')})"
            if managed.get("Status") == "ENABLED"
            else ""
        )
        status.lines.append(f"  variant {variant['VariantName']}: {current} instance(s), desired {desired}{bounds}")
    if section.component is not None:
        component = sagemaker.describe_inference_component(InferenceComponentName=section.component)
        runtime = component.get("RuntimeConfig") or {}
        copies = runtime.get("CurrentCopyCount", 0)
        zero = "  scaled to zero: the next call waits minutes for a copy" if copies == 0 and instances == 0 else ""
        status.lines.append(
            f"  component {section.component}: {component['InferenceComponentStatus']}, {copies} copy(ies), desired "
            f"{runtime.get('DesiredCopyCount', 0)}{zero}"
        )
        models = [component["Specification"]["ModelName"]]
    else:
        config = sagemaker.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
        models = [v["ModelName"] for v in config["ProductionVariants"] if v.get("ModelName")]
    for model_name in models:
        environment = sagemaker.describe_model(ModelName=model_name).get("PrimaryContainer", {}).get("Environment", {})
        settings = ", ".join(f"{k}={environment[k]}" for k in ANSWER_VARIABLES if k in environment) or "the artifact's"
        status.lines.append(
            f"  model {model_name}: sha256 {environment.get(EXPECTED_MODEL, 'not set')}; answer settings {settings}"
        )


def _alarms(deployed: Deployed, cloudwatch: Any, status: Status) -> None:
    found = cloudwatch.describe_alarms(AlarmNamePrefix=deployed.alarm_prefix, StateValue="ALARM")
    alarms = [*found.get("MetricAlarms", []), *found.get("CompositeAlarms", [])]
    if not alarms:
        status.lines.append(f"alarms in ALARM: none ({deployed.alarm_prefix}*)")
        return
    status.healthy = False
    status.lines.append(f"alarms in ALARM: {len(alarms)}")
    for alarm in alarms:
        status.lines.append(
            f"  {alarm['AlarmName']} since {alarm['StateUpdatedTimestamp']:%Y-%m-%d %H:%M:%S %Z}: "
            f"{alarm['StateReason']}"
        )
