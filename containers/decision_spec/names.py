"""Names the adapter, the stacks and decisionctl share beyond the decision contract: the model artifact's manifest
file, the JSON Lines content type and Batch Transform's payload cap, the log groups SageMaker writes a container's
lines to, and what the stacks call an environment's stacks, decision endpoints and inference components (which
decisionctl's day-two commands look up)."""

from __future__ import annotations

MANIFEST_NAME = "manifest.json"  # beside the GGUF in an artifact, and beside model.tar.gz where package-model uploads
JSON_LINES = "application/jsonlines"  # a JSON Lines body's content type (Batch Transform's SplitType Line)
MAX_PAYLOAD_MB = 100  # the most Batch Transform's MaxPayloadInMB allows
ENDPOINT_LOG_GROUP_PREFIX = "/aws/sagemaker/Endpoints/"  # SageMaker's own name for an endpoint's log group
COMPONENT_LOG_GROUP_PREFIX = "/aws/sagemaker/InferenceComponents/"  # where an inference component's container writes
STACK_PREFIX = "DecisionEndpoints"  # every stack is DecisionEndpoints-<env>-<part> (app.py)
BUCKET_OUTPUT = "ModelBucketName"  # the Foundation stack's output: the model artifacts' bucket (rollback reads it)


def stack_name(environment: str, part: str) -> str:
    """An environment's stack: `part` Foundation or Serving."""
    return f"{STACK_PREFIX}-{environment}-{part}"


def endpoint_name(environment: str, section: str) -> str:
    """The SageMaker endpoint of a decision section (cpu, gpu)."""
    return f"decision-{environment}-{section}"


def component_name(environment: str, section: str) -> str:
    """The inference component of decision-<env>-<section>: fixed (callers name it on every InvokeEndpoint)."""
    return f"decision-{environment}-{section}-model"
