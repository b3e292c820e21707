"""Genome upkeep and size: changed-source marks, aging, checkpoint, vacuum, integrity, stats.

A mixin of `Genome` (store.py), split from it so the store keeps to reading and writing genes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from contextlib import closing
from typing import Any

from helix_context.genome.scan import scan_connection
from helix_context.genome.schema import SCHEMA_VERSION


class GeneUpkeepMixin:
    """Upkeep of both genomes (SQL both engines take, `?` marks); needs `conn` and `transaction`."""

    conn: Any
    transaction: Any
    flush_deliveries: Callable[[], None]  # learning.LearningMixin's

    def mark_changed_sources(self, changed_paths: Iterable[str]) -> int:
        with self.transaction() as tx:
            n = 0
            for path in changed_paths:
                n += int(tx.execute("UPDATE genes SET source_changed = 1 WHERE source_path = ?", (path,)).rowcount)
            return n

    def age_genes(self, older_than: float) -> int:
        """Open genes neither delivered nor re-verified since `older_than` (unix s) move to tier "aging"."""
        with self.transaction(changes_genes=False) as tx:
            return int(tx.execute(
                "UPDATE genes SET tier = 'aging' WHERE tier = 'open' AND retired_at IS NULL "
                "AND last_verified_at < ? AND COALESCE(last_access_at, 0) < ?", (older_than, older_than)).rowcount)

    def source_paths(self) -> list[str]:
        return [str(r[0]) for r in self.conn.execute("SELECT path FROM files ORDER BY path")]


class MaintenanceMixin(GeneUpkeepMixin):
    """Needs `conn`, `path`, `transaction`, `generation`, `_write_lock` from Genome."""

    path: Any
    _write_lock: Any
    vector_model: str
    vector_model_id: int
    generation: Callable[[], int]  # Genome's, declared here for the type checker

    # ── maintenance ──

    def checkpoint(self) -> dict[str, int]:
        busy, log_frames, checkpointed = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return {"busy": busy, "log_frames": log_frames, "checkpointed": checkpointed}

    def vacuum(self) -> dict[str, int]:
        before = self.db_bytes()
        with self._write_lock:
            self.conn.execute("VACUUM")
        self.checkpoint()
        return {"bytes_before": before, "bytes_after": self.db_bytes()}

    def integrity_check(self) -> list[str]:
        """SQLite's own page and index checks; a file too damaged to check is itself the problem found."""
        try:
            problems = [r[0] for r in self.conn.execute("PRAGMA integrity_check")]
        except sqlite3.DatabaseError as exc:
            return [f"{exc}: the genome file {self.path} is damaged; move it aside, then import an export "
                    "(`helix import`) or ingest your folders again"]
        return [] if problems == ["ok"] else problems

    def db_bytes(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def wal_bytes(self) -> int:
        wal = self.path.with_name(self.path.name + "-wal")
        return wal.stat().st_size if wal.exists() else 0

    def stats(self) -> dict[str, Any]:
        self.flush_deliveries()  # usage counts and links include every answer given so far
        with closing(scan_connection(self.path, immutable=getattr(self, "disk_full", False))) as c:  # scans the genes table: never through the map (scan.py)
            return self._stats(c)

    def _stats(self, c: sqlite3.Connection) -> dict[str, Any]:
        live = "retired_at IS NULL"
        return {
            **common_stats(c),
            "db_bytes": self.db_bytes(),
            "wal_bytes": self.wal_bytes(),
            "with_embeddings": c.execute(f"SELECT COUNT(*) FROM genes WHERE {live} AND embedding IS NOT NULL "
                                         "AND vector_model = ?", (self.vector_model_id,)).fetchone()[0],
            "stale_embeddings": c.execute(f"SELECT COUNT(*) FROM genes WHERE {live} AND embedding IS NOT NULL "
                                          "AND vector_model IS NOT ?", (self.vector_model_id,)).fetchone()[0],
            "vector_model": self.vector_model,
            "coactivation_links": c.execute("SELECT COUNT(*) FROM coactivation").fetchone()[0],
            "schema_version": SCHEMA_VERSION,
            "generation": self.generation(),
        }


def common_stats(c: Any) -> dict[str, Any]:
    """What `helix stats`, /stats and the dashboard show of any genome (SQL both engines take, `?` marks)."""
    live = "retired_at IS NULL"
    total = c.execute(f"SELECT COUNT(*), COALESCE(SUM(LENGTH(content)), 0) FROM genes WHERE {live}").fetchone()

    def by(col: str, where: str = live) -> dict[str, int]:
        return {str(k): int(n) for k, n in c.execute(
            f"SELECT COALESCE({col}, '-'), COUNT(*) FROM genes WHERE {where} GROUP BY 1 ORDER BY 2 DESC")}

    files = c.execute("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM files").fetchone()
    return {
        "total_genes": int(total[0]),
        "raw_bytes": int(files[1]) if files[1] else int(total[1]),
        "stored_content_bytes": int(total[1]),  # zlib-compressed
        "files": int(files[0]),
        "genes_by_tier": by("tier", "1=1"),
        "genes_by_source_kind": by("source_kind"),
        "genes_by_content_type": by("content_type"),
        "genes_by_project": by("project"),
        "retired_genes": int(c.execute("SELECT COUNT(*) FROM genes WHERE retired_at IS NOT NULL").fetchone()[0]),
    }
