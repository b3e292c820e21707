"""SQL for genome export / import (helix_context/portable/ holds the file format and the checks).

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
from typing import Any, Protocol

from helix_context.genome import activity_sql, vectors
from helix_context.genome.retention import cap_sessions
from helix_context.genome.store import Genome
from helix_context.genome.stored_form import pack_text, unpack_text

# every genes column but the integer id; the export carries them all
# (tests/test_portable.py fails when the schema gains a column this list lacks)
GENE_FIELDS = (
    "gene_id", "content", "content_type", "language", "source_path", "project", "start_line", "end_line", "symbol",
    "tags", "facts", "source_kind", "volatility_class", "authority_class", "observed_at", "last_verified_at",
    "source_mtime", "source_hash", "org", "device", "user", "agent", "tier", "access_count", "last_access_at",
    "retired_at", "source_changed", "embedding", "vector_model",
)
FILE_FIELDS = ("path", "project", "size", "mtime_ns", "content_hash", "genes", "ingested_at")

# the vector's model travels by name (ids are per genome); a name the importing genome does not
# know becomes NULL: such a vector counts as stale and is re-embedded, never searched
_MODEL_NAME = "(SELECT name FROM vector_models WHERE id = genes.vector_model)"
_MODEL_ID = "(SELECT id FROM vector_models WHERE name = ?)"
_SELECT_GENES = ("SELECT id, " + ", ".join(_MODEL_NAME if c == "vector_model" else c for c in GENE_FIELDS)
                 + " FROM genes WHERE id > ? ORDER BY id LIMIT ?")
_INSERT_MARKS = ",".join(_MODEL_ID if c == "vector_model" else "?" for c in GENE_FIELDS)
# an incoming gene without a vector keeps the stored one and its model (a vector is never lost by an import)
_UPDATE_FIELDS = [c for c in GENE_FIELDS if c != "gene_id"]
_UPDATE_SET = ", ".join(f"vector_model = {_MODEL_ID}" if c == "vector_model" else f"{c} = ?" for c in _UPDATE_FIELDS)
_UPDATE_FIELDS_NO_VECTOR = [c for c in _UPDATE_FIELDS if c not in ("embedding", "vector_model")]
_UPDATE_SET_NO_VECTOR = ", ".join(f"{c} = ?" for c in _UPDATE_FIELDS_NO_VECTOR)


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
            data = dict(zip(GENE_FIELDS, row[1:], strict=True))
            data["content"] = unpack_text(data["content"])  # text, whatever the store's encoding
            yield data, sources.get(row[0], [])
        last = ids[-1]


def iter_file_rows(conn: sqlite3.Connection) -> Iterator[dict[str, Any]]:
    for row in conn.execute("SELECT " + ", ".join(FILE_FIELDS) + " FROM files ORDER BY path"):
        yield dict(zip(FILE_FIELDS, row, strict=True))


def iter_coactivation_rows(conn: sqlite3.Connection) -> Iterator[tuple[str, str, float, float]]:
    yield from conn.execute(
        "SELECT ga.gene_id, gb.gene_id, c.count, c.last_at FROM coactivation c "
        "JOIN genes ga ON ga.id = c.a JOIN genes gb ON gb.id = c.b ORDER BY c.a, c.b")


SYMBOL_FIELDS = ("path", "name", "leaf", "kind", "start_line", "end_line")
SOURCE_FIELDS = ("path", "project", "added_at")
SESSION_FIELDS = ("session_id", "agent", "first_seen", "last_seen", "requests", "genes_delivered")
ACTIVITY_FIELDS = ("at", "kind", "actor", "summary", "counts")


def iter_symbol_rows(conn: sqlite3.Connection) -> Iterator[dict[str, Any]]:
    """Every symbol with the id of the gene holding its first line (rowids differ between genomes)."""
    for row in conn.execute("SELECT g.gene_id, " + ", ".join(f"s.{c}" for c in SYMBOL_FIELDS) +
                            " FROM symbols s JOIN genes g ON g.id = s.gene ORDER BY s.path, s.start_line, s.id"):
        yield {"gene": row[0], **dict(zip(SYMBOL_FIELDS, row[1:], strict=True))}


def iter_source_rows(conn: sqlite3.Connection) -> Iterator[dict[str, Any]]:
    """The folders the user chose (not those being forgotten)."""
    for row in conn.execute("SELECT " + ", ".join(SOURCE_FIELDS) + " FROM sources "
                            "WHERE pending IS NULL OR pending != 'forget' ORDER BY path"):
        yield dict(zip(SOURCE_FIELDS, row, strict=True))


def iter_session_rows(conn: sqlite3.Connection) -> Iterator[dict[str, Any]]:
    for row in conn.execute("SELECT " + ", ".join(SESSION_FIELDS) + " FROM sessions ORDER BY last_seen"):
        yield dict(zip(SESSION_FIELDS, row, strict=True))


def iter_activity_rows(conn: sqlite3.Connection) -> Iterator[dict[str, Any]]:
    for row in conn.execute("SELECT " + ", ".join(ACTIVITY_FIELDS) + " FROM activity ORDER BY id"):
        data = dict(zip(ACTIVITY_FIELDS, row, strict=True))
        data["counts"] = json.loads(data["counts"] or "{}")
        yield data


def iter_vector_changes(conn: sqlite3.Connection) -> Iterator[str]:
    """The vector change log in order, as gene ids (entries of genes deleted since are left out)."""
    for (gene_id,) in conn.execute("SELECT g.gene_id FROM vector_changes v JOIN genes g ON g.id = v.gene "
                                   "ORDER BY v.seq"):
        yield gene_id


class ExportReads(Protocol):
    """What `helix export` reads, inside one snapshot of either backend (`Genome.export_reads()`;
    the team genome's: pg/portable.py). Rows are the file format's: a vector as its int8 codes."""

    def genes(self) -> Iterator[tuple[dict[str, Any], list[list[Any]]]]: ...
    def files(self) -> Iterator[dict[str, Any]]: ...
    def symbols(self) -> Iterator[dict[str, Any]]: ...
    def links(self) -> Iterator[tuple[str, str, float, float]]: ...
    def sources(self) -> Iterator[dict[str, Any]]: ...
    def sessions(self) -> Iterator[dict[str, Any]]: ...
    def activity(self) -> Iterator[dict[str, Any]]: ...
    def vector_changes(self) -> Iterator[str]: ...
    def disk_paths(self) -> set[str]: ...


class SqliteExportReads:
    """ExportReads over one SQLite read transaction (`snapshot`)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def genes(self) -> Iterator[tuple[dict[str, Any], list[list[Any]]]]:
        return iter_gene_rows(self.conn)

    def files(self) -> Iterator[dict[str, Any]]:
        return iter_file_rows(self.conn)

    def symbols(self) -> Iterator[dict[str, Any]]:
        return iter_symbol_rows(self.conn)

    def links(self) -> Iterator[tuple[str, str, float, float]]:
        return iter_coactivation_rows(self.conn)

    def sources(self) -> Iterator[dict[str, Any]]:
        return iter_source_rows(self.conn)

    def sessions(self) -> Iterator[dict[str, Any]]:
        return iter_session_rows(self.conn)

    def activity(self) -> Iterator[dict[str, Any]]:
        return iter_activity_rows(self.conn)

    def vector_changes(self) -> Iterator[str]:
        return iter_vector_changes(self.conn)

    def disk_paths(self) -> set[str]:
        return disk_paths(self.conn)


@contextmanager
def export_reads(genome: Genome) -> Iterator[SqliteExportReads]:
    with snapshot(genome) as conn:
        yield SqliteExportReads(conn)


# ── import ──


class ImportWrites(Protocol):
    """What `helix import` reads and writes, on either backend (`genome.import_writes(write=…)`; the team
    genome's: pg/portable_import.py). Rows are the importer's: a gene row as `importer._store_row` makes
    it (tags and facts encoded, the vector as its int8 codes and its model's name); ids are this genome's
    row ids. A dry run only reads. The rules (what is new, whose copy wins) are the importer's.

    `left_out`: genes written whose incoming vector this genome could not keep (a team genome holds one model's
    vectors: another's is left out), for the importer to embed again; SQLite keeps them (stale, re-embedded)."""

    left_out: list[int]

    def source_exists(self, path: str) -> bool: ...
    def write_source(self, path: str, project: str | None, added_at: float) -> None: ...
    def existing_genes(self, gene_ids: Sequence[str]) -> dict[str, tuple[int, float, float]]: ...
    def missing_sources(self, rowid: int, sources: Sequence[Sequence[Any]]) -> int: ...
    def insert_gene(self, row: dict[str, Any]) -> int: ...
    def overwrite_gene(self, rowid: int, row: dict[str, Any]) -> None: ...
    def add_sources(self, rowid: int, sources: Sequence[Sequence[Any]]) -> int: ...
    def existing_files(self, paths: Sequence[str]) -> dict[str, tuple[float, str]]: ...
    def upsert_file(self, row: dict[str, Any]) -> None: ...
    def link_state(self, a: int, b: int) -> tuple[float, float] | None: ...
    def write_link(self, a: int, b: int, count: float, last_at: float) -> None: ...
    def symbol_exists(self, gene: int, row: dict[str, Any]) -> bool: ...
    def write_symbol(self, gene: int, row: dict[str, Any]) -> bool: ...
    def session_last_seen(self, session_id: str) -> float | None: ...
    def write_session(self, row: dict[str, Any]) -> None: ...
    def cap_sessions(self, max_sessions: int) -> None: ...
    def activity_exists(self, row: dict[str, Any]) -> bool: ...
    def record_activity(self, row: dict[str, Any]) -> None: ...


class SqliteImportWrites:
    """ImportWrites over a SQLite connection (a dry run) or write transaction: this module's statements."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.left_out: list[int] = []  # never: another model's vector is kept, stale, and re-embedded

    def source_exists(self, path: str) -> bool:
        return source_exists(self.conn, path)

    def write_source(self, path: str, project: str | None, added_at: float) -> None:
        write_source(self.conn, path, project, added_at)

    def existing_genes(self, gene_ids: Sequence[str]) -> dict[str, tuple[int, float, float]]:
        return existing_genes(self.conn, gene_ids)

    def missing_sources(self, rowid: int, sources: Sequence[Sequence[Any]]) -> int:
        return missing_sources(self.conn, rowid, sources)

    def insert_gene(self, row: dict[str, Any]) -> int:
        return insert_gene(self.conn, row)

    def overwrite_gene(self, rowid: int, row: dict[str, Any]) -> None:
        overwrite_gene(self.conn, rowid, row)

    def add_sources(self, rowid: int, sources: Sequence[Sequence[Any]]) -> int:
        return add_sources(self.conn, rowid, sources)

    def existing_files(self, paths: Sequence[str]) -> dict[str, tuple[float, str]]:
        return existing_files(self.conn, paths)

    def upsert_file(self, row: dict[str, Any]) -> None:
        upsert_file(self.conn, row)

    def link_state(self, a: int, b: int) -> tuple[float, float] | None:
        return link_state(self.conn, a, b)

    def write_link(self, a: int, b: int, count: float, last_at: float) -> None:
        write_link(self.conn, a, b, count, last_at)

    def symbol_exists(self, gene: int, row: dict[str, Any]) -> bool:
        return symbol_exists(self.conn, gene, row)

    def write_symbol(self, gene: int, row: dict[str, Any]) -> bool:
        return write_symbol(self.conn, gene, row)

    def session_last_seen(self, session_id: str) -> float | None:
        return session_last_seen(self.conn, session_id)

    def write_session(self, row: dict[str, Any]) -> None:
        write_session(self.conn, row)

    def cap_sessions(self, max_sessions: int) -> None:
        cap_sessions(self.conn, max_sessions)

    def activity_exists(self, row: dict[str, Any]) -> bool:
        return activity_exists(self.conn, row)

    def record_activity(self, row: dict[str, Any]) -> None:
        activity_sql.record(self.conn, row["kind"], row["actor"], row["summary"], row["counts"], at=row["at"])


@contextmanager
def import_writes(genome: Genome, *, write: bool) -> Iterator[SqliteImportWrites]:
    """A dry run reads the genome's connection; a real import writes in one transaction (rolled back
    when the block raises)."""
    if not write:
        yield SqliteImportWrites(genome.conn)
        return
    with genome.transaction() as tx:
        yield SqliteImportWrites(tx)
        vectors.mark_import(tx.conn)  # a vector of another model may have come in: an open server re-embeds it


def write_symbol(tx: Any, gene: int, row: dict[str, Any]) -> bool:
    """One symbol, unless the same one (path, name, first line, gene) is stored already."""
    if symbol_exists(tx, gene, row):
        return False
    tx.execute("INSERT INTO symbols(gene, " + ", ".join(SYMBOL_FIELDS) + ") VALUES (?, ?, ?, ?, ?, ?, ?)",
               (gene, *[row[c] for c in SYMBOL_FIELDS]))
    return True


def source_exists(conn: sqlite3.Connection | Any, path: str) -> bool:
    return conn.execute("SELECT 1 FROM sources WHERE path = ?", (path,)).fetchone() is not None


def write_source(tx: Any, path: str, project: str | None, added_at: float) -> None:
    """A folder from an export, as `helix sources add` records it: the next backend start indexes it."""
    tx.execute("INSERT INTO sources(path, project, added_at, state) VALUES (?, ?, ?, 'new') "
               "ON CONFLICT(path) DO UPDATE SET project = COALESCE(project, excluded.project)", (path, project, added_at))


def session_last_seen(conn: sqlite3.Connection | Any, session_id: str) -> float | None:
    row = conn.execute("SELECT last_seen FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    return float(row[0]) if row else None


def write_session(tx: Any, row: dict[str, Any]) -> None:
    tx.execute("INSERT OR REPLACE INTO sessions(" + ", ".join(SESSION_FIELDS) + ") VALUES (?, ?, ?, ?, ?, ?)",
               [row[c] for c in SESSION_FIELDS])


def activity_exists(conn: sqlite3.Connection | Any, row: dict[str, Any]) -> bool:
    return conn.execute("SELECT 1 FROM activity WHERE at = ? AND kind = ? AND actor = ? AND summary = ?",
                        (row["at"], row["kind"], row["actor"], row["summary"])).fetchone() is not None




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


def existing_files(conn: sqlite3.Connection | Any, paths: Sequence[str]) -> dict[str, tuple[float, str]]:
    """{path: (ingested_at, content_hash)} for the file records already stored."""
    out: dict[str, tuple[float, str]] = {}
    items = list(dict.fromkeys(paths))
    for start in range(0, len(items), 500):
        batch = items[start:start + 500]
        marks = ",".join("?" * len(batch))
        for path, ingested_at, content_hash in conn.execute(
                f"SELECT path, ingested_at, content_hash FROM files WHERE path IN ({marks})", batch):
            out[path] = (ingested_at, content_hash)
    return out


def fts_values(row: dict[str, Any]) -> tuple[str, str, str]:
    return Genome.fts_values(row["content"], row["tags"], row["source_path"])


def _values(row: dict[str, Any], fields: Sequence[str] = GENE_FIELDS) -> list[Any]:
    """Column values in store representation (content packed as the store keeps it)."""
    return [pack_text(row[c]) if c == "content" else row[c] for c in fields]


def insert_gene(tx: Any, row: dict[str, Any]) -> int:
    """A new gene row (content as text; tags '\\n'-joined, facts JSON), indexed unless retired."""
    cur = tx.execute(f"INSERT INTO genes({', '.join(GENE_FIELDS)}) VALUES ({_INSERT_MARKS})", _values(row))
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
    if row["embedding"] is None:
        values = _values(row, _UPDATE_FIELDS_NO_VECTOR)
        tx.execute(f"UPDATE genes SET {_UPDATE_SET_NO_VECTOR} WHERE id = ?", (*values, rowid))
    else:
        values = _values(row, _UPDATE_FIELDS)
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


def link_state(conn: sqlite3.Connection | Any, a: int, b: int) -> tuple[float, float] | None:
    """(weight, last_at) of the stored co-activation link between two rowids, or None."""
    row = conn.execute("SELECT count, last_at FROM coactivation WHERE a = ? AND b = ?", (min(a, b), max(a, b))).fetchone()
    return (float(row[0]), float(row[1])) if row else None


def write_link(tx: Any, a: int, b: int, count: float, last_at: float) -> None:
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


def disk_paths(conn: sqlite3.Connection) -> set[str]:
    """Every path of a file on disk the genome names: files, spans of file genes, symbols."""
    paths = {r[0] for r in conn.execute("SELECT path FROM files")}
    paths.update(r[0] for r in conn.execute(
        "SELECT DISTINCT s.path FROM gene_sources s JOIN genes g ON g.id = s.gene WHERE g.source_kind = 'file'"))
    paths.update(r[0] for r in conn.execute("SELECT DISTINCT source_path FROM genes "
                                            "WHERE source_kind = 'file' AND source_path IS NOT NULL"))
    paths.update(r[0] for r in conn.execute("SELECT DISTINCT path FROM symbols"))
    return paths


def symbol_exists(conn: sqlite3.Connection | Any, gene: int, row: dict[str, Any]) -> bool:
    return conn.execute("SELECT 1 FROM symbols WHERE path = ? AND name = ? AND start_line = ? AND gene = ?",
                        (row["path"], row["name"], row["start_line"], gene)).fetchone() is not None
