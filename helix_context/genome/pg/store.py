"""PgGenome: the genome on PostgreSQL, behind the same methods ingest and retrieval call on `Genome`.

Why the same surface: ingest (pipeline.py), retrieval (retriever.py, scorers.py, locate.py)
and the manager call `Genome` methods and pass `genome.conn` to the small SQL modules; this
class answers the same calls, so a team genome needs no second code path above genome/.
`conn` is a thread's connection wrapped to take the `?` placeholders those modules write
(QmarkConnection) and to answer the two FTS5-only questions itself (genome/backend.py).

Writes: one transaction per batch of files, as in SQLite. Two backends may write at once
(different sources; one indexer per source is team.py's lock): a gene whose content another
backend inserted first is found by ON CONFLICT and reused, and a deadlock between two
batches is retried. Every gene-changing commit advances the `helix_generation` sequence and
sends NOTIFY helix_genome, which other backends' caches key on (team.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from helix_context.errors import GenomeError, GenomeVersionError
from helix_context.genome import fts_text
from helix_context.genome.pg import lexical
from helix_context.genome.pg.link import Link
from helix_context.genome.pg.qmark import QmarkConnection, bind, rewrite
from helix_context.genome.pg.gene_facts import GeneFacts
from helix_context.genome.pg.posting_sets import PostingSets
from helix_context.genome.pg.read_stats import CodeKinds, ReadStats
from helix_context.genome.pg.vector_model import PgVectorModelMixin
from helix_context.genome.pg.connect import GuardedConnection, check_server, connect, safe_url
from helix_context.genome.pg.schema import MIGRATE_LOCK, MIGRATIONS, SCHEMA_VERSION
from helix_context.genome.pg.snapshot import read_snapshot
from helix_context.genome.pg.team import ChangeListener, SourceClaim, announce_change, read_generation
from helix_context.genome.pg.door import PgDialect
from helix_context.genome.sources_sql import SourcesMixin
from helix_context.genome.activity_sql import ActivityMixin
from helix_context.genome.learning import LearningMixin
from helix_context.genome.pg.learning import PgLearningMixin
from helix_context.genome.pg.counts import PgCountsMixin
from helix_context.genome.symbols_sql import SymbolReadsMixin
from helix_context.genome.lexicon import LexiconMixin
from helix_context.genome.pg.portable import PgExportReads, export_reads
from helix_context.genome.pg.portable_import import PgImportWrites, import_writes
from helix_context.genome.reads import GeneReadsMixin
from helix_context.genome.projects_sql import ProjectsMixin
from helix_context.genome.pg.maintenance import PgMaintenanceMixin
from helix_context.genome.retention import PartyScope, RetentionMixin, WriteCaps
from helix_context.genome.pg.vectors import PgVectorIndex
from helix_context.genome.write_door import DoorWritesMixin, WriteDoor
from helix_context.genome.renames import RenamesMixin
from helix_context.genome.records import GENE_COLUMNS, FileRecord, SourceWrite, WriteResult, row_to_gene
from helix_context.genome.stored_form import StoredForm
from helix_context.models import Gene

log = logging.getLogger("helix.genome")

_T = TypeVar("_T")
_RETRIES = 5  # a deadlock or serialization failure between two writers: the batch is tried again
_BEGIN_WRITE = (f"BEGIN; SELECT pg_advisory_xact_lock_shared({MIGRATE_LOCK}); "
                "SELECT value FROM helix_meta WHERE key = 'schema_version'")
_BEGIN_NOT_DURABLE = _BEGIN_WRITE.replace("BEGIN; ", "BEGIN; SET LOCAL synchronous_commit = off; ")


class PgTx:
    """The open write transaction, taking the `?` placeholders of the shared SQL (write_door.py,
    sources_sql.py, learning.py …) as well as psycopg's own `%s`. An `IN (?, …)` list becomes one
    array (qmark.py), so a statement has one text whatever the list's length and the server keeps
    it prepared: a question's delivery record sends a list of its genes three times."""

    def __init__(self, raw: psycopg.Connection[tuple[Any, ...]]) -> None:
        self.conn = raw

    def execute(self, sql: str, args: Sequence[Any] = ()) -> psycopg.Cursor[tuple[Any, ...]]:
        text, slots = rewrite(sql)
        return self.conn.execute(text, bind(slots, list(args)) if slots else list(args))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> psycopg.Cursor[tuple[Any, ...]]:
        text, slots = rewrite(sql)
        cur = self.conn.cursor()
        cur.executemany(text, [bind(slots, list(r)) for r in rows] if slots else [list(r) for r in rows])
        return cur


class PgGenome(PgCountsMixin, SymbolReadsMixin, LexiconMixin, DoorWritesMixin, RenamesMixin, GeneReadsMixin, PgVectorModelMixin, SourcesMixin, ProjectsMixin, PgLearningMixin, LearningMixin, RetentionMixin, ActivityMixin,
               PgMaintenanceMixin):
    """The team genome: thread-local connections to one PostgreSQL database (pgvector for dense search)."""

    meta_table = "helix_meta"

    def __init__(self, url: str, *, readonly: bool = False, party: str = "", listen: bool = True,
                 caps: WriteCaps | None = None) -> None:
        self.url = url
        self.party = party  # user@device: whose sessions, co-activation and activity rows this backend sees
        self.party_scope = PartyScope(party)
        self.caps = caps or WriteCaps()  # retention caps every bookkeeping write applies (learning.py)
        self.path = safe_url(url)  # what logs and /health show in place of a file path: no credentials
        self.readonly = readonly
        self._local = threading.local()
        self._connections: list[tuple[threading.Thread, GuardedConnection]] = []
        self._connections_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._vectors: PgVectorIndex | None = None
        self._stats = ReadStats(self.generation)  # per-generation counts: no round trip per question for them
        self._kinds = CodeKinds()
        self._postings = PostingSets(self.generation)  # common words' gene ids, for ANDs (posting_sets.py)
        self._facts = GeneFacts(self.generation)  # ranked genes' paths and marks (gene_facts.py)
        self._link = Link(url)  # up, or down and retried with backoff (link.py; shown in /health)
        self._door = WriteDoor(PgDialect())
        first = self._raw()
        check_server(first, url)
        register_vector(first)
        self._migrate(first)
        # `listen`: keep generation() current from NOTIFY instead of asking the server on each call
        self._listener = ChangeListener(url, read_generation(first), self._link) if listen else None

    # ── connections ──

    def _raw(self) -> GuardedConnection:
        raw: GuardedConnection | None = getattr(self._local, "raw", None)
        if raw is not None and raw.epoch != self._link.epoch and not (raw.closed or raw.broken):
            self._retire_if_idle(raw)  # opened before the link last failed: perhaps dead with its server
        if raw is None or raw.closed or raw.broken:
            epoch = self._link.epoch
            raw = connect(self.url, link=self._link)
            raw.epoch = epoch
            try:
                register_vector(raw)
            except psycopg.ProgrammingError:  # before the first migration created the extension
                pass
            self._local.raw = raw
            with self._connections_lock:
                for owner, old in [p for p in self._connections if not p[0].is_alive() or p[1].closed]:
                    self._connections.remove((owner, old))
                    old.close()
                self._connections.append((threading.current_thread(), raw))
        return raw

    @staticmethod
    def _retire_if_idle(raw: GuardedConnection) -> None:
        """Close `raw` unless a transaction of this thread is open on it (that one ends on its own terms)."""
        try:
            raw.settle()  # the last question's pipeline, finished here (on a dead link it fails: closed below)
        except (psycopg.Error, GenomeError):
            pass
        if raw.closed or raw.broken or raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            try:
                raw.close()
            except psycopg.Error:
                pass

    @property
    def conn(self) -> QmarkConnection:
        return QmarkConnection(self._raw())

    def close(self) -> None:
        self.close_deliveries()  # what was queued is written while the connections are open
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with self._connections_lock:
            for _, raw in self._connections:
                raw.close()
            self._connections.clear()
        self._local = threading.local()

    def _migrate(self, raw: psycopg.Connection[tuple[Any, ...]]) -> None:
        version = self.schema_version(raw)
        if version > SCHEMA_VERSION:
            log.error("team genome %s has schema version %d, this Helix knows up to %d: reading only; "
                      "upgrade helix-context to write", self.path, version, SCHEMA_VERSION)
            return
        if version == SCHEMA_VERSION or self.readonly:
            return
        # a session lock taken before the transaction: its catalog reads then see a migration another
        # backend committed while we waited (a lock taken inside may leave a stale catalog snapshot)
        raw.execute("SELECT pg_advisory_lock(%s)", (MIGRATE_LOCK,))
        try:
            with raw.transaction():
                version = self.schema_version(raw)  # another backend may have migrated while we waited
                for target in range(version, SCHEMA_VERSION):
                    raw.execute(MIGRATIONS[target].encode())
                    raw.execute("INSERT INTO helix_meta(key, value) VALUES ('schema_version', %s) "
                                "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(target + 1),))
        finally:
            raw.execute("SELECT pg_advisory_unlock(%s)", (MIGRATE_LOCK,))
        log.info("team genome %s migrated to schema version %d", self.path, SCHEMA_VERSION)

    @staticmethod
    def schema_version(raw: psycopg.Connection[tuple[Any, ...]]) -> int:
        # in the schema the genome's tables are created in: with search_path "team_b, public", another
        # genome's public.helix_meta must not pass for this one's (it would be read and written instead)
        if raw.execute("SELECT to_regclass(format('%I.helix_meta', current_schema()))").fetchone() == (None,):
            return 0
        row = raw.execute("SELECT value FROM helix_meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row else 0

    # ── transactions ──

    @contextmanager
    def transaction(self, *, changes_genes: bool = True, durable: bool = True) -> Iterator[PgTx]:
        """One PostgreSQL transaction; refused when the schema is newer than this Helix (see schema.py).

        It opens with one round trip: BEGIN, the migration lock taken shared (a migration, which takes it
        exclusively, waits for open writes and they for it) and the schema version read. The shared lock
        replaced a FOR SHARE on the version's row: every write of every backend locked that one row, a
        multixact per concurrent writer (each question's delivery record is a write).

        `durable=False` (a question's delivery record) commits without waiting for the WAL flush
        (`synchronous_commit = off` for this transaction only): the flush was most of a team question's
        wait, and a server crash can lose only the last fraction of a second of usage counts, never
        a gene, a source or anything another statement relies on (what SQLite's synchronous = NORMAL
        gives the embedded genome)."""
        if self.readonly:
            raise GenomeError(f"team genome {self.path} is open read-only")
        raw = self._raw()
        with self._write_lock:
            try:
                with self._opened(raw, durable):
                    yield PgTx(raw)
                if changes_genes:  # after the commit, so no reader caches the old data under the new number
                    generation = announce_change(raw)
                    if self._listener is not None:
                        self._listener.seen(generation)
            except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure):
                raise  # replace_sources tries the batch again
            except psycopg.OperationalError as exc:
                raise GenomeError(f"team genome {self.path}: the write failed ({exc}); "
                                  "nothing of it was stored, run it again") from None

    @contextmanager
    def _opened(self, raw: psycopg.Connection[tuple[Any, ...]], durable: bool = True) -> Iterator[None]:
        """BEGIN … COMMIT (ROLLBACK on any error), refused when a newer Helix migrated the schema."""
        try:
            # three statements (four with the SET LOCAL): the simple protocol, never prepared
            cur = raw.execute(_BEGIN_WRITE if durable else _BEGIN_NOT_DURABLE, prepare=False)
            while cur.nextset():
                pass  # to the last statement's result: the version
            row = cur.fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                raise GenomeVersionError(
                    f"team genome {self.path} was migrated to schema version {version} by a newer Helix "
                    f"(this one knows up to {SCHEMA_VERSION}): writes are refused so they cannot damage it. "
                    "Upgrade helix-context on this machine; reading still works.")
            yield
        except BaseException:
            if not (raw.closed or raw.broken) and raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                raw.execute("ROLLBACK")
            raise
        raw.execute("COMMIT")

    def read_snapshot(self) -> AbstractContextManager[None]:
        """One question's reads in one REPEATABLE READ, READ ONLY transaction on this thread's connection;
        its BEGIN travels with the first read and its COMMIT is not waited for (snapshot.py)."""
        return read_snapshot(self._raw())

    def export_reads(self) -> AbstractContextManager[PgExportReads]:
        """What `helix export` reads, in one REPEATABLE READ snapshot (pg/portable.py)."""
        self.flush_deliveries()
        return export_reads(self, self._raw)

    def import_writes(self, *, write: bool) -> AbstractContextManager[PgImportWrites]:
        """What `helix import` reads and writes, through the write door's postings writer (pg/portable_import.py)."""
        return import_writes(self, self._door.dialect.lexical, write=write)

    def connection_state(self) -> dict[str, Any]:
        """For /health: ok, or reconnecting (since, tries, next try, the last error without credentials)."""
        return self._link.state()

    def generation(self) -> int:
        """Advanced after each gene-changing commit, so a cache keyed on it never holds data older than it."""
        if self._listener is not None:
            return self._listener.generation
        return read_generation(self._raw())

    def claim_source(self, source: str) -> SourceClaim:
        """The one-indexer-per-source lock (team.py): `with genome.claim_source(name) as c: if c.held: …`."""
        return SourceClaim(self.url, source)

    def live_gene_count(self) -> int:
        return self._stats.live_genes(self._raw())

    # ── files ──


    # ── writes (the rules are the write door's, shared with SQLite: genome/write_door.py) ──

    def replace_source(self, record: FileRecord | None, path: str | None,
                       genes: Sequence[tuple[Gene, np.ndarray | None]],
                       forms: Mapping[str, StoredForm] | None = None) -> WriteResult:
        result = self.replace_sources([SourceWrite(record, path, genes, forms or {})])[0]
        if isinstance(result, GenomeError):
            raise result
        return result

    def replace_sources(self, writes: Sequence[SourceWrite]) -> list[WriteResult | GenomeError]:
        """Each write makes its genes the complete set for its path; all commit together (retried on a deadlock)."""
        def write_all(tx: PgTx) -> list[WriteResult | GenomeError]:
            lex = self._door.dialect.lexical(tx)
            results: list[WriteResult | GenomeError] = list(self._door.replace(tx, lex, writes))
            lex.flush()
            return results
        return self._retried(write_all)

    def retire_source(self, path: str) -> int:
        """The file is gone: its genes leave retrieval (tier archived) unless another file holds them."""
        def retire(tx: PgTx) -> int:
            lex = self._door.dialect.lexical(tx)
            retired = self._door.retire(tx, lex, path)
            lex.flush()  # genes that moved to another file of theirs were re-indexed
            return retired
        return self._retried(retire)

    def _retried(self, work: Callable[[PgTx], _T]) -> _T:
        """`work` in one transaction, run again when it collided with another backend's (a deadlock)."""
        for attempt in range(_RETRIES):
            try:
                with self.transaction() as tx:
                    return work(tx)
            except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure) as exc:
                log.info("team genome %s: write collided with another backend (%s); retrying", self.path, exc)
                time.sleep(0.05 * (attempt + 1))
        raise GenomeError(f"team genome {self.path}: a write kept colliding with another backend; run it again")

    # ── reads ──

    def embedding_of(self, rowid: int) -> np.ndarray | None:
        row = self._raw().execute("SELECT embedding FROM genes WHERE id = %s", (rowid,)).fetchone()
        return None if row is None or row[0] is None else np.asarray(row[0].to_numpy(), dtype=np.float32)

    def embedded_gene_ids(self, gene_ids: Sequence[str]) -> set[str]:
        ids = list(dict.fromkeys(gene_ids))
        return {str(r[0]) for r in self._raw().execute(
            "SELECT gene_id FROM genes WHERE gene_id = ANY(%s) AND embedding IS NOT NULL", (ids,))} if ids else set()

    def genes_missing_embeddings(self, limit: int = 1000) -> list[Gene]:
        rows = self._raw().execute(f"SELECT {GENE_COLUMNS} FROM genes WHERE embedding IS NULL "
                                   "AND retired_at IS NULL ORDER BY id LIMIT %s", (limit,))
        return [row_to_gene(r) for r in rows]


    def fts_search(self, match: str, limit: int, column: str | None = None) -> list[tuple[int, float]]:
        """(gene id, score) best first, scored as SQLite's FTS5 bm25 (lexical.py)."""
        return self.start_fts_search(match, limit, column)()

    def start_fts_search(self, match: str, limit: int, column: str | None = None
                         ) -> Callable[[], list[tuple[int, float]]]:
        """fts_search's hits, read when the returned function is called; the statement is sent now, so in
        a question's read snapshot its searches travel to the server together (one round trip)."""
        if not match:
            return list
        raw = self._raw()
        return lexical.start_search(raw, match, limit, column, stats=self._stats.corpus(raw),
                                    freqs=lambda terms: self._stats.doc_freqs(raw, terms),
                                    holding_all=lambda terms, col: self._postings.holding_all(raw, terms, col))

    def gene_paths(self, rowids: Sequence[int]) -> dict[int, str]:
        """Gene rowid → its source path (symbols_sql's), with the marks, from one read per generation (gene_facts.py)."""
        return {r: f.path for r, f in self._facts.of(self._raw(), rowids).items() if f.path is not None}

    def start_gene_facts(self, rowids: Iterable[int]) -> Callable[[], object]:
        """The paths and marks of `rowids` not yet known this generation: sent now, read (and remembered)
        when the returned function is called, so gene_paths and gene_marks find them (gene_facts.py)."""
        return self._facts.start(self._raw(), rowids)

    def gene_marks(self, rowids: Iterable[int]) -> dict[int, tuple[str, str, str, str, str]]:
        """Gene rowid → (tier, device, user, org, agent) (reads.py's), with the paths (gene_facts.py)."""
        return {r: f.marks for r, f in self._facts.of(self._raw(), rowids).items()}

    def term_rowids(self, term: str, limit: int) -> list[int]:
        """Gene ids whose postings hold `term`, at most `limit` (fulltext.FullTextMixin.term_rowids on SQLite)."""
        return lexical.term_rowids(self._raw(), fts_text.quote_term(term), limit)

    def project_rowids(self, projects: Collection[str]) -> np.ndarray:
        """Sorted ids of the live genes of `projects` (projects_sql.ProjectsMixin's), as one bytea (lexical.gene_ids)."""
        names = sorted(set(projects))
        if not names:
            return np.zeros(0, np.int64)
        with self._raw().cursor(binary=True) as cur:
            row = cur.execute("SELECT string_agg(int8send(id), ''::bytea ORDER BY id) FROM genes "
                              "WHERE project = ANY(%s) AND retired_at IS NULL", (names,)).fetchone()
        return lexical.gene_ids(row[0] if row else None)

    def term_rowid_lists(self, terms: Sequence[str], limit: int) -> dict[str, np.ndarray]:
        """term_rowids for many terms in one round trip (fulltext.FullTextMixin.term_rowid_lists on SQLite)."""
        return lexical.term_rowid_lists(self._raw(), {t: fts_text.quote_term(t) for t in terms}, limit,
                                        held=self._postings.held)

    def vector_index(self) -> PgVectorIndex:
        if self._vectors is None:
            self._vectors = PgVectorIndex(self._raw)
        return self._vectors
