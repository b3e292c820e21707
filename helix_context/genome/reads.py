"""Reads of genes, files and their sources, for both genomes (SQL both engines take, `?` marks).

Why one module: `get_gene`, `iter_genes` and the file records are what ingest, the live check,
export and copy read; written once, the two backends cannot answer them differently.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from helix_context.genome.records import GENE_COLUMNS, FileRecord, row_to_gene
from helix_context.models import Gene

_FILE_COLUMNS = "path, project, size, mtime_ns, content_hash, genes, ingested_at"
_CHUNK = 500  # ids per IN (...) list


class GeneReadsMixin:
    """Needs `conn` from the genome."""

    conn: Any

    def file_record(self, path: str) -> FileRecord | None:
        row = self.conn.execute(f"SELECT {_FILE_COLUMNS} FROM files WHERE path = ?", (path,)).fetchone()
        return FileRecord(*row) if row else None

    def file_records(self, under: str | None = None) -> dict[str, FileRecord]:
        sql = f"SELECT {_FILE_COLUMNS} FROM files"
        args: tuple[Any, ...] = ()
        if under:
            sql += " WHERE path >= ? AND path < ?"
            args = (under, under + "\U0010ffff")
        return {row[0]: FileRecord(*row) for row in self.conn.execute(sql, args)}

    def get_gene(self, gene_id: str) -> Gene | None:
        row = self.conn.execute(f"SELECT {GENE_COLUMNS} FROM genes WHERE gene_id = ?", (gene_id,)).fetchone()
        return row_to_gene(row) if row else None

    def genes_by_rowid(self, rowids: Iterable[int]) -> dict[int, Gene]:
        ids = list(dict.fromkeys(int(r) for r in rowids))
        out: dict[int, Gene] = {}
        for start in range(0, len(ids), _CHUNK):
            batch = ids[start:start + _CHUNK]
            marks = ",".join("?" * len(batch))
            for row in self.conn.execute(f"SELECT {GENE_COLUMNS} FROM genes WHERE id IN ({marks})", batch):
                out[int(row[0])] = row_to_gene(row)
        return out

    def gene_marks(self, rowids: Iterable[int]) -> dict[int, tuple[str, str, str, str, str]]:
        """rowid → (tier, device, user, org, agent): whether a ranked gene may be returned (not archived,
        the asking party's), without reading and decompressing its text as genes_by_rowid does."""
        ids = list(dict.fromkeys(int(r) for r in rowids))
        out: dict[int, tuple[str, str, str, str, str]] = {}
        for start in range(0, len(ids), _CHUNK):
            batch = ids[start:start + _CHUNK]
            marks = ",".join("?" * len(batch))
            for rowid, *mark in self.conn.execute(
                    f'SELECT id, tier, device, "user", org, agent FROM genes WHERE id IN ({marks})', batch):
                out[int(rowid)] = tuple(mark)
        return out

    def genes_for_source(self, path: str) -> list[Gene]:
        rows = self.conn.execute(
            f"SELECT {GENE_COLUMNS} FROM genes WHERE id IN (SELECT gene FROM gene_sources WHERE path = ?) "
            "ORDER BY start_line", (path,))
        return [row_to_gene(r) for r in rows]

    def iter_genes(self, *, include_retired: bool = False, batch: int = 1000) -> Iterator[Gene]:
        live = "" if include_retired else "AND retired_at IS NULL"
        last = 0
        while True:
            rows = self.conn.execute(
                f"SELECT {GENE_COLUMNS} FROM genes WHERE id > ? {live} ORDER BY id LIMIT ?", (last, batch)).fetchall()
            if not rows:
                return
            for row in rows:
                yield row_to_gene(row)
            last = int(rows[-1][0])

    def sources_of(self, rowid: int) -> list[tuple[str, int, int]]:
        return [(str(p), int(s), int(e)) for p, s, e in self.conn.execute(
            "SELECT path, start_line, end_line FROM gene_sources WHERE gene = ? ORDER BY path", (rowid,))]
