"""Application factory. The configured app object is the one piece of global state."""

from __future__ import annotations

import asyncio
import gc
import inspect
import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI
from fastapi.responses import HTMLResponse

from helix_context import signals
from helix_context.config import Settings, load_config
from helix_context.server import lifeline
from helix_context.server.errors import install_error_handlers
from helix_context import redact as log_redact
from helix_context.server.browser_guard import HostPolicy
from helix_context.server import (routes_admin, routes_context, routes_dashboard, routes_genes, routes_health,
                                  routes_proxy, routes_sources)
from helix_context.server.security import BindCheck, GuardMiddleware
from helix_context.telemetry import Telemetry, instrument_app

log = logging.getLogger("helix.server")



@dataclass(frozen=True)
class Route:
    """One HTTP route: method, path and the function that answers it (go-to-definition leads there)."""

    method: str
    path: str
    endpoint: Callable[..., Any]
    tag: str
    options: dict[str, Any] = field(default_factory=dict)  # status_code, response_class, include_in_schema …


def routes() -> list[Route]:
    """Every route the backend answers, in one table; create_app builds the app from it and nothing else."""
    H, A, C, D = routes_health, routes_admin, routes_context, routes_dashboard
    G, P, S = routes_genes, routes_proxy, routes_sources
    no_schema = {"include_in_schema": False}
    raw = {"response_model": None}  # the handler returns a Response itself
    return [
        Route("GET", "/health", H.health, "health"),
        Route("GET", "/health/history", H.health_history, "health"),
        Route("POST", "/admin/announce_restart", A.announce_restart, "admin"),
        Route("POST", "/admin/shutdown", A.shutdown, "admin"),
        Route("GET", "/admin/ribosome", A.ribosome_state, "admin"),
        Route("POST", "/admin/ribosome/pause", A.ribosome_pause, "admin"),
        Route("POST", "/admin/ribosome/resume", A.ribosome_resume, "admin"),
        Route("POST", "/admin/refresh", A.refresh, "admin"),
        Route("POST", "/admin/vacuum", A.vacuum, "admin"),
        Route("POST", "/admin/checkpoint", A.checkpoint, "admin"),
        Route("POST", "/admin/compact", A.compact, "admin"),
        Route("POST", "/admin/kv-backfill", A.kv_backfill, "admin"),
        Route("POST", "/context", C.context, "context"),
        Route("POST", "/context/packet", C.context_packet, "context"),
        Route("POST", "/context/refresh-plan", C.refresh_plan, "context"),
        Route("POST", "/fingerprint", C.fingerprint, "context"),
        Route("POST", "/ingest", C.ingest, "context"),
        Route("GET", "/stats", C.stats, "context"),
        Route("GET", "/dashboard", D.dashboard_page, "dashboard", {"response_class": HTMLResponse, **no_schema}),
        Route("GET", "/dashboard/static/{filename}", D.dashboard_static, "dashboard", no_schema),
        Route("GET", "/dashboard/data", D.dashboard_data, "dashboard"),
        Route("GET", "/genes/{gene_id}", G.get_gene, "genes"),
        Route("GET", "/genes/{gene_id}/neighbors", G.gene_neighbors, "genes"),
        Route("POST", P.CHAT_PATH, P.chat_completions, "proxy", raw),
        Route("GET", "/v1/models", P.list_models, "proxy", raw),
        Route("GET", "/sessions", P.sessions, "proxy"),
        Route("POST", "/consolidate", P.consolidate_sessions, "proxy"),
        Route("GET", "/sources", S.list_sources, "sources"),
        Route("POST", "/sources", S.add_source, "sources", {"status_code": 202}),
        Route("DELETE", "/sources", S.remove_source, "sources"),
        Route("POST", "/sources/pause", S.pause, "sources"),
        Route("POST", "/sources/resume", S.resume, "sources"),
    ]


def _add_routes(app: FastAPI, table: list[Route]) -> None:
    for route in table:
        app.add_api_route(route.path, route.endpoint, methods=[route.method], tags=[route.tag], **route.options)
    # the hot chat route is also answered before FastAPI's routing (routes_proxy.fast_path); added before
    # the guard, so inside it: keys and body limits still apply
    chat = next(r for r in app.router.routes if getattr(r, "path", None) == routes_proxy.CHAT_PATH)
    app.add_middleware(routes_proxy.fast_path, route=chat)


def _no_native_telemetry() -> dict[str, Any]:
    """Switch off FastAPI's own OpenTelemetry (newer FastAPI) where it exists. Helix records its HTTP metrics
    itself (telemetry.instrument_app) on a provider it never installs globally, so FastAPI's would only ask
    the global providers on every request whether anyone listens (a few µs per request, for nothing)."""
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters:
        return {"telemetry": {"tracing": False, "metrics": False, "logs": False}}
    return {}


def _freeze_heap(_: object) -> None:
    """Once the parts are loaded, move everything alive into the collector's permanent generation.

    Models, genome caches and the app live as long as the process; left in the oldest generation, every
    full collection walks them all (~70 ms with the parts loaded, more with bigger ones) while every request
    in flight waits. Collected first, so no garbage is frozen; a one-off pause at start-up instead."""
    gc.collect()
    gc.freeze()


async def _housekeeping(helix: Any) -> None:
    """While the server runs, also when no request comes: retention (genome/retention.py), and the re-embed of
    another model's vectors that an import by another process left (manager.resume_reembed)."""
    every = max(1.0, min(helix.settings.retention.prune_interval_s, 60.0))
    while True:
        await asyncio.sleep(every)
        try:
            if helix.retention.due():
                await asyncio.to_thread(helix.retention.run)
            await asyncio.to_thread(helix.resume_reembed)
        except Exception as exc:  # a locked or full genome: the next round tries again, the server goes on
            log.warning("housekeeping: %s: %s (tried again in %.0f s)", type(exc).__name__, exc, every)




def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or load_config()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        from helix_context.manager import HelixContextManager, open_genome
        from helix_context.sources.service import SourcesService

        app.state.started_at = time.time()
        genome = open_genome(settings)
        # the living index: sources indexed, reconciled and watched from now on (sources/service.py)
        sources = SourcesService(genome, settings)
        helix = HelixContextManager(settings, genome=genome, telemetry=telemetry, sources=sources)
        app.state.helix = helix
        helix.actor = f"server pid {os.getpid()}"
        telemetry.observe_genome(helix.genome_gauges)
        # load models in the background: /health answers at once (the supervisor's restart clock is
        # ticking), and a request that needs a part waits on that part's lock, not on all of them
        app.state.warmup = asyncio.create_task(asyncio.to_thread(helix.load_parts))
        app.state.warmup.add_done_callback(_freeze_heap)
        await asyncio.to_thread(sources.start, helix)
        app.state.sources = sources
        signals.write_server_state("running", pid=os.getpid(), reason="started", actor="backend",
                                   home=settings.home, url=settings.base_url)
        app.state.housekeeping = asyncio.create_task(_housekeeping(helix))
        lifeline.watch_supervisor(os.environ, home=settings.home)  # exit with our supervisor (lifeline.py)
        log.info("helix backend serving on %s (pid %s)", settings.base_url, os.getpid())
        try:
            async with routes_dashboard.lifespan(app), routes_proxy.lifespan(app):
                yield
        finally:
            app.state.housekeeping.cancel()
            await asyncio.to_thread(app.state.sources.stop)
            # the warm-up thread reads the genome (the dense index): closing its connection under it crashes
            # SQLite. A stop during start-up must not wait for it either (the supervisor would call a slow stop
            # hung), so the genome closes when the warm-up ends, or not at all if the process exits first:
            # every committed write is already in the WAL
            if app.state.warmup.done():
                app.state.helix.close()
            else:
                app.state.warmup.add_done_callback(lambda _task: app.state.helix.close())
            telemetry.shutdown()
            current, stale, _ = signals.read_server_state(settings.home)
            announced = current is not None and current.state == "restarting" and current.pid == os.getpid()
            if not announced or stale:  # a planned restart keeps its announcement for the supervisor
                signals.write_server_state("stopped", pid=os.getpid(), reason="clean stop", actor="backend",
                                           home=settings.home)

    app = FastAPI(
        title="Helix Context",
        version="0.1.0",
        description="Local context server: expressed context, trust-verdict packets, and an OpenAI-compatible proxy.",
        lifespan=lifespan,
        **_no_native_telemetry(),
    )
    app.state.settings = settings
    log_redact.install()  # ?api_key= and other query values never reach the access log
    telemetry = Telemetry(settings, "helix-backend")
    app.state.telemetry = telemetry
    install_error_handlers(app)
    _add_routes(app, routes())
    app.add_middleware(GuardMiddleware, api_key=settings.api_key, max_body_bytes=settings.server.max_body_bytes,
                       hosts=HostPolicy.build(settings.server.host, settings.server.allowed_hosts))
    instrument_app(app, telemetry)  # also counts 401/413 answers
    app.add_middleware(BindCheck, settings=settings)  # outermost: refuses an open bind before the lifespan opens anything
    return app
