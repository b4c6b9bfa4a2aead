"""Errors the adapter raises on purpose, and the one table that maps them to HTTP responses.

Bodies follow the contract: `{"detail": {"error_type", "message"}}` with a JSON media type.
Validation failures (422 with `detail[]`) are FastAPI's own and already in the contract's shape.
"""

from __future__ import annotations

from fastapi.responses import JSONResponse


class AdapterError(Exception):
    """Base: carries the error type the table maps to a status."""

    error_type = "internal_error"

    def __init__(self, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


class AuthenticationError(AdapterError):
    error_type = "authentication_error"


class Overloaded(AdapterError):
    error_type = "overloaded"


class NotReady(AdapterError):
    error_type = "not_ready"


class PayloadTooLarge(AdapterError):
    error_type = "payload_too_large"


class TokenBudget(AdapterError):
    error_type = "token_budget_exceeded"


class ModelNotServed(AdapterError):
    error_type = "model_not_found"


class UnsupportedShape(AdapterError):
    error_type = "unsupported_request_shape"


class ServerFault(AdapterError):
    error_type = "internal_error"


# The one table of statuses. 429, 503 and 500 are the ones clients retry; none of them is used for bad input.
ERROR_STATUS: dict[type[AdapterError], int] = {
    AuthenticationError: 401,
    ModelNotServed: 404,
    UnsupportedShape: 400,
    PayloadTooLarge: 413,
    TokenBudget: 413,
    Overloaded: 429,
    NotReady: 503,
    ServerFault: 500,
}


def status_of(err: AdapterError) -> int:
    return ERROR_STATUS.get(type(err), 500)


def error_response(err: AdapterError) -> JSONResponse:
    headers = {}
    if err.retry_after is not None:
        headers["Retry-After"] = str(err.retry_after)
    if isinstance(err, AuthenticationError):
        headers["WWW-Authenticate"] = "Bearer"
    return JSONResponse(
        {"detail": {"error_type": err.error_type, "message": err.message}}, status_code=status_of(err), headers=headers
    )
