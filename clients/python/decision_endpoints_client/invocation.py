"""One call to an endpoint as data: what is sent (`Invocation`), what came back (`EndpointResponse`), and the two
failures that leave no response (a timeout, an unreachable service); the header names both sides use."""

from __future__ import annotations

import email.utils
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

JSON = "application/json"

# Request headers read as InvokeEndpoint parameters: the names InvokeEndpoint itself uses on the wire.
CUSTOM_ATTRIBUTES = "x-amzn-sagemaker-custom-attributes"
TARGET_VARIANT = "x-amzn-sagemaker-target-variant"
INFERENCE_ID = "x-amzn-sagemaker-inference-id"
INFERENCE_COMPONENT = "x-amzn-sagemaker-inference-component"  # InvokeEndpoint's InferenceComponentName
# Response headers: the variant that answered (SageMaker's own name), the AWS request id under SageMaker's name
# and under the one the SDK reads into its errors and logs, the log stream a ModelError names, and Retry-After.
INVOKED_VARIANT = "x-amzn-invoked-production-variant"
AWS_REQUEST_ID = "x-amzn-requestid"
SDK_REQUEST_ID = "x-typesafe-request-id"
LOG_STREAM_ARN = "x-amzn-sagemaker-log-stream-arn"
RETRY_AFTER = "retry-after"
# The error_type of SageMaker's refusal of an inference component with no copy (scaled to zero), given as a 503.
NO_CAPACITY = "no_capacity"


@dataclass(frozen=True)
class Invocation:
    """A request body for the container's /invocations, with the InvokeEndpoint parameters that go with it."""

    body: bytes
    content_type: str = JSON
    accept: str = JSON
    custom_attributes: str | None = None
    target_variant: str | None = None
    inference_id: str | None = None
    inference_component: str | None = None

    @classmethod
    def from_headers(cls, body: bytes, headers: Mapping[str, str]) -> Invocation:
        """The parameters from a request's headers (names compared without case); absent ones stay unset."""
        lower = {k.lower(): v for k, v in headers.items()}
        return cls(
            body=body,
            content_type=lower.get("content-type", JSON),
            accept=lower.get("accept", JSON),
            custom_attributes=lower.get(CUSTOM_ATTRIBUTES),
            target_variant=lower.get(TARGET_VARIANT),
            inference_id=lower.get(INFERENCE_ID),
            inference_component=lower.get(INFERENCE_COMPONENT),
        )


@dataclass(frozen=True)
class EndpointResponse:
    """An HTTP response as the container gave it: its status, its body and the headers that matter to a client, and
    how many calls it took (`sends`: more than one where a scaled-to-zero endpoint was waited for)."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    sends: int = 1

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def retry_after_s(self) -> float | None:
        return retry_after_seconds(self.headers.get(RETRY_AFTER))


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP date (None: absent or unreadable)."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, seconds) if math.isfinite(seconds) else None


def error_response(
    status: int, error_type: str, message: str, headers: Mapping[str, str] | None = None, *, sends: int = 1
) -> EndpointResponse:
    """A response made on this side, in the adapter's own error shape (`detail.error_type`, `detail.message`)."""
    body = json.dumps({"detail": {"error_type": error_type, "message": message}}).encode("utf-8")
    return EndpointResponse(status, body, {"content-type": JSON, **(headers or {})}, sends)


class InvocationTimeout(Exception):
    """No answer in time: SageMaker's invocation limit passed, or the socket's read timeout."""


class EndpointUnreachable(Exception):
    """The runtime service could not be reached (DNS, refused or reset connection, connect timeout)."""


class Invoker(Protocol):
    """Something that gets one invocation answered: a real-time or an asynchronous endpoint."""

    label: str

    def invoke(self, invocation: Invocation) -> EndpointResponse: ...

    def close(self) -> None: ...
