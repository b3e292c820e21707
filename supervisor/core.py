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
import os
import queue
import threading
import time
from typing import Any, Callable, Mapping, Sequence

from helix_context import signals
from helix_context.bind_rule import bind_refusal
from helix_context.config import Settings
from helix_context.telemetry import Telemetry

from supervisor import pressure as pressure_rules
from supervisor import status as status_mod
from supervisor.client import BackendClient, Probe
from supervisor.lock import SupervisorLock
from supervisor.logs import BACKEND_LOG, LogCapture, tail_file
from supervisor.policy import RestartPolicy
from supervisor.pressure import GpuReading, Pressure, ResidentModel
from supervisor.process import IS_WINDOWS, BackendProcess, backend_env, default_command
from supervisor.watchers import GpuProbe, GpuWatcher, HealthWatcher, OllamaWatcher

log = logging.getLogger("helix.supervisor")

LOOP_TICK_S = 0.1
START_POLL_S = 0.05
FATAL_LOG_LINES = 40


class Supervisor:
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

    # ── lifecycle ─────────────────────────────────────────────────────────────

    def start(self) -> "Supervisor":
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

    def _start_watchers(self) -> None:
        w = self.settings.watchers
        health = HealthWatcher(self.settings.base_url, self.cfg.health_interval_s, self.cfg.health_timeout_s,
                               self._on_health, self._on_stats, self._should_probe, api_key=self.settings.api_key)
        gpu = GpuWatcher(w.gpu_interval_s, self._on_gpu, probe=self._gpu_probe)
        self.ollama = OllamaWatcher(w.ollama_url, w.ollama_interval_s, self._on_models,
                                    timeout_s=min(2.0, max(0.2, w.ollama_interval_s)))
        self._watchers = [health, gpu, self.ollama]
        for watcher in self._watchers:
            watcher.start()

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

    def set_ribosome_paused(self, paused: bool, actor: str = "tray") -> bool:
        """Through the backend when it answers (it owns the flag); the shared flag file otherwise."""
        path = "/admin/ribosome/pause" if paused else "/admin/ribosome/resume"
        probe = BackendClient(self.settings.base_url, api_key=self.settings.api_key,
                              timeout=self.cfg.health_timeout_s)
        try:
            result = probe.post(path)
        finally:
            probe.close()
        if not result.ok:
            log.info("backend did not take the ribosome %s (%s); setting the flag file",
                     "pause" if paused else "resume", result.error)
            signals.set_ribosome_paused(paused, actor=actor, home=self.home)
        with self._lock:
            self.ribosome_paused = signals.ribosome_paused(self.home)
            if not paused:
                self._paused_by_pressure = False
        self.publish()
        return self.ribosome_paused

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
        except Exception as exc:  # noqa: BLE001 - report, never die silently
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

    def _bring_up(self) -> None:
        """Adopt a backend already serving on our port; otherwise start one."""
        probe = self.client.health(timeout=min(1.0, self.cfg.health_timeout_s))
        if probe.ok:
            bp = BackendProcess.adopt(probe.pid)
            with self._lock:
                self.backend = bp
                self._health_pid = probe.pid
                self._set_running()
            log.info("adopted the backend already serving on %s (pid %s)", self.settings.base_url, probe.pid)
            self.publish(force=True)
            return
        orphan = self._starting_orphan()
        if orphan is not None:
            log.info("a backend (pid %s) from an earlier session is still starting; waiting for it", orphan)
            bp = BackendProcess.adopt(orphan)
            if self._wait_healthy(bp):
                with self._lock:
                    self.backend = bp
                    self._set_running()
                self.publish(force=True)
                return
            log.warning("backend pid %s never answered /health; stopping it", orphan)
            bp.stop(0.0, graceful=False)
        self._start_backend()

    def _starting_orphan(self) -> int | None:
        """A live backend pid stamped 'running' in server_state.json that does not answer yet."""
        sig, _stale, _age = signals.read_server_state(self.home)
        if sig is None or sig.state != "running" or not sig.pid or sig.pid == os.getpid():
            return None
        try:
            import psutil

            proc = psutil.Process(sig.pid)
            cmdline = " ".join(proc.cmdline())
        except Exception:  # noqa: BLE001 - gone, or not ours to look at
            return None
        return sig.pid if "helix_context.server" in cmdline else None

    def _set_running(self) -> None:
        self.status = "running"
        self._running_since = time.monotonic()
        self._health_failures = 0
        self._hung = False
        self._health = {"ok": True, "status": "ok", "consecutive_failures": 0, "checked_at": time.time()}

    def _wait_healthy(self, bp: BackendProcess) -> bool:
        """Poll /health every START_POLL_S until it answers, the process exits, or start_timeout_s."""
        deadline = time.monotonic() + self.cfg.start_timeout_s
        timeout = min(1.0, self.cfg.health_timeout_s)
        while not self._stop.is_set():
            if not bp.alive():
                return False
            probe = self.client.health(timeout=timeout)
            if probe.ok and (probe.pid is None or bp.pid is None or probe.pid in bp.pids() or not bp.owned):
                with self._lock:
                    self._health_pid = probe.pid
                return True
            if time.monotonic() >= deadline:
                return False
            self._wake.wait(START_POLL_S)
            self._wake.clear()
        return False

    def _start_backend(self) -> None:
        refused = bind_refusal(self.settings.server.host, self.settings.api_key)
        if refused is not None:  # the backend would refuse too: say why once, instead of a crash loop
            with self._lock:
                self.status = "fatal"
                self.last_error = refused
                self.last_log_lines = []
            log.error("%s", refused)
            self.publish(force=True)
            return
        with self._lock:
            self.status = "starting"
            self._announced = None
            self._health_pid = None
            self.last_log_lines = []
        self.publish(force=True)
        try:
            bp = BackendProcess.spawn(self.command, self.env, self.logs, on_exit=lambda _bp: self._wake.set(),
                                      cwd=None)
        except OSError as exc:
            self._fail(f"could not start the backend: {exc}")
            return
        with self._lock:
            self.backend = bp
        log.info("started backend pid %s: %s", bp.pid, " ".join(self.command))
        if self._wait_healthy(bp):
            with self._lock:
                if self.backend is bp:
                    self._set_running()
            log.info("backend pid %s serving on %s", bp.pid, self.settings.base_url)
            self.publish(force=True)
            return
        if self._stop.is_set():
            return
        if bp.alive():
            bp.stop(0.0, graceful=False)
            self._fail(f"backend did not answer /health within {self.cfg.start_timeout_s:g}s; killed it")
        else:
            self._fail(f"backend exited during start-up (exit code {bp.exit_code})")

    def _fail(self, reason: str) -> None:
        """Count a failure; schedule the restart per the policy, or go FATAL."""
        decision = self.policy.record_failure(time.monotonic())
        with self._lock:
            self.crashes += 1
            bp = self.backend
            if bp is not None and bp.exit_code is not None:
                self.last_exit_code = bp.exit_code
            self.backend = None
            if decision.fatal:
                self.status = "fatal"
                self.last_error = f"{reason}; {decision.reason}"
                self.last_log_lines = self.logs.tail(FATAL_LOG_LINES) or tail_file(self.logs.path, FATAL_LOG_LINES)
                log.error("backend FATAL: %s", self.last_error)
            else:
                self.status = "restarting"
                self.last_error = reason
                self.restarts += 1
                self._restart_at = time.monotonic() + decision.delay_s
                log.warning("%s; restarting in %.2fs (failure %d in the window)", reason, decision.delay_s,
                            decision.failures_in_window)
        self._wake.set()
        self.publish(force=True)

    def _check_running(self) -> None:
        with self._lock:
            bp = self.backend
            hung = self._hung
        if bp is None:
            return
        self._watch_announcements(bp)
        if not bp.alive():
            if self._exit_was_planned(bp):
                with self._lock:
                    self.planned_restarts += 1
                    self.restarts += 1
                    self.last_exit_code = bp.exit_code
                    self.backend = None
                    self.status = "restarting"
                    self._restart_at = time.monotonic()
                log.info("backend pid %s exited after an announced restart; starting it again", bp.pid)
                self._wake.set()
                self.publish(force=True)
            else:
                code = bp.exit_code
                self._fail(f"backend pid {bp.pid} exited unexpectedly"
                           + (f" (exit code {code})" if code is not None else ""))
            return
        if hung:
            n = self.cfg.hung_after_failures
            log.warning("backend pid %s missed %d health checks: hung; killing it", bp.pid, n)
            bp.stop(0.0, graceful=False)
            with self._lock:
                self._hung = False
            self._fail(f"backend pid {bp.pid} stopped answering /health ({n} checks in a row): hung, killed")

    def _watch_announcements(self, bp: BackendProcess) -> None:
        """Remember a restart announcement for our backend the moment it appears: a clean
        shutdown then overwrites server_state with "stopped" before the process exits."""
        path = signals.signals_dir(self.home) / signals.SERVER_STATE
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return
        if mtime == self._state_mtime:
            return
        self._state_mtime = mtime
        sig, stale, _age = signals.read_server_state(self.home)
        if sig is not None and sig.state == "restarting" and not stale and self._is_our_pid(sig.pid, bp):
            with self._lock:
                self._announced = (sig.at, sig.expected_downtime_s, sig.pid)

    def _is_our_pid(self, pid: int | None, bp: BackendProcess) -> bool:
        return pid is None or pid == bp.pid or pid == self._health_pid

    def _exit_was_planned(self, bp: BackendProcess) -> bool:
        if bp.stopping:
            return True
        sig, stale, _age = signals.read_server_state(self.home)
        if sig is not None and sig.state == "restarting" and not stale and self._is_our_pid(sig.pid, bp):
            return True
        with self._lock:
            announced = self._announced
        if announced is not None:
            at, downtime, _pid = announced
            if time.time() - at <= downtime + signals.STALE_GRACE_S:
                return True
        return False

    def _handle_commands(self) -> None:
        while True:
            try:
                name, args = self._commands.get_nowait()
            except queue.Empty:
                return
            if name == "restart":
                self._do_restart(args.get("reason", "requested"))
            elif name == "start":
                with self._lock:
                    if self.status in ("fatal", "stopped"):
                        self.policy.reset()
                        self.status = "restarting"
                        self._restart_at = time.monotonic()
                        self.last_log_lines = []
                self._wake.set()
            elif name == "stop":
                with self._lock:
                    bp = self.backend
                if bp is not None:
                    self._stop_backend(bp, reason="stopped from the tray")
                with self._lock:
                    self.backend = None
                    self.status = "stopped"
                self.publish(force=True)

    def _do_restart(self, reason: str) -> None:
        with self._lock:
            current = self.status
            bp = self.backend
        if current in ("fatal", "stopped") or bp is None:
            self._commands.put(("start", {}))
            return
        if current in ("starting", "restarting"):
            return  # already on its way up
        log.info("restarting the backend (pid %s): %s", bp.pid, reason)
        with self._lock:
            self.status = "restarting"
        self.publish(force=True)
        self._stop_backend(bp, reason=reason)
        with self._lock:
            self.planned_restarts += 1
            self.restarts += 1
            self.last_exit_code = bp.exit_code
            self.backend = None
            self._restart_at = time.monotonic()
        self._start_backend()

    def _stop_backend(self, bp: BackendProcess, *, reason: str) -> None:
        """Announce, terminate gracefully, wait stop_timeout_s, then kill the whole tree."""
        pid = self._health_pid or bp.pid
        try:
            signals.announce_restart(reason, "supervisor", expected_downtime_s=self.cfg.stop_timeout_s + 5.0,
                                     pid=pid, home=self.home)
        except OSError as exc:
            log.warning("could not write the restart announcement: %s", exc)
        if IS_WINDOWS and bp.alive():
            # no console signal reaches a windowless child on Windows: ask the backend to stop itself
            # (uvicorn shuts down cleanly), then bp.stop() only waits and cleans up the tree
            BackendClient(self.settings.base_url, api_key=self.settings.api_key,
                          timeout=self.cfg.health_timeout_s).post("/admin/shutdown")
        bp.stop(self.cfg.stop_timeout_s, graceful=True)
        sig, _stale, _age = signals.read_server_state(self.home)
        if sig is not None and sig.state == "restarting" and sig.pid == pid:
            # killed before it could stamp its own clean stop
            signals.write_server_state("stopped", pid=pid, reason=reason, actor="supervisor", home=self.home)

    # ── watcher callbacks (watcher threads) ───────────────────────────────────

    def _should_probe(self) -> bool:
        with self._lock:
            return self.status == "running"

    def _on_health(self, started: float, probe: Probe) -> None:
        with self._lock:
            if self.status != "running" or started < self._running_since:
                return  # a probe of an earlier backend
            if probe.ok:
                self._health_failures = 0
                self._health_pid = probe.pid or self._health_pid
                genes = (probe.body.get("genome") or {}).get("genes")
                if isinstance(genes, int) and not self._stats_ok:
                    self.genes = genes  # /health counts genes too; /stats wins when it answers
            else:
                self._health_failures += 1
                if self._health_failures >= self.cfg.hung_after_failures:
                    self._hung = True
                    self._wake.set()
            self._health = {"ok": probe.ok, "status": probe.body.get("status") if probe.ok else None,
                            "consecutive_failures": self._health_failures, "checked_at": time.time(),
                            "error": probe.error}
        self.publish()

    def _on_stats(self, probe: Probe) -> None:
        genes = probe.body.get("total_genes") if probe.ok else None
        with self._lock:
            self._stats_ok = isinstance(genes, int)
            if isinstance(genes, int):
                self.genes = genes
        self.publish()

    def _on_gpu(self, reading: GpuReading) -> None:
        with self._lock:
            self.gpu = reading
        self.publish()

    def _on_models(self, models: list[ResidentModel] | None, error: str) -> None:
        w = self.settings.watchers
        with self._lock:
            self._ollama = {"url": w.ollama_url, "reachable": models is not None, "error": error,
                            "checked_at": time.time()}
            self.models = list(models or [])
            gpu = self.gpu
            previous = self.pressure
        verdict = pressure_rules.evaluate(self.models, gpu, vram_pressure_pct=w.vram_pressure_pct,
                                          chat_model=w.chat_model, allowed_models=w.allowed_models)
        with self._lock:
            self.pressure = verdict
            if verdict.active and not previous.active:
                self._pressure_since = time.time()
            elif not verdict.active:
                self._pressure_since = None
        if verdict.active and verdict.reasons != previous.reasons:
            log.warning("GPU pressure: %s", "; ".join(verdict.reasons))
            self._act_on_pressure(models or [])
        elif not verdict.active and previous.active:
            log.info("GPU pressure cleared")
            with self._lock:
                resume = self._paused_by_pressure
            if resume:
                self.set_ribosome_paused(False, actor="supervisor (pressure cleared)")
        self.publish()

    def _act_on_pressure(self, models: list[ResidentModel]) -> None:
        action = self.settings.watchers.pressure_action
        done = "notified"
        if action == "pause_ribosome":
            if signals.ribosome_paused(self.home):
                done = "ribosome already paused"
            else:
                self.set_ribosome_paused(True, actor="supervisor (GPU pressure)")
                with self._lock:
                    self._paused_by_pressure = True
                done = "paused the ribosome"
        elif action == "unload_ribosome":
            model = self.settings.ribosome.model
            if not model:
                done = "no ribosome model configured to unload"
            elif not pressure_rules.model_is_resident(model, models):
                done = f"ribosome model {model} is not resident"
            elif self.ollama is not None and self.ollama.unload(model):
                done = f"unloaded {model}"
            else:
                done = f"could not unload {model}"
        with self._lock:
            self._last_action = done
            self._last_action_at = time.time()
        log.info("pressure action (%s): %s", action, done)

    def _refresh_flags(self) -> None:
        paused = signals.ribosome_paused(self.home)
        with self._lock:
            self.ribosome_paused = paused

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
                except Exception:  # noqa: BLE001 - a listener must not break the supervisor
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
