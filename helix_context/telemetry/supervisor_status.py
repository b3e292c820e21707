"""The supervisor's status snapshot as plain numbers, for its observable gauges and the dashboard.

Why apart: the snapshot is written by another process in its own shape (and older shapes);
reading it defensively is one job, shared by :class:`~helix_context.telemetry.Telemetry` and
the dashboard route.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from helix_context.telemetry.attrs import finite_number

_UP_STATES = frozenset({"running", "healthy", "ok", "up", "degraded", "ready", "adopted"})


def normalize_supervisor_status(snapshot: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Read the supervisor's status document (signals.read_supervisor_status) tolerantly.

    The document is the one supervisor/status.py describes (``backend.status/pid/restarts/
    health``, ``gpu.available/used_bytes/total_bytes/devices``, ``resident_models``,
    ``pressure.active``, ``ribosome_paused``). Also accepts the fields flat (``status``, ``pid``, ``restarts``) or under ``backend``;
    ``gpu`` as a dict (or a list of dicts: the first is used); models under
    ``models`` / ``resident_models`` / ``ollama.models``; ``pressure`` as a bool, a
    string (``ok``/``none``/``normal`` = no pressure) or a dict with ``active``.
    """
    if not isinstance(snapshot, Mapping):
        return None
    raw_backend = snapshot.get("backend")
    backend: Mapping[str, Any] = raw_backend if isinstance(raw_backend, Mapping) else {}
    status = backend.get("status", backend.get("state", snapshot.get("backend_status", snapshot.get("status"))))
    status = str(status) if status is not None else "unknown"
    up_raw = backend.get("up", snapshot.get("backend_up"))
    raw_health = backend.get("health")
    health: Mapping[str, Any] = raw_health if isinstance(raw_health, Mapping) else {}
    if up_raw is not None:
        up = bool(up_raw)
    else:  # running (or adopted) and not failing its health checks
        up = status.lower() in _UP_STATES and health.get("ok") is not False
    restarts = finite_number(backend.get("restarts", snapshot.get("restarts"))) or 0.0
    pid = backend.get("pid", snapshot.get("pid"))

    gpu_raw: Any = snapshot.get("gpu")
    if isinstance(gpu_raw, list):
        gpu_raw = gpu_raw[0] if gpu_raw else None
    gpu: dict[str, Any] = {"available": False, "used_bytes": None, "total_bytes": None, "name": "", "devices": []}
    if isinstance(gpu_raw, Mapping):
        used = finite_number(gpu_raw.get("used_bytes", gpu_raw.get("used")))
        total = finite_number(gpu_raw.get("total_bytes", gpu_raw.get("total")))
        available = gpu_raw.get("available")
        devices: list[dict[str, Any]] = []
        for i, dev in enumerate(gpu_raw.get("devices") or []):
            if isinstance(dev, Mapping):
                devices.append({"id": str(dev.get("index", i)), "name": str(dev.get("name", "") or ""),
                                "used_bytes": finite_number(dev.get("used_bytes")), "total_bytes": finite_number(dev.get("total_bytes"))})
        if not devices and (used is not None or total is not None):
            devices.append({"id": str(gpu_raw.get("index", gpu_raw.get("id", "0"))),
                            "name": str(gpu_raw.get("name", "") or ""), "used_bytes": used, "total_bytes": total})
        names = sorted({d["name"] for d in devices if d["name"]})
        gpu.update(
            available=bool(available) if available is not None else total is not None,
            used_bytes=used,
            total_bytes=total,
            name=str(gpu_raw.get("name") or (names[0] + (f" ×{len(devices)}" if len(devices) > 1 else "") if names else "")),
            devices=devices,
        )

    models_raw: Any = snapshot.get("models", snapshot.get("resident_models"))
    if models_raw is None and isinstance(snapshot.get("ollama"), Mapping):
        models_raw = snapshot["ollama"].get("models")
    models: list[dict[str, Any]] = []
    if isinstance(models_raw, list):
        for item in models_raw:
            if isinstance(item, Mapping):
                models.append({
                    "name": str(item.get("name", item.get("model", "?"))),
                    "size": finite_number(item.get("size")) or 0.0,
                    "size_vram": finite_number(item.get("size_vram")) or 0.0,
                })
            elif isinstance(item, str):
                models.append({"name": item, "size": 0.0, "size_vram": 0.0})

    pressure_raw = snapshot.get("pressure")
    pressure_detail: Any
    if isinstance(pressure_raw, Mapping):
        active = pressure_raw.get("active", pressure_raw.get("pressure", pressure_raw.get("high")))
        if active is None:
            level = str(pressure_raw.get("state", pressure_raw.get("level", "ok"))).lower()
            active = level not in ("ok", "none", "normal", "low", "")
        pressure, pressure_detail = bool(active), dict(pressure_raw)
    elif isinstance(pressure_raw, str):
        pressure, pressure_detail = pressure_raw.lower() not in ("ok", "none", "normal", "low", ""), pressure_raw
    else:
        pressure, pressure_detail = bool(pressure_raw), pressure_raw

    return {
        "backend_status": status,
        "backend_up": up,
        "pid": pid,
        "restarts": restarts,
        "gpu": gpu,
        "models": models,
        "pressure": pressure,
        "pressure_detail": pressure_detail,
        "ribosome_paused": bool(snapshot.get("ribosome_paused", False)),
        "written_at": finite_number(snapshot.get("written_at")),
    }
