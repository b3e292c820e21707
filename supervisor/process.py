"""BackendProcess: one backend, either spawned by us (a child) or adopted (already serving).

Spawn: `sys.executable -m uvicorn helix_context.server:app --host H --port P`,
no shell, in its own session / process group, output into the LogCapture.
Stop: terminate gracefully, wait, then kill the whole process tree — the list
of descendants is taken *before* the parent goes, because orphans are
re-parented and could no longer be found through it. Works the same on
Windows and Linux (psutil; no signals beyond what both have).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence

import psutil

from helix_context.config import Settings
from helix_context.signals import SUPERVISOR_PID_ENV

from supervisor import winjob
from supervisor.logs import LogCapture

log = logging.getLogger("helix.supervisor")

IS_WINDOWS = sys.platform == "win32"


def default_command(settings: Settings) -> list[str]:
    return [sys.executable, "-m", "uvicorn", "helix_context.server:app",
            "--host", settings.server.host, "--port", str(settings.server.port)]


def backend_env(settings: Settings, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment: ours, plus what the supervisor decides for its backend."""
    env = dict(os.environ if base is None else base)
    env["HELIX_HOME"] = str(settings.home)
    if settings.config_path is not None:
        env["HELIX_CONFIG"] = str(settings.config_path)  # the file these settings came from
    env["HELIX_SERVER_HOST"] = settings.server.host
    env["HELIX_SERVER_PORT"] = str(settings.server.port)
    if settings.supervisor.budget_zone:
        env["HELIX_BUDGET_ZONE"] = "1"
    env["HELIX_OTEL_ENABLED"] = "1" if settings.telemetry.enabled else "0"
    env["HELIX_OTEL_ENDPOINT"] = settings.telemetry.endpoint
    env["HELIX_TELEMETRY_PROTOCOL"] = settings.telemetry.protocol
    env[SUPERVISOR_PID_ENV] = str(os.getpid())  # the backend exits if this process dies (lifeline.py)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("PYTHONIOENCODING", "utf-8")
    return env


def popen_options(platform: str = sys.platform) -> dict:
    """How a backend is started: on Windows without a console window and in its own process
    group; elsewhere in its own session (our Ctrl-C is ours to handle)."""
    if platform == "win32":
        return {"creationflags": (getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0x200)
                                  | getattr(subprocess, "CREATE_NO_WINDOW", 0x08000000))}
    return {"start_new_session": True}


def tree_of(root: psutil.Process | None) -> list[psutil.Process]:
    """The process and all its descendants (taken now: orphans cannot be found later)."""
    if root is None:
        return []
    try:
        return [root, *root.children(recursive=True)]
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return [root]


def kill_all(procs: Sequence[psutil.Process], timeout_s: float = 2.0) -> None:
    """Kill every process in `procs` that still runs (pid reuse is guarded by psutil)."""
    for p in procs:
        try:
            p.kill()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    others = [p for p in procs if p.pid != os.getpid()]
    try:
        psutil.wait_procs(others, timeout=timeout_s)
    except Exception:  # best effort
        pass


class BackendProcess:
    """A backend we started (`spawn`) or found serving (`adopt`)."""

    def __init__(self, *, popen: subprocess.Popen | None = None, proc: psutil.Process | None = None,
                 adopted: bool = False, started_at: float | None = None) -> None:
        self.popen = popen
        self.adopted = adopted
        self.started_at = started_at if started_at is not None else time.time()
        self._proc = proc
        self.exit_code: int | None = None
        self.job: winjob.KillOnCloseJob | None = None  # Windows: the kernel kills the backend if we die
        self._exited = threading.Event()
        self._stopping = False
        if popen is not None and proc is None:
            try:
                self._proc = psutil.Process(popen.pid)
            except psutil.NoSuchProcess:
                self._proc = None

    # ── creation ──
    @classmethod
    def spawn(cls, command: Sequence[str], env: Mapping[str, str], logs: LogCapture,
              on_exit: Callable[[BackendProcess], None] | None = None, cwd: str | None = None) -> BackendProcess:
        kwargs = popen_options()
        logs.mark(f"starting: {' '.join(command)}")
        popen = subprocess.Popen(list(command), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, env=dict(env), cwd=cwd, close_fds=True, **kwargs)
        bp = cls(popen=popen)
        bp.job = winjob.create_job()
        winjob.attach(bp.job, popen)
        assert popen.stdout is not None
        pump = logs.follow(popen.stdout, name=f"backend-log-{popen.pid}")

        def waiter() -> None:
            code = popen.wait()
            # let the last lines (often the reason it died) reach the log before anyone reads the tail;
            # bounded, since a grandchild may still hold the pipe open
            pump.join(timeout=0.5)
            bp.exit_code = code
            bp._exited.set()
            logs.mark(f"pid {popen.pid} exited with code {code}")
            if on_exit is not None:
                on_exit(bp)

        threading.Thread(target=waiter, name=f"backend-wait-{popen.pid}", daemon=True).start()
        return bp

    @classmethod
    def adopt(cls, pid: int | None) -> BackendProcess:
        proc = None
        started = None
        if pid:
            try:
                proc = psutil.Process(pid)
                started = proc.create_time()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                proc = None
        return cls(proc=proc, adopted=True, started_at=started)

    # ── state ──
    @property
    def pid(self) -> int | None:
        if self.popen is not None:
            return self.popen.pid
        return self._proc.pid if self._proc is not None else None

    @property
    def owned(self) -> bool:
        return self.popen is not None

    def alive(self) -> bool:
        if self.popen is not None:
            return not self._exited.is_set()  # set by the waiter thread once the exit and its last log lines are in
        if self._proc is None:
            return True  # adopted without a pid we can see: health is the only judge
        try:
            return self._proc.is_running() and self._proc.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False
        except psutil.AccessDenied:
            return True

    def wait(self, timeout: float | None = None) -> bool:
        """True once the process has exited."""
        if self.popen is not None:
            return self._exited.wait(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.alive():
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def pids(self) -> list[int]:
        if self._proc is None:
            return []
        try:
            return [self._proc.pid, *(c.pid for c in self._proc.children(recursive=True))]
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return [self._proc.pid]

    def release(self) -> None:
        """We quit and leave this backend serving on purpose: its job object must not kill it with us."""
        if self.job is not None:
            try:
                self.job.release()
            except OSError as exc:
                log.warning("could not release backend pid %s from its job object: %s", self.pid, exc)

    # ── stopping ──
    def _graceful_signal(self) -> None:
        if self.popen is not None:
            if IS_WINDOWS:
                # A console-less child cannot receive CTRL_BREAK; TerminateProcess is what Windows has.
                # SQLite WAL keeps committed genes safe either way.
                self.popen.terminate()
            else:
                self.popen.send_signal(signal.SIGTERM)
        elif self._proc is not None:
            self._proc.terminate()

    def stop(self, timeout_s: float, *, graceful: bool = True) -> None:
        """Terminate (graceful: SIGTERM and wait `timeout_s`), then kill the whole tree."""
        self._stopping = True
        procs = tree_of(self._proc)
        if not procs and self.popen is None:
            return
        if graceful and self.alive():
            try:
                self._graceful_signal()
            except (psutil.NoSuchProcess, ProcessLookupError, OSError):
                pass
            if not self.wait(timeout_s):
                log.warning("backend pid %s did not stop within %.1fs; killing its process tree", self.pid, timeout_s)
        # our own child is reaped by its waiter thread (Popen.wait); psutil must not reap it first
        kill_all([p for p in procs if self.popen is None or p.pid != self.popen.pid], timeout_s=2.0)
        if self.popen is not None:
            if self.popen.poll() is None:
                try:
                    self.popen.kill()
                except OSError:
                    pass
            self._exited.wait(max(2.0, timeout_s))

    @property
    def stopping(self) -> bool:
        return self._stopping
