"""The AWS calls of a bulk run: stack outputs, S3 parts up and answers down, the Batch Transform state
machine, and asynchronous invocations. Every function takes its boto3 client, so tests pass stubbed ones.

The layout is the stacks' (stacks/batch_transform.py, stacks/async_inference.py): Transform input under
`<BatchInputUri><run>/`, answers under `<BatchOutputUri><run>/<execution name>/<object>.out`; asynchronous
requests under the `input/` beside the endpoint's `output/` path.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from decision_spec.names import JSON_LINES

STACK_NAME = "DecisionEndpoints-{environment}-Serving"
BATCH_OUTPUTS = ("BatchStateMachineArn", "BatchInputUri", "BatchOutputUri")
PART_NAME = "part-{index:05d}.jsonl"
TRANSFORM_SUFFIX = ".out"  # Batch Transform names an answer object after its input object
ASYNC_OUTPUT_DIR, ASYNC_INPUT_DIR = "output/", "input/"
RUNNING = "RUNNING"


class BulkAwsError(RuntimeError):
    """A bulk run cannot go on: a stack without the batch outputs, an endpoint that is not asynchronous, ..."""


@dataclass(frozen=True)
class S3Uri:
    bucket: str
    key: str

    @classmethod
    def parse(cls, uri: str) -> S3Uri:
        if not uri.startswith("s3://") or "/" not in uri[5:]:
            raise BulkAwsError(f"not an s3://bucket/key URI: {uri!r}")
        bucket, key = uri[5:].split("/", 1)
        return cls(bucket, key)

    def child(self, name: str) -> S3Uri:
        return S3Uri(self.bucket, self.key + name)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


def is_missing(error: Exception) -> bool:
    from botocore.exceptions import ClientError

    if not isinstance(error, ClientError):
        return False
    return str(error.response.get("Error", {}).get("Code")) in {"NoSuchKey", "404", "NotFound"}


# --- S3 ---------------------------------------------------------------------------------------------


def upload(
    s3: Any, target: S3Uri, data: bytes, *, config: Any = None, on_bytes: Callable[[int], object] | None = None
) -> None:
    """One part, through boto3's managed transfer (multipart above its threshold)."""
    s3.upload_fileobj(
        io.BytesIO(data),
        target.bucket,
        target.key,
        ExtraArgs={"ContentType": JSON_LINES},
        Callback=on_bytes,
        Config=config,
    )


def exists(s3: Any, target: S3Uri) -> bool:
    from botocore.exceptions import ClientError

    try:
        s3.head_object(Bucket=target.bucket, Key=target.key)
    except ClientError as exc:
        if is_missing(exc):
            return False
        raise
    return True


def read_lines(s3: Any, target: S3Uri) -> Iterator[bytes] | None:
    """The object's lines, streamed; None if there is no such object."""
    from botocore.exceptions import ClientError

    try:
        body = s3.get_object(Bucket=target.bucket, Key=target.key)["Body"]
    except ClientError as exc:
        if is_missing(exc):
            return None
        raise
    lines: Iterator[bytes] = iter(body.iter_lines())
    return lines


def read_text(s3: Any, target: S3Uri, limit: int = 2000) -> str:
    lines = read_lines(s3, target)
    if lines is None:
        return ""
    return b"\n".join(lines).decode("utf-8", "replace")[:limit]


# --- Batch Transform through the state machine -------------------------------------------------------


def batch_outputs(cloudformation: Any, environment: str) -> dict[str, str]:
    """The Serving stack's outputs that name the state machine and its S3 folders."""
    name = STACK_NAME.format(environment=environment)
    stacks = cloudformation.describe_stacks(StackName=name)["Stacks"]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
    missing = [key for key in BATCH_OUTPUTS if key not in outputs]
    if missing:
        raise BulkAwsError(f"{name} has no {', '.join(missing)}: switch batch on in cdk.json and deploy it")
    return outputs


def transform_input(outputs: dict[str, str], run: str) -> S3Uri:
    return S3Uri.parse(outputs["BatchInputUri"]).child(f"{run}/")


def transform_answers(outputs: dict[str, str], run: str, execution: str, part: str) -> S3Uri:
    return S3Uri.parse(outputs["BatchOutputUri"]).child(f"{run}/{execution}/{part}{TRANSFORM_SUFFIX}")


def start_transform(sfn: Any, state_machine_arn: str, run: str) -> str:
    """Start the execution named `run`; one that exists already (an earlier, interrupted call) is not started again."""
    from botocore.exceptions import ClientError

    try:
        return str(
            sfn.start_execution(stateMachineArn=state_machine_arn, name=run, input=json.dumps({"run": run}))[
                "executionArn"
            ]
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
            raise
    return execution_arn(state_machine_arn, run)


def execution_arn(state_machine_arn: str, name: str) -> str:
    return state_machine_arn.replace(":stateMachine:", ":execution:", 1) + f":{name}"


@dataclass(frozen=True)
class Execution:
    status: str
    job: dict[str, Any]  # the state machine's output: the Transform job's name, times and resources
    error: str

    @property
    def running(self) -> bool:
        return self.status == RUNNING

    def seconds(self) -> float | None:
        start, end = _time(self.job.get("TransformStartTime")), _time(self.job.get("TransformEndTime"))
        return (end - start) if start is not None and end is not None else None


def _time(value: Any) -> float | None:
    """Step Functions hands SageMaker's timestamps over as epoch milliseconds; ISO text is read too."""
    if isinstance(value, int | float):
        return float(value) / 1000.0
    if isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    if isinstance(value, datetime):
        return value.timestamp()
    return None


def describe_execution(sfn: Any, arn: str) -> Execution:
    found = sfn.describe_execution(executionArn=arn)
    output = json.loads(found["output"]) if found.get("output") else {}
    error = " ".join(str(found[k]) for k in ("error", "cause") if found.get(k))
    return Execution(str(found["status"]), output if isinstance(output, dict) else {}, error)


# --- asynchronous inference -----------------------------------------------------------------------


@dataclass(frozen=True)
class AsyncTarget:
    endpoint: str
    instance_type: str
    output: S3Uri
    input: S3Uri


def async_target(sagemaker: Any, endpoint: str, input_uri: str | None = None) -> AsyncTarget:
    config_name = sagemaker.describe_endpoint(EndpointName=endpoint)["EndpointConfigName"]
    config = sagemaker.describe_endpoint_config(EndpointConfigName=config_name)
    output_path = (config.get("AsyncInferenceConfig") or {}).get("OutputConfig", {}).get("S3OutputPath")
    if not output_path:
        raise BulkAwsError(f"{endpoint} is not an asynchronous endpoint (its config has no AsyncInferenceConfig)")
    output = S3Uri.parse(output_path if output_path.endswith("/") else output_path + "/")
    if input_uri is None:
        if not output.key.endswith(ASYNC_OUTPUT_DIR):
            raise BulkAwsError(f"{endpoint} writes to {output}: name the input folder with --input-uri")
        source = S3Uri(output.bucket, output.key.removesuffix(ASYNC_OUTPUT_DIR) + ASYNC_INPUT_DIR)
    else:
        source = S3Uri.parse(input_uri if input_uri.endswith("/") else input_uri + "/")
    return AsyncTarget(endpoint, str(config["ProductionVariants"][0].get("InstanceType", "")), output, source)


def invoke_async(runtime: Any, endpoint: str, source: S3Uri, inference_id: str, timeout_s: int) -> tuple[str, str]:
    """Queue one part, to be answered within `timeout_s` (SageMaker's InvocationTimeoutSeconds: at most 3600,
    15 minutes if unset); returns where its answers (OutputLocation) or its error (FailureLocation) will be."""
    reply = runtime.invoke_endpoint_async(
        EndpointName=endpoint,
        InputLocation=str(source),
        ContentType=JSON_LINES,
        Accept=JSON_LINES,
        InferenceId=inference_id,
        InvocationTimeoutSeconds=timeout_s,
    )
    return str(reply["OutputLocation"]), str(reply.get("FailureLocation", ""))


def instance_count(sagemaker: Any, endpoint: str) -> int:
    variants = sagemaker.describe_endpoint(EndpointName=endpoint).get("ProductionVariants") or [{}]
    return int(variants[0].get("CurrentInstanceCount") or 0)
