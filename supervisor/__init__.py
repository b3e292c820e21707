"""The supervisor: keeps the Helix backend serving and watches GPU memory and Ollama.

Public API:
  run_supervisor(settings, *, headless=True) -> int   `helix supervise` (blocks until Ctrl-C / SIGTERM)
  Supervisor(settings, command=None, ...)             the object the tray drives (start / shutdown /
                                                      request_restart / set_ribosome_paused / snapshot)
  LockHeld                                            raised by Supervisor.start() when another
                                                      supervisor owns the same HELIX_HOME
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any
from collections.abc import Sequence

from helix_context.config import Settings

from supervisor.core import Supervisor
from supervisor.lock import LockHeld
from supervisor.logs import setup_supervisor_logging, unwritable_home

__all__ = ["run_supervisor", "Supervisor", "LockHeld", "EXIT_LOCKED", "EXIT_FATAL"]

EXIT_FATAL = 1  # the backend went FATAL (crash loop); the snapshot holds the last log lines
EXIT_USAGE = 2  # HELIX_HOME cannot be written
EXIT_LOCKED = 3  # another supervisor already runs for this HELIX_HOME


def _describe(snap: dict[str, Any]) -> str:
    b = snap["backend"]
    line = f"backend {b['status']}"
    if b.get("pid"):
        line += f" (pid {b['pid']}{', adopted' if b.get('adopted') else ''})"
    if b.get("restarts"):
        line += f", {b['restarts']} restart(s)"
    if b.get("last_error") and b["status"] in ("restarting", "fatal"):
        line += f": {b['last_error']}"
    if snap["pressure"]["active"]:
        line += " | GPU pressure: " + "; ".join(snap["pressure"]["reasons"])
    return line


def install_stop_signals(on_stop: Any, on_restart: Any = None) -> None:
    """Ctrl-C / SIGTERM (and Ctrl-Break on Windows) → on_stop; SIGHUP → on_restart (POSIX)."""
    if threading.current_thread() is not threading.main_thread():
        return
    names = ["SIGINT", "SIGTERM", "SIGBREAK"]
    for name in names:
        sig = getattr(signal, name, None)
        if sig is not None:
            try:
                signal.signal(sig, lambda *_: on_stop())
            except (ValueError, OSError):
                pass
    if on_restart is not None and hasattr(signal, "SIGHUP"):
        try:
            signal.signal(signal.SIGHUP, lambda *_: on_restart())
        except (ValueError, OSError):
            pass


def run_supervisor(settings: Settings, *, headless: bool = True, command: Sequence[str] | None = None) -> int:
    """Supervise the backend in the foreground until Ctrl-C / SIGTERM (the backend is stopped
    with us if we started it; an adopted one keeps running). SIGHUP restarts the backend.

    Returns 0 on a normal stop, EXIT_FATAL (1) when the backend crash-looped into FATAL,
    EXIT_LOCKED (3) when another supervisor already runs for this HELIX_HOME.
    `headless=False` also prints each state change on stdout (for a person at a terminal).
    """
    problem = unwritable_home(settings.logs_dir, settings.signals_dir)
    if problem is not None:
        print(f"helix supervise: {problem}: HELIX_HOME ({settings.home}) must be a writable folder; set HELIX_HOME "
              "to one", file=sys.stderr)
        return EXIT_USAGE
    setup_supervisor_logging(settings.logs_dir, max_bytes=settings.supervisor.log_max_bytes,
                             backups=settings.supervisor.log_backups, stderr=True)
    sup = Supervisor(settings, command=command, headless=headless)
    stop_requested = threading.Event()
    if not headless:
        last = {"line": ""}

        def show(snap: dict[str, Any]) -> None:
            line = _describe(snap)
            if line != last["line"]:
                last["line"] = line
                print(line, flush=True)

        sup.add_listener(show)
    try:
        sup.start()
    except LockHeld as exc:
        print(f"helix supervise: {exc}", file=sys.stderr)
        return EXIT_LOCKED
    install_stop_signals(stop_requested.set, lambda: sup.request_restart("SIGHUP"))
    print(f"helix supervise: supervising the backend on {settings.base_url} "
          f"(status: {settings.signals_dir / 'supervisor_status.json'}, logs: {settings.logs_dir}); "
          "Ctrl-C stops", file=sys.stderr, flush=True)
    fatal = False
    try:
        while not sup.wait(0.2):
            if stop_requested.is_set():
                break
            if sup.snapshot()["backend"]["status"] == "fatal":
                fatal = True
                break
    except KeyboardInterrupt:
        pass
    sup.shutdown()
    if fatal:
        snap = sup.snapshot()
        print(f"helix supervise: backend FATAL: {snap['backend']['last_error']}", file=sys.stderr)
        for line in snap["backend"]["last_log_lines"][-15:]:
            print(f"  | {line}", file=sys.stderr)
        return EXIT_FATAL
    return sup.exit_code
