"""Application factory. The configured app object is the one piece of global state."""

from __future__ import annotations

import asyncio
import gc
import inspect
import logging
import os
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

from fastapi import FastAPI

from helix_context import signals
from helix_context.config import Settings, load_config
from helix_context.server import lifeline
from helix_context.server.errors import install_error_handlers
from helix_context import redact as log_redact
from helix_context.server.browser_guard import HostPolicy
from helix_context.server.security import GuardMiddleware, refuse_open_bind
from helix_context.telemetry import Telemetry, instrument_app

log = logging.getLogger("helix.server")

# Route modules register themselves here; each is a small APIRouter module. A module may also offer
# `fast_path(app) -> ASGI app`: a hot route answered before FastAPI's routing (routes_proxy does).
ROUTERS = (
    "helix_context.server.routes_health",
    "helix_context.server.routes_admin",
    "helix_context.server.routes_context",
    "helix_context.server.routes_dashboard",
    "helix_context.server.routes_genes",
    "helix_context.server.routes_proxy",
    "helix_context.server.routes_sources",
)


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


async def _prune_periodically(helix: Any) -> None:
    """Retention while the server runs, also when no request triggers it (see genome/retention.py)."""
    every = max(1.0, min(helix.settings.retention.prune_interval_s, 60.0))
    while True:
        await asyncio.sleep(every)
        if helix.retention.due():
            await asyncio.to_thread(helix.retention.run)


def start_sources(helix: Any) -> Any:
    """The living index: sources indexed, reconciled and watched from now on (sources/service.py)."""
    from helix_context.sources.service import SourcesService

    service = SourcesService(helix)
    service.start()
    return service


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or load_config()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        from helix_context.manager import HelixContextManager

        refuse_open_bind(settings)  # before anything is opened: `python -m uvicorn … --host 0.0.0.0` ends here
        app.state.started_at = time.time()
        helix = HelixContextManager(settings)
        app.state.helix = helix
        helix.actor = f"server pid {os.getpid()}"
        helix.telemetry = telemetry
        telemetry.observe_genome(helix.genome_gauges)
        # load models in the background: /health answers at once (the supervisor's restart clock is
        # ticking), and a request that needs a part waits on that part's lock, not on all of them
        app.state.warmup = asyncio.create_task(asyncio.to_thread(helix.load_parts))
        app.state.warmup.add_done_callback(_freeze_heap)
        app.state.sources = await asyncio.to_thread(start_sources, helix)
        signals.write_server_state("running", pid=os.getpid(), reason="started", actor="backend",
                                   home=settings.home)
        app.state.housekeeping = asyncio.create_task(_prune_periodically(helix))
        lifeline.watch_supervisor(os.environ, home=settings.home)  # exit with our supervisor (lifeline.py)
        log.info("helix backend serving on %s (pid %s)", settings.base_url, os.getpid())
        try:
            yield
        finally:
            app.state.housekeeping.cancel()
            await asyncio.to_thread(app.state.sources.stop)
            app.state.helix.close()
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
    import importlib

    for module_name in ROUTERS:
        module = importlib.import_module(module_name)
        app.include_router(module.router)
        fast_path = getattr(module, "fast_path", None)
        if fast_path is not None:  # added before the guard, so inside it: keys and body limits still apply
            app.add_middleware(fast_path)
    app.add_middleware(GuardMiddleware, api_key=settings.api_key, max_body_bytes=settings.server.max_body_bytes,
                       hosts=HostPolicy.build(settings.server.host, settings.server.allowed_hosts))
    instrument_app(app, telemetry)  # outermost: also counts 401/413 answers
    return app
