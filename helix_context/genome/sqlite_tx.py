"""SQLite plumbing under the store: a transaction handle, script splitting, and errors in words a user acts on.

Why its own module: a full disk, a lock held by another process and a read-only file all surface
as sqlite3.OperationalError; turning them into a GenomeError that says what to do is done once here.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helix_context.errors import GenomeError


@dataclass
class Tx:
    conn: sqlite3.Connection

    def execute(self, sql: str, args: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, args)

    def executemany(self, sql: str, rows: Iterable[Any]) -> sqlite3.Cursor:
        return self.conn.executemany(sql, rows)

    def executescript_in_tx(self, script: str) -> None:
        # executescript() would COMMIT first; run statement by statement inside the transaction
        for statement in _split_sql(script):
            self.conn.execute(statement)


def _split_sql(script: str) -> list[str]:
    statements, buf = [], []
    for line in script.splitlines():
        if line.strip().startswith("--"):
            continue
        buf.append(line)
        candidate = "\n".join(buf).strip()
        if candidate.endswith(";") and sqlite3.complete_statement(candidate):
            statements.append(candidate)
            buf = []
    tail = "\n".join(buf).strip()
    if tail:
        statements.append(tail)
    return statements


NO_SPACE_BYTES = 1 << 20  # below this much free space a disk counts as full


def no_space_left(folder: Path) -> bool:
    """The disk holding `folder` is (as good as) full: what a failed write on it most likely means."""
    try:
        return shutil.disk_usage(folder).free < NO_SPACE_BYTES
    except OSError:
        return False


def friendly_error(exc: sqlite3.OperationalError, path: Path) -> GenomeError:
    text = str(exc)
    low = text.lower()
    if "locked" in low or "busy" in low:
        return GenomeError(f"genome {path} is locked by another process ({text}); wait for it to finish or stop it")
    if "readonly" in low or "read-only" in low:
        return GenomeError(f"genome {path} is read-only ({text}); fix its permissions or set HELIX_HOME to a writable folder")
    if "disk is full" in low or "full" in low:
        return GenomeError(f"no space left for genome {path} ({text}); free disk space and run the ingest again — "
                           "nothing already stored was lost")
    if "unable to open" in low:
        return GenomeError(f"cannot open genome {path} ({text}); check the folder exists and is writable")
    return GenomeError(f"genome {path}: {text}")
