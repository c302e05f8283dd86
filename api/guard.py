"""The first thing every HTTP request meets: authentication, then the body's size.

A plain ASGI middleware, so it runs before FastAPI reads a byte of the body: a caller
without a valid token is refused (401) without its body being read, and a body over the
limit is refused (413) from its Content-Length or, for a streamed body, as soon as the
bytes received pass the limit. The principal it authenticates is what the routes see
(api.deps.get_principal), so a token is checked once per request.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.auth import Authenticator
from api.errors import error_response
from models.errors import RequestTooLarge, SluiceError

OPEN_PATHS = frozenset(
    {"/healthz", "/readyz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc", "/"}
)
"""Probes, the API's own documentation and the dashboard's front page need no token."""
OPEN_PREFIX = "/ui/"
"""The dashboard's page shells and assets (api.web): they hold no data, which the page fetches
from the API with the token."""


class RequestGuard:
    def __init__(self, app: ASGIApp, authenticator: Authenticator, max_body_bytes: int) -> None:
        self.app = app
        self.authenticator = authenticator
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            principal = (
                None
                if scope["path"] in OPEN_PATHS or scope["path"].startswith(OPEN_PREFIX)
                else self.authenticator.authenticate(_header(scope, b"authorization"))
            )
            body = await self._body(scope, receive)
        except SluiceError as error:
            await error_response(error)(scope, receive, send)
            return
        scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, _replay(body, receive), send)

    async def _body(self, scope: Scope, receive: Receive) -> list[Message]:
        """The request's body messages, refused as soon as they pass the limit."""
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            raise self._too_large(f"Content-Length {int(declared):,}")
        messages: list[Message] = []
        received = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                return messages  # the caller went away; the app sees it as usual
            received += len(message.get("body", b""))
            if received > self.max_body_bytes:
                raise self._too_large(f"more than {self.max_body_bytes:,} bytes")
            if not message.get("more_body", False):
                return messages

    def _too_large(self, seen: str) -> RequestTooLarge:
        return RequestTooLarge(
            f"the request body ({seen}) is larger than this server accepts"
            f" ({self.max_body_bytes:,} bytes); send fewer actions per batch",
            field="body",
        )


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A receive that hands out the body already read, then waits on the connection."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
