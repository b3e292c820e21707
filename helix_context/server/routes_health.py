"""GET /health, /health/history, /stats."""

from __future__ import annotations

import os
import time
from typing import Any

from fastapi import Depends, Request

from helix_context.manager import HelixContextManager
from helix_context.server.deps import get_helix
from helix_context.server.security import request_has_key


def health(request: Request, helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    """ok / degraded, each optional part, the upstream, the PID.

    /health answers without a key (liveness for the supervisor and load balancers); where a key is
    configured, a caller without it learns only whether the server is up, never where the genome
    lives, which upstream it talks to, or the process id."""
    report = helix.health()
    if not request_has_key(request.scope.get("headers", ()), helix.settings.api_key):
        return {"status": report["status"]}
    report["pid"] = os.getpid()
    report["uptime_s"] = round(time.time() - request.app.state.started_at, 3)
    return report


def health_history(helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    return {"history": helix.health_history()}
