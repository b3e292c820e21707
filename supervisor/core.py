"""Supervisor: keeps one backend serving, watches the GPU and Ollama, publishes the snapshot.

Threads:
  supervisor loop  owns every start/stop/restart decision (one place, no races);
                   wakes on a child's exit at once (a waiter thread per child),
                   on commands, and every LOOP_TICK_S
  health watcher   GET /health every health_interval_s while running → hung detection
  gpu watcher      NVML / nvidia-smi every gpu_interval_s
  ollama watcher   GET /api/ps every ollama_interval_s → dual-load pressure → action

Everything the outside world may ask for is a method that only queues a
command (`request_restart`, `request_start`, `shutdown`) or touches a flag
(`set_ribosome_paused`), so tray menu callbacks never block on a restart.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from helix_context import signals
from helix_context.telemetry import Telemetry

from supervisor.lifecycle import FATAL_LOG_LINES, BackendLifecycle

log = logging.getLogger("helix.supervisor")

LOOP_TICK_S = 0.1


class Supervisor(BackendLifecycle):
    """The public face: start/stop supervising, queue commands, and the loop that acts on them."""

    # ── lifecycle ─────────────────────────────────────────────────────────────

    def start(self) -> Supervisor:
        """Take the HELIX_HOME lock (raises LockHeld), start the loop and the watchers. Returns at once."""
        self.lock.acquire()
        # the supervisor's own metrics (backend up, restarts, GPU memory, resident models, pressure)
        # come from the same snapshot the tray reads; exported only when [telemetry] says so
        self.telemetry = Telemetry(self.settings, "helix-supervisor")
        self.telemetry.observe_supervisor(self.snapshot)
        self._stop.clear()
        self._done.clear()
        self._thread = threading.Thread(target=self._run, name="helix-supervisor", daemon=True)
        self._thread.start()
        if self._with_watchers:
            self._start_watchers()
        return self
    def shutdown(self, stop_backend: bool | None = None, timeout: float | None = None) -> None:
        """Stop supervising. The backend is stopped when we started it (default) or when asked."""
        with self._lock:
            if self._stop_backend_on_exit is None:
                self._stop_backend_on_exit = stop_backend
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout if timeout is not None else self.cfg.stop_timeout_s + 10.0)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the supervisor has shut down."""
        return self._done.wait(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def owns_backend(self) -> bool:
        with self._lock:
            return self.backend is not None and self.backend.owned

    # ── commands (any thread) ─────────────────────────────────────────────────

    def request_restart(self, reason: str = "requested from the tray") -> None:
        """Planned restart of a running backend; from FATAL or stopped, a fresh start."""
        self._commands.put(("restart", {"reason": reason}))
        self._wake.set()

    def request_start(self) -> None:
        self._commands.put(("start", {}))
        self._wake.set()

    def request_stop_backend(self) -> None:
        self._commands.put(("stop", {}))
        self._wake.set()

    def add_listener(self, callback: Callable[[dict[str, Any]], None]) -> None:
        """Called with each published snapshot (from the publishing thread)."""
        self._listeners.append(callback)
    # ── the loop ──────────────────────────────────────────────────────────────

    def _run(self) -> None:
        try:
            self._bring_up()
            while not self._stop.is_set():
                self._wake.wait(LOOP_TICK_S)
                self._wake.clear()
                if self._stop.is_set():
                    break
                self._handle_commands()
                with self._lock:
                    current = self.status
                if current == "running":
                    self._check_running()
                elif current == "restarting" and time.monotonic() >= self._restart_at:
                    self._start_backend()
                self._refresh_flags()
                self.publish()
        except Exception as exc:  # report, never die silently
            log.exception("supervisor loop failed")
            with self._lock:
                self.status = "fatal"
                self.last_error = f"supervisor error: {type(exc).__name__}: {exc}"
                self.last_log_lines = self.logs.tail(FATAL_LOG_LINES)
            self.exit_code = 1
        finally:
            self._finish()

    def _finish(self) -> None:
        for watcher in self._watchers:
            watcher.stop(timeout=1.0)
        with self._lock:
            bp = self.backend
            stop_it = self._stop_backend_on_exit
            if stop_it is None:
                stop_it = bp is not None and bp.owned
        if bp is not None and stop_it:
            self._stop_backend(bp, reason="supervisor stopping")
            with self._lock:
                self.status = "stopped"
                self.backend = None
        elif bp is not None:
            if bp.owned and bp.pid:  # ours, kept on request: it must not follow us out (lifeline.py)
                signals.release_backend(bp.pid, home=self.home)
                bp.release()
            log.info("leaving the backend (pid %s) running: %s", bp.pid,
                     "adopted, not ours to stop" if bp.adopted else "asked to keep it")
        with self._lock:
            if self.status != "fatal" and (self.backend is None or stop_it):
                self.status = "stopped"
            self._finished = True
        self.publish(force=True)
        self.client.close()
        if self.telemetry is not None:
            self.telemetry.shutdown()
        self.logs.close()
        self.lock.release()
        self._done.set()
