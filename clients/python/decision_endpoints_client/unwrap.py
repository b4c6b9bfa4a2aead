"""SageMaker's errors turned back into what the container or the service meant: a ModelError gives the container's
own status, body and Retry-After; the runtime's own errors become the HTTP statuses clients know."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from decision_endpoints_client.invocation import (
    AWS_REQUEST_ID,
    JSON,
    LOG_STREAM_ARN,
    NO_CAPACITY,
    RETRY_AFTER,
    SDK_REQUEST_ID,
    EndpointResponse,
    InvocationTimeout,
    error_response,
)

MODEL_ERROR = "ModelError"
# SageMaker's own error codes, as the status a client's retry policy reads: throttling is a 429 and the service's
# passing troubles 5xx (retried); a bad call or missing permission stays a 4xx (not retried).
SERVICE_ERROR_STATUS = {
    "ThrottlingException": 429,
    "ThrottledException": 429,
    "TooManyRequestsException": 429,
    "ServiceUnavailable": 503,
    "ModelNotReadyException": 503,
    "InternalFailure": 500,
    "InternalDependencyException": 502,
    "ValidationError": 400,
    "AccessDeniedException": 403,
    "UnrecognizedClientException": 403,
    "InvalidSignatureException": 403,
    "ExpiredTokenException": 403,
}
# The ValidationError SageMaker sends for a body over its limit (6 MB real-time) reads like this.
_PAYLOAD_TOO_LARGE = re.compile(r"payload|too large", re.IGNORECASE)
# And this one an inference component with no copy (scaled to zero): "Inference Component has no capacity to process
# this request. ApplicationAutoScaling may be in-progress (if configured) or try to increase the capacity by invoking
# UpdateInferenceComponentRuntimeConfig API." It is a wait, not a bad call: a 503 the caller may wait through.
_NO_CAPACITY = re.compile(r"no capacity", re.IGNORECASE)
# The container's 429 states its wait in the message ("... retry after 3 s"): SageMaker drops a ModelError's
# container headers, Retry-After among them, so the body is where the wait survives.
_RETRY_AFTER_IN_MESSAGE = re.compile(r"retry after (\d+(?:\.\d+)?) ?s\b", re.IGNORECASE)
# An OriginalStatusCode of 0 is SageMaker saying the container never answered (its 60 s limit).
_NO_CONTAINER_ANSWER = 0


def answer_from_error(error: Mapping[str, Any]) -> EndpointResponse:
    """The answer a botocore ClientError's `response` stands for; raises InvocationTimeout where none came."""
    code = str(error.get("Error", {}).get("Code", ""))
    message = str(error.get("Error", {}).get("Message", "") or error.get("Message", ""))
    metadata = error.get("ResponseMetadata", {})
    sent_headers = {str(k).lower(): str(v) for k, v in (metadata.get("HTTPHeaders") or {}).items()}
    headers = _request_id_headers(metadata)
    if RETRY_AFTER in sent_headers:
        headers[RETRY_AFTER] = sent_headers[RETRY_AFTER]
    if code == MODEL_ERROR:
        return _container_answer(error, message, headers)
    status = SERVICE_ERROR_STATUS.get(code, int(metadata.get("HTTPStatusCode") or 500))
    if code == "ValidationError" and _NO_CAPACITY.search(message):
        return error_response(503, NO_CAPACITY, message, headers)
    if code == "ValidationError" and _PAYLOAD_TOO_LARGE.search(message):
        status = 413
    return error_response(status, code or "sagemaker_error", message, headers)


def _container_answer(error: Mapping[str, Any], message: str, headers: dict[str, str]) -> EndpointResponse:
    status = error.get("OriginalStatusCode")
    if status is None or int(status) == _NO_CONTAINER_ANSWER:
        raise InvocationTimeout(message or "the container gave no answer within SageMaker's invocation limit")
    original = error.get("OriginalMessage")
    body = str(original if original is not None else message).encode("utf-8")
    if error.get("LogStreamArn"):
        headers[LOG_STREAM_ARN] = str(error["LogStreamArn"])
    detail = _json_detail(body)
    if detail is not None:
        headers["content-type"] = JSON
        if RETRY_AFTER not in headers:
            wait = _stated_wait(detail)
            if wait is not None:
                headers[RETRY_AFTER] = wait
    else:
        headers["content-type"] = "text/plain; charset=utf-8"
    return EndpointResponse(int(status), body, headers)


def _json_detail(body: bytes) -> Any:
    """The body's `detail` where the body is the adapter's (or any System One server's) JSON error; its `error`
    where it is in OpenAI's envelope (the adapter's /v1/decisions shape)."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    return parsed.get("detail", parsed.get("error", parsed)) if isinstance(parsed, dict) else None


def _stated_wait(detail: Any) -> str | None:
    """The wait a JSON error body states: a `retry_after` field, or the adapter's "retry after N s" message."""
    if isinstance(detail, dict):
        value = detail.get("retry_after")
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            return _seconds(float(value))
        text = detail.get("message")
        if isinstance(text, str):
            found = _RETRY_AFTER_IN_MESSAGE.search(text)
            if found:
                return _seconds(float(found.group(1)))
    return None


def _seconds(value: float) -> str:
    return str(int(value)) if value.is_integer() else str(value)


def _request_id_headers(metadata: Mapping[str, Any]) -> dict[str, str]:
    request_id = metadata.get("RequestId")
    return {AWS_REQUEST_ID: str(request_id), SDK_REQUEST_ID: str(request_id)} if request_id else {}
