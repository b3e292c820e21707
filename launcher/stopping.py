"""Stopping that always works: a deadline after which the tray ends whatever is stuck.

A tray stop (SIGTERM, SIGINT, Quit, an icon that failed) first tries the polite
way: hide the icon, end its loop, stop supervising (the backend gets SIGTERM,
then its tree is killed). Some of that runs in code Helix does not own (a GUI
toolkit's loop, an X connection, a D-Bus call) and can hang. So the first stop
request also arms a deadline: when it passes and the process is still alive, the
backend's process tree is killed and the process exits, well inside the 5 s a
user waits.

Signal handlers only set the stop in motion on a new thread: the polite stop
takes locks that the interrupted main thread may be holding.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import threading
import time
from collections.abc import Callable

log = logging.getLogger("helix.tray")

STOP_DEADLINE_S = 4.0


class StopDeadline:
    """Arm once; after `seconds`, `kill_backend()` then `exit(code)` unless `disarm()` ran first."""

    def __init__(self, kill_backend: Callable[[], None], seconds: float = STOP_DEADLINE_S,
                 exit: Callable[[int], None] = os._exit) -> None:
        self._kill_backend = kill_backend
        self.seconds = seconds
        self._exit = exit
        self._armed = threading.Event()
        self._done = threading.Event()
        self.code = 0
        self.armed_at: float | None = None
        self.fired = False

    def arm(self, reason: str, code: int = 0) -> None:
        if self._armed.is_set():
            return
        self.code = code
        self.armed_at = time.monotonic()
        self._armed.set()
        log.info("stopping (%s); everything ends within %.1f s", reason, self.seconds)
        threading.Thread(target=self._watch, name="helix-tray-stop-deadline", daemon=True).start()

    @property
    def armed(self) -> bool:
        return self._armed.is_set()

    def disarm(self) -> None:
        """The polite stop finished: nothing left to force."""
        self._done.set()

    def _watch(self) -> None:
        if self._done.wait(self.seconds):
            return
        self.fired = True
        log.error("the tray did not stop within %.1f s; killing the backend it started and exiting "
                  "(where each thread was stuck follows on stderr)", self.seconds)
        try:
            faulthandler.dump_traceback(all_threads=True)
        except Exception:  # stderr may be closed
            pass
        try:
            self._kill_backend()
        except Exception:  # exiting matters more than a clean log
            log.exception("killing the backend failed")
        for handler in logging.getLogger().handlers + log.handlers:
            try:
                handler.flush()
            except Exception:
                pass
        self._exit(self.code)


def install_stop_signals(on_stop: Callable[[str], None], on_restart: Callable[[], None] | None = None,
                         platform_signals: tuple[str, ...] = ("SIGINT", "SIGTERM", "SIGBREAK")) -> list[str]:
    """Route SIGINT / SIGTERM (and Ctrl-Break on Windows) to `on_stop(name)` on a fresh thread.
    Returns the names installed (only the main thread may install handlers)."""
    if threading.current_thread() is not threading.main_thread():
        return []
    installed = []
    for name in platform_signals:
        sig = getattr(signal, name, None)
        if sig is None:
            continue

        def handler(_signum: int, _frame: object, _name: str = name) -> None:
            threading.Thread(target=on_stop, args=(_name,), name="helix-tray-stop", daemon=True).start()

        try:
            signal.signal(sig, handler)
            installed.append(name)
        except (ValueError, OSError):
            pass
    if on_restart is not None and hasattr(signal, "SIGHUP"):
        try:
            signal.signal(signal.SIGHUP, lambda *_: threading.Thread(target=on_restart, daemon=True).start())
        except (ValueError, OSError):
            pass
    return installed
