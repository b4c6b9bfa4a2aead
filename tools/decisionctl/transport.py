"""Getting one decision body to an endpoint and its reply back: a local URL or a SageMaker endpoint.

A sender sends once and reports what came back (status, body, Retry-After, latency), read as the client package's
`EndpointResponse` (its Retry-After parser is the one both use); whether to try again is `send_with_retries`'s job,
so `bench` can send without retrying and see every 429.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import httpx

if TYPE_CHECKING:
    from decision_endpoints_client.invocation import EndpointResponse

DEFAULT_ROUTE = "/v1/systemone"
DEFAULT_TIMEOUT_S = 70.0  # SageMaker gives /invocations 60 s; a little more so its own error arrives first
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
TRANSPORT_ERROR = 0  # the status recorded when no HTTP answer came back (refused, reset, timed out)


@dataclass(frozen=True)
class Reply:
    """What one attempt got back. `status` is TRANSPORT_ERROR when no HTTP answer arrived. `sends`: the calls it
    took (more than one where a scaled-to-zero endpoint was waited for); `no_capacity`: the endpoint still had no
    copy when the sender's wait for one ended, which no retry can mend."""

    status: int
    body: bytes
    latency_s: float
    retry_after_s: float | None = None
    error: str = ""
    sends: int = 1
    no_capacity: bool = False

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def retryable(self) -> bool:
        # a spent wait for capacity is not tried again: its budget was the sender's to spend
        return not self.no_capacity and (self.status == TRANSPORT_ERROR or self.status in RETRYABLE_STATUSES)

    @classmethod
    def of(cls, answer: EndpointResponse, latency_s: float, *, no_capacity: bool = False) -> Reply:
        """The reply an answer of the client package's stands for: its status, body, Retry-After and sends."""
        return cls(
            answer.status,
            answer.body,
            latency_s,
            retry_after_s=answer.retry_after_s,
            sends=answer.sends,
            no_capacity=no_capacity,
        )

    def json(self) -> Any:
        return json.loads(self.body)

    def describe_error(self) -> str:
        """One line for an operator: the API's error_type and message, or the 422 detail list."""
        if self.status == TRANSPORT_ERROR:
            return f"no answer: {self.error}"
        try:
            detail = self.json().get("detail")
        except (ValueError, AttributeError):
            detail = None
        if isinstance(detail, dict):
            return f"HTTP {self.status} {detail.get('error_type', '?')}: {detail.get('message', '')}"
        if isinstance(detail, list):
            parts = [
                f"{'.'.join(str(x) for x in d.get('loc', []))}: {d.get('msg', '')}"
                for d in detail
                if isinstance(d, dict)
            ]
            return f"HTTP {self.status} invalid request: " + "; ".join(parts)
        return f"HTTP {self.status}: {self.body[:200].decode('utf-8', 'replace')}"


class Sender(Protocol):
    """Sends one decision body and reports what came back (HttpSender, RealTimeEndpointSender)."""

    label: str

    def send(self, body: Mapping[str, Any]) -> Reply: ...

    def close(self) -> None: ...


def http_reply(response: httpx.Response, latency_s: float) -> Reply:
    """The reply an HTTP response stands for, its Retry-After read as the client package reads it."""
    from decision_endpoints_client.invocation import RETRY_AFTER, EndpointResponse

    retry_after = response.headers.get("Retry-After")
    headers = {RETRY_AFTER: retry_after} if retry_after is not None else {}
    return Reply.of(EndpointResponse(response.status_code, response.content, headers), latency_s)


class HttpSender:
    """POST to a running adapter (or any System One server) over HTTP: one decision body (`send`), or any bytes of
    a content type the route takes (`send_bytes`, e.g. a JSON Lines mini-batch to /invocations)."""

    def __init__(
        self,
        base_url: str,
        *,
        route: str = DEFAULT_ROUTE,
        api_key: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_connections: int = 16,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + "/" + route.lstrip("/")
        self.label = base_url
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._client = httpx.Client(headers=headers, timeout=timeout_s, limits=limits, transport=transport)

    def send(self, body: Mapping[str, Any]) -> Reply:
        return self.send_bytes(json.dumps(body).encode("utf-8"))

    def send_bytes(self, payload: bytes, content_type: str = "application/json") -> Reply:
        start = time.perf_counter()
        try:
            response = self._client.post(
                self.url, content=payload, headers={"Content-Type": content_type, "Accept": content_type}
            )
        except httpx.HTTPError as exc:
            return Reply(TRANSPORT_ERROR, b"", time.perf_counter() - start, error=f"{type(exc).__name__}: {exc}")
        return http_reply(response, time.perf_counter() - start)

    def close(self) -> None:
        self._client.close()


class RealTimeEndpointSender:
    """invoke_endpoint on a SageMaker real-time endpoint; the container's /invocations takes the decision body.

    The call and the unwrapping of SageMaker's errors (a ModelError's own status, body and Retry-After, throttling
    as 429) are the client package's (`decision_endpoints_client`), the same an application's SDK calls go through.
    botocore's own retries are off so that `send_with_retries` (and `bench`) see every rejection. On a components
    endpoint each call names `inference_component`; while it is at zero the client package waits for a copy within
    `capacity_wait` (None: not at all), its progress lines going to `capacity_wait.on_wait`.
    """

    def __init__(
        self,
        endpoint_name: str,
        *,
        region: str | None = None,
        client: Any = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_connections: int = 16,
        target_variant: str | None = None,
        inference_component: str | None = None,
        capacity_wait: Any = None,
    ) -> None:
        from decision_endpoints_client.realtime import RealTimeEndpoint

        self.endpoint_name = endpoint_name
        self._endpoint = RealTimeEndpoint(
            endpoint_name,
            region=region,
            client=client,
            target_variant=target_variant,
            read_timeout_s=timeout_s,
            max_connections=max_connections,
            inference_component=inference_component,
            capacity_wait=capacity_wait,
        )
        self.label = self._endpoint.label

    def send(self, body: Mapping[str, Any]) -> Reply:
        return self.send_bytes(json.dumps(body).encode("utf-8"))

    def send_bytes(self, payload: bytes, content_type: str = "application/json") -> Reply:
        """One InvokeEndpoint (and the calls a wait for capacity adds); a failure of the local AWS set-up (no
        credentials, no region) is raised, not replied: no retry can mend it, and every other request would fail the
        same way."""
        from botocore.exceptions import BotoCoreError
        from decision_endpoints_client.capacity import is_no_capacity
        from decision_endpoints_client.invocation import EndpointUnreachable, Invocation, InvocationTimeout

        start = time.perf_counter()
        try:
            answer = self._endpoint.invoke(Invocation(payload, content_type=content_type, accept=content_type))
        except (InvocationTimeout, EndpointUnreachable, BotoCoreError) as exc:
            if aws_setup_failure(exc) is not None:
                raise
            return Reply(TRANSPORT_ERROR, b"", time.perf_counter() - start, error=f"{type(exc).__name__}: {exc}")
        return Reply.of(answer, time.perf_counter() - start, no_capacity=is_no_capacity(answer))

    def close(self) -> None:
        self._endpoint.close()


def aws_setup_failure(exc: BaseException) -> str | None:
    """What to tell an operator when botocore could not make a call on this machine's AWS set-up (no credentials,
    an expired SSO session, no region, an unknown profile), or None for any other failure. Such a failure is the
    same for every request: a command stops at the first one instead of retrying it."""
    from botocore import exceptions as aws

    if isinstance(exc, aws.NoRegionError):
        return f"no AWS region: {exc}; pass --region or set AWS_REGION"
    if isinstance(exc, aws.ProfileNotFound | aws.ConfigParseError | aws.InvalidConfigError):
        return f"the AWS configuration cannot be used: {exc}"
    credentials = (
        aws.NoCredentialsError,
        aws.PartialCredentialsError,
        aws.CredentialRetrievalError,
        aws.UnknownCredentialError,
        aws.NoAuthTokenError,
        aws.TokenRetrievalError,
        aws.SSOError,
    )
    if isinstance(exc, credentials):
        return (
            f"no usable AWS credentials: {exc}. botocore looks in the environment (AWS_ACCESS_KEY_ID ...), "
            "AWS_PROFILE and ~/.aws, SSO (run `aws sso login`) and the instance or container role"
        )
    return None


@dataclass
class RetryPolicy:
    """Exponential backoff with full jitter; a server's Retry-After is waited out first."""

    max_attempts: int = 5
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempt: int, reply: Reply) -> float:
        """Seconds to wait after `attempt` (1-based) failed with `reply`."""
        if reply.retry_after_s is not None:
            # the server said when; a little jitter (a quarter of it at most) spreads the herd
            return min(reply.retry_after_s * (1 + 0.25 * self.rng.random()), self.max_delay_s * 4)
        return self.rng.uniform(0, min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1)))


def send_with_retries(
    sender: Sender,
    body: Mapping[str, Any],
    policy: RetryPolicy | None = None,
    on_retry: Callable[[int, Reply, float], None] | None = None,
) -> tuple[Reply, int]:
    """Send, retrying overload (429/503), timeouts and other 5xx; never a 4xx, nor a spent wait for capacity. Returns
    the last reply and the sends all attempts took (an attempt that waited for capacity counts each of its calls)."""
    policy = policy or RetryPolicy()
    attempt = sends = 0
    while True:
        attempt += 1
        reply = sender.send(body)
        sends += reply.sends
        if reply.ok or not reply.retryable or attempt >= policy.max_attempts:
            return reply, sends
        wait = policy.delay(attempt, reply)
        if on_retry is not None:
            on_retry(attempt, reply, wait)
        policy.sleep(wait)
