"""The supervisor's status snapshot: one JSON document, the single source for the tray,
`helix-status`, the dashboard and telemetry.

Written atomically (signals.write_supervisor_status) on every change and at
least every HEARTBEAT_S seconds, at HELIX_HOME/shared/signals/supervisor_status.json.

Readers (tray, helix-status, dashboard, telemetry) take this file as the one
source of supervisor state; "alive": false marks the last words of a supervisor
that has exited. Shape (version 1)::

    {
      "version": 1,
      "written_at": 1795320000.1,           # added by signals.write_supervisor_status
      "supervisor": {"pid": 123, "alive": true, "started_at": ..., "headless": true,
                     "base_url": "http://127.0.0.1:11437", "home": "/home/me/.helix"},
      "backend": {
        "status": "starting|running|restarting|stopped|fatal",
        "pid": 456, "adopted": false, "owned": true,
        "started_at": ..., "uptime_s": 12.3,
        "restarts": 2,            # every replacement start (crash or planned)
        "crashes": 1,             # unexpected exits, hangs, failed starts
        "planned_restarts": 1,    # announced restarts and "Restart backend"
        "last_error": "...", "last_exit_code": -9,
        "last_log_lines": [...],  # the backend log's last lines, when fatal
        "health": {"ok": true, "status": "ok", "consecutive_failures": 0, "checked_at": ...},
        "announced_restart": null,  # {"at", "expected_downtime_s", "pid"} once a restart is announced
        "log_file": ".../logs/backend.log"
      },
      "gpu": {"available": false, "used_bytes": null, "total_bytes": null, "used_pct": null,
              "source": "nvml|nvidia-smi|none", "devices": [...], "error": "..."},
      "ollama": {"url": "...", "reachable": false, "error": "...", "checked_at": ...},
      "resident_models": [{"name", "model", "size", "size_vram", "expires_at", "context_length"}],
      "pressure": {"active": false, "reasons": [], "offenders": [], "action": "notify",
                   "since": null, "last_action": null, "last_action_at": null},
      "ribosome_paused": false,
      "genes": 1234               # GET /stats total_genes (else /health genome.genes); null when unknown
    }
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helix_context import signals

VERSION = 1
HEARTBEAT_S = 2.0
STATUSES = ("starting", "running", "restarting", "stopped", "fatal")

# keys that change every second without anything having happened
_VOLATILE = {("backend", "uptime_s"), ("backend", "health"), ("ollama", "checked_at")}


def comparable(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The snapshot without fields that tick by themselves (to decide "changed?")."""
    out: dict[str, Any] = {}
    for key, value in snapshot.items():
        if isinstance(value, dict):
            out[key] = {k: v for k, v in value.items() if (key, k) not in _VOLATILE}
        else:
            out[key] = value
    out["backend"] = {**out.get("backend", {}),
                      "health_ok": (snapshot.get("backend", {}).get("health") or {}).get("ok")}
    return out


def write(snapshot: dict[str, Any], home: Path) -> None:
    signals.write_supervisor_status(snapshot, home=home)


def read(home: Path | None = None) -> dict[str, Any] | None:
    return signals.read_supervisor_status(home)


def icon_state(snapshot: dict[str, Any] | None) -> str:
    """running | starting | pressure | stopped | fatal — what the tray's icon colour shows."""
    if not snapshot:
        return "stopped"
    status = (snapshot.get("backend") or {}).get("status", "stopped")
    if status == "fatal":
        return "fatal"
    if status == "stopped":
        return "stopped"
    if status in ("starting", "restarting"):
        return "starting"
    if (snapshot.get("pressure") or {}).get("active"):
        return "pressure"
    return "running"
