"""The write door: the one place whose rules decide how a file's genes replace its old ones, for both backends.

Why one module: the rules are subtle (a gene shared by two files is stored once; a file that loses a
gene another file still holds hands the gene over to it; a retired gene whose text comes back is
revived, in whatever file it now is; the lexical index must always hold exactly the live genes),
and two copies of them in two SQL dialects drift apart. What differs between SQLite and PostgreSQL
is small and lives in each backend's dialect (`DoorDialect`): whether looked-up rows are locked
against another writer, how a vector is stored, and how the lexical index is written (FTS5 rows
on SQLite, BM25 postings on PostgreSQL: `LexicalWriter`). Every statement here is in the subset
of SQL both engines take, with `?` placeholders (the PostgreSQL transaction translates them).

Why batched: each statement is a round trip (a network one on PostgreSQL) and a pass through the
GIL, so a file's genes are looked up in one query, its new genes inserted a few hundred per
statement, and its span, source and symbol rows written with one executemany each.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from helix_context.genome.records import FileRecord, SourceWrite, WriteResult
from helix_context.genome.stored_form import StoredForm, stored_form
from helix_context.models import Gene

_LOOKUP_CHUNK = 500  # ids per lookup (SQLite binds each as a variable)
_GENE_COLUMNS = ("gene_id, content, content_type, language, source_path, project, start_line, end_line, symbol, "
                 'tags, facts, source_kind, volatility_class, authority_class, observed_at, last_verified_at, '
                 'source_mtime, source_hash, org, device, "user", agent, tier, access_count')
_FILE_UPSERT = ("INSERT INTO files(path, project, size, mtime_ns, content_hash, genes, ingested_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (path) DO UPDATE SET project = excluded.project, "
                "size = excluded.size, mtime_ns = excluded.mtime_ns, content_hash = excluded.content_hash, "
                "genes = excluded.genes, ingested_at = excluded.ingested_at")

Stored = dict[str, tuple[int, str | None, float | None]]  # gene_id → (row id, source_path, retired_at)


class DoorTx(Protocol):
    """An open write transaction of either backend (sqlite_tx.Tx, pg/store.PgTx), taking `?` placeholders.
    Its cursors answer fetchone / fetchall / iteration / rowcount on both."""

    def execute(self, sql: str, args: Sequence[Any] = ...) -> Any: ...

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any: ...


class LexicalWriter(Protocol):
    """The lexical index of one transaction. `index` is only called for a gene not indexed now, and
    `unindex` while the gene's row still holds what it was indexed with (FTS5 replays it)."""

    def index(self, rowid: int, content: str | bytes, tags: str, path: str | None, form: StoredForm | None) -> None:
        """`form`: the gene's stored form when the caller has it (its full-text body, and on a team genome
        maybe its postings, computed by a parse worker); None: derived here from `content`."""

    def unindex(self, rowid: int) -> None: ...

    def flush(self) -> None:
        """Write what `index` buffered (a few multi-row statements, or one COPY)."""
        ...


class DoorDialect(Protocol):
    """The backend's side of the write door: a few clauses and the lexical writer."""

    lock_rows: str  # appended to a lookup of genes this write may change: "" or " FOR UPDATE"
    vector_columns: str  # the genes columns a new gene's vector fills, after the common ones
    vector_set: str  # SET clause storing a vector on a stored gene; its values are `vector_values`
    vector_missing: str  # WHERE clause of a gene stored without a vector of the active model

    def vector_values(self, vector: np.ndarray | None) -> tuple[Any, ...]:
        """Values of `vector_columns` and of `vector_set` (all None without a vector)."""
        ...

    def vector_missing_values(self) -> tuple[Any, ...]: ...

    def member(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """`column` is one of `values` (at most _LOOKUP_CHUNK): the condition and its arguments."""
        ...

    def insert_genes(self, tx: Any, columns: str, rows: Sequence[tuple[Any, ...]]) -> list[tuple[int, str]]:
        """Insert gene rows (skipping gene ids already stored); (row id, gene id) of those inserted."""
        ...

    def lexical(self, tx: Any) -> LexicalWriter:
        """The lexical writer of `tx`, this backend's own transaction type."""
        ...


class WriteDoor:
    """Every write of genes, files, sources and symbols, over one open transaction at a time."""

    def __init__(self, dialect: DoorDialect) -> None:
        self.dialect = dialect

    # ── replacing a file's genes ──

    def replace(self, tx: DoorTx, lex: LexicalWriter, writes: Sequence[SourceWrite]) -> list[WriteResult]:
        """Make each write's genes the complete set for its path (the caller commits and flushes `lex`).

        The batch is written as if its files came one after another, in a fixed number of statements:
        their old source rows go in one DELETE, their genes are looked up and the new ones inserted
        together, and a gene a file lost is released only after every file's new source rows are in
        (so a chunk that moved from one file of the batch to another is handed over, not re-inserted).
        """
        paths: set[str] = set()
        for n, write in enumerate(writes):
            if write.path is not None and write.path in paths:  # the same file twice: one after the other
                return self.replace(tx, lex, writes[:n]) + self.replace(tx, lex, writes[n:])
            if write.path is not None:
                paths.add(write.path)
        now = time.time()
        results = [WriteResult() for _ in writes]
        old = self._take_sources(tx, [w.path for w in writes if w.path is not None])
        stored = self._stored(tx, [gene.gene_id for w in writes for gene, _ in w.genes])
        added = self._insert_new(tx, lex, writes, stored, now)
        lost: dict[int, tuple[int, set[str | None]]] = {}  # gene → (the write that lost it first, paths)
        source_rows: list[tuple[Any, ...]] = []
        symbol_rows: list[tuple[Any, ...]] = []
        spans: list[tuple[Any, ...]] = []
        vectors: list[tuple[Any, ...]] = []
        files: list[tuple[Any, ...]] = []
        for n, (write, result) in enumerate(zip(writes, results, strict=True)):
            path = write.path
            kept: set[int] = set()
            for gene, vector in write.genes:
                if gene.gene_id in added:
                    rowid = added.pop(gene.gene_id)  # its first place in the batch: inserted above
                    result.added += 1
                else:
                    rowid = self._reuse(tx, lex, gene, stored, result, spans, now)
                    if vector is not None:  # stored without a vector, or with another model's
                        vectors.append((*self.dialect.vector_values(vector), rowid,
                                        *self.dialect.vector_missing_values()))
                kept.add(rowid)
                if path is not None:
                    source_rows.append((rowid, path, gene.start_line, gene.end_line))
                    symbol_rows.extend((path, rowid, s.name, s.name.rsplit(".", 1)[-1].lower(), s.kind,
                                        s.start_line, s.end_line) for s in gene.symbols)
            for rowid in old.get(path, set()) - kept if path is not None else ():
                lost.setdefault(rowid, (n, set()))[1].add(path)
            if write.record is not None:
                r = write.record
                files.append((r.path, r.project, r.size, r.mtime_ns, r.content_hash, len(kept), now))
        if spans:
            tx.executemany("UPDATE genes SET start_line = ?, end_line = ?, source_mtime = ?, source_hash = ?, "
                           "last_verified_at = ?, source_changed = 0 WHERE id = ?", spans)
        if vectors:
            tx.executemany(f"UPDATE genes SET {self.dialect.vector_set} WHERE id = ? AND {self.dialect.vector_missing}",
                           vectors)
        if source_rows:
            tx.executemany("INSERT INTO gene_sources(gene, path, start_line, end_line) VALUES (?, ?, ?, ?) "
                           "ON CONFLICT DO NOTHING", source_rows)
        if symbol_rows:
            tx.executemany("INSERT INTO symbols(path, gene, name, leaf, kind, start_line, end_line) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?)", symbol_rows)
        for rowid in self._release(tx, lex, {r: paths for r, (_, paths) in lost.items()}, retire_at=None):
            results[lost[rowid][0]].replaced += 1
        if files:
            tx.executemany(_FILE_UPSERT, files)
        return results

    def _take_sources(self, tx: DoorTx, paths: Sequence[str]) -> dict[str | None, set[int]]:
        """Delete the source and symbol rows of `paths`; path → the genes its source rows named."""
        old: dict[str | None, set[int]] = {}
        unique = list(dict.fromkeys(paths))
        for start in range(0, len(unique), _LOOKUP_CHUNK):
            where, args = self.dialect.member("path", unique[start:start + _LOOKUP_CHUNK])
            for path, gene in tx.execute(f"DELETE FROM gene_sources WHERE {where} RETURNING path, gene",
                                         args).fetchall():
                old.setdefault(str(path), set()).add(int(gene))
            tx.execute(f"DELETE FROM symbols WHERE {where}", args)
        return old

    def _stored(self, tx: DoorTx, gene_ids: Sequence[str]) -> Stored:
        """What the genes table holds for these ids (locked against other writers where the dialect does)."""
        found: Stored = {}
        unique = list(dict.fromkeys(gene_ids))
        for start in range(0, len(unique), _LOOKUP_CHUNK):
            where, args = self.dialect.member("gene_id", unique[start:start + _LOOKUP_CHUNK])
            rows = tx.execute(f"SELECT gene_id, id, source_path, retired_at FROM genes WHERE {where} "
                              f"ORDER BY id{self.dialect.lock_rows}", args).fetchall()
            found.update((gene_id, (int(rowid), source, retired)) for gene_id, rowid, source, retired in rows)
        return found

    def _insert_new(self, tx: DoorTx, lex: LexicalWriter, writes: Sequence[SourceWrite], stored: Stored,
                    now: float) -> dict[str, int]:
        """Insert the genes `stored` lacks (each id once), a few hundred per statement; gene_id → row id.

        A gene another backend inserted since the lookup is skipped by ON CONFLICT and joins `stored`
        (looked up again, locked), so it is reused like any stored gene."""
        new: dict[str, tuple[Gene, np.ndarray | None]] = {}
        forms_ahead: dict[str, StoredForm] = {}
        for write in writes:
            for gene, vector in write.genes:
                if gene.gene_id not in stored and gene.gene_id not in new:
                    new[gene.gene_id] = (gene, vector)
            forms_ahead.update(write.forms)
        if not new:
            return {}
        columns = f"{_GENE_COLUMNS}{self.dialect.vector_columns}"
        forms: dict[str, StoredForm] = {}
        rows: list[tuple[Any, ...]] = []
        for gene, vector in new.values():
            form = forms[gene.gene_id] = forms_ahead.get(gene.gene_id) or stored_form(gene.content)
            prov = gene.provenance
            rows.append((gene.gene_id, form.packed, gene.content_type, gene.language, gene.source_path, gene.project,
                         gene.start_line, gene.end_line, gene.symbol, "\n".join(gene.tags),
                         json.dumps([list(f) for f in gene.facts]), prov.source_kind, prov.volatility_class,
                         prov.authority_class, prov.observed_at or now, prov.last_verified_at or now,
                         prov.source_mtime, prov.source_hash, gene.org, gene.device, gene.user, gene.agent, gene.tier,
                         gene.access_count, *self.dialect.vector_values(vector)))
        inserted = {str(gene_id): int(rowid) for rowid, gene_id in self.dialect.insert_genes(tx, columns, rows)}
        for gene_id, rowid in inserted.items():
            gene = new[gene_id][0]
            lex.index(rowid, gene.content, "\n".join(gene.tags), gene.source_path, forms[gene_id])
            stored[gene_id] = (rowid, gene.source_path, None)  # a later copy in this file finds it
        missed = [gene_id for gene_id in new if gene_id not in inserted]
        if missed:
            stored.update(self._stored(tx, missed))
        return inserted

    def _reuse(self, tx: DoorTx, lex: LexicalWriter, gene: Gene, stored: Stored, result: WriteResult,
               spans: list[tuple[Any, ...]], now: float) -> int:
        """A gene already stored: revive it if retired; refresh its span if this file owns it."""
        rowid, source_path, retired_at = stored[gene.gene_id]
        result.reused += 1
        if retired_at is not None:
            # revived (its text is back, maybe in another file): the row takes the path and tags it is
            # indexed under now, since a later unindex re-derives them from the row (FTS5 replays them)
            tags = "\n".join(gene.tags)
            tx.execute("UPDATE genes SET retired_at = NULL, tier = 'open', source_path = ?, tags = ? WHERE id = ?",
                       (gene.source_path, tags, rowid))
            lex.index(rowid, gene.content, tags, gene.source_path, None)
            source_path = gene.source_path
        if source_path == gene.source_path or source_path is None:
            prov = gene.provenance
            spans.append((gene.start_line, gene.end_line, prov.source_mtime, prov.source_hash, now, rowid))
            if source_path != gene.source_path:
                self._set_source_path(tx, lex, rowid, gene.source_path)
            stored[gene.gene_id] = (rowid, gene.source_path, None)
        return rowid

    def _set_source_path(self, tx: DoorTx, lex: LexicalWriter, rowid: int, new_path: str | None) -> None:
        """The path is indexed: the gene is re-indexed under its new primary source."""
        lex.unindex(rowid)
        row = tx.execute("UPDATE genes SET source_path = ? WHERE id = ? RETURNING content, tags, retired_at",
                         (new_path, rowid)).fetchone()
        if row is not None and row[2] is None:
            content = row[0] if isinstance(row[0], (str, bytes)) else bytes(row[0])
            lex.index(rowid, content, row[1], new_path, None)

    def _release(self, tx: DoorTx, lex: LexicalWriter, lost: Mapping[int, set[str | None]], *,
                 retire_at: float | None) -> list[int]:
        """Genes that lost their place in the files `lost` names. One still held by another file moves to
        it (if a lost file was its primary source); one held nowhere is deleted (a replaced file) or
        retired at `retire_at` (a deleted file). Returns those deleted or retired."""
        rowids = sorted(lost)
        if not rowids:
            return []
        others: dict[int, tuple[str, int, int]] = {}
        current: dict[int, str | None] = {}
        for start in range(0, len(rowids), _LOOKUP_CHUNK):
            part = rowids[start:start + _LOOKUP_CHUNK]
            where, args = self.dialect.member("gene", part)
            for gene, path, first, last in tx.execute(
                    f"SELECT gene, path, start_line, end_line FROM gene_sources WHERE {where} "
                    "ORDER BY gene, path, start_line", args).fetchall():
                others.setdefault(int(gene), (str(path), int(first), int(last)))
            held = [r for r in part if r in others]
            if held:
                where, args = self.dialect.member("id", held)
                current.update((int(r), p) for r, p in tx.execute(
                    f"SELECT id, source_path FROM genes WHERE {where}", args).fetchall())
        gone = [r for r in rowids if r not in others]
        for rowid in gone:
            lex.unindex(rowid)
        for start in range(0, len(gone), _LOOKUP_CHUNK):
            part = gone[start:start + _LOOKUP_CHUNK]
            in_a, args_a = self.dialect.member("a", part)
            in_b, args_b = self.dialect.member("b", part)
            where, args = self.dialect.member("id", part)
            if retire_at is None:
                tx.execute(f"DELETE FROM coactivation WHERE {in_a} OR {in_b}", [*args_a, *args_b])
                tx.execute(f"DELETE FROM genes WHERE {where}", args)
            else:
                tx.execute(f"UPDATE genes SET tier = 'archived', retired_at = ? WHERE {where} "
                           "AND retired_at IS NULL", [retire_at, *args])
        for rowid, (path, first, last) in others.items():
            if current.get(rowid) in lost[rowid]:  # its primary source was a lost one: hand it over
                tx.execute("UPDATE genes SET start_line = ?, end_line = ? WHERE id = ?", (first, last, rowid))
                self._set_source_path(tx, lex, rowid, path)
        return gone

    # ── other writes ──

    def retire(self, tx: DoorTx, lex: LexicalWriter, path: str) -> int:
        """The file is gone: its genes leave retrieval (tier archived) unless another file holds them."""
        # a chunk repeated in the file has a source row per place: each gene is released once
        rowids = self._take_sources(tx, [path]).get(path, set())
        retired = self._release(tx, lex, {r: {path} for r in rowids}, retire_at=time.time())
        tx.execute("DELETE FROM files WHERE path = ?", (path,))
        return len(retired)

    @staticmethod
    def touch(tx: DoorTx, record: FileRecord) -> None:
        """The file's mtime moved but its bytes did not: remember the new mtime only."""
        tx.execute("UPDATE files SET mtime_ns = ?, size = ? WHERE path = ?", (record.mtime_ns, record.size, record.path))
        tx.execute("UPDATE genes SET source_mtime = ?, last_verified_at = ? WHERE source_path = ?",
                   (record.mtime_ns / 1e9, time.time(), record.path))

    def set_embeddings(self, tx: DoorTx, items: Sequence[tuple[int, np.ndarray]]) -> None:
        tx.executemany(f"UPDATE genes SET {self.dialect.vector_set} WHERE id = ?",
                       [(*self.dialect.vector_values(v), int(r)) for r, v in items])

    @staticmethod
    def set_facts(tx: DoorTx, items: Sequence[tuple[int, Sequence[tuple[str, str]]]]) -> None:
        tx.executemany("UPDATE genes SET facts = ? WHERE id = ?",
                       [(json.dumps([list(f) for f in facts]), rowid) for rowid, facts in items])


class DoorWritesMixin:
    """The genome methods that are one door call in one transaction, for both genomes (store.py, pg/store.py).
    Needs `_door` and `transaction` from the genome."""

    _door: WriteDoor
    transaction: Callable[..., AbstractContextManager[Any]]

    def touch_file(self, record: FileRecord) -> None:
        """The file's mtime moved but its bytes did not: remember the new mtime only."""
        with self.transaction() as tx:
            self._door.touch(tx, record)

    def set_embeddings(self, items: Sequence[tuple[int, np.ndarray]]) -> None:
        with self.transaction() as tx:
            self._door.set_embeddings(tx, items)

    def set_facts(self, items: Sequence[tuple[int, Sequence[tuple[str, str]]]]) -> None:
        with self.transaction() as tx:
            self._door.set_facts(tx, items)
