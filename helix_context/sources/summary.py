"""The one line the tray, the dashboard and `helix sources list` show for the living index.

Why a module of its own: the line must never say "up to date" while it is not — a folder
whose file events were lost, a folder polled because native events failed, a folder whose
last pass failed (a full disk above all), a team genome's folder whose checkout is on another
branch than the team follows (sources/branch.py) — and those rules are easier to read and test in
one place than inside the service.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helix_context.genome.store import no_space_left

DISK_FULL = "no space left on the disk"
_NO_SPACE_ERRNOS = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))


def disk_full_reason(genome_path: Path, exc: BaseException) -> str | None:
    """The reason a failed pass shows when it failed for lack of space (None otherwise)."""
    text = str(exc).lower()
    if not ((isinstance(exc, OSError) and exc.errno in _NO_SPACE_ERRNOS) or "no space left" in text
            or "disk is full" in text or no_space_left(genome_path.parent)):
        return None
    return (f"{DISK_FULL} holding the genome ({genome_path.parent}): indexing stopped. Free disk space, then "
            "resume indexing (tray, dashboard or `helix sources resume`); nothing already stored was lost")


def no_space(reason: str) -> bool:
    return reason.startswith(DISK_FULL)


@dataclass(frozen=True)
class IndexState:
    paused: bool
    busy: bool
    progress_done: int
    progress_total: int
    queued: int
    lost: int  # folders whose file events were lost, rescanning
    disk_full: bool  # a pass stopped for lack of space
    sources: list[dict[str, Any]]


def folders(n: int) -> str:
    return f"{n:,} folder{'s' if n != 1 else ''}"


def summary_line(state: IndexState) -> str:
    watching = [s for s in state.sources if s["state"] != "removing"]
    failed = [s for s in watching if s["state"] == "error"]
    degraded = sum(1 for s in watching if s.get("watch_failed"))
    held = sum(1 for s in watching if s["state"] == "other_branch")  # a team genome follows one branch
    if state.disk_full:
        line = (f"Indexing stopped: the disk is full ({folders(len(failed))} not up to date); "
                "free disk space, then resume indexing — what is indexed is still served")
    elif state.paused:
        line = f"Indexing paused, {folders(len(watching))}"
    elif state.busy:
        line = f"Indexing {state.progress_done:,} / {state.progress_total:,} files"
    elif state.lost:
        line = f"Catching up: file events were lost for {folders(state.lost)}; rescanning"
    elif state.queued:
        line = f"Indexing: {folders(state.queued)} waiting"
    elif not watching:
        line = "No folders indexed yet"
    elif failed:
        line = f"Indexing failed for {folders(len(failed))} of {len(watching):,}: see its error"
    elif held:  # never "up to date": this checkout's files are not indexed (answers overlay them from disk)
        line = (f"{folders(held)} of {len(watching):,} not indexed from this checkout: it is on another branch "
                "than the team genome follows; switch back to index it")
    elif degraded:  # rescanned, and polled from now on: said as such, never "up to date"
        line = f"Index rescanned, {folders(len(watching))}; {degraded} polled because native file events failed"
    else:
        line = f"Index up to date, {folders(len(watching))}"
        names = sorted({s["project"] for s in watching if s.get("project")})  # the tray shows them
        if names:
            shown = ", ".join(names[:4]) + (f" +{len(names) - 4}" if len(names) > 4 else "")
            line += f" ({'project' if len(names) == 1 else 'projects'} {shown})"
    missing = sum(1 for s in watching if s["state"] == "missing")
    if missing:
        line += f" ({missing} missing)"
    unmapped = sum(1 for s in watching if s["state"] == "unmapped")
    if unmapped:  # a team genome's shared root this machine has no map for: not an error, said with its fix
        line += f" ({unmapped} not mapped on this machine: helix sources map ROOT PATH)"
    if held and "another branch" not in line:
        line += f" ({held} on another branch than the team genome follows: not indexed from here)"
    if degraded and "polled" not in line:
        line += f" ({degraded} polled: native file events failed)"
    return line
