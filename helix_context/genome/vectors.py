"""Stored gene vectors: the int8 codec, and the reads the dense index is kept in step with.

Why a change log: the genome has more than one writer (the server, a CLI ingest in
another process), and the dense index lives outside SQLite. Triggers (schema V3) append
a gene's rowid to `vector_changes` whenever its vector appears, it is retired or
revived, or it is deleted; an index remembers the last sequence number it applied and
replays only what came after. The log is state-based (it names genes, not operations),
so replaying an entry twice is harmless. Retention: entries at or below the sequence
of the index file on disk are deleted when that file is saved, and the whole log is
cleared when no index file exists (the next index is built from the genes table).

Which model: each vector carries the id (table vector_models, schema V6) of the
embedding model that made it. Every read here takes the active model's id and
returns only its vectors, so vectors of two models are never compared; after a
model change the others count as stale until they are re-embedded.
"""

from __future__ import annotations

import sqlite3
import struct
from collections.abc import Iterator, Sequence

import numpy as np

EMBED_DIM = 384
VECTOR_BYTES = 4 + EMBED_DIM  # float32 scale + one int8 per dimension
_CHUNK = 500


def encode_vector(vec: np.ndarray) -> bytes:
    """int8 with a per-vector scale: 388 bytes instead of 1536, cosine within ~0.01 of float."""
    vec = np.asarray(vec, dtype=np.float32).reshape(-1)
    peak = float(np.max(np.abs(vec))) if vec.size else 0.0
    scale = peak / 127.0 if peak > 0 else 1.0
    quantised = np.clip(np.rint(vec / scale), -127, 127).astype(np.int8)
    return bytes(struct.pack("<f", scale) + quantised.tobytes())


def decode_vector(blob: bytes) -> np.ndarray:
    scale = float(struct.unpack_from("<f", blob)[0])
    decoded: np.ndarray = np.frombuffer(blob, dtype=np.int8, offset=4).astype(np.float32) * scale
    return decoded


def int8_rows(blobs: Sequence[bytes]) -> np.ndarray:
    """Stored vectors as an (n, 384) int8 matrix, without their scales.

    Cosine does not change when a vector is scaled, so the int8 codes themselves are
    what an index needs; this keeps 384 bytes per gene instead of 1536.
    """
    if not blobs:
        return np.zeros((0, EMBED_DIM), dtype=np.int8)
    raw = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), VECTOR_BYTES)
    return raw[:, 4:].view(np.int8)


def model_id(conn: sqlite3.Connection, name: str) -> int:
    """The id of the embedding model `name`, added on first use (in the caller's transaction)."""
    row = conn.execute("SELECT id FROM vector_models WHERE name = ?", (name,)).fetchone()
    if row is not None:
        return int(row[0])
    return int(conn.execute("INSERT INTO vector_models(name) VALUES (?)", (name,)).lastrowid or 0)


def known_model_id(conn: sqlite3.Connection, name: str) -> int | None:
    row = conn.execute("SELECT id FROM vector_models WHERE name = ?", (name,)).fetchone()
    return int(row[0]) if row is not None else None


def recorded_model(conn: sqlite3.Connection) -> str | None:
    """The model named active by the last process that chose one (meta 'vector_model')."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'vector_model'").fetchone()
    return str(row[0]) if row is not None else None


def record_model(conn: sqlite3.Connection, name: str) -> None:
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('vector_model', ?)", (name,))


def mark_import(conn: sqlite3.Connection) -> None:
    """Count an import (meta 'imports'): it may have stored another model's vectors, which a process that has the
    genome open learns by this mark changing (vector_models.has_stale_vectors), not by counting per question."""
    conn.execute("INSERT INTO meta(key, value) VALUES ('imports', '1') "
                 "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1")


def import_mark(conn: sqlite3.Connection) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = 'imports'").fetchone()
    return str(row[0]) if row is not None else None


def drop_unused_models(conn: sqlite3.Connection, keep: int) -> int:
    """Retention: forget model ids no stored vector uses any more (the active one stays)."""
    return conn.execute("DELETE FROM vector_models WHERE id != ? AND id NOT IN "
                        "(SELECT DISTINCT vector_model FROM genes WHERE vector_model IS NOT NULL)", (keep,)).rowcount


def stale_vector_count(conn: sqlite3.Connection, model: int) -> int:
    """Live genes whose vector another model made (to be re-embedded)."""
    return int(conn.execute(
        "SELECT COUNT(*) FROM genes WHERE retired_at IS NULL AND embedding IS NOT NULL "
        "AND vector_model IS NOT ?", (model,)).fetchone()[0])


def stale_among(conn: sqlite3.Connection, model: int, rowids: Sequence[int]) -> list[int]:
    """Those of `rowids` (live) whose vector another model made, in the order given."""
    ids = list(dict.fromkeys(int(r) for r in rowids))
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    found = {int(r[0]) for r in conn.execute(
        f"SELECT id FROM genes WHERE id IN ({marks}) AND retired_at IS NULL AND embedding IS NOT NULL "
        "AND vector_model IS NOT ?", (*ids, model))}
    return [r for r in ids if r in found]


def stale_vector_rowids(conn: sqlite3.Connection, model: int, limit: int) -> list[int]:
    return [int(r[0]) for r in conn.execute(
        "SELECT id FROM genes WHERE retired_at IS NULL AND embedding IS NOT NULL AND vector_model IS NOT ? "
        "ORDER BY id LIMIT ?", (model, limit))]


def iter_live_vectors(conn: sqlite3.Connection, model: int,
                      batch: int = 20_000) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(rowids, int8 matrix) of every live gene with a vector of `model`, `batch` rows at a time."""
    last = 0
    while True:
        rows = conn.execute(
            "SELECT id, embedding FROM genes WHERE id > ? AND retired_at IS NULL AND embedding IS NOT NULL "
            "AND vector_model = ? ORDER BY id LIMIT ?", (last, model, batch)).fetchall()
        if not rows:
            return
        last = rows[-1][0]
        yield np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)), int8_rows([r[1] for r in rows])


def live_vectors_of(conn: sqlite3.Connection, rowids: Sequence[int], model: int) -> tuple[np.ndarray, np.ndarray]:
    """The subset of `rowids` that is live with a vector of `model`, and those vectors (int8)."""
    ids: list[int] = []
    blobs: list[bytes] = []
    for start in range(0, len(rowids), _CHUNK):
        part = list(rowids[start:start + _CHUNK])
        marks = ",".join("?" * len(part))
        for rowid, blob in conn.execute(
                f"SELECT id, embedding FROM genes WHERE id IN ({marks}) AND retired_at IS NULL "
                "AND embedding IS NOT NULL AND vector_model = ?", [*part, model]):
            ids.append(rowid)
            blobs.append(blob)
    return np.asarray(ids, dtype=np.int64), int8_rows(blobs)


def live_vector_count(conn: sqlite3.Connection, model: int) -> int:
    return int(conn.execute(
        "SELECT COUNT(*) FROM genes WHERE retired_at IS NULL AND embedding IS NOT NULL AND vector_model = ?",
        (model,)).fetchone()[0])


def last_change(conn: sqlite3.Connection) -> int:
    """The newest sequence number of the change log (0 when it was never written)."""
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'vector_changes'").fetchone()
    return int(row[0]) if row else 0


def first_change(conn: sqlite3.Connection) -> int | None:
    row = conn.execute("SELECT MIN(seq) FROM vector_changes").fetchone()
    return int(row[0]) if row and row[0] is not None else None


def changes_after(conn: sqlite3.Connection, seq: int, limit: int) -> tuple[int, list[int]]:
    """Up to `limit` log entries after `seq`: (the last sequence read, distinct gene rowids)."""
    rows = conn.execute("SELECT seq, gene FROM vector_changes WHERE seq > ? ORDER BY seq LIMIT ?",
                        (seq, limit)).fetchall()
    if not rows:
        return seq, []
    return int(rows[-1][0]), list(dict.fromkeys(int(r[1]) for r in rows))


def trim_changes(conn: sqlite3.Connection, upto: int) -> int:
    """Forget log entries at or below `upto` (an index file on disk already holds them)."""
    return conn.execute("DELETE FROM vector_changes WHERE seq <= ?", (upto,)).rowcount
