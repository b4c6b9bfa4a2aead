"""A stand-in for the SageMaker runtime (AWS itself cannot run here), in front of the real adapter.

It answers `POST /endpoints/{name}/invocations` as InvokeEndpoint does: the request must carry SigV4 headers of
the right form (Authorization `AWS4-HMAC-SHA256 Credential=<key>/<date>/<region>/sagemaker/aws4_request,
SignedHeaders=..., Signature=<64 hex>` and an `X-Amz-Date` of the same date); only the headers InvokeEndpoint
forwards (Content-Type, Accept, X-Amzn-SageMaker-Custom-Attributes) reach the container's /invocations; a 2xx
comes back with `x-Amzn-Invoked-Production-Variant` and `x-amzn-RequestId`, and every other status is wrapped as
a `ModelError`: HTTP 424, `x-amzn-ErrorType: ModelError`, a JSON body of ErrorCode, LogStreamArn, Message,
OriginalMessage (the container's body) and OriginalStatusCode, and none of the container's headers (SageMaker
drops them, Retry-After included). What it cannot check is the signature's value: that needs AWS's copy of the key.

An endpoint that hosts its model as an inference component (`component`) must be invoked with that component named
(X-Amzn-SageMaker-Inference-Component); while it has no copy (`no_capacity`: that many invocations, as a scale from
zero), each invocation is refused as SageMaker refuses it: ValidationError, HTTP 400, NO_CAPACITY_MESSAGE (SageMaker's
wording as published; the stand-in's other messages are its own).
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

ACCOUNT = "123456789012"
AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[A-Z0-9]{16,128})/(?P<date>\d{8})/(?P<region>[a-z0-9-]+)/sagemaker/"
    r"aws4_request, SignedHeaders=(?P<signed>[a-z0-9-]+(?:;[a-z0-9-]+)*), Signature=[0-9a-f]{64}"
)
AMZ_DATE = re.compile(r"(?P<date>\d{8})T\d{6}Z")
FORWARDED = ("content-type", "accept", "x-amzn-sagemaker-custom-attributes")  # what InvokeEndpoint passes on
COMPONENT_HEADER = "x-amzn-sagemaker-inference-component"
NO_CAPACITY_MESSAGE = (
    "Inference Component has no capacity to process this request. ApplicationAutoScaling may be in-progress (if "
    "configured) or try to increase the capacity by invoking UpdateInferenceComponentRuntimeConfig API."
)


@dataclass
class Seen:
    """One request as it reached the stand-in, and what the container answered it (before wrapping)."""

    path: str
    headers: dict[str, str]
    body_bytes: int
    at: float
    container_status: int = 0
    container_headers: dict[str, str] = field(default_factory=dict)


class SageMakerRuntimeStandIn:
    def __init__(
        self,
        container_url: str,
        *,
        endpoint: str,
        region: str,
        variants: tuple[str, ...],
        containers: dict[str, str | list[str]] | None = None,
        component: str | None = None,
        no_capacity: int = 0,
    ) -> None:
        """`containers`: a variant's own container URL (variants not named there, and the default, `container_url`),
        as each production variant of an endpoint runs its own model and instances; a list of URLs is an instance
        pool, its instances taking the variant's requests in turn."""
        self.container_url, self.endpoint, self.region, self.variants = container_url, endpoint, region, variants
        self.containers = {v: [u] if isinstance(u, str) else list(u) for v, u in (containers or {}).items()}
        self.turns: dict[str, int] = {}
        self.component, self.no_capacity = component, no_capacity
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                status, headers, body = outer.invoke(self.path, {k.lower(): v for k, v in self.headers.items()}, self)
                self.send_response(status)
                for name, value in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def invoke(self, path: str, headers: dict[str, str], handler: BaseHTTPRequestHandler) -> tuple[int, dict, bytes]:
        body = handler.rfile.read(int(headers.get("content-length", "0")))
        seen = Seen(path, headers, len(body), time.monotonic())
        with self.lock:
            self.seen.append(seen)
        request_id = str(uuid.uuid4())
        refused = self._refusal(path, headers)
        if refused is not None:
            code, status, message = refused
            return status, self._aws_error_headers(code, request_id), json.dumps({"message": message}).encode()
        forwarded = {k: v for k, v in headers.items() if k in FORWARDED}
        variant = headers.get("x-amzn-sagemaker-target-variant", self.variants[0])
        with self.lock:
            instances = self.containers.get(variant, [self.container_url])
            turn = self.turns[variant] = self.turns.get(variant, -1) + 1
        container = instances[turn % len(instances)]
        reply = httpx.post(container + "/invocations", content=body, headers=forwarded, timeout=60)
        seen.container_status, seen.container_headers = reply.status_code, dict(reply.headers)
        if 200 <= reply.status_code < 300:
            ok = {
                "Content-Type": reply.headers.get("content-type", "application/json"),
                "x-Amzn-Invoked-Production-Variant": variant,
                "x-amzn-RequestId": request_id,
            }
            return 200, ok, reply.content
        return 424, self._aws_error_headers("ModelError", request_id), self._model_error(reply, variant)

    def _refusal(self, path: str, headers: dict[str, str]) -> tuple[str, int, str] | None:
        """SageMaker's own refusals: a bad signature (403), an unknown endpoint or variant (400)."""
        auth = AUTHORIZATION.fullmatch(headers.get("authorization", ""))
        date = AMZ_DATE.fullmatch(headers.get("x-amz-date", ""))
        if auth is None or date is None or auth["date"] != date["date"] or auth["region"] != self.region:
            return "InvalidSignatureException", 403, "The request signature we calculated does not match."
        if not {"host", "x-amz-date"} <= set(auth["signed"].split(";")):
            return "InvalidSignatureException", 403, "Host and X-Amz-Date must be signed."
        if path != f"/endpoints/{self.endpoint}/invocations":
            return "ValidationError", 400, f"Endpoint {path.split('/')[2]} of account {ACCOUNT} not found."
        variant = headers.get("x-amzn-sagemaker-target-variant")
        if variant is not None and variant not in self.variants:
            return "ValidationError", 400, f"Target variant {variant} not found for endpoint {self.endpoint}."
        return self._component_refusal(headers.get(COMPONENT_HEADER))

    def _component_refusal(self, named: str | None) -> tuple[str, int, str] | None:
        if self.component is None:
            return None if named is None else ("ValidationError", 400, f"Endpoint {self.endpoint} hosts no components.")
        if named != self.component:
            return "ValidationError", 400, f"Inference component {named} of endpoint {self.endpoint} not found."
        with self.lock:
            if self.no_capacity > 0:
                self.no_capacity -= 1
                return "ValidationError", 400, NO_CAPACITY_MESSAGE
        return None

    def _aws_error_headers(self, code: str, request_id: str) -> dict[str, str]:
        return {
            "Content-Type": "application/json",
            "x-amzn-RequestId": request_id,
            "x-amzn-ErrorType": f"{code}:http://internal.amazon.com/coral/com.amazonaws.sagemaker/",
        }

    def _model_error(self, reply: httpx.Response, variant: str) -> bytes:
        side = "client" if reply.status_code < 500 else "server"
        group = f"/aws/sagemaker/Endpoints/{self.endpoint}"
        message = (
            f'Received {side} error ({reply.status_code}) from primary with message "{reply.text}". See '
            f"https://{self.region}.console.aws.amazon.com/cloudwatch/home?region={self.region}#logEventViewer:"
            f"group={group} in account {ACCOUNT} for more information."
        )
        return json.dumps(
            {
                "ErrorCode": f"{side.upper()}_ERROR_FROM_MODEL",
                "LogStreamArn": f"arn:aws:logs:{self.region}:{ACCOUNT}:log-group:{group}:log-stream:{variant}/i-0abc",
                "Message": message,
                "OriginalMessage": reply.text,
                "OriginalStatusCode": reply.status_code,
            }
        ).encode()
