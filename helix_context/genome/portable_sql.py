"""SQL for genome export / import (helix_context/portable.py holds the file format).

Export reads every column of a gene (including the ones the Gene dataclass
does not carry: retirement, last access, the changed-source mark, the raw
embedding blob) inside one read transaction, so a backend writing at the same
time cannot tear the snapshot. Import writes through a Genome transaction
(`Genome.transaction()`), and keeps the contentless FTS index in step using
the same text derivation as the store.

Also here: the read-only change markers (PRAGMA data_version, the meta
generation) that benchmarks/monitor.py watches to catch a genome written
during a benchmark run.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from helix_context.genome.store import Genome
from helix_context.genome.stored_form import pack_text, unpack_text

# every genes column but the integer id; the export carries them all
# (tests/test_portable.py fails when the schema gains a column this list lacks)
GENE_FIELDS = (
    "gene_id", "content", "content_type", "language", "source_path", "project", "start_line", "end_line", "symbol",
    "tags", "facts", "source_kind", "volatility_class", "authority_class", "observed_at", "last_verified_at",
    "source_mtime", "source_hash", "org", "device", "user", "agent", "tier", "access_count", "last_access_at",
    "retired_at", "source_changed", "embedding",
)
FILE_FIELDS = ("path", "project", "size", "mtime_ns", "content_hash", "genes", "ingested_at")

_SELECT_GENES = "SELECT id, " + ", ".join(GENE_FIELDS) + " FROM genes WHERE id > ? ORDER BY id LIMIT ?"
# an incoming gene without a vector keeps the stored one (a vector is never lost by an import)
_UPDATE_SET = ", ".join("embedding = COALESCE(?, embedding)" if c == "embedding" else f"{c} = ?"
                        for c in GENE_FIELDS if c != "gene_id")


@contextmanager
def snapshot(genome: Genome) -> Iterator[sqlite3.Connection]:
    """A read transaction on this thread's connection: every read inside sees one state of the genome."""
    conn = genome.conn
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")


def iter_gene_rows(conn: sqlite3.Connection, batch: int = 500) -> Iterator[tuple[dict[str, Any], list[list[Any]]]]:
    """(gene row as a dict of GENE_FIELDS, [[path, start_line, end_line], ...]) for every gene, retired ones too."""
    last = 0
    while True:
        rows = conn.execute(_SELECT_GENES, (last, batch)).fetchall()
        if not rows:
            return
        ids = [r[0] for r in rows]
        marks = ",".join("?" * len(ids))
        sources: dict[int, list[list[Any]]] = {}
        for gene, path, start, end in conn.execute(
                f"SELECT gene, path, start_line, end_line FROM gene_sources WHERE gene IN ({marks}) "
                "ORDER BY gene, path, start_line", ids):
            sources.setdefault(gene, []).append([path, start, end])
        for row in rows:
            data = dict(zip(GENE_FIELDS, row[1:]))
            data["content"] = unpack_text(data["content"])  # text, whatever the store's encoding
            yield data, sources.get(row[0], [])
        last = ids[-1]


def iter_file_rows(conn: sqlite3.Connection) -> Iterator[dict[str, Any]]:
    for row in conn.execute("SELECT " + ", ".join(FILE_FIELDS) + " FROM files ORDER BY path"):
        yield dict(zip(FILE_FIELDS, row))


def iter_coactivation_rows(conn: sqlite3.Connection) -> Iterator[tuple[str, str, int, float]]:
    yield from conn.execute(
        "SELECT ga.gene_id, gb.gene_id, c.count, c.last_at FROM coactivation c "
        "JOIN genes ga ON ga.id = c.a JOIN genes gb ON gb.id = c.b ORDER BY c.a, c.b")


# ── import ──


def existing_genes(conn: sqlite3.Connection | Any, gene_ids: Sequence[str]) -> dict[str, tuple[int, float, float]]:
    """{gene_id: (rowid, last_verified_at, observed_at)} for the ids already stored."""
    out: dict[str, tuple[int, float, float]] = {}
    ids = list(dict.fromkeys(gene_ids))
    for start in range(0, len(ids), 500):
        batch = ids[start:start + 500]
        marks = ",".join("?" * len(batch))
        for gid, rowid, verified, observed in conn.execute(
                f"SELECT gene_id, id, last_verified_at, observed_at FROM genes WHERE gene_id IN ({marks})", batch):
            out[gid] = (rowid, verified, observed)
    return out


def existing_files(conn: sqlite3.Connection | Any, paths: Sequence[str]) -> dict[str, float]:
    """{path: ingested_at} for the file records already stored."""
    out: dict[str, float] = {}
    items = list(dict.fromkeys(paths))
    for start in range(0, len(items), 500):
        batch = items[start:start + 500]
        marks = ",".join("?" * len(batch))
        for path, ingested_at in conn.execute(f"SELECT path, ingested_at FROM files WHERE path IN ({marks})", batch):
            out[path] = ingested_at
    return out


def fts_values(row: dict[str, Any]) -> tuple[str, str, str]:
    return Genome.fts_values(row["content"], row["tags"], row["source_path"])


def _values(row: dict[str, Any], fields: Sequence[str] = GENE_FIELDS) -> list[Any]:
    """Column values in store representation (content packed as the store keeps it)."""
    return [pack_text(row[c]) if c == "content" else row[c] for c in fields]


def insert_gene(tx: Any, row: dict[str, Any]) -> int:
    """A new gene row (content as text; tags '\\n'-joined, facts JSON), indexed unless retired."""
    marks = ",".join("?" * len(GENE_FIELDS))
    cur = tx.execute(f"INSERT INTO genes({', '.join(GENE_FIELDS)}) VALUES ({marks})", _values(row))
    rowid = int(cur.lastrowid)
    if row["retired_at"] is None:
        tx.execute("INSERT INTO genes_fts(rowid, body, tags, path) VALUES (?, ?, ?, ?)", (rowid, *fts_values(row)))
    return rowid


def overwrite_gene(tx: Any, rowid: int, row: dict[str, Any]) -> None:
    """Replace every column of a stored gene with `row`, re-indexing it (FTS) from the new values."""
    old = tx.execute("SELECT content, tags, source_path, retired_at FROM genes WHERE id = ?", (rowid,)).fetchone()
    if old is not None and old[3] is None:  # only live genes are in the index
        tx.execute("INSERT INTO genes_fts(genes_fts, rowid, body, tags, path) VALUES ('delete', ?, ?, ?, ?)",
                   (rowid, *Genome.fts_values(old[0], old[1], old[2])))
    values = _values(row, [c for c in GENE_FIELDS if c != "gene_id"])
    tx.execute(f"UPDATE genes SET {_UPDATE_SET} WHERE id = ?", (*values, rowid))
    if row["retired_at"] is None:
        tx.execute("INSERT INTO genes_fts(rowid, body, tags, path) VALUES (?, ?, ?, ?)", (rowid, *fts_values(row)))


def add_sources(tx: Any, rowid: int, sources: Sequence[Sequence[Any]]) -> int:
    """Source spans for a gene (kept: a span already stored is not duplicated). Returns rows added."""
    added = 0
    for path, start, end in sources:
        added += tx.execute("INSERT OR IGNORE INTO gene_sources(gene, path, start_line, end_line) VALUES (?, ?, ?, ?)",
                            (rowid, path, start, end)).rowcount
    return added


def missing_sources(conn: sqlite3.Connection | Any, rowid: int, sources: Sequence[Sequence[Any]]) -> int:
    """How many of these spans the gene does not have yet."""
    return sum(1 for path, start, _end in sources if conn.execute(
        "SELECT 1 FROM gene_sources WHERE path = ? AND start_line = ? AND gene = ?", (path, start, rowid)).fetchone()
        is None)


def upsert_file(tx: Any, row: dict[str, Any]) -> None:
    marks = ",".join("?" * len(FILE_FIELDS))
    tx.execute(f"INSERT OR REPLACE INTO files({', '.join(FILE_FIELDS)}) VALUES ({marks})",
               [row[c] for c in FILE_FIELDS])


def rowids_for(tx: Any, gene_ids: Sequence[str]) -> dict[str, int]:
    return {gid: found[0] for gid, found in existing_genes(tx, gene_ids).items()}


def link_state(conn: sqlite3.Connection | Any, a: int, b: int) -> tuple[int, float] | None:
    """(count, last_at) of the stored co-activation link between two rowids, or None."""
    row = conn.execute("SELECT count, last_at FROM coactivation WHERE a = ? AND b = ?", (min(a, b), max(a, b))).fetchone()
    return (int(row[0]), float(row[1])) if row else None


def write_link(tx: Any, a: int, b: int, count: int, last_at: float) -> None:
    """Insert or replace the co-activation link between two rowids (stored with a < b)."""
    tx.execute("INSERT INTO coactivation(a, b, count, last_at) VALUES (?, ?, ?, ?) "
               "ON CONFLICT(a, b) DO UPDATE SET count = excluded.count, last_at = excluded.last_at",
               (min(a, b), max(a, b), count, last_at))


def encode_tags(tags: Sequence[str]) -> str:
    return "\n".join(tags)


def decode_tags(stored: str) -> list[str]:
    return [t for t in (stored or "").split("\n") if t]


def encode_facts(facts: Sequence[Sequence[str]]) -> str:
    return json.dumps([list(f) for f in facts])


def decode_facts(stored: str) -> list[list[str]]:
    return [list(f) for f in json.loads(stored or "[]")]


# ── read-only change markers (benchmarks/monitor.py watches a genome for writes during a run) ──


def open_readonly(path: str) -> sqlite3.Connection:
    """A read-only connection that never creates, migrates or locks the genome for writing."""
    from pathlib import Path

    uri = f"{Path(path).resolve().as_uri()}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=2.0, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 2000")
    return conn


def change_markers(conn: sqlite3.Connection) -> dict[str, int | None]:
    """PRAGMA data_version (moves when another connection commits) and the meta generation counter."""
    data_version = int(conn.execute("PRAGMA data_version").fetchone()[0])
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        generation = int(row[0]) if row else None
    except sqlite3.OperationalError:  # not a Helix genome (no meta table): data_version still works
        generation = None
    return {"data_version": data_version, "generation": generation}
