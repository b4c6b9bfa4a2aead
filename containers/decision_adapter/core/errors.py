"""The adapter's domain errors and the one table that gives each its HTTP status and body.

Bodies follow the contract: `{"detail": {"error_type", "message"}}` with a JSON media type.
Validation failures, malformed JSON among them, are `InvalidRequest`: the contract's 422 with `detail[]`
(built by `validation_detail`), as `jevcompat mock` answers them. A JSON Lines error line (bulk.py) is
`record_error`: the same `error_type` and `message`, the status, and an `InvalidRequest`'s `detail[]`.
On OpenAI's route (`/v1/decisions`, and its shape on /invocations) the same errors go out in OpenAI's envelope,
`{"error": {"message", "type", "param", "code"}}` with `code` the `error_type`, and a 422 as the 400 OpenAI answers
(the SDK's BadRequestError); every other status, Retry-After included, is the table's.
Start-up failures have no response and no row: the lifespan hook that catches them (app.startup_failure) gives
the line each writes before the process stops. This module imports nothing of the adapter's: every module may raise.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class AdapterError(Exception):
    """An error raised on purpose; `retry_after` (seconds) becomes a Retry-After header."""

    def __init__(self, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class InvalidRequest(AdapterError):
    """The body is not a valid request (malformed JSON included); `detail`: where and why of each problem."""

    def __init__(self, detail: Sequence[Mapping[str, Any]]) -> None:
        self.detail = [dict(d) for d in detail]
        super().__init__("; ".join(f"{'.'.join(str(p) for p in d['loc'])}: {d['msg']}" for d in self.detail))


class AuthenticationError(AdapterError):
    """No or a wrong API key where one is configured."""


class ModelNotServed(AdapterError):
    """The request names a model this endpoint does not serve."""


class UnsupportedShape(AdapterError):
    """A body on /invocations that is neither a decision nor a chat request."""


class UnencodableText(AdapterError):
    """Caller text with no UTF-8 form (a lone UTF-16 surrogate): refused before anything tokenizes it."""


class ChatTemplateRefused(AdapterError):
    """The model's chat template refused the conversation (its own `raise_exception`: roles out of order, say)."""


class ChatNotServed(AdapterError):
    """Chat completions are switched off (DECISION_CHAT_CONTEXTS=0): the endpoint serves decisions only."""


class PayloadTooLarge(AdapterError):
    """The body is over DECISION_MAX_BODY_BYTES."""


class TokenBudgetExceeded(AdapterError):
    """The request needs more context than the model's budget; it is refused, never truncated."""


class RequestLimitExceeded(AdapterError):
    """The request asks for more questions, or a question for more options, than this endpoint reads in one request."""


class RuntimeFailure(AdapterError):
    """llama.cpp failed on a well-formed request (a server fault, not the caller's)."""


class Overloaded(AdapterError):
    """No permit left: refused at once, with Retry-After."""


class DeadlineExceeded(AdapterError):
    """The request's time budget (DECISION_REQUEST_TIMEOUT_S) ran out: its work stopped between two units."""


class NotReady(AdapterError):
    """The model is still loading."""


def request_budget_exceeded(needed: str, limit: int) -> TokenBudgetExceeded:
    """The refusal of a request that needs more tokens evaluated than one request may have."""
    return TokenBudgetExceeded(
        f"the request needs {needed} tokens evaluated, its state and every question and option order together, but "
        f"one request may have at most {limit} (DECISION_MAX_REQUEST_TOKENS); split the request"
    )


@dataclass(frozen=True)
class ErrorKind:
    status: int
    error_type: str
    message: str = "{}"  # the body's message; {} is the error's own text
    retry_after: int | None = None  # where the error carries none


# 429, 503 and 500 are the statuses clients retry; none of them is used for bad input. 504: the request's own time
# budget ran out (asking the same again costs the same).
ERROR_TABLE: dict[type[Exception], ErrorKind] = {
    InvalidRequest: ErrorKind(422, "invalid_request"),
    AuthenticationError: ErrorKind(401, "authentication_error"),
    ModelNotServed: ErrorKind(404, "model_not_found"),
    UnsupportedShape: ErrorKind(400, "unsupported_request_shape"),
    UnencodableText: ErrorKind(400, "invalid_text"),
    ChatTemplateRefused: ErrorKind(400, "chat_template_refused", "the model's chat template refused the messages: {}"),
    ChatNotServed: ErrorKind(400, "chat_not_served"),
    PayloadTooLarge: ErrorKind(413, "payload_too_large"),
    TokenBudgetExceeded: ErrorKind(413, "token_budget_exceeded"),
    RequestLimitExceeded: ErrorKind(413, "request_limit_exceeded"),
    Overloaded: ErrorKind(429, "overloaded"),
    NotReady: ErrorKind(503, "not_ready"),
    DeadlineExceeded: ErrorKind(504, "deadline_exceeded"),
    RuntimeFailure: ErrorKind(500, "internal_error", "the model runtime failed: {}", retry_after=1),
}


def error_kind(err: Exception) -> ErrorKind:
    """The table's row for the error's class or its nearest listed base; a 500 for anything else."""
    for cls in type(err).__mro__:
        kind = ERROR_TABLE.get(cls)
        if kind is not None:
            return kind
    return ErrorKind(500, "internal_error")


def status_of(err: Exception) -> int:
    return error_kind(err).status


def error_detail(err: Exception) -> dict[str, str]:
    """The body's `detail` for the error (an `InvalidRequest`'s body carries its `detail[]` instead)."""
    kind = error_kind(err)
    return {"error_type": kind.error_type, "message": kind.message.format(err)}


def record_error(err: Exception) -> dict[str, Any]:
    """A JSON Lines error line's `error`: the single route's `error_detail` and status, and where an
    `InvalidRequest` is a 422 alone, its `detail[]` with the message `loc: msg; loc: msg`."""
    line: dict[str, Any] = {**error_detail(err), "status": status_of(err)}
    if isinstance(err, InvalidRequest):
        line["detail"] = err.detail
    return line


def invalid_json(err: json.JSONDecodeError | UnicodeDecodeError) -> InvalidRequest:
    """Malformed JSON, in a body or a JSON Lines line: a 422 `json_invalid` at the character where reading
    stopped, as FastAPI's own routes and the contract's reference server answer it."""
    if isinstance(err, UnicodeDecodeError):
        return InvalidRequest(
            [{"loc": ["body", err.start], "msg": "JSON decode error: not UTF-8", "type": "json_invalid"}]
        )
    msg = f"JSON decode error: {err.msg} at column {err.colno}"
    return InvalidRequest([{"loc": ["body", err.pos], "msg": msg, "type": "json_invalid"}])


def validation_detail(errors: Iterable[Mapping[str, Any]], *, prefix: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """A 422's `detail`: where (`loc`, under `prefix`) and why (`msg`, `type`) of each validation error, never its
    input, which can be customer text or a non-finite number JSON cannot carry back."""
    return [
        {"loc": [*prefix, *e.get("loc", ())], "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
        for e in errors
    ]
