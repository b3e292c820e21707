"""The Genome: one SQLite file (WAL) holding genes, their sources, and the FTS index.

All SQL of the project lives in this package. Writes happen in one
transaction per file, so a crash or `kill -9` at any moment leaves either the
old or the new genes of a file, never a mix; readers run concurrently (WAL).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, closing, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from helix_context.errors import GenomeError, GenomeVersionError
from helix_context.genome.lexicon import LexiconMixin
from helix_context.genome.symbols_sql import SymbolReadsMixin
from helix_context.genome import vectors as vector_sql
from helix_context.genome.schema import FTS_VERSION, MIGRATIONS, SCHEMA_VERSION
from helix_context.genome.activity_sql import ActivityMixin
from helix_context.genome.learning import LearningMixin
from helix_context.genome.reads import GeneReadsMixin
from helix_context.genome.projects_sql import ProjectsMixin
from helix_context.genome.retention import EVERYONE, RetentionMixin, WriteCaps
from helix_context.genome.ann import VectorIndex
from helix_context.genome.fulltext import FullTextMixin
from helix_context.genome.maintenance import MaintenanceMixin
from helix_context.genome.scan import scan_connection
from helix_context.genome.sources_sql import SourcesMixin
from helix_context.genome.stored_form import StoredForm
from helix_context.genome.vector_models import DEFAULT_VECTOR_MODEL, VectorModelMixin
from helix_context.genome.vectors import EMBED_DIM, decode_vector, encode_vector
from helix_context.genome.records import FileRecord, SourceWrite, WriteResult
from helix_context.genome.sqlite_tx import Tx, friendly_error, no_space_left
from helix_context.genome.door_sqlite import SqliteDialect
from helix_context.genome.write_door import DoorWritesMixin, WriteDoor
from helix_context.genome.renames import RenamesMixin
from helix_context.models import Gene

if TYPE_CHECKING:
    from helix_context.genome.portable_sql import ExportReads, ImportWrites

log = logging.getLogger("helix.genome")
MMAP_BYTES = 0  # [genome] mmap_mb: off by default (README, at scale: each connection maps it again)

__all__ = ["EMBED_DIM", "FileRecord", "Genome", "GenomeError", "GenomeVersionError", "SourceWrite", "WriteResult",
           "no_space_left",
           "decode_vector", "encode_vector"]


class Genome(SymbolReadsMixin, LexiconMixin, DoorWritesMixin, RenamesMixin, GeneReadsMixin, FullTextMixin, LearningMixin, RetentionMixin, ActivityMixin, MaintenanceMixin, SourcesMixin,
             ProjectsMixin, VectorModelMixin):
    """Thread-safe access to one genome file.

    Each thread gets its own connection (sqlite3 connections are not shareable
    across threads); in-process writers are serialised by a lock and other
    processes by SQLite's busy timeout.
    """

    meta_table = "meta"
    party_scope = EVERYONE  # one user's file: every bookkeeping row is its own (retention.PartyScope)

    def __init__(self, path: str | Path, *, busy_timeout_ms: int = 10_000, readonly: bool = False,
                 mmap_bytes: int = MMAP_BYTES, caps: WriteCaps | None = None) -> None:
        self.path = Path(path)
        self.caps = caps or WriteCaps()  # retention caps every bookkeeping write applies (learning.py)
        self.mmap_bytes = max(0, int(mmap_bytes))
        self.busy_timeout_s = busy_timeout_ms / 1000.0
        self.readonly = readonly
        self._local = threading.local()
        self._write_lock = threading.Lock()
        # every connection with the thread that owns it: a thread that has ended (an ingest's embedding
        # threads, a server's short-lived workers) leaves its connection behind, closed when the next opens
        self._connections: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._connections_lock = threading.Lock()
        self._vectors: VectorIndex | None = None
        self._live_count: tuple[int, int] | None = None  # (generation, live genes)
        self._vectors_lock = threading.Lock()
        self._migrated = False
        self._vector_model: tuple[str, int] = (DEFAULT_VECTOR_MODEL, 1)
        self.disk_full = False  # opened read-only because its disk had no space left (reads still served)
        self._immutable = False
        self._door = WriteDoor(SqliteDialect(lambda: self.vector_model_id))
        existed = self.path.exists() and self.path.stat().st_size > 0
        try:
            self._open_and_migrate()
        except GenomeError:
            if readonly or not self.path.exists() or not no_space_left(self.path.parent):
                raise
            if not existed:  # nothing stored to serve: a new genome needs room for its first pages
                self.close()
                self.path.unlink(missing_ok=True)  # the empty file the attempt left
                raise GenomeError(f"no space left to create the genome {self.path}: free some disk space (or set "
                                  "HELIX_HOME to a folder on another disk) and start Helix again") from None
            # a full disk cannot even hold SQLite's WAL index: serve what is stored, write nothing
            log.warning("no space left on the disk of genome %s: serving reads only until space is freed "
                        "and Helix restarts", self.path)
            self.close()
            self.readonly = self.disk_full = self._immutable = True
            self._open_and_migrate()
        self._load_vector_model()
        self._migrated = True

    # ── connections ──

    def _connect(self) -> sqlite3.Connection:
        if self.readonly:
            # immutable: no lock or WAL-index file is created (there is no room for one); changes still in a
            # WAL that was never folded in are not seen until space is freed
            uri = f"{self.path.resolve().as_uri()}?mode=ro" + ("&immutable=1" if self._immutable else "")
            conn = sqlite3.connect(uri, uri=True, timeout=self.busy_timeout_s, isolation_level=None,
                                   check_same_thread=False)
        else:
            conn = sqlite3.connect(str(self.path), timeout=self.busy_timeout_s, isolation_level=None,
                                   check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA cache_size = -32000")
        # an optional memory map ([genome] mmap_mb): each connection maps the file again and every page a
        # thread touched stays counted in the server's resident memory; off by default (README, at scale)
        conn.execute(f"PRAGMA mmap_size = {self.mmap_bytes}")
        with self._connections_lock:
            for owner, old in [pair for pair in self._connections if not pair[0].is_alive()]:
                self._connections.remove((owner, old))
                try:
                    old.close()
                except sqlite3.Error:
                    pass
            self._connections.append((threading.current_thread(), conn))
        return conn

    @property
    def conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
        return conn

    def close(self) -> None:
        self.close_deliveries()  # what was queued is written while the connections are open
        if self._vectors is not None:
            try:
                self._vectors.close()
            except GenomeError as exc:
                log.warning("genome %s: dense index not saved on close (%s)", self.path, exc)
            self._vectors = None
        with self._connections_lock:
            for _, conn in self._connections:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._connections.clear()
        self._local = threading.local()

    def _open_and_migrate(self) -> None:
        if self.readonly and not self.path.exists():
            raise GenomeError(f"genome {self.path} does not exist; run `helix ingest PATH` first")
        if not self.readonly:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise GenomeError(f"cannot create the folder for the genome {self.path}: {exc}") from None
        try:
            conn = self.conn
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise GenomeError(f"{self.path} is not a Helix genome or is corrupt ({exc}); move it aside and re-ingest") from None
        if version > SCHEMA_VERSION:
            raise GenomeVersionError(
                f"genome {self.path} has schema version {version}, but this Helix knows up to {SCHEMA_VERSION}: "
                "it was written by a newer Helix. Upgrade helix-context, or point HELIX_HOME / [genome] path elsewhere. "
                "The file was not modified."
            )
        if self.readonly:
            return
        try:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode.lower() != "wal":
                log.warning("genome %s: journal mode is %s, not WAL", self.path, mode)
            for target in range(version, SCHEMA_VERSION):
                with self.transaction() as tx:
                    # another process may have migrated while we waited for the write lock
                    if tx.execute("PRAGMA user_version").fetchone()[0] > target:
                        continue
                    tx.executescript_in_tx(MIGRATIONS[target])
                    tx.execute(f"PRAGMA user_version = {target + 1}")
                    tx.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('generation', '0')")
                    tx.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('fts_version', ?)", (str(FTS_VERSION),))
                    tx.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('created_at', ?)", (str(time.time()),))
            self._match_fts_version()
            self._forget_unindexed_changes()
        except sqlite3.OperationalError as exc:
            raise friendly_error(exc, self.path) from None

    def _forget_unindexed_changes(self) -> None:
        """No dense index on disk: the next one is built from the genes table, so the change log can go."""
        if Path(str(self.path) + ".ann").exists() or vector_sql.first_change(self.conn) is None:
            return
        try:
            with self.transaction(changes_genes=False) as tx:
                vector_sql.trim_changes(tx.conn, vector_sql.last_change(tx.conn))
        except GenomeError as exc:  # busy: the next open trims it
            log.info("genome %s: vector change log kept for now (%s)", self.path, exc)

    # ── transactions ──

    def read_snapshot(self) -> AbstractContextManager[None]:
        """Nothing to open: this process's writers and readers share one connection under a lock, and a
        file's genes are replaced in one transaction (the team genome needs it: pg/store.py)."""
        return nullcontext()

    def export_reads(self) -> AbstractContextManager[ExportReads]:
        """What `helix export` reads, in one read transaction (portable_sql.py)."""
        from helix_context.genome import portable_sql  # it imports this module

        self.flush_deliveries()
        return portable_sql.export_reads(self)

    def import_writes(self, *, write: bool) -> AbstractContextManager[ImportWrites]:
        """What `helix import` reads and writes: one transaction when `write` (portable_sql.py)."""
        from helix_context.genome import portable_sql  # it imports this module

        return portable_sql.import_writes(self, write=write)

    @contextmanager
    def transaction(self, *, changes_genes: bool = True, durable: bool = True) -> Iterator[Tx]:
        """BEGIN IMMEDIATE … COMMIT, rolled back on any error.

        `changes_genes` bumps the generation, which readers use to rebuild caches
        (the dense matrix); bookkeeping writes (sessions, co-activation, access
        counts) pass False so a chat does not throw the caches away. `durable` changes
        nothing here: in WAL mode with synchronous = NORMAL no commit waits for the disk.
        """
        if self.disk_full:
            raise GenomeError(f"no space left on the disk of genome {self.path}: Helix serves what is stored but "
                              "cannot write; free disk space and restart Helix — nothing already stored was lost")
        if self.readonly:
            raise GenomeError(f"genome {self.path} is open read-only")
        conn = self.conn
        with self._write_lock:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise friendly_error(exc, self.path) from None
            try:
                yield Tx(conn)
                if self._migrated and changes_genes:
                    conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
                conn.execute("COMMIT")
            except BaseException as exc:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
                if isinstance(exc, sqlite3.OperationalError):
                    raise friendly_error(exc, self.path) from None
                raise

    def generation(self) -> int:
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row[0]) if row else 0

    def live_gene_count(self) -> int:
        """Live genes, counted once per generation: the count scans the genes table (~0.2 s at 1M genes)."""
        generation = self.generation()
        cached = self._live_count
        if cached is not None and cached[0] == generation:
            return cached[1]
        with closing(scan_connection(self.path, immutable=self.disk_full)) as conn:  # a full scan: never through the map (scan.py)
            n = int(conn.execute("SELECT count(*) FROM genes WHERE retired_at IS NULL").fetchone()[0])
        self._live_count = (generation, n)
        return n

    # ── files ──


    # ── writes (the rules are the write door's, shared with PostgreSQL: write_door.py) ──

    def replace_source(self, record: FileRecord | None, path: str | None,
                       genes: Sequence[tuple[Gene, np.ndarray | None]],
                       forms: Mapping[str, StoredForm] | None = None) -> WriteResult:
        """Make `genes` the complete set for `path` in one transaction.

        Genes whose content is already stored (elsewhere or unchanged) are
        reused; genes of `path` no longer present lose this source and are
        deleted once no source holds them. `forms` (by gene id) are stored forms
        computed ahead, in a parse worker; a gene without one is encoded here.
        """
        with self.transaction() as tx:
            return self._replace_all(tx, [SourceWrite(record, path, genes, forms or {})])[0]

    def replace_sources(self, writes: Sequence[SourceWrite]) -> list[WriteResult | GenomeError]:
        """Several `replace_source` calls, committed together; each file's error is its own.

        Why: a commit costs about as much as writing a small file's genes, so an ingest
        commits once per batch. If any file of the batch fails (or the disk fills), the
        batch rolls back whole and is written again one transaction per file, so every
        file that can be stored is, and each failure is reported against its own file.
        (A savepoint per file would do the same but costs ~0.2 ms per file every time.)
        """
        if len(writes) > 1:
            try:
                with self.transaction() as tx:
                    return list(self._replace_all(tx, writes))
            except (GenomeError, sqlite3.Error):
                pass  # nothing of the batch was stored: retry file by file below
        results: list[WriteResult | GenomeError] = []
        for write in writes:
            try:
                results.append(self.replace_source(write.record, write.path, write.genes, write.forms))
            except GenomeError as exc:
                results.append(exc)
            except sqlite3.Error as exc:
                results.append(GenomeError(f"genome {self.path}: {exc}"))
        return results

    def _replace_all(self, tx: Tx, writes: Sequence[SourceWrite]) -> list[WriteResult]:
        lex = self._door.dialect.lexical(tx)
        results = self._door.replace(tx, lex, writes)
        lex.flush()
        return results

    def retire_source(self, path: str) -> int:
        """The file is gone: its genes leave retrieval (tier archived) unless another file holds them."""
        with self.transaction() as tx:
            lex = self._door.dialect.lexical(tx)
            retired = self._door.retire(tx, lex, path)
            lex.flush()  # genes that moved to another file of theirs were re-indexed
        return retired

    # ── reads ──

    def embedding_of(self, rowid: int) -> np.ndarray | None:
        row = self.conn.execute("SELECT embedding FROM genes WHERE id = ? AND vector_model = ?",
                                (rowid, self.vector_model_id)).fetchone()
        return decode_vector(row[0]) if row and row[0] else None

    def vector_index(self) -> VectorIndex:
        """The dense index of this genome's live vectors (genome/ann.py), kept in step on each search."""
        if self._vectors is None:
            with self._vectors_lock:
                if self._vectors is None:
                    self._vectors = VectorIndex(self.path, lambda: self.conn,
                                                None if self.readonly else self._trim_vector_log,
                                                model=self.vector_model_id)
        return self._vectors

    def _trim_vector_log(self, upto: int) -> None:
        with self.transaction(changes_genes=False) as tx:
            vector_sql.trim_changes(tx.conn, upto)

    def embedded_gene_ids(self, gene_ids: Sequence[str]) -> set[str]:
        """Which of these genes are already stored with a vector of the active model (ingest need not embed them)."""
        found: set[str] = set()
        ids = list(dict.fromkeys(gene_ids))
        for start in range(0, len(ids), 500):
            batch = ids[start:start + 500]
            marks = ",".join("?" * len(batch))
            found.update(r[0] for r in self.conn.execute(
                f"SELECT gene_id FROM genes WHERE gene_id IN ({marks}) AND embedding IS NOT NULL "
                "AND vector_model = ?", [*batch, self.vector_model_id]))
        return found

    def genes_missing_embeddings(self, limit: int = 1000) -> list[Gene]:
        rowids = [r[0] for r in self.conn.execute(
            "SELECT id FROM genes WHERE (embedding IS NULL OR vector_model IS NOT ?) AND retired_at IS NULL LIMIT ?",
            (self.vector_model_id, limit))]
        found = self.genes_by_rowid(rowids)
        return [found[r] for r in rowids if r in found]

