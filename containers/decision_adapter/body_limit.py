"""The body-limit middleware: a 413 for a body over DECISION_MAX_BODY_BYTES, declared or streamed."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .core.errors import PayloadTooLarge
from .error_bodies import envelope_of_path, error_response

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
        await error_response(err, envelope_of_path(scope.get("path", "")))(scope, receive, send)
