"""Atomic JSON signals shared between the backend, the supervisor and the tray.

Processes never talk through sockets for state; they write small JSON files
under HELIX_HOME with temp-file + os.replace, so a reader sees either the old
or the new document — never a half-written one — on Windows and Linux alike.

Files:
  shared/signals/server_state.json      restart announcement protocol (backend ↔ supervisor)
  shared/signals/supervisor_status.json the supervisor's status snapshot (tray, helix-status, dashboard)
  shared/signals/ribosome.json          ribosome pause flag (survives backend restarts)
  shared/signals/backend_released.json  a supervisor left its backend running on purpose (lifeline.py)
"""

from __future__ import annotations

import errno
import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helix_context.config import default_home

log = logging.getLogger("helix.signals")

SERVER_STATE = "server_state.json"
SUPERVISOR_STATUS = "supervisor_status.json"
RIBOSOME = "ribosome.json"
BACKEND_RELEASED = "backend_released.json"
SUPERVISOR_PID_ENV = "HELIX_SUPERVISOR_PID"  # set by the supervisor in its backend's environment

# after the announced downtime, a "restarting" signal stays fresh this long
STALE_GRACE_S = 10.0


def signals_dir(home: Path | None = None) -> Path:
    """HELIX_HOME/shared/signals; `home` defaults to HELIX_HOME (or ~/.helix)."""
    return Path(home if home is not None else default_home()) / "shared" / "signals"


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write JSON so readers never see a partial file (temp file in the same dir + os.replace)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=True, default=str)
            fh.flush()
            os.fsync(fh.fileno())
        _replace_with_retry(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


NO_SPACE = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
_full_disk_warned: set[str] = set()


def write_advisory(path: Path, data: dict[str, Any]) -> bool:
    """write_json_atomic for signals that help but are not needed to serve: on a full disk the old file
    stays (or none), a warning is logged once, and the caller goes on (the backend and the supervisor
    must start and serve reads on a full disk). False when it was not written."""
    try:
        write_json_atomic(path, data)
    except OSError as exc:
        if exc.errno not in NO_SPACE:
            raise
        if str(path) not in _full_disk_warned:
            _full_disk_warned.add(str(path))
            log.warning("no space left to write %s; going on without it until space is freed", path)
        return False
    _full_disk_warned.discard(str(path))
    return True


def _replace_with_retry(src: str, dst: Path, attempts: int = 20) -> None:
    # On Windows os.replace fails while another process has the target open; retry briefly.
    for attempt in range(attempts):
        try:
            os.replace(src, dst)
            return
        except PermissionError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.01 * (attempt + 1))


MAX_SIGNAL_BYTES = 1 << 20


def read_json(path: Path) -> dict[str, Any] | None:
    """The document, or None when it is missing or unreadable (a reader never crashes on a signal)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
        if len(text) > MAX_SIGNAL_BYTES:  # Helix writes a few KB: anything this size is not ours
            return None
        data = json.loads(text)
    except (OSError, ValueError, RecursionError):  # RecursionError: `[[[[...` nested past the parser's depth
        return None
    return data if isinstance(data, dict) else None


# ── restart announcement protocol ─────────────────────────────────────────────


@dataclass(frozen=True)
class ServerState:
    state: str  # running | restarting | stopped
    pid: int | None
    reason: str
    actor: str
    expected_downtime_s: float
    at: float  # unix seconds when written
    url: str = ""  # where the backend serves (a backend started on another port is still found)

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "pid": self.pid,
            "reason": self.reason,
            "actor": self.actor,
            "expected_downtime_s": self.expected_downtime_s,
            "at": self.at,
            "url": self.url,
        }


def _server_state_path(home: Path | None) -> Path:
    return signals_dir(home) / SERVER_STATE


def write_server_state(state: str, *, pid: int | None, reason: str = "", actor: str = "",
                       expected_downtime_s: float = 0.0, home: Path | None = None, url: str = "") -> ServerState:
    signal = ServerState(state, pid, reason, actor, float(expected_downtime_s), time.time(), url)
    write_advisory(_server_state_path(home), signal.as_dict())
    return signal


def announce_restart(reason: str, actor: str, expected_downtime_s: float = 5.0, pid: int | None = None,
                     *, home: Path | None = None) -> ServerState:
    """Tell every watcher that the coming exit of `pid` is planned, not a crash."""
    return write_server_state("restarting", pid=pid, reason=reason, actor=actor,
                              expected_downtime_s=expected_downtime_s, home=home)


def read_server_state(home: Path | None = None, now: float | None = None) -> tuple[ServerState | None, bool, float]:
    """(signal, is_stale, age_s). A restart announcement is stale once the expected
    downtime plus a grace period has passed; running/stopped stamps never go stale."""
    raw = read_json(_server_state_path(home))
    if raw is None:
        return None, True, float("inf")
    try:
        signal = ServerState(
            state=str(raw["state"]),
            pid=int(raw["pid"]) if raw.get("pid") is not None else None,
            reason=str(raw.get("reason", "")),
            actor=str(raw.get("actor", "")),
            expected_downtime_s=float(raw.get("expected_downtime_s", 0.0)),
            at=float(raw["at"]),
            url=str(raw.get("url") or ""),
        )
    except (KeyError, TypeError, ValueError):
        return None, True, float("inf")
    age = (time.time() if now is None else now) - signal.at
    stale = signal.state == "restarting" and age > signal.expected_downtime_s + STALE_GRACE_S
    return signal, stale, age


def announced_backend_url(home: Path | None = None) -> str | None:
    """The URL the running backend wrote into its state file, or None when none says it runs.

    The CLI and the MCP server start from helix.toml's port; a backend started on another
    one (HELIX_SERVER_PORT, `helix serve --port`) is found here instead."""
    signal, stale, _age = read_server_state(home)
    if signal is None or stale or signal.state == "stopped" or not signal.url:
        return None
    return signal.url


# ── supervisor status snapshot ────────────────────────────────────────────────


def write_supervisor_status(snapshot: dict[str, Any], *, home: Path | None = None) -> None:
    write_advisory(signals_dir(home) / SUPERVISOR_STATUS, {**snapshot, "written_at": time.time()})


def read_supervisor_status(home: Path | None = None) -> dict[str, Any] | None:
    return read_json(signals_dir(home) / SUPERVISOR_STATUS)


# ── ribosome pause flag ───────────────────────────────────────────────────────


def set_ribosome_paused(paused: bool, actor: str = "", *, home: Path | None = None) -> None:
    write_json_atomic(signals_dir(home) / RIBOSOME, {"paused": bool(paused), "actor": actor, "at": time.time()})


def ribosome_paused(home: Path | None = None) -> bool:
    data = read_json(signals_dir(home) / RIBOSOME)
    return bool(data and data.get("paused"))


def release_backend(pid: int, *, home: Path | None = None) -> None:
    """The supervisor quits but leaves backend `pid` serving: the backend must not follow it out."""
    write_json_atomic(signals_dir(home) / BACKEND_RELEASED, {"pid": pid, "at": time.time()})


def backend_released(pid: int, home: Path | None = None) -> bool:
    data = read_json(signals_dir(home) / BACKEND_RELEASED)
    return data is not None and data.get("pid") == pid
