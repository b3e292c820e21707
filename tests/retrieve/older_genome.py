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
