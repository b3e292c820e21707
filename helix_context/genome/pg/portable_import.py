"""What `helix import` writes into a team genome (portable_sql.ImportWrites), in one transaction.

Why its own module: the importer's rules (remaps, conflicts, whose copy wins) are backend-neutral
(portable/importer.py), but four things are stored differently here than in the SQLite rows of
portable_sql.py:

- a vector is a halfvec of the one model the team genome records (pg/vector_model.py): the file's
  int8 codes are decoded into it when the file names that model; a vector of another model is left
  out (`left_out`: the importer embeds the gene again), and an overwrite without a usable
  vector keeps the stored one: an import never loses a vector;
- the lexical index is BM25 postings, kept in step by the write door's own writer (pg/door.py's
  PostingsWriter: a gene leaves the index before it is overwritten and comes back with its new
  text if live), flushed by one COPY per FLUSH_EVERY genes and before the commit;
- sessions, co-activation and activity carry the importing developer's party (retention.PartyScope):
  an import adds to their own history, never to a teammate's;
- upserts are `ON CONFLICT` statements (no `INSERT OR REPLACE`), and `"user"` is quoted.

Statements both engines take (existence checks, symbols) are portable_sql's own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pgvector import HalfVector

from helix_context.genome import activity_sql
from helix_context.genome import portable_sql as shared
from helix_context.genome.write_door import LexicalWriter
from helix_context.genome.retention import PartyScope, cap_sessions
from helix_context.genome.stored_form import StoredForm, stored_form
from helix_context.genome.vectors import decode_vector

if TYPE_CHECKING:
    from helix_context.genome.pg.store import PgGenome

_STORED = [c for c in shared.GENE_FIELDS if c not in ("embedding", "vector_model")]
_COLUMNS = ", ".join(f'"{c}"' for c in _STORED)
_SET = ", ".join(f'"{c}" = ?' for c in _STORED if c != "gene_id")
# genes indexed between two COPYs of their postings: the writer buffers each gene's text until it flushes,
# so an import flushed only at its commit held the whole export's text in memory (the ingest's batch size)
FLUSH_EVERY = 500


class PgImportWrites:
    """ImportWrites over a PgTx (a real import) or the genome's `?`-taking connection (a dry run)."""

    def __init__(self, tx: Any, scope: PartyScope, model: str, lex: LexicalWriter | None) -> None:
        self.tx = tx
        self.scope = scope
        self.model = model  # the team genome's embedding model: a vector of another is not stored
        self.lex = lex  # None in a dry run (nothing is written)
        self.retired: set[int] = set()  # genes this import stored retired: they hold no spans (helix check)
        self.left_out: list[int] = []  # genes whose incoming vector was another model's: embedded again after
        self._buffered = 0  # genes indexed since the last flush

    # ── genes ──

    def _vector(self, row: dict[str, Any]) -> HalfVector | None:
        if row["embedding"] is None or row.get("vector_model") != self.model:
            return None
        return HalfVector(decode_vector(bytes(row["embedding"])))

    def _note_foreign(self, rowid: int, row: dict[str, Any]) -> None:
        """A vector of another model comes with the gene: it is not stored, and the importer embeds the gene again."""
        if row["embedding"] is not None and row.get("vector_model") != self.model:
            self.left_out.append(rowid)

    @staticmethod
    def _values(row: dict[str, Any], form: StoredForm, columns: Sequence[str]) -> list[Any]:
        return [form.packed if c == "content" else row[c] for c in columns]

    def _index(self, rowid: int, row: dict[str, Any], form: StoredForm) -> None:
        if row["retired_at"] is None:
            assert self.lex is not None
            self.retired.discard(rowid)
            self.lex.index(rowid, row["content"], row["tags"], row["source_path"], form)
            self._buffered += 1
            if self._buffered >= FLUSH_EVERY:  # a gene unindexed later has its flushed postings deleted (door.py)
                self.lex.flush()
                self._buffered = 0
        else:
            self.retired.add(rowid)

    def insert_gene(self, row: dict[str, Any]) -> int:
        form = stored_form(row["content"])
        values = [*self._values(row, form, _STORED), self._vector(row)]
        found = self.tx.execute(f"INSERT INTO genes({_COLUMNS}, embedding) VALUES ({', '.join('?' * len(values))}) "
                                "ON CONFLICT (gene_id) DO NOTHING RETURNING id", values).fetchone()
        if found is None:  # another backend stored the same text meanwhile: this import overwrites it
            (rowid,) = self.tx.execute("SELECT id FROM genes WHERE gene_id = ?", (row["gene_id"],)).fetchone()
            self.overwrite_gene(int(rowid), row)
            return int(rowid)
        self._note_foreign(int(found[0]), row)
        self._index(int(found[0]), row, form)
        return int(found[0])

    def overwrite_gene(self, rowid: int, row: dict[str, Any]) -> None:
        assert self.lex is not None
        old = self.tx.execute("SELECT retired_at FROM genes WHERE id = ?", (rowid,)).fetchone()
        if old is not None and old[0] is None:  # only live genes are in the index
            self.lex.unindex(rowid)
        vector = self._vector(row)
        self._note_foreign(rowid, row)
        keep = "" if vector is None else ", embedding = ?"  # no usable vector: the stored one stays
        form = stored_form(row["content"])
        values = self._values(row, form, [c for c in _STORED if c != "gene_id"])
        self.tx.execute(f"UPDATE genes SET {_SET}{keep} WHERE id = ?",
                        (*values, *(() if vector is None else (vector,)), rowid))
        if row["retired_at"] is not None:
            self.tx.execute("DELETE FROM gene_sources WHERE gene = ?", (rowid,))  # as the write door retires
        self._index(rowid, row, form)

    def add_sources(self, rowid: int, sources: Sequence[Sequence[Any]]) -> int:
        if rowid in self.retired:
            return 0
        return sum(self.tx.execute("INSERT INTO gene_sources(gene, path, start_line, end_line) VALUES (?, ?, ?, ?) "
                                   "ON CONFLICT DO NOTHING", (rowid, path, start, end)).rowcount
                   for path, start, end in sources)

    def existing_genes(self, gene_ids: Sequence[str]) -> dict[str, tuple[int, float, float]]:
        return shared.existing_genes(self.tx, gene_ids)

    def missing_sources(self, rowid: int, sources: Sequence[Sequence[Any]]) -> int:
        return shared.missing_sources(self.tx, rowid, sources)

    # ── files, symbols, sources ──

    def existing_files(self, paths: Sequence[str]) -> dict[str, tuple[float, str]]:
        return shared.existing_files(self.tx, paths)

    def upsert_file(self, row: dict[str, Any]) -> None:
        fields = shared.FILE_FIELDS
        self.tx.execute(f"INSERT INTO files({', '.join(fields)}) VALUES ({', '.join('?' * len(fields))}) "
                        "ON CONFLICT (path) DO UPDATE SET "
                        + ", ".join(f"{c} = excluded.{c}" for c in fields if c != "path"), [row[c] for c in fields])

    def symbol_exists(self, gene: int, row: dict[str, Any]) -> bool:
        return shared.symbol_exists(self.tx, gene, row)

    def write_symbol(self, gene: int, row: dict[str, Any]) -> bool:
        return shared.write_symbol(self.tx, gene, row)

    def source_exists(self, path: str) -> bool:
        return shared.source_exists(self.tx, path)

    def write_source(self, path: str, project: str | None, added_at: float) -> None:
        self.tx.execute("INSERT INTO sources(path, project, added_at, state) VALUES (?, ?, ?, 'new') "
                        "ON CONFLICT (path) DO UPDATE SET project = COALESCE(sources.project, excluded.project)",
                        (path, project, added_at))

    # ── this developer's history (their party's rows only) ──

    def link_state(self, a: int, b: int) -> tuple[float, float] | None:
        row = self.tx.execute(f"SELECT count, last_at FROM coactivation WHERE {self.scope.where}a = ? AND b = ?",
                              (*self.scope.values, min(a, b), max(a, b))).fetchone()
        return (float(row[0]), float(row[1])) if row else None

    def write_link(self, a: int, b: int, count: float, last_at: float) -> None:
        scope = self.scope
        self.tx.execute(f"INSERT INTO coactivation({scope.column}a, b, count, last_at) VALUES ({scope.mark}?, ?, ?, ?) "
                        f"ON CONFLICT ({scope.column}a, b) DO UPDATE SET count = excluded.count, "
                        "last_at = excluded.last_at", (*scope.values, min(a, b), max(a, b), count, last_at))

    def session_last_seen(self, session_id: str) -> float | None:
        row = self.tx.execute(f"SELECT last_seen FROM sessions WHERE {self.scope.where}session_id = ?",
                              (*self.scope.values, session_id)).fetchone()
        return float(row[0]) if row else None

    def write_session(self, row: dict[str, Any]) -> None:
        scope, fields = self.scope, shared.SESSION_FIELDS
        self.tx.execute(f"INSERT INTO sessions({scope.column}{', '.join(fields)}) "
                        f"VALUES ({scope.mark}{', '.join('?' * len(fields))}) "
                        f"ON CONFLICT ({scope.column}session_id) DO UPDATE SET "
                        + ", ".join(f"{c} = excluded.{c}" for c in fields if c != "session_id"),
                        (*scope.values, *[row[c] for c in fields]))

    def cap_sessions(self, max_sessions: int) -> None:
        cap_sessions(self.tx, max_sessions, self.scope)

    def activity_exists(self, row: dict[str, Any]) -> bool:
        return self.tx.execute(f"SELECT 1 FROM activity WHERE {self.scope.where}at = ? AND kind = ? AND actor = ? "
                               "AND summary = ?", (*self.scope.values, row["at"], row["kind"], row["actor"],
                                                   row["summary"])).fetchone() is not None

    def record_activity(self, row: dict[str, Any]) -> None:
        activity_sql.record(self.tx, row["kind"], row["actor"], row["summary"], row["counts"], at=row["at"],
                            scope=self.scope)


@contextmanager
def import_writes(genome: PgGenome, lexical: Callable[[Any], LexicalWriter], *,
                  write: bool) -> Iterator[PgImportWrites]:
    """A dry run reads in one snapshot; an import writes in one transaction, its postings (`lexical(tx)`:
    the write door's writer) flushed before the commit, which advances the generation: every backend
    drops its caches."""
    model = genome.vector_model
    if not write:
        with genome.read_snapshot():
            yield PgImportWrites(genome.conn, genome.party_scope, model, None)
        return
    with genome.transaction() as tx:
        lex = lexical(tx)
        yield PgImportWrites(tx, genome.party_scope, model, lex)
        lex.flush()
