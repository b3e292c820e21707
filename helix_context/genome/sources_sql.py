"""The sources table: folders the user chose to keep indexed (SQL only; the logic is in helix_context/sources/).

A mixin of both genomes (store.py, pg/store.py): its statements are in the SQL both engines
take, with `?` placeholders, so the sources service runs unchanged on a team genome.
Bookkeeping writes use `transaction(changes_genes=False)`: adding a folder to
the list must not throw away the retriever's caches; the genes themselves are
written by the ingest, which bumps the generation as usual.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

PAUSED_KEY = "sources_paused"


@dataclass(frozen=True)
class SourceRow:
    path: str
    project: str | None
    added_at: float
    last_indexed: float | None = None
    files: int = 0
    genes: int = 0
    skipped: tuple[dict[str, str], ...] = field(default_factory=tuple)
    skipped_total: int = 0
    last_error: str | None = None
    state: str = "new"
    pending: str | None = None


_COLUMNS = "path, project, added_at, last_indexed, files, genes, skipped, skipped_total, last_error, state, pending"


def _row(values: tuple[Any, ...]) -> SourceRow:
    (path, project, added_at, last_indexed, files, genes, skipped, skipped_total, last_error, state,
     pending) = values
    try:
        items = tuple(dict(i) for i in json.loads(skipped or "[]"))
    except (ValueError, TypeError):
        items = ()
    return SourceRow(path, project, added_at, last_indexed, files, genes, items, skipped_total, last_error, state,
                     pending)


def _prefix_range(folder: str) -> tuple[str, str]:
    low = folder.rstrip("/\\")
    sep = "\\" if "\\" in low and "/" not in low else "/"
    prefix = low + sep
    return prefix, prefix + "\U0010ffff"


class SoleIndexer:
    """The claim of a genome that only this backend writes (a SQLite file): always held."""

    held = True

    def __enter__(self) -> SoleIndexer:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class SourcesMixin:
    """Needs `conn`, `transaction` and `meta_table` from the genome."""

    conn: Any
    transaction: Callable[..., AbstractContextManager[Any]]
    meta_table: str  # the key/value table: `meta` on SQLite, `helix_meta` on PostgreSQL

    def claim_source(self, source: str) -> AbstractContextManager[Any]:
        """`with genome.claim_source(key) as claim: if claim.held: …index it…`: one indexer per source.
        A SQLite genome has one writer; the team genome overrides this with an advisory lock (pg/team.py)."""
        del source
        return SoleIndexer()

    def list_sources(self) -> list[SourceRow]:
        return [_row(r) for r in self.conn.execute(f"SELECT {_COLUMNS} FROM sources ORDER BY path")]

    def get_source(self, path: str) -> SourceRow | None:
        row = self.conn.execute(f"SELECT {_COLUMNS} FROM sources WHERE path = ?", (path,)).fetchone()
        return _row(row) if row else None

    def add_source(self, path: str, project: str | None, now: float, *, pending: str | None = None) -> SourceRow:
        """Insert the folder, or bring back a row marked for removal; an existing row keeps its numbers."""
        with self.transaction(changes_genes=False) as tx:
            tx.execute("INSERT INTO sources(path, project, added_at, state, pending) VALUES (?, ?, ?, 'new', ?) "
                       "ON CONFLICT (path) DO UPDATE SET project = COALESCE(excluded.project, sources.project), "
                       "pending = excluded.pending, "
                       "state = CASE WHEN sources.state = 'removing' THEN 'new' ELSE sources.state END",
                       (path, project, now, pending))
        row = self.get_source(path)
        assert row is not None
        return row

    def delete_source(self, path: str) -> bool:
        with self.transaction(changes_genes=False) as tx:
            return bool(tx.execute("DELETE FROM sources WHERE path = ?", (path,)).rowcount > 0)

    def set_source_pending(self, path: str, pending: str | None) -> None:
        with self.transaction(changes_genes=False) as tx:
            tx.execute("UPDATE sources SET pending = ? WHERE path = ?", (pending, path))

    def set_source_state(self, path: str, state: str, *, last_error: str | None = None) -> None:
        with self.transaction(changes_genes=False) as tx:
            tx.execute("UPDATE sources SET state = ?, last_error = ? WHERE path = ?", (state, last_error, path))

    def record_source_index(self, path: str, *, at: float, skipped: list[dict[str, str]], skipped_total: int,
                            last_error: str | None, state: str, max_skipped: int) -> None:
        """After an indexing pass: the folder's file and gene counts, its skipped files (bounded), its error."""
        files, genes = self.counts_under(path)
        kept = json.dumps(skipped[:max_skipped])
        with self.transaction(changes_genes=False) as tx:
            tx.execute("UPDATE sources SET last_indexed = ?, files = ?, genes = ?, skipped = ?, skipped_total = ?, "
                       "last_error = ?, state = ? WHERE path = ?",
                       (at, files, genes, kept, skipped_total, last_error, state, path))

    def counts_under(self, folder: str) -> tuple[int, int]:
        """Files and genes the files table holds under `folder` (a range scan of its primary key)."""
        row = self.conn.execute("SELECT COUNT(*), COALESCE(SUM(genes), 0) FROM files WHERE path >= ? AND path < ?",
                                _prefix_range(folder)).fetchone()
        return int(row[0]), int(row[1])

    def paths_under(self, folder: str) -> list[str]:
        """Indexed file paths under `folder` (a folder that vanished: its files retire one by one)."""
        return [str(r[0]) for r in self.conn.execute("SELECT path FROM files WHERE path >= ? AND path < ?",
                                                     _prefix_range(folder))]

    def meta_value(self, key: str) -> str | None:
        row = self.conn.execute(f"SELECT value FROM {self.meta_table} WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta_value(self, key: str, value: str) -> None:
        with self.transaction(changes_genes=False) as tx:
            tx.execute(f"INSERT INTO {self.meta_table}(key, value) VALUES (?, ?) "
                       "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, value))

    def _paused_key(self) -> str:
        """Pausing is one developer's choice for their own machine: on a team genome each backend keeps the
        flag under its party (user@device), so one developer's pause never stops another's indexing. One
        user's SQLite file has no party and keeps the plain key."""
        party = getattr(self, "party", "")
        return f"{PAUSED_KEY}:{party}" if party else PAUSED_KEY

    def sources_paused(self) -> bool:
        return self.meta_value(self._paused_key()) == "1"

    def set_sources_paused(self, value: bool) -> None:
        self.set_meta_value(self._paused_key(), "1" if value else "0")


def as_dict(row: SourceRow) -> dict[str, Any]:
    return {"path": row.path, "project": row.project, "added_at": row.added_at, "last_indexed": row.last_indexed,
            "files": row.files, "genes": row.genes, "skipped": list(row.skipped), "skipped_total": row.skipped_total,
            "last_error": row.last_error, "state": row.state, "pending": row.pending}
