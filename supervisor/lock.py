"""One supervisor per HELIX_HOME: an O_EXCL lock file holding the owner's pid.

No fcntl/msvcrt: the file is created with O_CREAT|O_EXCL (atomic on every OS
and on network drives); a holder that no longer runs (pid gone, or the pid was
reused by another process, told apart by its start time) is stale and is
replaced. Released on a clean exit; a crashed supervisor leaves a stale file
that the next one takes over.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import psutil

LOCK_NAME = "supervisor.lock"

_HELD_HERE: set[str] = set()  # locks this process holds (a second Supervisor object in-process is refused)


class LockHeld(RuntimeError):
    """Another supervisor owns this HELIX_HOME.

    Not a HelixError on purpose: it never crosses into HTTP. It stops `python -m supervisor` at start-up
    (the message goes to the terminal / log), before any server exists to map it to a status."""

    def __init__(self, path: Path, pid: int) -> None:
        super().__init__(f"another Helix supervisor (pid {pid}) already runs for this HELIX_HOME "
                         f"({path.parent}); stop it first, or use its tray / `helix-status`")
        self.path = path
        self.pid = pid


def _create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return None


def _holder_alive(info: dict) -> bool:
    try:
        pid = int(info["pid"])
    except (KeyError, TypeError, ValueError):
        return False
    if pid == os.getpid():
        return False
    created = _create_time(pid)
    if created is None:
        return psutil.pid_exists(pid) if pid > 0 else False
    recorded = info.get("create_time")
    if isinstance(recorded, (int, float)) and abs(recorded - created) > 1.0:
        return False  # the pid now belongs to someone else
    return True


class SupervisorLock:
    def __init__(self, home: Path) -> None:
        self.path = Path(home) / LOCK_NAME
        self.held = False

    def read(self) -> dict | None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return data if isinstance(data, dict) else None
        except (OSError, ValueError):
            return None

    def acquire(self) -> None:
        """Take the lock or raise LockHeld naming the live owner."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        key = str(self.path.resolve())
        if key in _HELD_HERE:
            raise LockHeld(self.path, os.getpid())
        me = {"pid": os.getpid(), "create_time": _create_time(os.getpid()), "at": time.time()}
        for _ in range(5):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                info = self.read()
                if info is None:
                    # being written right now, or garbage: give a writer a moment, then treat as stale
                    time.sleep(0.05)
                    info = self.read()
                if info is not None and _holder_alive(info):
                    raise LockHeld(self.path, int(info["pid"])) from None
                try:
                    os.unlink(self.path)  # stale: its owner is gone
                except FileNotFoundError:
                    pass
                except PermissionError:
                    time.sleep(0.05)
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(me, fh)
            self.held = True
            _HELD_HERE.add(key)
            return
        info = self.read() or {}
        raise LockHeld(self.path, int(info.get("pid") or -1))

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        _HELD_HERE.discard(str(self.path.resolve()))
        info = self.read()
        if info is not None and info.get("pid") == os.getpid():
            try:
                os.unlink(self.path)
            except OSError:
                pass

    def holder(self) -> int | None:
        """The pid of a live owner, if any."""
        info = self.read()
        if info is not None and (_holder_alive(info) or str(self.path.resolve()) in _HELD_HERE):
            return int(info["pid"])
        return None
