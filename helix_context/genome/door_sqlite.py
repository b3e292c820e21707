"""SQLite's side of the write door (write_door.py): its vector columns and its FTS5 lexical writer.

Why the writer buffers: new genes' full-text rows go in a few multi-row inserts per batch, not one
statement per gene. A gene unindexed while still buffered is simply dropped from the buffer; one
already in the index is deleted by replaying the exact values it was indexed with, read back from
its genes row (the index is contentless: see fulltext.py for what a wrong replay does).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from helix_context.genome.fulltext import FullTextMixin
from helix_context.genome.stored_form import StoredForm
from helix_context.genome.vectors import encode_vector
from helix_context.genome.write_door import DoorTx


_INSERT_ROWS = 200  # genes per multi-row INSERT (x 26 values: far below SQLite's 32766 variables)


class FtsWriter:
    """The FTS5 index of one SQLite transaction (write_door.LexicalWriter)."""

    def __init__(self, tx: DoorTx) -> None:
        self.tx = tx
        self.rows: dict[int, tuple[str, str, str]] = {}

    def index(self, rowid: int, content: str | bytes, tags: str, path: str | None, form: StoredForm | None) -> None:
        self.rows[rowid] = FullTextMixin.fts_values(content, tags, path, form.fts_body if form is not None else None)

    def unindex(self, rowid: int) -> None:
        if self.rows.pop(rowid, None) is None:
            # a retired gene has no full-text row: "deleting" one that is not there corrupts the index
            row = self.tx.execute("SELECT content, tags, source_path FROM genes WHERE id = ? AND retired_at IS NULL",
                                  (rowid,)).fetchone()
            if row is not None:
                self.tx.execute("INSERT INTO genes_fts(genes_fts, rowid, body, tags, path) "
                                "VALUES ('delete', ?, ?, ?, ?)", (rowid, *FullTextMixin.fts_values(*row)))

    def flush(self) -> None:
        FullTextMixin._fts_insert_many(self.tx, [(rowid, *values) for rowid, values in self.rows.items()])
        self.rows.clear()


class SqliteDialect:
    """write_door.DoorDialect for SQLite: one writer at a time (no row locks); vectors as int8 blobs
    tagged with the model that made them."""

    lock_rows = ""
    vector_columns = ", embedding, vector_model"
    vector_set = "embedding = ?, vector_model = ?"
    vector_missing = "(embedding IS NULL OR vector_model IS NOT ?)"

    def __init__(self, model_id: Callable[[], int]) -> None:
        self._model_id = model_id  # the genome's active vector model (it can change at run time)

    def vector_values(self, vector: np.ndarray | None) -> tuple[Any, ...]:
        return (None, None) if vector is None else (encode_vector(vector), self._model_id())

    def vector_missing_values(self) -> tuple[Any, ...]:
        return (self._model_id(),)

    def member(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} IN ({', '.join('?' * len(values))})", list(values)

    def insert_genes(self, tx: DoorTx, columns: str, rows: Sequence[tuple[Any, ...]]) -> list[tuple[int, str]]:
        """A few hundred rows per statement: one pass through the GIL each, not one per gene."""
        out: list[tuple[int, str]] = []
        for start in range(0, len(rows), _INSERT_ROWS):
            part = rows[start:start + _INSERT_ROWS]
            values = ", ".join([f"({', '.join('?' * len(part[0]))})"] * len(part))
            out.extend(tx.execute(f"INSERT INTO genes({columns}) VALUES {values} ON CONFLICT (gene_id) DO NOTHING "
                                  "RETURNING id, gene_id", [v for row in part for v in row]).fetchall())
        return out

    def lexical(self, tx: Any) -> FtsWriter:
        return FtsWriter(tx)
