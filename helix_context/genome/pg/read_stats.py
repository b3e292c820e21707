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

import numpy as np

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


MAX_POSTING_IDS = 4_000_000  # gene ids kept in PostingSets (8 bytes each: ~32 MB), emptied when full


class PostingSets:
    """Per generation: the sorted gene ids holding a word (its postings), for ANDs of common words.

    Why: retrieval ANDs a question's common words when no rare one is left (terms.py), and on
    PostgreSQL an intersection of long posting lists costs a probe per posting of the rarest word
    (~1 s for five config words at 40k genes, measured) where FTS5 merges compressed lists in C.
    Questions share their common words, so each word's ids are read once per generation (one
    statement for all the missing words) and intersected here with numpy."""

    def __init__(self, generation: Callable[[], int]) -> None:
        self._generation = generation
        self._lock = threading.Lock()
        self._at = -1
        self._sets: dict[tuple[str, str | None], np.ndarray] = {}
        self._held = 0

    def of(self, conn: Any, terms: Sequence[str], column: str | None = None) -> dict[str, np.ndarray]:
        generation = self._generation()
        with self._lock:
            if generation != self._at or self._held > MAX_POSTING_IDS:
                self._at, self._sets, self._held = generation, {}, 0
            known = {t: self._sets[(t, column)] for t in terms if (t, column) in self._sets}
        missing = [t for t in dict.fromkeys(terms) if t not in known]
        if missing:
            where = f" AND p.tf_{column} > 0" if column in ("body", "tags", "path") else ""
            # each word's ids as one bytea (lexical.gene_ids; 538k ids of ten common words at 96k genes: 25 ms → 1 ms)
            with conn.cursor(binary=True) as cur:
                rows = cur.execute("SELECT t.term, (SELECT string_agg(int8send(p.gene), ''::bytea ORDER BY p.gene) "
                                   f"FROM lex_postings p WHERE p.term = t.term{where}) "
                                   "FROM unnest(%s::text[]) AS t(term)", (missing,)).fetchall()
            found = {str(t): lexical.gene_ids(ids) for t, ids in rows}
            read = {t: found.get(t, np.zeros(0, np.int64)) for t in missing}
            with self._lock:
                if self._at == generation:
                    self._sets.update({(t, column): ids for t, ids in read.items()})
                    self._held += sum(len(ids) for ids in read.values())
            known.update(read)
        return known

    def holding_all(self, conn: Any, terms: Sequence[str], column: str | None = None) -> np.ndarray:
        """Sorted ids of the genes holding every one of `terms`."""
        sets = self.of(conn, terms, column)
        ordered = sorted((sets[t] for t in dict.fromkeys(terms)), key=len)
        if not ordered:
            return np.zeros(0, np.int64)
        out = ordered[0]
        for ids in ordered[1:]:
            if len(out) == 0:
                break
            out = np.intersect1d(out, ids, assume_unique=True)
        return out
