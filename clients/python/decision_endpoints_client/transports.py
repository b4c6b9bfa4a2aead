"""The httpx2 transports the official SDK takes (`transport=`; the `openai` SDK, in an httpx2 client), sync and
async: each maps the SDK's routes onto an endpoint's invocations and gives back the container's answer as an HTTP
response."""

from __future__ import annotations

import gzip
from typing import Any, TypedDict, Unpack

import anyio.to_thread
import httpx2

from decision_endpoints_client.async_inference import AsyncInferenceEndpoint
from decision_endpoints_client.capacity import CapacityWait
from decision_endpoints_client.invocation import (
    EndpointResponse,
    EndpointUnreachable,
    Invocation,
    InvocationTimeout,
    Invoker,
    error_response,
)
from decision_endpoints_client.realtime import RealTimeEndpoint

# The routes whose body the container's /invocations takes as it is: the decision call (what the SDK sends),
# SageMaker's own route, chat completions and OpenAI's Decisions API (the adapter answers each shape on /invocations).
INVOKED_ROUTES = ("/v1/systemone", "/invocations", "/v1/chat/completions", "/v1/decisions")


def _decompressed(body: bytes, encoding: str | None) -> bytes | None:
    """The body as the container must read it (InvokeEndpoint carries no Content-Encoding); None if unknown."""
    if not encoding or encoding == "identity":
        return body
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "zstd":
        try:
            from compression import zstd  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            from backports import zstd  # type: ignore[import-not-found,no-redef,unused-ignore]
        data: bytes = zstd.decompress(body)
        return data
    return None


def invocation_of(request: httpx2.Request, body: bytes) -> Invocation | EndpointResponse:
    """The invocation a request stands for, or the answer for one no endpoint route can take."""
    path = request.url.path.rstrip("/")
    if request.method != "POST" or not path.endswith(INVOKED_ROUTES):
        return error_response(
            404,
            "route_not_on_sagemaker",
            f"{request.method} {path or '/'} cannot reach a SageMaker endpoint: InvokeEndpoint only posts to the "
            f"container's /invocations (routes sent there: {', '.join(INVOKED_ROUTES)})",
        )
    encoding = request.headers.get("content-encoding")
    content = _decompressed(body, encoding.lower() if encoding else None)
    if content is None:
        return error_response(415, "unsupported_content_encoding", f"cannot send a {encoding} body to SageMaker")
    return Invocation.from_headers(content, request.headers)


def response_of(answer: EndpointResponse, request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(answer.status, headers=answer.headers, content=answer.body, request=request)


def _invoke(invoker: Invoker, request: httpx2.Request, body: bytes) -> httpx2.Response:
    """One request through the invoker; no answer at all is raised as httpx2 raises it, which the SDK expects."""
    invocation = invocation_of(request, body)
    if isinstance(invocation, EndpointResponse):
        return response_of(invocation, request)
    try:
        answer = invoker.invoke(invocation)
    except InvocationTimeout as exc:
        raise httpx2.ReadTimeout(str(exc), request=request) from exc
    except EndpointUnreachable as exc:
        raise httpx2.ConnectError(str(exc), request=request) from exc
    return response_of(answer, request)


class EndpointOptions(TypedDict, total=False):
    """The keywords that choose the endpoint a transport invokes and how (every builder takes them, by these names):
    RealTimeEndpoint's, and `async_input_location` (s3://bucket/prefix/) for an Async Inference endpoint."""

    region: str | None
    client: Any
    target_variant: str | None
    async_input_location: str | None
    read_timeout_s: float
    max_connections: int
    inference_component: str | None
    capacity_wait: CapacityWait | None


ENDPOINT_OPTIONS = EndpointOptions.__optional_keys__


def endpoint(endpoint_name: str, **options: Unpack[EndpointOptions]) -> Invoker:
    """A real-time endpoint (its `inference_component` named on a components endpoint, waiting through its
    scaled-to-zero refusals within `capacity_wait`; RealTimeEndpoint's defaults for what is not given), or an Async
    Inference one where `async_input_location` (s3://bucket/prefix/) is given."""
    realtime: dict[str, Any] = {k: v for k, v in options.items() if k != "async_input_location"}
    async_input_location = options.get("async_input_location")
    if async_input_location is not None:
        if options.get("target_variant") is not None or options.get("inference_component") is not None:
            raise ValueError(
                "InvokeEndpointAsync has no TargetVariant and no InferenceComponentName: an asynchronous endpoint "
                "has one variant and hosts its model on it"
            )
        return AsyncInferenceEndpoint(
            endpoint_name,
            input_location=async_input_location,
            region=options.get("region"),
            runtime=options.get("client"),
        )
    return RealTimeEndpoint(endpoint_name, **realtime)


class SageMakerTransport(httpx2.BaseTransport):
    """For `TypeSafeClient(transport=...)`: the SDK's decision calls go to the named SageMaker endpoint.

    `client` is a botocore (or boto3) sagemaker-runtime client to sign and send with; by default one on the
    standard credential chain with botocore's retries off (the SDK's retry policy is the one that retries).
    `inference_component` and `capacity_wait` are RealTimeEndpoint's: the component a components endpoint serves
    the model as, and how long to wait for it at zero.
    """

    def __init__(
        self, endpoint_name: str | None = None, *, invoker: Invoker | None = None, **options: Unpack[EndpointOptions]
    ) -> None:
        if invoker is None:
            if endpoint_name is None:
                raise ValueError("name the endpoint (endpoint_name) or pass an invoker")
            invoker = endpoint(endpoint_name, **options)
        self.invoker = invoker

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        return _invoke(self.invoker, request, request.read())

    def close(self) -> None:
        self.invoker.close()


class AsyncSageMakerTransport(httpx2.AsyncBaseTransport):
    """For `AsyncTypeSafeClient(transport=...)`: as `SageMakerTransport`, with botocore's blocking call in a
    worker thread so the event loop keeps running."""

    def __init__(
        self, endpoint_name: str | None = None, *, invoker: Invoker | None = None, **options: Unpack[EndpointOptions]
    ) -> None:
        self._sync = SageMakerTransport(endpoint_name, invoker=invoker, **options)
        self.invoker = self._sync.invoker

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        return await anyio.to_thread.run_sync(_invoke, self.invoker, request, body)

    async def aclose(self) -> None:
        self.invoker.close()
