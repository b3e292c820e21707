"""The sources table: folders the user chose to keep indexed (SQL only; the logic is in helix_context/sources/).

Bookkeeping writes use `transaction(changes_genes=False)`: adding a folder to
the list must not throw away the retriever's caches; the genes themselves are
written by the ingest, which bumps the generation as usual.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from helix_context.genome.store import Genome

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


def list_sources(genome: Genome) -> list[SourceRow]:
    return [_row(r) for r in genome.conn.execute(f"SELECT {_COLUMNS} FROM sources ORDER BY path")]


def get_source(genome: Genome, path: str) -> SourceRow | None:
    row = genome.conn.execute(f"SELECT {_COLUMNS} FROM sources WHERE path = ?", (path,)).fetchone()
    return _row(row) if row else None


def add_source(genome: Genome, path: str, project: str | None, now: float, *, pending: str | None = None) -> SourceRow:
    """Insert the folder, or bring back a row marked for removal; an existing row keeps its numbers."""
    with genome.transaction(changes_genes=False) as tx:
        tx.execute("INSERT INTO sources(path, project, added_at, state, pending) VALUES (?, ?, ?, 'new', ?) "
                   "ON CONFLICT(path) DO UPDATE SET project = COALESCE(excluded.project, project), "
                   "pending = excluded.pending, state = CASE WHEN state = 'removing' THEN 'new' ELSE state END",
                   (path, project, now, pending))
    row = get_source(genome, path)
    assert row is not None
    return row


def delete_source(genome: Genome, path: str) -> bool:
    with genome.transaction(changes_genes=False) as tx:
        return tx.execute("DELETE FROM sources WHERE path = ?", (path,)).rowcount > 0


def set_pending(genome: Genome, path: str, pending: str | None) -> None:
    with genome.transaction(changes_genes=False) as tx:
        tx.execute("UPDATE sources SET pending = ? WHERE path = ?", (pending, path))


def set_state(genome: Genome, path: str, state: str, *, last_error: str | None = None) -> None:
    with genome.transaction(changes_genes=False) as tx:
        tx.execute("UPDATE sources SET state = ?, last_error = ? WHERE path = ?", (state, last_error, path))


def record_index(genome: Genome, path: str, *, at: float, skipped: list[dict[str, str]], skipped_total: int,
                 last_error: str | None, state: str, max_skipped: int) -> None:
    """After an indexing pass: the folder's file and gene counts, its skipped files (bounded), its error."""
    files, genes = counts_under(genome, path)
    kept = json.dumps(skipped[:max_skipped])
    with genome.transaction(changes_genes=False) as tx:
        tx.execute("UPDATE sources SET last_indexed = ?, files = ?, genes = ?, skipped = ?, skipped_total = ?, "
                   "last_error = ?, state = ? WHERE path = ?",
                   (at, files, genes, kept, skipped_total, last_error, state, path))


def counts_under(genome: Genome, folder: str) -> tuple[int, int]:
    """Files and genes the files table holds under `folder` (a range scan of its primary key)."""
    low = folder.rstrip("/\\")
    sep = "\\" if "\\" in low and "/" not in low else "/"
    prefix = low + sep
    row = genome.conn.execute("SELECT COUNT(*), COALESCE(SUM(genes), 0) FROM files WHERE path >= ? AND path < ?",
                              (prefix, prefix + "\U0010ffff")).fetchone()
    return int(row[0]), int(row[1])


def paths_under(genome: Genome, folder: str) -> list[str]:
    """Indexed file paths under `folder` (a folder that vanished: its files retire one by one)."""
    low = folder.rstrip("/\\")
    sep = "\\" if "\\" in low and "/" not in low else "/"
    prefix = low + sep
    return [r[0] for r in genome.conn.execute("SELECT path FROM files WHERE path >= ? AND path < ?",
                                              (prefix, prefix + "\U0010ffff"))]


def paused(genome: Genome) -> bool:
    row = genome.conn.execute("SELECT value FROM meta WHERE key = ?", (PAUSED_KEY,)).fetchone()
    return bool(row and row[0] == "1")


def set_paused(genome: Genome, value: bool) -> None:
    with genome.transaction(changes_genes=False) as tx:
        tx.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (PAUSED_KEY, "1" if value else "0"))


def as_dict(row: SourceRow) -> dict[str, Any]:
    return {"path": row.path, "project": row.project, "added_at": row.added_at, "last_indexed": row.last_indexed,
            "files": row.files, "genes": row.genes, "skipped": list(row.skipped), "skipped_total": row.skipped_total,
            "last_error": row.last_error, "state": row.state, "pending": row.pending}
