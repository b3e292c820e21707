"""Admin routes (loopback-only unless HELIX_API_KEY is set; see security.py)."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

from fastapi import Depends
from pydantic import BaseModel, Field

from helix_context import signals
from helix_context.manager import HelixContextManager
from helix_context.server.deps import get_helix


class AnnounceRestart(BaseModel):
    reason: str = Field("requested", max_length=500)
    actor: str = Field("api", max_length=100)
    expected_downtime_s: float = Field(5.0, ge=0, le=3600)


def announce_restart(body: AnnounceRestart, helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    state = signals.announce_restart(body.reason, body.actor, body.expected_downtime_s, os.getpid(),
                                     home=helix.settings.home)
    return state.as_dict()


async def shutdown(body: AnnounceRestart | None = None,
                   helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    """Stop this backend cleanly (the supervisor uses it where no console signal reaches a child: Windows).
    With a body, the stop is announced as a planned restart first."""
    if body is not None:
        signals.announce_restart(body.reason, body.actor, body.expected_downtime_s, os.getpid(),
                                 home=helix.settings.home)
    # raise SIGINT in this process after the answer is sent: uvicorn's own handler shuts down gracefully
    asyncio.get_running_loop().call_later(0.1, signal.raise_signal, signal.SIGINT)
    return {"stopping": True, "pid": os.getpid()}


def ribosome_state(helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    return helix.ribosome_state()


def ribosome_pause(helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    helix.set_ribosome_paused(True)
    return helix.ribosome_state()


def ribosome_resume(helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    helix.set_ribosome_paused(False)
    return helix.ribosome_state()


def refresh(helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    """Re-ingest every known source file (incremental: unchanged files are not re-read)."""
    return helix.refresh().to_dict()


def vacuum(helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    return helix.genome.vacuum()


def checkpoint(helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    return helix.genome.checkpoint()


def compact(helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    """Mark genes whose source file changed or vanished since ingest."""
    return helix.compact()


def kv_backfill(helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    """Re-extract key=value facts (and missing embeddings) for stored genes."""
    return helix.kv_backfill()
