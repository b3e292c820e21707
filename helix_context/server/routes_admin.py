"""Admin routes (loopback-only unless HELIX_API_KEY is set; see security.py)."""

from __future__ import annotations

import os
from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from helix_context import signals
from helix_context.manager import HelixContextManager
from helix_context.server.deps import get_helix

router = APIRouter(prefix="/admin", tags=["admin"])


class AnnounceRestart(BaseModel):
    reason: str = Field("requested", max_length=500)
    actor: str = Field("api", max_length=100)
    expected_downtime_s: float = Field(5.0, ge=0, le=3600)


@router.post("/announce_restart")
def announce_restart(body: AnnounceRestart, helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    signal = signals.announce_restart(body.reason, body.actor, body.expected_downtime_s, os.getpid(),
                                      home=helix.settings.home)
    return signal.as_dict()


@router.get("/ribosome")
def ribosome_state(helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    return helix.ribosome_state()


@router.post("/ribosome/pause")
def ribosome_pause(helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    helix.set_ribosome_paused(True)
    return helix.ribosome_state()


@router.post("/ribosome/resume")
def ribosome_resume(helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    helix.set_ribosome_paused(False)
    return helix.ribosome_state()


@router.post("/refresh")
def refresh(helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    """Re-ingest every known source file (incremental: unchanged files are not re-read)."""
    return helix.refresh().to_dict()


@router.post("/vacuum")
def vacuum(helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    return helix.genome.vacuum()


@router.post("/checkpoint")
def checkpoint(helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    return helix.genome.checkpoint()


@router.post("/compact")
def compact(helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    """Mark genes whose source file changed or vanished since ingest."""
    return helix.compact()


@router.post("/kv-backfill")
def kv_backfill(helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    """Re-extract key=value facts (and missing embeddings) for stored genes."""
    return helix.kv_backfill()
