"""The numbers every question of a team genome needs, read once per generation instead of once per question.

Why: on SQLite a word's document count or the live gene count costs a lookup in the same
process; on PostgreSQL each is a round trip to the server, and retrieval asks for them
several times per question (the words' weights, BM25's N and average length, the silence
gate's counts). They change only when genes do, and every gene-changing commit advances the
generation that each backend's change listener follows (team.py: NOTIFY, or a 1 s poll),
so keeping them per generation never serves a number older than the last write it has seen.

Retention: at most MAX_TERMS words are remembered; the memory is emptied when it is full
or the generation moves.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from helix_context.genome.pg import lexical

MAX_TERMS = 50_000
_NONE = (0, 0, 0, 0)


class ReadStats:
    """Per-generation: live genes, BM25's corpus numbers, and each word's document counts per column."""

    def __init__(self, generation: Callable[[], int]) -> None:
        self._generation = generation
        self._lock = threading.Lock()
        self._at = -1
        self._corpus: tuple[int, int] | None = None
        self._freqs: dict[str, tuple[int, int, int, int]] = {}

    def _current(self) -> int:
        """The generation now; the memory is emptied first when it moved (call under the lock)."""
        generation = self._generation()
        if generation != self._at or len(self._freqs) > MAX_TERMS:
            self._at, self._corpus, self._freqs = generation, None, {}
        return generation

    def live_genes(self, conn: Any) -> int:
        """Live genes: BM25's N (lex_docs holds a row per live gene), so both come from one scan."""
        return self.corpus(conn)[0]

    def corpus(self, conn: Any) -> tuple[int, int]:
        """(N, total tokens) for BM25."""
        with self._lock:
            generation = self._current()
            if self._corpus is not None:
                return self._corpus
        found = lexical.corpus_stats(conn)
        with self._lock:
            if self._at == generation:
                self._corpus = found
        return found

    def doc_freqs(self, conn: Any, terms: Sequence[str]) -> Mapping[str, tuple[int, int, int, int]]:
        """Term → genes holding it (any column, body, tags, path); unknown words read in one statement."""
        with self._lock:
            generation = self._current()
            known = {t: self._freqs[t] for t in terms if t in self._freqs}
        missing = [t for t in dict.fromkeys(terms) if t not in known]
        if missing:
            found = lexical.doc_freqs(conn, missing)
            read = {t: found.get(t, _NONE) for t in missing}
            with self._lock:
                if self._at == generation:
                    self._freqs.update(read)
            known.update(read)
        return known


MAX_KINDS = 500_000  # remembered genes in CodeKinds (a few tens of MB at most)


class CodeKinds:
    """Which genes hold code. A gene's content type never changes (its id names one content for
    good), so an answer read once stays true and needs no generation; only unseen ids are read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._code: set[int] = set()
        self._other: set[int] = set()

    def warm(self, conn: Any) -> int:
        """Learn every live gene's kind in one statement, up to MAX_KINDS (a backend's start-up: each
        question's candidates are otherwise asked for, a few hundred unseen ids at a time). Returns the ids read."""
        with conn.cursor(binary=True) as cur:
            row = cur.execute("SELECT string_agg(int8send(id), ''::bytea ORDER BY id) FILTER (WHERE content_type = 'code'), "
                              "string_agg(int8send(id), ''::bytea ORDER BY id) FILTER (WHERE content_type <> 'code') "
                              "FROM (SELECT id, content_type FROM genes WHERE retired_at IS NULL ORDER BY id DESC LIMIT %s) AS g",
                              (MAX_KINDS,)).fetchone()
        code, other = lexical.gene_ids(row[0] if row else None), lexical.gene_ids(row[1] if row else None)
        with self._lock:
            if len(self._code) + len(self._other) + len(code) + len(other) > MAX_KINDS:
                self._code, self._other = set(), set()
            self._code.update(code.tolist())
            self._other.update(other.tolist())
        return len(code) + len(other)

    def code_rowids(self, conn: Any, rowids: Sequence[int]) -> set[int]:
        with self._lock:
            found = {r for r in rowids if r in self._code}
            unseen = [r for r in rowids if r not in found and r not in self._other]
        if unseen:
            code = {int(r[0]) for r in conn.execute(
                "SELECT id FROM genes WHERE content_type = 'code' AND id = ANY(%s)", (unseen,)).fetchall()}
            with self._lock:
                if len(self._code) + len(self._other) > MAX_KINDS:
                    self._code, self._other = set(), set()
                self._code.update(code)
                self._other.update(r for r in unseen if r not in code)
            found |= code
        return found
