"""Call a SageMaker decision endpoint with the official typesafe-sdk (or the `openai` SDK's Decisions API): SigV4
through botocore, SageMaker's errors given back as the container's own answers."""

from decision_endpoints_client.async_inference import AsyncInferenceEndpoint
from decision_endpoints_client.capacity import CapacityProgress, CapacityWait
from decision_endpoints_client.invocation import (
    CUSTOM_ATTRIBUTES,
    INFERENCE_COMPONENT,
    INFERENCE_ID,
    INVOKED_VARIANT,
    NO_CAPACITY,
    TARGET_VARIANT,
    EndpointResponse,
    EndpointUnreachable,
    Invocation,
    InvocationTimeout,
    Invoker,
)
from decision_endpoints_client.realtime import MAX_REALTIME_PAYLOAD_BYTES, RealTimeEndpoint, runtime_client
from decision_endpoints_client.sdk import (
    async_openai_client,
    async_sagemaker_client,
    openai_client,
    openai_route_client,
    sagemaker_client,
)
from decision_endpoints_client.transports import AsyncSageMakerTransport, EndpointOptions, SageMakerTransport

__version__ = "0.2.0"

__all__ = [
    "CUSTOM_ATTRIBUTES",
    "INFERENCE_COMPONENT",
    "INFERENCE_ID",
    "INVOKED_VARIANT",
    "MAX_REALTIME_PAYLOAD_BYTES",
    "NO_CAPACITY",
    "TARGET_VARIANT",
    "AsyncInferenceEndpoint",
    "AsyncSageMakerTransport",
    "CapacityProgress",
    "CapacityWait",
    "EndpointOptions",
    "EndpointResponse",
    "EndpointUnreachable",
    "Invocation",
    "InvocationTimeout",
    "Invoker",
    "RealTimeEndpoint",
    "SageMakerTransport",
    "async_openai_client",
    "async_sagemaker_client",
    "openai_client",
    "openai_route_client",
    "runtime_client",
    "sagemaker_client",
]
