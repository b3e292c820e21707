"""HTTP server metrics: ``http.server.request.duration`` per request, by route template, as pure ASGI.

Why apart: it wraps the FastAPI app (the backend only); streaming responses pass through
unbuffered, and the route attribute is the template, never the raw path.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from helix_context.telemetry.instruments import Telemetry

if TYPE_CHECKING:  # pragma: no cover
    from fastapi import FastAPI

log = logging.getLogger("helix.telemetry")


def route_template(scope: Mapping[str, Any]) -> str:
    """The matched route template of a request after routing ("" when nothing matched)."""
    root_path = str(scope.get("root_path", "") or "")
    app_root = str(scope.get("app_root_path", root_path) or "")
    mount_prefix = root_path[len(app_root):] if root_path.startswith(app_root) else ""
    fastapi_scope = scope.get("fastapi")
    if isinstance(fastapi_scope, Mapping):
        context = fastapi_scope.get("effective_route_context")
        path_format = getattr(context, "path_format", None)
        if isinstance(path_format, str) and path_format:
            return mount_prefix + path_format
    route = scope.get("route")
    if route is None:
        return ""
    from starlette.routing import Mount

    if isinstance(route, Mount):
        return (mount_prefix or getattr(route, "path", "")) + "/{path}"
    path_format = getattr(route, "path_format", None) or getattr(route, "path", None)
    return mount_prefix + path_format if isinstance(path_format, str) else ""


class HttpMetricsMiddleware:
    """Records http.server.request.duration per request. Pure ASGI: it only watches the
    messages going by, so streaming responses are never buffered; the duration ends
    with the last body chunk (background tasks after it do not count)."""

    def __init__(self, app: Any, telemetry: Telemetry) -> None:
        self.app = app
        self.telemetry = telemetry

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status: int | None = None
        done = False

        def finish(final_status: int | None) -> None:
            nonlocal done
            if done:
                return
            done = True
            try:
                self.telemetry.record_http(scope.get("method", ""), route_template(scope),
                                           final_status if final_status is not None else 500,
                                           time.perf_counter() - start)
            except Exception as exc:  # pragma: no cover - telemetry must not break serving
                log.debug("record_http failed: %s", exc)

        async def send_wrapper(message: dict[str, Any]) -> None:
            nonlocal status
            kind = message.get("type")
            if kind == "http.response.start":
                status = int(message.get("status", 0))
            await send(message)
            if kind == "http.response.body" and not message.get("more_body", False):
                finish(status)

        try:
            await self.app(scope, receive, send_wrapper)
        except BaseException:
            finish(status if status is not None else 500)
            raise
        finish(status)


def instrument_app(app: FastAPI, telemetry: Telemetry | None) -> None:
    """Add :class:`HttpMetricsMiddleware` to ``app`` (before it starts); no-op for None or twice."""
    if telemetry is None or getattr(app.state, "_helix_http_metrics", False):
        return
    app.add_middleware(HttpMetricsMiddleware, telemetry=telemetry)
    app.state._helix_http_metrics = True
