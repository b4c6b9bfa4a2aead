"""The HTTP surface: the decision API, SageMaker's /ping, /invocations and /execution-parameters, and /metrics.

`create_app(settings, runtime_settings, service=None)` builds an app; the model service is created
in the lifespan hook (or passed in), held on `app.state`, never in module globals.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import RELEASE_DATE, __version__, bulk, events, handlers
from .contract import DEFAULT_MODEL_ALIAS
from .errors import (
    ERROR_TABLE,
    AuthenticationError,
    NotReady,
    PayloadTooLarge,
    UnsupportedShape,
    error_response,
    startup_failure,
    validation_detail,
)
from .events import requests_log
from .schemas import ChatCompletionRequest, DecisionRequest, ModelCard, ModelList
from .service import ModelService
from .settings import AdapterSettings, RuntimeSettings

DRAIN_FACTOR = 2  # bodies up to this many times the limit are read to their end before the 413 goes out


class BodyLimit:
    """413 for a body larger than the limit (declared or streamed); nothing past the limit is kept.

    Before the 413 the body is read and dropped, up to DRAIN_FACTOR times the limit: a client that sends its whole
    body before it reads (urllib, which also asks to close the connection after the response) would otherwise find
    the connection reset, since a socket closed with unread data resets, and never see the 413. Larger bodies, and
    those of a client waiting for 100-continue (it sends nothing until asked), are answered without reading.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit, self.drain_limit = app, limit, DRAIN_FACTOR * limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            if int(declared) <= self.drain_limit and headers.get(b"expect", b"").lower() != b"100-continue":
                await self._drain(receive, 0)
            await self._reject(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    if message.get("more_body", False):
                        await self._drain(receive, seen)
                    raise PayloadTooLarge(f"request body exceeds {self.limit} bytes")
            return message

        await self.app(scope, limited, send)

    async def _drain(self, receive: Receive, seen: int) -> None:
        """Read and drop the rest of the body, or as much of it as keeps the total within the drain limit."""
        while seen <= self.drain_limit:
            message = await receive()
            if message["type"] != "http.request":
                return
            seen += len(message.get("body", b""))
            if not message.get("more_body", False):
                return

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        err = PayloadTooLarge(f"request body exceeds {self.limit} bytes (SageMaker's payload limit is 6 MB)")
        await error_response(err)(scope, receive, send)


def create_app(
    settings: AdapterSettings, runtime_settings: RuntimeSettings, service: ModelService | None = None
) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = service is None
        try:
            app.state.service = service or await anyio.to_thread.run_sync(ModelService.load, settings, runtime_settings)
        except Exception as e:
            line = startup_failure(e)
            if line is not None:
                requests_log.error(json.dumps(line))
            raise
        requests_log.info(json.dumps({"event": events.READY, "identity": app.state.service.identity.model_dump()}))
        try:
            yield
        finally:
            if owned:
                app.state.service.close()

    app = FastAPI(
        title="Decision adapter",
        version=__version__,
        lifespan=lifespan,
        description="System One decision API over llama.cpp logits, in SageMaker's container contract.",
    )
    app.state.settings = settings
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)

    async def _domain_error(request: Request, err: Exception) -> Response:
        return error_response(err)

    for error_class in ERROR_TABLE:
        app.add_exception_handler(error_class, _domain_error)

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, err: RequestValidationError) -> Response:
        """422 with where and why (decision-api.md), without FastAPI's echo of the offending input: the input can
        be customer text, which error bodies carry into client logs, or a non-finite number (Python's JSON
        reader accepts `Infinity` and `NaN`) that a JSON body cannot carry back."""
        return JSONResponse(status_code=422, content={"detail": validation_detail(err.errors())})

    def svc(request: Request) -> ModelService:
        service_: ModelService | None = getattr(request.app.state, "service", None)
        if service_ is None:
            raise NotReady("the model is still loading", retry_after=5)
        return service_

    def authorize(request: Request) -> None:
        key = settings.api_key.get_secret_value() if settings.api_key else None
        if not key:
            return  # no key configured: any Authorization header is accepted and ignored
        header = request.headers.get("authorization", "")
        if not header:
            raise AuthenticationError("missing API key: send Authorization: Bearer <key>")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), key.encode()):
            raise AuthenticationError("invalid API key")

    @app.get("/ping")
    async def ping(request: Request) -> Response:
        svc(request)
        return JSONResponse({"status": "ok"})

    @app.get("/execution-parameters")
    async def batch_execution_parameters() -> Response:
        """Batch Transform asks this once (no key: SageMaker sends none); the values come from settings alone."""
        return JSONResponse(bulk.execution_parameters(settings))

    @app.get("/v1/models", response_model=ModelList)
    async def models(request: Request) -> ModelList:
        authorize(request)
        s = svc(request)
        ident = s.identity
        desc = f"{ident.model_file} (sha256 {ident.model_sha256[:12]}) served as decisions over llama.cpp logits"
        return ModelList(
            models=[
                ModelCard(name=s.model_name, description=desc, release_date=RELEASE_DATE),
                ModelCard(name=DEFAULT_MODEL_ALIAS, description=f"alias of {s.model_name}", release_date=RELEASE_DATE),
            ]
        )

    @app.post("/v1/systemone")
    async def systemone(body: DecisionRequest, request: Request) -> Response:
        authorize(request)
        return await handlers.decide(svc(request), body, "/v1/systemone")

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatCompletionRequest, request: Request) -> Response:
        authorize(request)
        return await handlers.chat(svc(request), body)

    @app.post("/invocations")
    async def invocations(request: Request) -> Response:
        authorize(request)
        s = svc(request)
        raw = await request.body()
        if bulk.is_json_lines(request.headers.get("content-type")):
            return await bulk.invocations(s, raw)
        try:
            payload = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise RequestValidationError(
                [{"type": "json_invalid", "loc": ("body", 0), "msg": f"JSON decode error: {e}"}]
            ) from None
        shape = _shape(payload)
        try:
            if shape == "decision":
                return await handlers.decide(s, DecisionRequest.model_validate(payload), "/invocations")
            return await handlers.chat(s, ChatCompletionRequest.model_validate(payload))
        except ValidationError as e:
            raise RequestValidationError([{**err, "loc": ("body", *err["loc"])} for err in e.errors()]) from None

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        authorize(request)
        return JSONResponse(svc(request).metrics())

    return app


def _shape(payload: Any) -> str:
    if isinstance(payload, dict) and "questions" in payload:
        return "decision"
    if isinstance(payload, dict) and "messages" in payload:
        return "chat"
    raise UnsupportedShape(
        "POST /invocations accepts a decision request (an object with 'state' and 'questions') "
        "or an OpenAI chat-completions request (an object with 'messages')"
    )
