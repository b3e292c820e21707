"""Request guards: Host allow-list, no cross-site state changes, API key, loopback-only admin routes,
body size limit.

Pure ASGI middleware (not BaseHTTPMiddleware) so streaming proxy responses
pass through untouched and the checks cost microseconds. The factory puts it
outside every route and fast path, so routes added later are covered too.
"""

from __future__ import annotations

import hmac
import json
from typing import Any
from collections.abc import Awaitable, Callable

from helix_context.bind_rule import HOW_TO_SET_A_KEY, bind_refusal, is_loopback, uvicorn_host
from helix_context.server.browser_guard import HostPolicy, cross_site_message, cross_site_refusal

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

OPEN_PATHS = {"/health"}  # liveness must answer the supervisor without a key
DASHBOARD_COOKIE = "helix_api_key"


def _cookie(header: str, name: str) -> str:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return ""


def _query_param(raw: bytes, name: str) -> str:
    from urllib.parse import parse_qs

    values = parse_qs(raw.decode("latin-1")).get(name)
    return values[0] if values else ""


# Every answer: no page of another site may frame one of ours (a click there on "Remove + forget" inside an
# invisible frame of the dashboard is a same-origin request the cross-site rule cannot tell apart), no URL of
# ours (the dashboard's `?api_key=`) is sent on as a Referer, and no answer is read as another type than it says.
_PAGE_HEADERS = [(b"x-frame-options", b"DENY"), (b"content-security-policy", b"frame-ancestors 'none'"),
                 (b"referrer-policy", b"no-referrer"), (b"x-content-type-options", b"nosniff")]


def _with_page_headers(send: Send) -> Send:
    async def wrapped(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *_PAGE_HEADERS]}
        await send(message)

    return wrapped


def _with_cookie(send: Send, name: str, value: str) -> Send:
    async def wrapped(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            cookie = f"{name}={value}; Path=/; HttpOnly; SameSite=Strict".encode("latin-1")
            message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", cookie)]}
        await send(message)

    return wrapped


def check_bind(host: str, api_key: str) -> None:
    """Refuse to expose the genome to the network without a key (the one rule: bind_rule.py)."""
    refused = bind_refusal(host, api_key)
    if refused is not None:
        raise SystemExit(refused)


def open_bind_refusal(settings: Any, argv: list[str] | None = None) -> str | None:
    """Why the backend must not start here, or None: the configured host, and the `--host` of a uvicorn
    command line (which uvicorn does not tell the app about)."""
    import sys

    for host in (settings.server.host, uvicorn_host(sys.argv if argv is None else argv)):
        refused = bind_refusal(host, settings.api_key) if host is not None else None
        if refused is not None:
            return refused
    return None


class BindCheck:
    """The backend's own start-up check of where it listens, before anything is opened.

    Why an ASGI layer and not the lifespan: an exception raised in the lifespan reaches uvicorn as a
    traceback wrapped around the message, while a ``lifespan.startup.failed`` sent from here is printed
    as the one line that says what to do, and uvicorn exits non-zero (`python -m uvicorn … --host 0.0.0.0`).
    """

    def __init__(self, app: Any, *, settings: Any) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            refused = open_bind_refusal(self.settings)
            if refused is not None:
                await receive()  # lifespan.startup; uvicorn prints the message and exits non-zero
                await send({"type": "lifespan.startup.failed", "message": refused})
                return
        await self.app(scope, receive, send)


async def _send_json(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})


_GUARD_HEADERS = frozenset((b"x-api-key", b"authorization", b"cookie", b"content-length", b"host", b"origin",
                            b"sec-fetch-site"))


_SINGLE = frozenset(("host", "origin"))
DUPLICATED = " duplicated"  # not a header name (it has a space): the names of guard headers sent twice


def _guard_headers(raw: Any) -> dict[str, str]:
    """The few headers the guard reads, decoded. It runs on every request, and decoding every header was
    most of what the guard cost. A Host or Origin sent twice is noted under DUPLICATED: which of the two
    a proxy, a framework or the guard would believe differs, so such a request is refused."""
    found: dict[str, str] = {}
    for key, value in raw:
        low = key.lower()
        if low in _GUARD_HEADERS:
            name = low.decode("latin-1")
            if name in found and name in _SINGLE:
                found[DUPLICATED] = f"{found.get(DUPLICATED, '')} {name}".strip()
            found[name] = value.decode("latin-1")
    return found


def presented_key(headers: dict[str, str]) -> str:
    """The API key a request carries (X-API-Key, else a Bearer token), or ''."""
    supplied = headers.get("x-api-key", "")
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        supplied = supplied or auth[7:].strip()
    return supplied


def key_matches(supplied: str, api_key: str) -> bool:
    return bool(api_key) and hmac.compare_digest(supplied.encode(), api_key.encode())


def request_has_key(raw_headers: Any, api_key: str) -> bool:
    """For open routes (/health): does this request prove it holds the configured key?
    With no key configured every caller is trusted alike (loopback only; see check_bind)."""
    return not api_key or key_matches(presented_key(_guard_headers(raw_headers)), api_key)


class GuardMiddleware:
    def __init__(self, app: Any, *, api_key: str, max_body_bytes: int, hosts: HostPolicy | None = None) -> None:
        self.app = app
        self.api_key = api_key
        self.max_body_bytes = max_body_bytes
        self.hosts = hosts or HostPolicy()

    def _browser_refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, dict[str, Any]] | None:
        """A forged Host (DNS rebinding) or a foreign page asking for a state change: status and body."""
        if DUPLICATED in headers:
            return 400, {"error": {"message": f"the request has more than one {headers[DUPLICATED]} header; "
                                              "send each once", "type": "duplicate_header"}}
        refused = self.hosts.host_refusal(headers.get("host"))
        if refused is not None:
            return 400, {"error": {"message": refused, "type": "host_not_allowed"}}
        method: str = scope.get("method", "GET")
        label = cross_site_refusal(method, headers.get("host"), headers.get("origin"), headers.get("sec-fetch-site"),
                                   websocket=scope["type"] == "websocket", scheme=scope.get("scheme", "http"))
        if label is not None:
            message = cross_site_message(method, scope.get("path", ""), label)
            return 403, {"error": {"message": message, "type": "cross_site_refused"}}
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        headers = _guard_headers(scope.get("headers", ()))
        refusal = self._browser_refusal(scope, headers)
        client = scope.get("client")
        client_host = client[0] if client else None
        if not self.api_key and client_host is not None and not is_loopback(client_host):  # None: a Unix socket
            refusal = 403, {"error": {"message": f"this backend has no HELIX_API_KEY, so it answers callers on this "
                                                 f"machine only. {HOW_TO_SET_A_KEY}", "type": "forbidden"}}
        if scope["type"] == "websocket":
            if refusal is not None:
                await send({"type": "websocket.close", "code": 1008})  # the server answers the handshake with 403
                return
            await self.app(scope, receive, send)
            return
        send = _with_page_headers(send)
        if refusal is not None:
            await _send_json(send, *refusal)
            return

        set_cookie = False
        if self.api_key and path not in OPEN_PATHS:
            supplied = presented_key(headers) or _cookie(headers.get("cookie", ""), DASHBOARD_COOKIE)
            if not supplied and path.startswith("/dashboard") and scope.get("method") == "GET":
                # a browser cannot send headers: the dashboard takes the key once in its URL, then the
                # browser sends it back as a cookie to every route the dashboard calls (/sources, /stats …);
                # SameSite=Strict keeps other sites' pages from sending it, and the cross-site rule above
                # refuses their state changes anyway
                supplied = _query_param(scope.get("query_string", b""), "api_key")
                set_cookie = bool(supplied)
            if not key_matches(supplied, self.api_key):
                await _send_json(send, 401, {"error": {"message": "missing or wrong API key: send it as "
                                 "'Authorization: Bearer <HELIX_API_KEY>' or 'X-API-Key'", "type": "unauthorized"}})
                return

        declared = headers.get("content-length")
        if declared is not None:
            try:
                too_big = int(declared) > self.max_body_bytes
            except ValueError:
                too_big = False
            if too_big:
                await _send_json(send, 413, BodyTooLarge.body(self.max_body_bytes))
                return

        limit = self.max_body_bytes
        seen = 0

        async def limited_receive() -> dict[str, Any]:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge(limit)
            return message

        if set_cookie:
            send = _with_cookie(send, DASHBOARD_COOKIE, self.api_key)
        try:
            await self.app(scope, limited_receive, send)
        except BodyTooLarge:
            await _send_json(send, 413, BodyTooLarge.body(limit))


class BodyTooLarge(Exception):
    """A body read past [server] max_body_bytes (a chunked one: no Content-Length said so up front)."""

    def __init__(self, limit: int = 0) -> None:
        super().__init__(f"request body over {limit} bytes")
        self.limit = limit

    @staticmethod
    def body(limit: int) -> dict[str, Any]:
        return {"error": {"message": f"request body over {limit} bytes; send less or raise [server] max_body_bytes",
                          "type": "payload_too_large"}}
