"""The HTTP surface: the decision API (System One's, and OpenAI's Decisions API on /v1/decisions), SageMaker's
/ping, /invocations and /execution-parameters, and /metrics.

`create_app(settings, runtime_settings, service=None)` builds an app; the model service is created
in the lifespan hook (or passed in), held on `app.state`, never in module globals. The routes are two
routers: `keyed` (every route behind the API key, a router dependency) and `sagemaker` (what SageMaker
itself asks, with no key); a route reaches the service through the `Service` dependency.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Annotated, Any

import anyio
from decision_spec import events
from decision_spec.contract import DEFAULT_MODEL_ALIAS
from decision_spec.gguf_metadata import DecisionMetadataError
from decision_spec.manifest import ChecksumMismatch, ModelNotFound
from decision_spec.policy import PolicyError
from decision_spec.schemas import ChatCompletionRequest, DecisionRequest, ModelCard, ModelList
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError

from . import RELEASE_DATE, __version__, bulk, handlers, openai_decisions
from . import openai_schemas as oa
from .body_limit import BodyLimit
from .core.errors import (
    ERROR_TABLE,
    AuthenticationError,
    InvalidRequest,
    NotReady,
    UnsupportedShape,
    invalid_json,
    validation_detail,
)
from .core.settings import AdapterSettings, RuntimeSettings, SettingsError
from .error_bodies import Envelope, envelope_of_path, error_response
from .loading import load_service
from .request_log import requests_log
from .service import ModelService


def loaded_service(request: Request) -> ModelService:
    """The app's model service; 503 with Retry-After while it is still loading."""
    service: ModelService | None = getattr(request.app.state, "service", None)
    if service is None:
        raise NotReady("the model is still loading", retry_after=5)
    return service


def authorize(request: Request) -> None:
    """The API key, where one is configured, from `Authorization: Bearer <key>` (compared in constant time)."""
    settings: AdapterSettings = request.app.state.settings
    key = settings.api_key.get_secret_value() if settings.api_key else None
    if not key:
        return  # no key configured: any Authorization header is accepted and ignored
    header = request.headers.get("authorization", "")
    if not header:
        raise AuthenticationError("missing API key: send Authorization: Bearer <key>")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), key.encode()):
        raise AuthenticationError("invalid API key")


class ParsedOffTheLoop(APIRoute):
    """A route whose JSON body is parsed in a worker thread before FastAPI validates it (FastAPI parses on the event
    loop: a 6 MB body of many keys is a third of a second in which /ping and admission wait). Malformed JSON is the
    422 FastAPI itself would answer."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def parse_then_handle(request: Request) -> Response:
            media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
            body = await request.body() if self.body_field is not None else b""
            if body and (media == "application/json" or media.endswith("+json")):
                try:
                    request._json = await anyio.to_thread.run_sync(json.loads, body)
                except json.JSONDecodeError as e:
                    error = {"type": "json_invalid", "loc": ("body", e.pos), "msg": "JSON decode error", "input": {}}
                    raise RequestValidationError([error]) from None
                except RecursionError:
                    error = {"type": "json_invalid", "loc": ("body", 0), "msg": "JSON nested too deep", "input": {}}
                    raise RequestValidationError([error]) from None
                except UnicodeDecodeError:
                    pass  # FastAPI answers it as it always has
            return await handler(request)

        return parse_then_handle


Service = Annotated[ModelService, Depends(loaded_service)]
keyed = APIRouter(dependencies=[Depends(authorize)], route_class=ParsedOffTheLoop)
sagemaker = APIRouter()  # SageMaker's health check and Batch Transform's question carry no key


@sagemaker.get("/ping")
async def ping(service: Service) -> Response:
    return JSONResponse({"status": "ok"})


@sagemaker.get("/execution-parameters")
async def batch_execution_parameters(request: Request) -> Response:
    """Batch Transform asks this once; the values come from settings alone (no model needed)."""
    return JSONResponse(bulk.execution_parameters(request.app.state.settings))


@keyed.get("/v1/models", response_model=ModelList)
async def models(service: Service) -> ModelList:
    ident = service.identity
    desc = f"{ident.model_file} (sha256 {ident.model_sha256[:12]}) served as decisions over llama.cpp logits"
    name = service.model_name
    return ModelList(
        models=[
            ModelCard(name=name, description=desc, release_date=RELEASE_DATE),
            ModelCard(name=DEFAULT_MODEL_ALIAS, description=f"alias of {name}", release_date=RELEASE_DATE),
        ]
    )


@keyed.post("/v1/systemone")
async def systemone(body: DecisionRequest, service: Service) -> Response:
    return await handlers.answer(service, body, "/v1/systemone")


@keyed.post(openai_decisions.ROUTE)
async def decisions(body: oa.DecisionCreate, service: Service) -> Response:
    return await handlers.answer_openai(service, body, openai_decisions.ROUTE)


@keyed.post("/v1/chat/completions")
async def chat_completions(body: ChatCompletionRequest, service: Service) -> Response:
    return await handlers.chat(service, body)


@keyed.post("/invocations")
async def invocations(request: Request, service: Service) -> Response:
    raw = await request.body()
    if bulk.is_json_lines(request.headers.get("content-type")):
        return await handlers.answer_json_lines(service, raw)
    payload = await anyio.to_thread.run_sync(parsed, raw)  # a body of megabytes is parsed off the event loop
    shape = _shape(payload)
    if shape == "openai_decision":
        request.state.envelope = "openai"  # its errors in the envelope its client reads
    body = await anyio.to_thread.run_sync(validated, SHAPES[shape], payload)
    if isinstance(body, DecisionRequest):
        return await handlers.answer(service, body, "/invocations")
    if isinstance(body, oa.DecisionCreate):
        return await handlers.answer_openai(service, body, "/invocations")
    assert isinstance(body, ChatCompletionRequest)
    return await handlers.chat(service, body)


SHAPES: dict[str, type[BaseModel]] = {
    "decision": DecisionRequest,
    "openai_decision": oa.DecisionCreate,
    "chat": ChatCompletionRequest,
}


def parsed(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise invalid_json(e) from None
    except RecursionError:  # nested deeper than Python's JSON reader goes (about 1,000 levels)
        raise invalid_json(json.JSONDecodeError("nested too deep", "", 0)) from None


def validated(model: type[BaseModel], payload: Any) -> BaseModel:
    try:
        return model.model_validate(payload)
    except ValidationError as e:
        raise InvalidRequest(validation_detail(e.errors(), prefix=("body",))) from None


@keyed.get("/metrics")
async def metrics(service: Service) -> Response:
    return JSONResponse(service.metrics())


def _shape(payload: Any) -> str:
    if isinstance(payload, dict) and isinstance(payload.get("questions"), list):
        return "openai_decision"  # OpenAI's questions are an array, System One's an object keyed by id
    if isinstance(payload, dict) and "questions" in payload:
        return "decision"
    if isinstance(payload, dict) and "messages" in payload:
        return "chat"
    raise UnsupportedShape(
        "POST /invocations accepts a decision request (an object with 'state' and 'questions'), an OpenAI "
        "Decisions request ('input' and an array of 'questions') or an OpenAI chat-completions request ('messages')"
    )


def envelope_of(request: Request) -> Envelope:
    """OpenAI's on its route and for its shape on /invocations (the handler notes it), else System One's."""
    noted: Envelope | None = getattr(request.state, "envelope", None)
    return noted or envelope_of_path(request.url.path)


async def _domain_error(request: Request, err: Exception) -> Response:
    return error_response(err, envelope_of(request))


async def _invalid_request(request: Request, err: Exception) -> Response:
    """FastAPI's own validation failures as the table's 422 (decision-api.md), without FastAPI's echo of the
    offending input: it can be customer text, or a non-finite number a JSON body cannot carry back."""
    assert isinstance(err, RequestValidationError)
    return error_response(InvalidRequest(validation_detail(err.errors())), envelope_of(request))


def startup_failure(err: Exception) -> dict[str, Any] | None:
    """The log line of an error that stops start-up, classified here where loading's errors are caught (the
    modules that raise them sit below errors.py); None for an error that has no event of its own."""
    if isinstance(err, ChecksumMismatch):
        return {
            "event": events.MODEL_CHECKSUM_MISMATCH,
            "file": str(err.path),
            "expected_sha256": err.expected,
            "actual_sha256": err.actual,
            "message": "refusing to start",
        }
    if isinstance(err, PolicyError):
        return {"event": events.POLICY_REFUSED, "message": f"refusing to start: {err}"}
    if isinstance(err, ModelNotFound | SettingsError | DecisionMetadataError):
        return {"event": events.MODEL_NOT_LOADED, "message": str(err)}
    return None


def create_app(
    settings: AdapterSettings, runtime_settings: RuntimeSettings, service: ModelService | None = None
) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = service is None
        try:
            app.state.service = service or await anyio.to_thread.run_sync(load_service, settings, runtime_settings)
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
        description="System One decision API over llama.cpp logits, in SageMaker's container contract. This "
        f"endpoint answers at most {settings.max_questions} questions a request and {settings.max_options} options a "
        f"question (413 request_limit_exceeded past them), in bodies of at most {settings.max_body_bytes} bytes. A "
        f"JSON Lines body on /invocations carries at most {settings.max_body_records} records "
        "(DECISION_MAX_BODY_RECORDS; 413 request_limit_exceeded) and text of at most "
        f"{settings.max_body_tokens or 'DECISION_MAX_REQUEST_TOKENS'} tokens by the count of its characters "
        "(DECISION_MAX_BODY_TOKENS; 413 token_budget_exceeded), each distinct state once. Every request has "
        f"{settings.request_timeout_s:g} s (DECISION_REQUEST_TIMEOUT_S) from its arrival: past it, 504 "
        "deadline_exceeded, and a JSON Lines body answers the records it finished with a deadline_exceeded line for "
        "each of the others. A lone UTF-16 surrogate in any text: 400 invalid_text.",
    )
    app.state.settings = settings
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    for error_class in ERROR_TABLE:
        app.add_exception_handler(error_class, _domain_error)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.include_router(sagemaker)
    app.include_router(keyed)
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = published(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def published(document: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI document with its request models' schemas under the names it has always published
    (openai_schemas.PUBLISHED_SCHEMA_NAMES), in FastAPI's order (by name), every reference to them renamed."""
    names = oa.PUBLISHED_SCHEMA_NAMES
    prefix = "#/components/schemas/"

    def renamed(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: renamed(v) for k, v in value.items()}
        if isinstance(value, list):
            return [renamed(v) for v in value]
        if isinstance(value, str) and value.startswith(prefix) and value[len(prefix) :] in names:
            return prefix + names[value[len(prefix) :]]
        return value

    document = renamed(document)
    schemas = {names.get(k, k): v for k, v in document["components"]["schemas"].items()}
    document["components"]["schemas"] = {k: schemas[k] for k in sorted(schemas)}
    return document
