"""The genes' full-text index (FTS5, contentless): writing rows, searching, rebuilding, and surviving damage.

A mixin of `Genome` (store.py). The index is contentless to keep the genome small, which has
one sharp edge: a row is deleted by replaying the exact values it was indexed with, read
back from the genes row. A delete with other values leaves postings behind for a row that
no longer has a size record, and a later BM25 search meeting them fails with "database
disk image is malformed". Writers keep the genes row and the index in step; if it happens
anyway (an older version, a crash mid-way, a bug), searches go on without full-text
results, the index is marked, and the next open of the genome rebuilds it.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from helix_context.genome import fts_text
from helix_context.genome.schema import FTS_VERSION
from helix_context.genome.stored_form import unpack_text

log = logging.getLogger("helix.genome")

DAMAGED = "damaged"  # the meta fts_version value that makes the next open rebuild the index
_BM25_WEIGHTS = "1.0, 0.6, 0.8"  # body, tags, path
_ROWS_PER_INSERT = 200  # x 4 values: far below SQLite's 32766 bound variables
_TERMS_PER_STATEMENT = 100  # term_rowid_lists: far below SQLite's 500 SELECTs in one compound statement
_MERGE_PAGES = 500  # index pages one merge step writes (each step is its own short write transaction)
_MAX_MERGE_STEPS = 10_000  # a bound on one call's steps; the next ingest's call goes on from there


class FullTextMixin:
    """Needs `conn`, `path`, `transaction` and `readonly` from Genome."""

    conn: Any
    path: Any
    transaction: Any
    readonly: bool
    _fts_damage_reported: bool = False

    @staticmethod
    def _fts_mark(conn: Any) -> str | None:
        """The meta `fts_version` value: the derivation the index was built with, or DAMAGED."""
        row = conn.execute("SELECT value FROM meta WHERE key = 'fts_version'").fetchone()
        return None if row is None else row[0]

    def _match_fts_version(self) -> None:
        """Re-index every live gene when the index was built by another text derivation, or was damaged.

        Rows derived the old way could never be deleted cleanly. One transaction: an
        interrupted rebuild leaves the old index, and the next open starts it again.
        """
        if self._fts_mark(self.conn) == str(FTS_VERSION):
            return
        with self.transaction() as tx:
            mark = self._fts_mark(tx)
            if mark == str(FTS_VERSION):
                return  # another process rebuilt it while we waited for the write lock
            live = tx.execute("SELECT COUNT(*) FROM genes WHERE retired_at IS NULL").fetchone()[0]
            why = "it was damaged" if mark == DAMAGED else "for this version of Helix"
            log.warning("genome %s: rebuilding the full-text index of %d genes (%s; once; the genes themselves "
                        "are unchanged)", self.path, live, why)
            tx.execute("INSERT INTO genes_fts(genes_fts) VALUES ('delete-all')")
            rows = self.conn.execute("SELECT id, content, tags, source_path FROM genes WHERE retired_at IS NULL")
            for rowid, content, tags, path in rows:
                self._fts_insert(tx, rowid, content, tags, path)
            tx.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('fts_version', ?)", (str(FTS_VERSION),))

    @staticmethod
    def fts_values(content: str | bytes, tags: str, path: str | None, body: str | None = None) -> tuple[str, str, str]:
        """The full-text row; `body` when the stored form already holds it (computed by a parse worker)."""
        return (body if body is not None else fts_text.body_text(unpack_text(content)),
                fts_text.tags_text(tags.split("\n") if tags else []), fts_text.path_text(path))

    def _fts_insert(self, tx: Any, rowid: int, content: str | bytes, tags: str, path: str | None,
                    body: str | None = None) -> None:
        tx.execute("INSERT INTO genes_fts(rowid, body, tags, path) VALUES (?, ?, ?, ?)",
                   (rowid, *self.fts_values(content, tags, path, body)))

    @staticmethod
    def _fts_insert_many(tx: Any, rows: list[tuple[Any, ...]]) -> None:
        """Rows from `fts_values` with their rowid first, a few hundred per statement (one pass through
        the GIL each, not one per gene: the writes of a big ingest set its pace)."""
        for start in range(0, len(rows), _ROWS_PER_INSERT):
            part = rows[start:start + _ROWS_PER_INSERT]
            tx.execute("INSERT INTO genes_fts(rowid, body, tags, path) VALUES "
                       + ", ".join(["(?, ?, ?, ?)"] * len(part)), [v for row in part for v in row])

    def start_fts_search(self, match: str, limit: int, column: str | None = None
                         ) -> Callable[[], list[tuple[int, float]]]:
        """fts_search, as the team genome offers it (its statement sent now, read later); here it runs now."""
        hits = self.fts_search(match, limit, column)
        return lambda: hits

    def fts_search(self, match: str, limit: int, column: str | None = None) -> list[tuple[int, float]]:
        """(rowid, score) best first; score = -bm25 (higher is better). `match` is an FTS5 expression."""
        if not match:
            return []
        expr = f"{{{column}}} : ({match})" if column else match
        try:
            rows = self.conn.execute(
                f"SELECT rowid, -bm25(genes_fts, {_BM25_WEIGHTS}) AS s FROM genes_fts WHERE genes_fts MATCH ? "
                f"ORDER BY bm25(genes_fts, {_BM25_WEIGHTS}) LIMIT ?", (expr, limit)).fetchall()
        except sqlite3.OperationalError as exc:
            log.debug("fts query %r failed: %s", expr, exc)
            return []
        except sqlite3.DatabaseError as exc:  # "database disk image is malformed": stale postings
            self._full_text_damaged(exc)
            return []
        return [(int(r[0]), float(r[1])) for r in rows]

    def term_rowids(self, term: str, limit: int) -> list[int]:
        """Rowids of the genes whose full-text row holds `term` (at most `limit`): a project's document count
        of a word is the size of this list's overlap with the project's genes."""
        try:
            rows = self.conn.execute("SELECT rowid FROM genes_fts WHERE genes_fts MATCH ? LIMIT ?",
                                     (fts_text.quote_term(term), limit)).fetchall()
        except sqlite3.Error:  # a malformed or damaged index answers "no evidence", never an error
            return []
        return [int(r[0]) for r in rows]

    def term_rowid_lists(self, terms: Sequence[str], limit: int) -> dict[str, np.ndarray]:
        """term_rowids for many terms, in one statement per _TERMS_PER_STATEMENT: each term → the ids of
        the genes holding it (at most `limit`). Why: the silence gate counts a pasted issue's new words
        in the scoped project, dozens per question; each word's ids come back as one string, which
        costs a fourth of a row per gene id on a common word's 20k genes."""
        wanted = list(dict.fromkeys(terms))
        if limit <= 0:
            return {t: np.empty(0, dtype=np.int64) for t in wanted}
        out: dict[str, np.ndarray] = {}
        for start in range(0, len(wanted), _TERMS_PER_STATEMENT):
            part = wanted[start:start + _TERMS_PER_STATEMENT]
            sql = " UNION ALL ".join(
                f"SELECT {i}, (SELECT group_concat(rowid) FROM "
                f"(SELECT rowid FROM genes_fts WHERE genes_fts MATCH ? LIMIT ?))" for i in range(len(part)))
            try:
                rows = self.conn.execute(sql, [v for t in part for v in (fts_text.quote_term(t), limit)]).fetchall()
            except sqlite3.Error:  # one term the index cannot answer: each alone, that one answering "none"
                out.update((t, np.asarray(self.term_rowids(t, limit), dtype=np.int64)) for t in part)
                continue
            for i, ids in rows:
                out[part[i]] = (np.fromstring(str(ids), dtype=np.int64, sep=",") if ids is not None
                                else np.empty(0, dtype=np.int64))
        return out

    def merge_full_text(self) -> int:
        """Merge the full-text index's segments after a batch of writes; returns the merge steps taken.

        Why: each write transaction adds a segment to the FTS5 index, and FTS5's own merging
        (`automerge`) lets three pile up on each level before it merges them: a 10k-gene genome
        built by a few dozen transactions held 13 segments, and every word a question looks up
        is looked up in each of them. Those lookups, not BM25 ranking, were most of a pasted
        issue's full-text cost (measured: its four searches took 6.8 ms over 13 segments and
        3.3 ms over one; the main search 2.6 → 0.6 ms). Merging every level that holds two or
        more (FTS5's `usermerge` 2) keeps about one segment per level, for writing each posting
        about twice as often over the genome's life (a binary counter's log2 against log4; about
        0.1 s of CPU per 10k genes ingested). The index holds the same rows with the same
        statistics, so every search returns the same genes with the same scores.
        """
        if self.readonly or getattr(self, "disk_full", False):
            return 0
        if self.conn.execute("SELECT v FROM genes_fts_config WHERE k = 'usermerge'").fetchone() != (2,):
            with self.transaction(changes_genes=False) as tx:
                tx.execute("INSERT INTO genes_fts(genes_fts, rank) VALUES ('usermerge', 2)")
        steps = 0
        while steps < _MAX_MERGE_STEPS:
            try:
                with self.transaction(changes_genes=False) as tx:
                    before = self.conn.total_changes
                    tx.execute("INSERT INTO genes_fts(genes_fts, rank) VALUES ('merge', ?)", (_MERGE_PAGES,))
                    wrote = self.conn.total_changes - before > 1  # the command's own row counts one
            except sqlite3.OperationalError:
                raise  # (the transaction turned busy / full into a GenomeError already)
            except sqlite3.DatabaseError as exc:  # a damaged index: marked, rebuilt at the next open
                self._full_text_damaged(exc)
                break
            steps += 1
            if not wrote:
                break
        return steps

    def full_text_damaged(self) -> bool:
        """Whether the index is marked for a rebuild at the next open (`helix check` reports it)."""
        return self._fts_mark(self.conn) == DAMAGED

    def _full_text_damaged(self, exc: sqlite3.DatabaseError) -> None:
        if not self.readonly:
            try:
                with self.transaction(changes_genes=False) as tx:
                    tx.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('fts_version', ?)", (DAMAGED,))
            except Exception as mark_exc:  # busy or read-only: the next failing search marks it
                log.info("genome %s: could not mark the full-text index for a rebuild yet (%s)", self.path, mark_exc)
        if not self._fts_damage_reported:
            self._fts_damage_reported = True
            log.error("genome %s: the full-text index is damaged (%s). Searches go on without full-text results "
                      "until it is rebuilt, which the next start does by itself: restart the backend (tray menu) "
                      "or run `helix check`. No gene is lost.", self.path, exc)
