"""Files already indexed, read again: `/admin/refresh` and `/admin/compact`.

Why a module of its own: both read paths that came out of the genome, not out of a walk, so
nothing checked them a moment ago. They read through safe_open like every reader does, and
decide here which folders a recorded file may be read from:

- refresh re-ingests each file with the walk's own rules: a file inside a source or a
  ``[server] allowed_ingest_roots`` folder may be reached through a link only into those
  folders; a file given to ``helix ingest`` outside all of them only within its own folder;
- compact only compares hashes: it reads the recorded file itself, through no link, and a
  FIFO, a device or a file that hangs where a tracked file was counts as changed, never
  waited on.

Both read a file where it is on **this** machine: a team genome stores `@ROOT/rel` names and
older absolute ones (`local_files`). Reading a stored name as a path would find every shared
file "missing" and retire (refresh) or mark (compact) the team's whole index.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from helix_context.config import IngestSettings, Settings
from helix_context.genome.store import FileRecord
from helix_context.genome.storage import GenomeStore
from helix_context.ingest.pipeline import IngestReport
from helix_context.safe_open import ReadRule, Refusal, read_file, within
from helix_context.sources.names import SourceNames
from helix_context.sources.roots import is_shared


def local_files(stored: Iterable[str], names: SourceNames) -> dict[str, str]:
    """{file on this machine: stored name} for the recorded files this machine can judge. Left out on a team
    genome: a file under a root not mapped here, and an absolute name whose folder is no folder here
    (another machine's, stored before shared roots: names.py `elsewhere`), which would read as deleted."""
    found: dict[str, str] = {}
    for name in stored:
        local = names.local(name)
        if local is None or (names.team and not is_shared(name) and not Path(local).parent.is_dir()):
            continue
        found[local] = name
    return found


def read_roots(genome: GenomeStore, settings: Settings, names: SourceNames) -> list[Path]:
    """The folders files may be read from: the sources (where they are here) and [server]
    allowed_ingest_roots, resolved."""
    roots = [folder for row in genome.list_sources() if (folder := names.folder(row.path)) is not None]
    for raw in settings.server.allowed_ingest_roots:
        try:
            roots.append(Path(raw).expanduser().resolve())
        except (OSError, RuntimeError):
            continue
    return roots


def refresh_groups(paths: Iterable[str], roots: Sequence[Path]) -> list[tuple[list[str], list[Path]]]:
    """(files, folders their real paths may lie in): inside the roots, the roots; elsewhere, their own folders."""
    inside: list[str] = []
    outside: list[str] = []
    for path in paths:
        (inside if within(Path(path), roots) else outside).append(path)
    groups: list[tuple[list[str], list[Path]]] = []
    if inside:
        groups.append((inside, list(roots)))
    if outside:
        groups.append((outside, sorted({Path(p).parent for p in outside})))
    return groups


def merged(reports: Sequence[IngestReport]) -> IngestReport:
    """One report for several ingests: counts added, skips listed, seconds summed."""
    total = IngestReport()
    for report in reports:
        for item in dataclasses.fields(IngestReport):
            value = getattr(report, item.name)
            if item.name == "files_skipped":
                total.files_skipped.extend(value)
            elif item.name == "embedded":
                total.embedded = total.embedded or value
            else:
                setattr(total, item.name, getattr(total, item.name) + value)
    return total


def changed_files(records: Mapping[str, FileRecord], cfg: IngestSettings) -> tuple[list[str], list[str]]:
    """(changed, missing) among the recorded files; an unchanged size and mtime costs one lstat."""
    changed: list[str] = []
    missing: list[str] = []
    for path, record in records.items():
        try:
            st = os.lstat(path)
        except (OSError, ValueError):
            missing.append(path)
            continue
        if stat.S_ISREG(st.st_mode) and record.stat_matches(st.st_size, st.st_mtime_ns):
            continue
        got = read_file(path, ReadRule.exact(path, max_bytes=cfg.max_file_bytes, timeout_s=cfg.read_timeout_s))
        if isinstance(got, Refusal):
            (missing if got.gone else changed).append(path)
        elif hashlib.sha256(got.data).hexdigest() != record.content_hash:
            changed.append(path)
    return changed, missing
