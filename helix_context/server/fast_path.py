"""A fast path for one hot JSON POST route (the proxy's ``/v1/chat/completions``).

Why: on the 2-core machine the proxy's CPU per chat is its latency under load, and
FastAPI's per-request machinery (matching across the included routers, dependency
solving, content-type sniffing, the exception and exit-stack middlewares) costs
~80 µs of CPU per request even in a one-route app, where reading and validating the
same body in a bare ASGI handler costs ~8 µs; skipping it took about a third off
the server's CPU per proxied chat. :class:`JsonFastPath` answers a well-formed request
itself: it reads the body, validates it with the route's own pydantic model and
calls the same handler the route calls. Anything else (another path or method, a
content type other than JSON, a body that is not JSON or does not validate, a
caller gone before its body arrived) goes on to FastAPI with the body replayed, so
the route stays the one definition of error answers and of the OpenAPI schema.

The factory puts it inside the guard (API key, body size limit) and the HTTP
metrics; it sets ``scope["route"]`` so the metrics name the route's template.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

from starlette.types import Message, Receive, Scope, Send


def is_json_body(headers: list[tuple[bytes, bytes]]) -> bool:
    """True when the request says its body is ``application/json`` (ASGI header names are lower case)."""
    for name, value in headers:
        if name == b"content-type":
            return value.split(b";", 1)[0].strip().lower() == b"application/json"
    return False


def _replaying(messages: list[Message], receive: Receive) -> Receive:
    """``receive`` that hands out the messages already taken first, then the caller's own."""
    pending = list(messages)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay


class JsonFastPath:
    """Pure ASGI middleware: ``POST route.path`` with a valid JSON body → ``handler(request, body)``."""

    def __init__(self, app: Any, *, route: Any, model: type[BaseModel],
                 handler: Callable[[Request, Any], Awaitable[Response]]) -> None:
        self.app = app
        self.route = route  # the FastAPI route it stands in for (its path, and its template for metrics)
        self.path: str = route.path
        self.model = model
        self.handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] != "http" or scope["path"] != self.path or scope["method"] != "POST"
                or not is_json_body(scope["headers"])):
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        chunks: list[bytes] = []
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":  # gone before the body arrived: FastAPI's business
                await self.app(scope, _replaying(messages, receive), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        try:
            body = self.model.model_validate(json.loads(b"".join(chunks)))
        except (ValueError, RecursionError):  # not JSON, or a ValidationError: the route answers its usual error
            await self.app(scope, _replaying(messages, receive), send)
            return
        scope["route"] = self.route
        response = await self.handler(Request(scope, receive), body)
        await response(scope, receive, send)
