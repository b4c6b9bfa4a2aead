"""InvokeEndpoint on a real-time endpoint through botocore: the botocore client it signs with, the call's
parameters, SageMaker's limits checked before sending, and every outcome as an `EndpointResponse` or a failure."""

from __future__ import annotations

from typing import Any

from decision_endpoints_client.capacity import CapacityWait, CapacityWaiter
from decision_endpoints_client.invocation import (
    AWS_REQUEST_ID,
    CUSTOM_ATTRIBUTES,
    INVOKED_VARIANT,
    SDK_REQUEST_ID,
    EndpointResponse,
    EndpointUnreachable,
    Invocation,
    InvocationTimeout,
    error_response,
)
from decision_endpoints_client.unwrap import answer_from_error

RUNTIME_SERVICE = "sagemaker-runtime"
MAX_REALTIME_PAYLOAD_BYTES = 6 * 1024 * 1024  # SageMaker refuses larger real-time request bodies
DEFAULT_READ_TIMEOUT_S = 70.0  # SageMaker gives the container 60 s; a little more so its own error arrives first
DEFAULT_CONNECT_TIMEOUT_S = 10.0


def runtime_client(
    *,
    region: str | None = None,
    endpoint_url: str | None = None,
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
    max_connections: int = 10,
    session: Any = None,
) -> Any:
    """A botocore sagemaker-runtime client on the standard credential chain, with botocore's retries off.

    One layer retries: the SDK's policy (or decisionctl's) sees every 429 and honours its Retry-After; botocore
    retrying throttles underneath it would multiply the attempts an overloaded endpoint gets.
    """
    import botocore.session
    from botocore.config import Config

    config = Config(
        retries={"total_max_attempts": 1},
        read_timeout=read_timeout_s,
        connect_timeout=DEFAULT_CONNECT_TIMEOUT_S,
        max_pool_connections=max_connections,
    )
    session = session if session is not None else botocore.session.get_session()
    return session.create_client(RUNTIME_SERVICE, region_name=region, endpoint_url=endpoint_url, config=config)


def transport_failure(exc: Exception) -> Exception | None:
    """The failure a botocore exception raised before any HTTP answer stands for; None if it is no such one."""
    from botocore.exceptions import (
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        ReadTimeoutError,
    )

    if isinstance(exc, ReadTimeoutError):
        return InvocationTimeout(str(exc))
    if isinstance(exc, ConnectTimeoutError | EndpointConnectionError | ConnectionClosedError):
        return EndpointUnreachable(str(exc))
    return None


class RealTimeEndpoint:
    """A real-time endpoint: each invocation is one InvokeEndpoint call, answered within SageMaker's 60 s.

    `inference_component` names the component that serves the model on a components endpoint (every invocation of
    one must name it). Where the component has scaled to zero, SageMaker refuses the call until a copy runs:
    `capacity_wait` asks again within its budget (CapacityWait(), 900 s, by default; None answers the refusal at once,
    a 503 `no_capacity`)."""

    def __init__(
        self,
        endpoint_name: str,
        *,
        region: str | None = None,
        client: Any = None,
        target_variant: str | None = None,
        read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
        max_connections: int = 10,
        inference_component: str | None = None,
        capacity_wait: CapacityWait | None = CapacityWait(),  # noqa: B008 - frozen, shared safely
    ) -> None:
        self.endpoint_name = endpoint_name
        self.target_variant = target_variant
        self.inference_component = inference_component
        self.label = f"sagemaker:{endpoint_name}" + (f"/{inference_component}" if inference_component else "")
        self.capacity = CapacityWaiter(capacity_wait, self.label)
        self.client = (
            client
            if client is not None
            else runtime_client(region=region, read_timeout_s=read_timeout_s, max_connections=max_connections)
        )

    def parameters(self, invocation: Invocation) -> dict[str, Any]:
        """invoke_endpoint's keyword arguments: the optional ones only where set (botocore checks their shapes)."""
        params: dict[str, Any] = {
            "EndpointName": self.endpoint_name,
            "Body": invocation.body,
            "ContentType": invocation.content_type,
            "Accept": invocation.accept,
        }
        variant = invocation.target_variant or self.target_variant
        optional = {
            "CustomAttributes": invocation.custom_attributes,
            "TargetVariant": variant,
            "InferenceId": invocation.inference_id,
            "InferenceComponentName": invocation.inference_component or self.inference_component,
        }
        params.update({k: v for k, v in optional.items() if v})
        return params

    def invoke(self, invocation: Invocation) -> EndpointResponse:
        """One answer for the invocation, waiting through a scaled-to-zero component's refusals (capacity_wait)."""
        return self.capacity.invoke(lambda: self.invoke_once(invocation))

    def invoke_once(self, invocation: Invocation) -> EndpointResponse:
        from botocore.exceptions import ClientError

        if len(invocation.body) > MAX_REALTIME_PAYLOAD_BYTES:
            return error_response(
                413,
                "payload_too_large",
                f"the body is {len(invocation.body)} bytes; a real-time SageMaker endpoint takes at most "
                f"{MAX_REALTIME_PAYLOAD_BYTES} (an asynchronous endpoint takes up to 1 GB)",
            )
        try:
            response = self.client.invoke_endpoint(**self.parameters(invocation))
            body = response["Body"].read()
        except ClientError as exc:
            return answer_from_error(exc.response)
        except Exception as exc:
            failure = transport_failure(exc)
            if failure is None:
                raise
            raise failure from exc
        return EndpointResponse(200, body, success_headers(response))

    def close(self) -> None:
        self.client.close()


def success_headers(response: dict[str, Any]) -> dict[str, str]:
    """What InvokeEndpoint returned beside the body, under the headers a client reads."""
    headers = {"content-type": str(response.get("ContentType") or "application/json")}
    if response.get("InvokedProductionVariant"):
        headers[INVOKED_VARIANT] = str(response["InvokedProductionVariant"])
    if response.get("CustomAttributes"):
        headers[CUSTOM_ATTRIBUTES] = str(response["CustomAttributes"])
    request_id = response.get("ResponseMetadata", {}).get("RequestId")
    if request_id:
        headers[AWS_REQUEST_ID] = headers[SDK_REQUEST_ID] = str(request_id)
    return headers
