"""GET /health, /health/history, /stats."""

from __future__ import annotations

import os
import time
from typing import Any

from fastapi import APIRouter, Depends, Request

from helix_context.manager import HelixContextManager
from helix_context.server.deps import get_helix

router = APIRouter(tags=["health"])


@router.get("/health")
def health(request: Request, helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    """ok / degraded, each optional part, the upstream, the PID."""
    report = helix.health()
    report["pid"] = os.getpid()
    report["uptime_s"] = round(time.time() - request.app.state.started_at, 3)
    return report


@router.get("/health/history")
def health_history(helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    return {"history": helix.health_history()}
