"""Read a file under a root, safely: the one way Helix reads a file's bytes from disk.

Why one module: a folder being indexed may be hostile, and checking a path and then
opening it by name loses every race the folder runs (a file swapped for a symlink to
``~/.ssh/id_ed25519`` between the check and the read; a parent folder swapped for a
link; a regular file swapped for a FIFO that blocks the reader forever; a file that
reports size 0 and never ends). So every reader (the ingest walk, the watcher's events,
``/admin/refresh``, ``/admin/compact``, the live check) goes through :func:`read_file`:

1. the file is opened once, without following a link where links are not followed
   (``O_NOFOLLOW``), without blocking on a FIFO (``O_NONBLOCK``) and without becoming
   anyone's terminal (``O_NOCTTY``);
2. the opened handle is checked, never the name: ``fstat`` says a regular file of at
   most ``max_bytes``; its real path (``/proc/self/fd``, ``F_GETPATH``, or
   ``GetFinalPathNameByHandleW`` on Windows) lies inside the allowed roots, and where
   links are not followed it is the very path asked for (no link anywhere on the way);
3. the bytes come from that handle, at most ``max_bytes + 1`` of them, within
   ``timeout_s``. The read runs on a reader thread: a read that blocks (a FUSE or
   network file that never answers) is abandoned after the time limit and reported,
   so it holds up nothing else. At most ``MAX_STALLED`` reads may hang at once; past
   that, reads are refused at once instead of piling up threads.

Plain data out: :class:`FileBytes` or :class:`Refusal` (with ``gone`` when the file is
not there, which callers treat as a deletion rather than a problem).
"""

from __future__ import annotations

import errno
import os
import queue
import stat
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_STALLED = 8  # reads allowed to hang at once (each holds one thread and one handle until it ends)
_BLOCK = 1 << 16
_NOT_FOUND = (errno.ENOENT, errno.ENOTDIR)


@dataclass(frozen=True)
class ReadRule:
    """Where a file may lie and how much of it may be read.

    ``roots``: resolved folders the file's real path must lie in. ``follow_symlinks``:
    False = no link anywhere on the path (its real path is the path itself); True =
    links may be followed, but only to a real path inside ``roots``.
    """

    roots: tuple[Path, ...]
    follow_symlinks: bool = False
    max_bytes: int = 2_000_000
    timeout_s: float = 10.0

    @classmethod
    def exact(cls, path: str | Path, *, max_bytes: int, timeout_s: float) -> ReadRule:
        """The recorded file itself, through no link: how an indexed file is read again (refresh, compact,
        the live check) when it is not inside a folder that lets links be followed."""
        return cls((Path(os.path.abspath(path)).parent,), False, max_bytes, timeout_s)


@dataclass(frozen=True)
class FileBytes:
    path: str  # as asked
    real: str  # where the opened handle really is
    data: bytes
    mtime_ns: int

    @property
    def size(self) -> int:
        return len(self.data)


@dataclass(frozen=True)
class Refusal:
    path: str
    reason: str
    gone: bool = False  # the file is not there (deleted, or a folder on its path is)
    link: bool = False  # refused because a link is in the way (follow_symlinks = false)


def within(path: str | Path, roots: Sequence[str | Path]) -> bool:
    """Is the absolute `path` one of `roots` or below one (lexically)? On strings: pathlib's relative_to
    costs more than the whole read of a small file."""
    text = os.path.normcase(os.fspath(path))
    for root in roots:
        base = os.path.normcase(os.fspath(root)).rstrip("\\/")
        if text == base or text.startswith(base + os.sep) or (os.altsep and text.startswith(base + os.altsep)):
            return True
    return False


def _same(a: str, b: str) -> bool:
    return os.path.normcase(os.path.normpath(a)) == os.path.normcase(os.path.normpath(b))


def _real_path(fd: int, asked: str) -> str | None:
    """The path of what the handle really is (None: this platform cannot say)."""
    if sys.platform.startswith("linux"):
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None
        return real if not real.endswith(" (deleted)") else ""
    if sys.platform == "darwin":
        import fcntl

        try:
            raw = fcntl.fcntl(fd, getattr(fcntl, "F_GETPATH", 50), bytes(1024))
        except OSError:
            return None
        return os.fsdecode(raw.split(b"\0", 1)[0])
    if sys.platform == "win32":
        return _windows_final_path(fd)
    return None


def _windows_final_path(fd: int) -> str | None:
    import ctypes
    import msvcrt

    handle = msvcrt.get_osfhandle(fd)  # type: ignore[attr-defined]  # Windows only
    buf = ctypes.create_unicode_buffer(32_768)
    get = ctypes.windll.kernel32.GetFinalPathNameByHandleW  # type: ignore[attr-defined]  # Windows only
    n = get(ctypes.c_void_p(handle), buf, len(buf), 0)
    if not n or n >= len(buf):
        return None
    text = buf.value
    if text.startswith("\\\\?\\UNC\\"):
        return "\\\\" + text[8:]
    return text[4:] if text.startswith("\\\\?\\") else text


def _open_flags(follow: bool) -> int:
    flags = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    flags |= getattr(os, "O_NONBLOCK", 0)  # a FIFO opens at once (then fstat refuses it) instead of blocking
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    return flags


def _check_handle(fd: int, path: str, rule: ReadRule) -> tuple[os.stat_result, str] | Refusal:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        return Refusal(path, "not a regular file (a FIFO, device or socket is never read)")
    if st.st_size > rule.max_bytes:
        return Refusal(path, f"too large: {st.st_size} bytes > [ingest] max_file_bytes {rule.max_bytes}")
    real = _real_path(fd, path)
    if real is None:  # no way to ask the handle: the name's real path must still be the opened file
        real = os.path.realpath(path)
        try:
            named = os.stat(real)
        except OSError:
            return Refusal(path, "it changed while it was opened; try again")
        if (named.st_dev, named.st_ino) != (st.st_dev, st.st_ino):
            return Refusal(path, "it changed while it was opened; try again")
    if not real:
        return Refusal(path, "it was deleted while it was opened", gone=True)
    if not rule.follow_symlinks and not _same(real, path):
        return Refusal(path, f"a symlink is on its path (it leads to {real}); not followed "
                             "([ingest] follow_symlinks = false)", link=True)
    if not within(real, rule.roots):
        shown = ", ".join(str(r) for r in rule.roots)
        return Refusal(path, f"its real path {real} is outside the allowed folders ({shown}): not read")
    return st, real


def _read(path: str, rule: ReadRule, deadline: float, cancelled: threading.Event) -> FileBytes | Refusal:
    path = os.path.abspath(path)
    try:
        fd = os.open(path, _open_flags(rule.follow_symlinks))
    except OSError as exc:
        if exc.errno in _NOT_FOUND:
            return Refusal(path, "does not exist", gone=True)
        if exc.errno == errno.ELOOP or (os.path.islink(path) and not rule.follow_symlinks):
            return Refusal(path, "it is a symlink; not followed ([ingest] follow_symlinks = false)", link=True)
        return Refusal(path, f"unreadable: {exc.strerror or exc}")
    try:
        checked = _check_handle(fd, path, rule)
        if isinstance(checked, Refusal):
            return checked
        st, real = checked
        chunks: list[bytes] = []
        total = 0
        while total <= rule.max_bytes:
            if cancelled.is_set() or time.monotonic() > deadline:
                return Refusal(path, _stalled(rule))
            # the size it reports in one read, then small reads: a 1 MB buffer per call costs more than the read
            want = max(st.st_size + 1 - total, _BLOCK)
            block = os.read(fd, min(want, rule.max_bytes + 1 - total))
            if not block:
                break
            chunks.append(block)
            total += len(block)
        if total > rule.max_bytes:
            return Refusal(path, f"too large: more than [ingest] max_file_bytes {rule.max_bytes} bytes "
                                 f"(it reported {st.st_size}; it grew while read, or never ends)")
        return FileBytes(path, real, b"".join(chunks), st.st_mtime_ns)
    except BlockingIOError:
        return Refusal(path, "not a regular file: it has nothing to read yet")
    except OSError as exc:
        return Refusal(path, f"unreadable: {exc.strerror or exc}")
    finally:
        os.close(fd)


def _stalled(rule: ReadRule) -> str:
    return (f"stalled: reading it took more than {rule.timeout_s:g} s ([ingest] read_timeout_s); skipped, "
            "the other files go on")


class _Readers:
    """Reader threads, reused. A thread whose read outlives its time limit is left to finish on its own
    (a blocked read cannot be interrupted) and no longer counts as available; a new one takes its place."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[Any]] = []
        self.stalled = 0

    def run(self, fn: Callable[[threading.Event], Any], timeout_s: float) -> tuple[str, Any]:
        """("done", result), ("stalled", None) when the time limit passed, ("busy", None) when too many
        earlier reads still hang."""
        with self._lock:
            if self.stalled >= MAX_STALLED:
                return "busy", None
            inbox = self._idle.pop() if self._idle else self._spawn()
        done = threading.Event()
        cancelled = threading.Event()
        box: list[Any] = []
        inbox.put((fn, cancelled, box, done))
        finished = done.wait(timeout_s)
        with self._lock:  # the reader sets `done` under this lock: one of the two sides owns the thread
            if finished or done.is_set():
                self._idle.append(inbox)
                return "done", box[0]
            cancelled.set()
            self.stalled += 1
        return "stalled", None

    def _spawn(self) -> queue.SimpleQueue[Any]:
        inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        threading.Thread(target=self._loop, args=(inbox,), name="helix-file-reader", daemon=True).start()
        return inbox

    def _loop(self, inbox: queue.SimpleQueue[Any]) -> None:
        while True:
            fn, cancelled, box, done = inbox.get()
            try:
                box.append(fn(cancelled))
            except BaseException as exc:  # handed to the waiting caller, never lost in a thread
                box.append(exc)
            with self._lock:
                done.set()
                if cancelled.is_set():  # its caller gave up on it and counted it as stalled: free again
                    self.stalled -= 1
                    self._idle.append(inbox)


_READERS = _Readers()


def read_file(path: str | Path, rule: ReadRule) -> FileBytes | Refusal:
    """The file's bytes, read as the module docstring says, or why they were not read."""
    text = os.fspath(path)
    if "\x00" in text:
        return Refusal(text, "the path holds a NUL character: no such file")
    deadline = time.monotonic() + rule.timeout_s
    outcome, result = _READERS.run(lambda cancelled: _read(text, rule, deadline, cancelled), rule.timeout_s)
    if outcome == "busy":
        return Refusal(text, f"{MAX_STALLED} earlier reads are still stalled (a hung network or FUSE folder?); "
                             "not read now")
    if outcome == "stalled":
        return Refusal(text, _stalled(rule))
    if isinstance(result, BaseException):
        return Refusal(text, f"unreadable: {type(result).__name__}: {result}")
    return result
