"""One supervisor per HELIX_HOME: an O_EXCL lock file holding the owner's pid.

No fcntl/msvcrt: the file is created with O_CREAT|O_EXCL (atomic on every OS
and on network drives); a holder that no longer runs (pid gone, or the pid was
reused by another process, told apart by its start time) is stale and is
replaced. Released on a clean exit; a crashed supervisor leaves a stale file
that the next one takes over.

A full disk must not keep Helix from serving what it already indexed: when the
owner's pid cannot be written (or the file not even created), the lock is held
anyway — an empty file, or none — with a warning, instead of a traceback.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import time
import uuid
from pathlib import Path

import psutil

LOCK_NAME = "supervisor.lock"
NO_SPACE = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))

log = logging.getLogger("helix.supervisor")

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


def _parse(raw: bytes | None) -> dict | None:
    try:
        data = json.loads(raw.decode("utf-8")) if raw else None
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


class SupervisorLock:
    def __init__(self, home: Path) -> None:
        self.path = Path(home) / LOCK_NAME
        self.held = False

    def read(self) -> dict | None:
        return _parse(self._raw())

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
                self._clear_stale()
                continue
            except OSError as exc:
                if exc.errno not in NO_SPACE:
                    raise
                log.warning("the disk holding %s is full: running without a lock file", self.path.parent)
                self._hold(key)
                return
            try:
                os.write(fd, json.dumps(me).encode("utf-8"))
            except OSError as exc:
                if exc.errno not in NO_SPACE:
                    raise
                log.warning("the disk holding %s is full: the lock file could not record its owner", self.path)
            finally:
                os.close(fd)
            self._hold(key)
            return
        info = self.read() or {}
        raise LockHeld(self.path, int(info.get("pid") or -1))

    def _hold(self, key: str) -> None:
        self.held = True
        _HELD_HERE.add(key)

    def _raw(self, path: Path | None = None) -> bytes | None:
        try:
            return (path or self.path).read_bytes()
        except OSError:
            return None

    def _clear_stale(self) -> None:
        """The lock file exists: LockHeld for a live owner, else the stale file goes (the caller tries again).

        The stale file is renamed aside, not unlinked by name, and checked once it is ours alone: between
        judging it stale and removing it, another contender may have done the same and written its own fresh
        lock there, which an unlink by name deleted (two supervisors then held one HELIX_HOME). A file taken
        aside that is not the one judged stale is put back."""
        raw = self._raw()
        info = _parse(raw)
        if info is None:
            # being written right now, or garbage: give a writer a moment, then treat as stale
            time.sleep(0.05)
            raw = self._raw()
            info = _parse(raw)
        if raw is None:
            return  # gone already: the caller tries to create it again
        if info is not None and _holder_alive(info):
            raise LockHeld(self.path, int(info["pid"])) from None
        aside = self.path.with_name(f"{self.path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.stale")
        try:
            os.replace(self.path, aside)  # atomic: one contender takes this file
        except FileNotFoundError:
            return
        except PermissionError:
            time.sleep(0.05)
            return
        try:
            if self._raw(aside) != raw:  # someone's fresh lock: back where it was, unless a newer one is there
                try:
                    os.link(aside, self.path)
                except FileExistsError:
                    pass
                except OSError:  # no hard links here (a FAT drive): the rename is as close as it gets
                    if not self.path.exists():
                        os.replace(aside, self.path)
        finally:
            try:
                os.unlink(aside)
            except OSError:
                pass

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
