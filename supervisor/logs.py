"""Log capture: the backend's stdout/stderr into a rotating file, plus the last lines in memory.

The child writes into a pipe; one reader thread per child copies each line into
`logs/backend.log` (rotated at `log_max_bytes`, `log_backups` old files kept)
and into a small ring buffer, which is what a FATAL snapshot shows. Access-log
lines of the supervisor's own health probes are dropped so the file keeps what
matters.
"""

from __future__ import annotations

import collections
import logging
import os
import logging.handlers
import re
import threading
from pathlib import Path
from typing import IO

BACKEND_LOG = "backend.log"
SUPERVISOR_LOG = "supervisor.log"

# uvicorn access-log lines for our own probes: `... "GET /health HTTP/1.1" 200 OK`
_PROBE_LINE = re.compile(r'"GET /(health|stats) HTTP/[0-9.]+" 200')


class QuietRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A rotating log file that a full disk cannot turn into tracebacks on the user's terminal:
    a failed write is dropped and counted (the line stays in the in-memory tail), and closing a
    file whose last buffer cannot be flushed is not an error."""

    dropped = 0

    def handleError(self, record: logging.LogRecord) -> None:  # logging names it so
        self.dropped += 1

    def close(self) -> None:
        try:
            super().close()
        except OSError:
            self.stream = None  # the buffer could not be flushed: nothing to keep


class LogCapture:
    """One rotating log file shared by every backend process this supervisor starts."""

    def __init__(self, path: Path, *, max_bytes: int, backups: int, keep_lines: int = 200) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handler = QuietRotatingFileHandler(
            self.path, maxBytes=max(0, int(max_bytes)), backupCount=max(0, int(backups)), encoding="utf-8",
            delay=True)
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        self._tail: collections.deque[str] = collections.deque(maxlen=keep_lines)
        self._lock = threading.Lock()

    def write_line(self, line: str) -> None:
        line = line.rstrip("\r\n")
        if _PROBE_LINE.search(line):
            return
        record = logging.LogRecord("backend", logging.INFO, "", 0, line, None, None)
        with self._lock:
            self._tail.append(line)
            try:
                self._handler.emit(record)
            except Exception:  # a full disk must not take the supervisor down
                pass

    def mark(self, text: str) -> None:
        """A supervisor line in the backend log (start / exit / restart markers)."""
        self.write_line(f"--- helix-supervisor: {text} ---")

    def follow(self, stream: IO[bytes], name: str = "backend-log") -> threading.Thread:
        """Copy `stream` line by line until EOF, in a daemon thread."""

        def pump() -> None:
            try:
                for raw in iter(stream.readline, b""):
                    self.write_line(raw.decode("utf-8", errors="replace"))
            except (OSError, ValueError):
                pass
            finally:
                try:
                    stream.close()
                except OSError:
                    pass

        thread = threading.Thread(target=pump, name=name, daemon=True)
        thread.start()
        return thread

    def tail(self, n: int = 40) -> list[str]:
        with self._lock:
            lines = list(self._tail)
        if not lines:
            lines = tail_file(self.path, n)
        return lines[-n:]

    def close(self) -> None:
        with self._lock:
            self._handler.close()


def tail_file(path: Path, n: int = 40, max_bytes: int = 64_000) -> list[str]:
    """The last `n` lines of a text file (what a backend we did not start left behind)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            data = fh.read()
    except OSError:
        return []
    return data.decode("utf-8", errors="replace").splitlines()[-n:]


def unwritable_home(*folders: Path) -> str | None:
    """Why the supervisor cannot keep its logs and status in these folders (HELIX_HOME's), or None.

    Why: a read-only HELIX_HOME stopped the start script with a traceback from the first log write."""
    for folder in folders:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return f"cannot create {folder} ({exc.strerror})"
        if not os.access(folder, os.W_OK):
            return f"{folder} is not writable"
    return None


def setup_supervisor_logging(logs_dir: Path, *, max_bytes: int, backups: int, stderr: bool = True,
                             level: int = logging.INFO) -> logging.Logger:
    """Route the `helix.supervisor` / `helix.tray` loggers into logs/supervisor.log (and stderr)."""
    logs_dir.mkdir(parents=True, exist_ok=True)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    root = logging.getLogger("helix")
    root.setLevel(level)
    for h in list(root.handlers):
        if getattr(h, "_helix_supervisor", False):
            root.removeHandler(h)
            h.close()
    fh = QuietRotatingFileHandler(logs_dir / SUPERVISOR_LOG, maxBytes=max(0, int(max_bytes)),
                                              backupCount=max(0, int(backups)), encoding="utf-8")
    fh.setFormatter(fmt)
    fh._helix_supervisor = True  # type: ignore[attr-defined]  # a marker attribute on our own handler, read back by name
    root.addHandler(fh)
    if stderr:
        sh = logging.StreamHandler()
        sh.setFormatter(fmt)
        sh._helix_supervisor = True  # type: ignore[attr-defined]  # a marker attribute on our own handler, read back by name
        root.addHandler(sh)
    return root
