"""The backend's lifecycle: bring it up (or adopt one), wait for health, detect crashes and hangs, restart, stop.

Why apart: these are the decisions only the supervisor loop takes, one at a time, with the
restart policy (backoff, flapping → fatal) and the restart announcements the backend writes.
"""

from __future__ import annotations

import errno
import logging
import os
import queue
import shutil
import socket
import time

from helix_context import signals
from helix_context.bind_rule import bind_refusal
from helix_context.backend_identity import other_genome, own_genome

from supervisor.client import BackendClient
from supervisor.logs import tail_file
from supervisor.process import IS_WINDOWS, BackendProcess
from supervisor.watching import SupervisorWatching

log = logging.getLogger("helix.supervisor")

START_POLL_S = 0.05
MIN_FREE_FOR_A_NEW_GENOME = 1 << 20  # a new genome's schema, WAL and first pages
FATAL_LOG_LINES = 40


class BackendLifecycle(SupervisorWatching):
    """Start, watch, restart and stop the backend process; called from the supervisor loop only."""

    def _bring_up(self) -> None:
        """Adopt a backend already serving on our port; otherwise start one."""
        probe = self.client.health(timeout=min(1.0, self.cfg.health_timeout_s))
        if probe.ok:
            other = other_genome(probe.body, self.settings)
            if other is not None:  # another HELIX_HOME's backend: neither serve nor (on restart) kill it
                self._refuse(f"port {self.settings.server.port} is taken by a Helix backend (pid {probe.pid}) that serves "
                             f"{other}, not this HELIX_HOME's genome {own_genome(self.settings)}; stop that backend or set "
                             "[server] port (HELIX_SERVER_PORT) to another port")
                return
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
        taken = self._port_taken()  # checked before the first start only: a restart follows our own backend
        if taken is not None:
            self._refuse(taken)
            return
        self._start_backend()

    def _after_fatal(self) -> str:
        """What to do once the cause is fixed: a headless supervisor has ended by then, a tray's waits."""
        return ("fix the cause, then start the supervisor again" if self.headless
                else "fix the cause, then choose Restart backend in the tray menu")

    def _refuse(self, reason: str) -> None:
        """FATAL at once, with the reason: a start that cannot succeed is not retried into a crash loop."""
        with self._lock:
            self.status = "fatal"
            self.last_error = reason
            self.last_log_lines = []
        log.error("%s", reason)
        self.publish(force=True)

    def _starting_orphan(self) -> int | None:
        """A live backend pid stamped 'running' in server_state.json that does not answer yet."""
        sig, _stale, _age = signals.read_server_state(self.home)
        if sig is None or sig.state != "running" or not sig.pid or sig.pid == os.getpid():
            return None
        try:
            import psutil

            proc = psutil.Process(sig.pid)
            cmdline = " ".join(proc.cmdline())
        except Exception:  # gone, or not ours to look at
            return None
        return sig.pid if "helix_context.server" in cmdline else None

    def _set_running(self) -> None:
        self.policy.started()
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
        refused = bind_refusal(self.settings.server.host, self.settings.api_key) or self._no_room_for_a_new_genome()
        if refused is not None:  # the backend would fail too: say why once, instead of a crash loop
            self._refuse(refused)
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
            self._fail(f"backend did not answer /health within {self.cfg.start_timeout_s:g}s; killed it",
                       during_start=True)
        else:
            self._fail(f"backend exited during start-up (exit code {bp.exit_code})", during_start=True)

    def _port_taken(self) -> str | None:
        """Why the backend cannot listen on its port (another program holds it), or None.

        Bound as uvicorn binds (SO_REUSEADDR off Windows, so a port in TIME_WAIT after our own backend's exit
        is free). Why: six starts died on "address already in use" and the FATAL line said only "exit code 3"."""
        host, port = self.settings.server.host or "127.0.0.1", self.settings.server.port
        family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            if not IS_WINDOWS:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host.strip("[]"), port))
            except OSError as exc:
                if exc.errno not in (errno.EADDRINUSE, getattr(errno, "WSAEADDRINUSE", -1), errno.EACCES):
                    return None  # not ours to judge (an address this machine lacks): uvicorn will say
                return (f"port {port} on {host} is in use by another program ({exc.strerror}); stop it or set "
                        "[server] port (HELIX_SERVER_PORT) to a free port")
        return None

    def _no_room_for_a_new_genome(self) -> str | None:
        """A genome that does not exist yet on a full disk: the backend cannot create it, so it is not started.
        (An existing genome on a full disk is served read-only: genome/store.py.)"""
        if self.settings.genome.url or self.settings.genome_path.exists():
            return None
        folder = self.settings.genome_path.parent
        try:
            free = shutil.disk_usage(folder if folder.exists() else self.settings.home).free
        except OSError:
            return None
        if free >= MIN_FREE_FOR_A_NEW_GENOME:
            return None
        return (f"no space left to create the genome {self.settings.genome_path} ({free} bytes free): free some disk "
                "space, or set HELIX_HOME to a folder on another disk")

    def _fail(self, reason: str, *, during_start: bool = False) -> None:
        """Count a failure; schedule the restart per the policy, or go FATAL."""
        decision = self.policy.record_failure(time.monotonic(), during_start=during_start)
        with self._lock:
            self.crashes += 1
            bp = self.backend
            if bp is not None and bp.exit_code is not None:
                self.last_exit_code = bp.exit_code
            self.backend = None
            if decision.fatal:
                self.status = "fatal"
                self.last_error = f"{reason}; {decision.reason}: {self._after_fatal()}"
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
