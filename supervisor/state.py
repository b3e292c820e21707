"""The supervisor's state, and the snapshot it publishes (status file, listeners, telemetry).

Why a base class: one loop thread makes every start/stop/restart decision, the watcher threads
report into the same fields, and all of it is guarded by one lock. The layers above
(``watching`` → ``lifecycle`` → ``core.Supervisor``) each add one concern over this state;
the state and its one serialised view live here.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from helix_context import signals
from helix_context.config import Settings
from helix_context.telemetry import Telemetry

from supervisor import pressure as pressure_rules
from supervisor import status as status_mod
from supervisor.client import BackendClient
from supervisor.lock import SupervisorLock
from supervisor.logs import BACKEND_LOG, LogCapture
from supervisor.policy import RestartPolicy
from supervisor.pressure import GpuReading, Pressure, ResidentModel
from supervisor.process import BackendProcess, backend_env, default_command
from supervisor.watchers import GpuProbe, OllamaWatcher

log = logging.getLogger("helix.supervisor")


class SupervisorState:
    """Everything the supervisor knows, guarded by ``_lock``; :meth:`snapshot` is its published view."""

    def __init__(self, settings: Settings, *, command: Sequence[str] | None = None,
                 env: Mapping[str, str] | None = None, headless: bool = True,
                 gpu_probe: GpuProbe | None = None, watchers: bool = True) -> None:
        self.settings = settings
        self.cfg = settings.supervisor
        self.home = settings.home
        self.headless = headless
        self.command = list(command) if command else default_command(settings)
        self.env = backend_env(settings, env)
        self.logs = LogCapture(settings.logs_dir / BACKEND_LOG, max_bytes=self.cfg.log_max_bytes,
                               backups=self.cfg.log_backups)
        self.policy = RestartPolicy.from_settings(self.cfg)
        self.lock = SupervisorLock(settings.home)
        self.client = BackendClient(settings.base_url, api_key=settings.api_key, timeout=self.cfg.health_timeout_s)
        self._gpu_probe = gpu_probe
        self._with_watchers = watchers

        self._lock = threading.RLock()
        self._publish_lock = threading.Lock()
        self._wake = threading.Event()
        self._commands: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()
        self._stop = threading.Event()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._listeners: list[Callable[[dict[str, Any]], None]] = []
        self._watchers: list[Any] = []
        self.ollama: OllamaWatcher | None = None
        self._stop_backend_on_exit: bool | None = None
        self.telemetry: Telemetry | None = None
        self.exit_code = 0

        # state (guarded by _lock)
        self.started_at = time.time()
        self.status = "stopped"
        self.backend: BackendProcess | None = None
        self.restarts = 0
        self.crashes = 0
        self.planned_restarts = 0
        self.last_error = ""
        self.last_exit_code: int | None = None
        self.last_log_lines: list[str] = []
        self._restart_at = 0.0
        self._running_since = 0.0  # monotonic; health results from probes started earlier are ignored
        self._health_failures = 0
        self._health: dict[str, Any] = {"ok": None, "status": None, "consecutive_failures": 0, "checked_at": None}
        self._health_pid: int | None = None
        self._hung = False
        self._announced: tuple[float, float, int | None] | None = None  # (at, expected_downtime_s, pid)
        self._state_mtime: float | None = None
        self.gpu = GpuReading(False, source="none", error="not read yet")
        self.models: list[ResidentModel] = []
        self._ollama: dict[str, Any] = {"url": settings.watchers.ollama_url, "reachable": None, "error": "",
                                        "checked_at": None}
        self.pressure: Pressure = pressure_rules.NO_PRESSURE
        self._pressure_since: float | None = None
        self._last_action: str | None = None
        self._last_action_at: float | None = None
        self._paused_by_pressure = False
        self.genes: int | None = None
        self._stats_ok = False
        self.ribosome_paused = signals.ribosome_paused(self.home)

        self._finished = False
        self._last_published: dict[str, Any] | None = None
        self._last_write = 0.0

    # ── snapshot ──────────────────────────────────────────────────────────────

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            bp = self.backend
            now = time.time()
            started = bp.started_at if bp is not None else None
            return {
                "version": status_mod.VERSION,
                "supervisor": {"pid": os.getpid(), "alive": not self._finished,
                               "started_at": self.started_at, "headless": self.headless,
                               "base_url": self.settings.base_url, "home": str(self.home)},
                "backend": {
                    "status": self.status,
                    "pid": (self._health_pid or bp.pid) if bp is not None else None,
                    "adopted": bool(bp is not None and bp.adopted),
                    "owned": bool(bp is not None and bp.owned),
                    "started_at": started,
                    "uptime_s": round(now - started, 1) if started and self.status == "running" else None,
                    "restarts": self.restarts,
                    "crashes": self.crashes,
                    "planned_restarts": self.planned_restarts,
                    "last_error": self.last_error,
                    "last_exit_code": self.last_exit_code,
                    "last_log_lines": list(self.last_log_lines) if self.status == "fatal" else [],
                    "health": dict(self._health),
                    "announced_restart": ({"at": self._announced[0], "expected_downtime_s": self._announced[1],
                                           "pid": self._announced[2]} if self._announced else None),
                    "log_file": str(self.logs.path),
                },
                "gpu": self.gpu.as_dict(),
                "ollama": dict(self._ollama),
                "resident_models": [m.as_dict() for m in self.models],
                "pressure": {
                    "active": self.pressure.active,
                    "reasons": list(self.pressure.reasons),
                    "offenders": list(self.pressure.offenders),
                    "action": self.settings.watchers.pressure_action,
                    "since": self._pressure_since,
                    "last_action": self._last_action,
                    "last_action_at": self._last_action_at,
                },
                "ribosome_paused": self.ribosome_paused,
                "genes": self.genes,
            }

    def publish(self, force: bool = False) -> dict[str, Any] | None:
        """Write the snapshot when it changed, when forced, or every HEARTBEAT_S."""
        with self._publish_lock:
            snap = self.snapshot()
            key = status_mod.comparable(snap)
            now = time.monotonic()
            if not force and key == self._last_published and now - self._last_write < status_mod.HEARTBEAT_S:
                return None
            try:
                status_mod.write(snap, self.home)
            except OSError as exc:
                log.warning("could not write the status snapshot: %s", exc)
            changed = key != self._last_published
            self._last_published = key
            self._last_write = now
        if changed or force:
            for callback in list(self._listeners):
                try:
                    callback(snap)
                except Exception:  # a listener must not break the supervisor
                    log.exception("status listener failed")
        return snap

    # ── helpers for callers and tests ─────────────────────────────────────────

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float) -> dict[str, Any] | None:
        """Poll the snapshot until `predicate(snapshot)` holds; the snapshot, or None on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            snap = self.snapshot()
            if predicate(snap):
                return snap
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.02)
