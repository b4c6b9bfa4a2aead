"""Names the adapter, the stacks and decisionctl share beyond the decision contract: the model artifact's manifest
file, the JSON Lines content type and Batch Transform's payload cap, and the log groups SageMaker writes a container's
lines to."""

from __future__ import annotations

MANIFEST_NAME = "manifest.json"  # beside the GGUF in an artifact, and beside model.tar.gz where package-model uploads
JSON_LINES = "application/jsonlines"  # a JSON Lines body's content type (Batch Transform's SplitType Line)
MAX_PAYLOAD_MB = 100  # the most Batch Transform's MaxPayloadInMB allows
ENDPOINT_LOG_GROUP_PREFIX = "/aws/sagemaker/Endpoints/"  # SageMaker's own name for an endpoint's log group
COMPONENT_LOG_GROUP_PREFIX = "/aws/sagemaker/InferenceComponents/"  # where an inference component's container writes
