"""Errors rendered at the HTTP edge, once per dialect: System One's `{"detail": ...}` and OpenAI's `{"error": ...}`,
with the status, Retry-After and WWW-Authenticate the error table gives (core/errors.py defines the errors and the
table, and imports no web framework)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi.responses import JSONResponse

from .core.errors import AdapterError, AuthenticationError, InvalidRequest, error_detail, error_kind

# Which body an error goes out in: System One's `{"detail": ...}` or OpenAI's `{"error": ...}`.
Envelope = Literal["systemone", "openai"]
OPENAI_ROUTES = ("/v1/decisions",)
# OpenAI's error `type` per status; a status not listed is an invalid_request_error under 500, else a server_error
OPENAI_ERROR_TYPES = {401: "authentication_error", 404: "not_found_error", 429: "rate_limit_error"}
OPENAI_STATUS = {422: 400}  # OpenAI answers an invalid body with 400


def envelope_of_path(path: str) -> Envelope:
    return "openai" if path.rstrip("/") in OPENAI_ROUTES else "systemone"


def error_response(err: Exception, envelope: Envelope = "systemone") -> JSONResponse:
    kind = error_kind(err)
    headers = {}
    retry_after = err.retry_after if isinstance(err, AdapterError) and err.retry_after is not None else kind.retry_after
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    if isinstance(err, AuthenticationError):
        headers["WWW-Authenticate"] = "Bearer"
    if envelope == "openai":
        status = OPENAI_STATUS.get(kind.status, kind.status)
        return JSONResponse({"error": openai_error(err, status)}, status_code=status, headers=headers)
    detail: Any = err.detail if isinstance(err, InvalidRequest) else error_detail(err)
    return JSONResponse({"detail": detail}, status_code=kind.status, headers=headers)


def openai_error(err: Exception, status: int) -> dict[str, Any]:
    """OpenAI's `error` object; `param` is where the first problem of an invalid body is (its path under the body)."""
    kind = error_kind(err)
    param = None
    if isinstance(err, InvalidRequest) and err.detail:
        loc = [str(p) for p in err.detail[0].get("loc", ())]
        param = ".".join(loc[1:] if loc[:1] == ["body"] else loc) or None
    default_type = "server_error" if status >= 500 else "invalid_request_error"
    return {
        "message": str(err) if isinstance(err, InvalidRequest) else kind.message.format(err),
        "type": OPENAI_ERROR_TYPES.get(status, default_type),
        "param": param,
        "code": kind.error_type,
    }
