"""The backend exits when the supervisor that started it dies.

Why: the supervisor owns the backend's output pipe, its restarts and its stop. If the supervisor
is killed (``kill -9``, a crash, the tray's process tree ended), a backend left behind keeps the
port and the genome, writes into a pipe nobody reads, and nothing would ever stop it.

How: the supervisor puts its pid in ``HELIX_SUPERVISOR_PID``; a daemon thread here checks every
half second whether that process is still our parent (POSIX: an orphan is re-parented, so
``os.getppid()`` changes; Windows: a handle on the supervisor process becomes signalled). When it
is gone the backend stops gracefully (the same SIGINT path as ``/admin/shutdown``), and exits
hard if that has not finished within a grace period. A supervisor that quits but keeps its backend
on purpose says so first (``signals.release_backend``), and the backend stays. On Windows the
supervisor also puts the backend in a kill-on-close job object (supervisor/winjob.py), which the
kernel enforces even if this thread never runs. No prctl(PR_SET_PDEATHSIG): it fires when the
parent *thread* that spawned us ends, and the supervisor spawns from a worker thread.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from helix_context import signals
from helix_context.signals import SUPERVISOR_PID_ENV

log = logging.getLogger("helix.server")

POLL_S = 0.5
GRACE_S = 15.0


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _posix_alive(pid: int) -> Callable[[], bool]:
    parent = os.getppid()
    if parent == pid:  # the usual case: re-parenting is the one sure sign, immune to pid reuse
        return lambda: os.getppid() == pid
    # started through a wrapper (a shell, a launcher): the wrapper going or the supervisor going
    return lambda: os.getppid() == parent and _pid_exists(pid)


def _windows_alive(pid: int) -> Callable[[], bool]:
    import ctypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]  # Windows only: the Linux stubs have no ctypes.WinDLL
    synchronize, wait_timeout = 0x00100000, 0x00000102
    handle = kernel32.OpenProcess(synchronize, False, pid)
    if not handle:
        return lambda: False  # already gone (or never ours to see)
    return lambda: kernel32.WaitForSingleObject(handle, 0) == wait_timeout


def parent_alive_check(pid: int, platform: str = sys.platform) -> Callable[[], bool]:
    """A cheap callable answering "is the supervisor `pid` still there?" for this platform."""
    return _windows_alive(pid) if platform == "win32" else _posix_alive(pid)


def _stop_self(grace_s: float) -> None:
    """Graceful stop (uvicorn's SIGINT handler), then a hard exit if it hangs."""
    signal.raise_signal(signal.SIGINT)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        time.sleep(0.1)
    os._exit(70)  # still here: the graceful stop hung; committed genes are safe in the WAL


def watch_supervisor(env: Mapping[str, str], *, home: Path | None = None, poll_s: float = POLL_S,
                     grace_s: float = GRACE_S, alive: Callable[[], bool] | None = None,
                     on_gone: Callable[[], None] | None = None) -> threading.Thread | None:
    """Start the watch when a supervisor started us (`HELIX_SUPERVISOR_PID`); None otherwise."""
    raw = env.get(SUPERVISOR_PID_ENV, "").strip()
    if not raw.isdigit():
        return None
    pid = int(raw)
    check = alive or parent_alive_check(pid)
    if not check():
        log.warning("supervisor pid %s is already gone at start-up; stopping", pid)

    def loop() -> None:
        while check():
            time.sleep(poll_s)
        if signals.backend_released(os.getpid(), home):
            log.info("supervisor pid %s quit and released this backend; serving on", pid)
            return
        log.warning("supervisor pid %s is gone; this backend stops with it", pid)
        (on_gone or (lambda: _stop_self(grace_s)))()

    thread = threading.Thread(target=loop, name="helix-lifeline", daemon=True)
    thread.start()
    return thread
