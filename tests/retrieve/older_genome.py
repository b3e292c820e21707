"""A genome as an older Helix left it, for the tests of what a schema upgrade gives back."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from helix_context import HelixContextManager
from helix_context.genome.schema import MIGRATIONS


def older_genome(settings, folder: Path, migration: str, *undo: str) -> HelixContextManager:
    """`folder` indexed, then the genome left as the version before `migration` left it (`undo` takes back
    what that version found): an older Helix's genome, opened again by this one."""
    old = HelixContextManager(settings)
    old.ingest_path(folder)
    path = old.genome.path
    old.close()
    with sqlite3.connect(path) as conn:
        for statement in undo:
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {MIGRATIONS.index(migration)}")
    conn.close()
    return HelixContextManager(settings)


def reingest_marked(helix: HelixContextManager, folder: Path, marked: set[str]) -> None:
    """Check that opening the older genome marked exactly the files named `marked` for a re-parse, then ingest
    `folder` again: only those are read, and no gene is added (their text did not change, only what is found in it)."""
    sizes = dict(helix.genome.conn.execute("SELECT path, size FROM files").fetchall())
    assert {Path(p).name for p, size in sizes.items() if size == -1} == marked
    report = helix.ingest_path(folder)
    assert report.files_ingested == len(marked) and report.files_unchanged == len(sizes) - len(marked)
    assert report.genes_added == 0
