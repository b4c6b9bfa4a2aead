"""SageMaker Async Inference (InvokeEndpointAsync) on an asynchronous endpoint: the body is put in S3, the invocation
queued, and the answer (or the failure SageMaker records) read back from S3 once it is there, so a caller gets one
answer as from a real-time endpoint."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from decision_endpoints_client.invocation import (
    AWS_REQUEST_ID,
    INFERENCE_ID,
    SDK_REQUEST_ID,
    EndpointResponse,
    Invocation,
    InvocationTimeout,
    error_response,
)
from decision_endpoints_client.realtime import runtime_client, transport_failure
from decision_endpoints_client.unwrap import answer_from_error

DEFAULT_POLL_S = 1.0
DEFAULT_RESULT_TIMEOUT_S = 900.0  # SageMaker's own InvocationTimeoutSeconds when unset is 15 minutes
# A failed invocation is reported with 424 (Failed Dependency), a status retry policies leave alone: an
# asynchronous endpoint queues its work, so a failure is the request's or the model's, not backpressure.
FAILED_INVOCATION = 424
FAILURE_TEXT_LIMIT = 2000


def split_s3_uri(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://") or "/" not in uri[5:]:
        raise ValueError(f"not an s3://bucket/prefix/ URI: {uri!r}")
    bucket, key = uri[5:].split("/", 1)
    return bucket, key


class AsyncInferenceEndpoint:
    """An Async Inference endpoint: each invocation is a put to `input_location`, an InvokeEndpointAsync and a wait.

    The input object holds the request (customer data), so it is deleted once the answer or failure is read.
    """

    def __init__(
        self,
        endpoint_name: str,
        *,
        input_location: str,
        region: str | None = None,
        runtime: Any = None,
        s3: Any = None,
        invocation_timeout_s: int | None = None,
        result_timeout_s: float = DEFAULT_RESULT_TIMEOUT_S,
        poll_s: float = DEFAULT_POLL_S,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        object_name: Callable[[], str] = lambda: f"{uuid.uuid4().hex}.json",
    ) -> None:
        self.endpoint_name = endpoint_name
        self.label = f"sagemaker-async:{endpoint_name}"
        bucket, prefix = split_s3_uri(input_location)
        self.bucket, self.prefix = bucket, prefix if prefix.endswith("/") or not prefix else prefix + "/"
        self.runtime = runtime if runtime is not None else runtime_client(region=region)
        if s3 is None:
            import botocore.session

            s3 = botocore.session.get_session().create_client("s3", region_name=region)
        self.s3 = s3
        self.invocation_timeout_s = invocation_timeout_s
        self.result_timeout_s, self.poll_s = result_timeout_s, poll_s
        self._sleep, self._clock, self._object_name = sleep, clock, object_name

    def parameters(self, invocation: Invocation, input_location: str) -> dict[str, Any]:
        params: dict[str, Any] = {
            "EndpointName": self.endpoint_name,
            "InputLocation": input_location,
            "ContentType": invocation.content_type,
            "Accept": invocation.accept,
        }
        optional = {
            "CustomAttributes": invocation.custom_attributes,
            "InferenceId": invocation.inference_id,
            "InvocationTimeoutSeconds": self.invocation_timeout_s,
        }
        params.update({k: v for k, v in optional.items() if v})
        return params

    def invoke(self, invocation: Invocation) -> EndpointResponse:
        from botocore.exceptions import ClientError

        key = self.prefix + self._object_name()  # never the caller's id: two requests must not share an object
        try:
            self.s3.put_object(Bucket=self.bucket, Key=key, Body=invocation.body, ContentType=invocation.content_type)
            try:
                queued = self.runtime.invoke_endpoint_async(**self.parameters(invocation, f"s3://{self.bucket}/{key}"))
                return self._await(queued)
            finally:
                self.s3.delete_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            return answer_from_error(exc.response)
        except Exception as exc:
            failure = transport_failure(exc)
            if failure is None:
                raise
            raise failure from exc

    def _await(self, queued: dict[str, Any]) -> EndpointResponse:
        headers = {INFERENCE_ID: str(queued.get("InferenceId", ""))}
        request_id = queued.get("ResponseMetadata", {}).get("RequestId")
        if request_id:
            headers[AWS_REQUEST_ID] = headers[SDK_REQUEST_ID] = str(request_id)
        output, failure = str(queued["OutputLocation"]), str(queued.get("FailureLocation") or "")
        deadline = self._clock() + self.result_timeout_s
        while True:
            answer = self._read(output)
            if answer is not None:
                return EndpointResponse(200, answer[0], {**headers, "content-type": answer[1]})
            failed = self._read(failure) if failure else None
            if failed is not None:
                text = failed[0][:FAILURE_TEXT_LIMIT].decode("utf-8", "replace")
                return error_response(FAILED_INVOCATION, "async_invocation_failed", text, headers)
            if self._clock() >= deadline:
                raise InvocationTimeout(
                    f"no answer at {output} after {self.result_timeout_s:.0f} s (the invocation may still be queued)"
                )
            self._sleep(self.poll_s)

    def _read(self, uri: str) -> tuple[bytes, str] | None:
        """The object's bytes and content type; None while SageMaker has not written it."""
        from botocore.exceptions import ClientError

        bucket, key = split_s3_uri(uri)
        try:
            found = self.s3.get_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) in {"NoSuchKey", "404", "NotFound"}:
                return None
            raise
        return found["Body"].read(), str(found.get("ContentType") or "application/json")

    def close(self) -> None:
        self.runtime.close()
        self.s3.close()
