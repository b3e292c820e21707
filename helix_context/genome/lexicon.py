"""How many genes hold a word, counted only up to a cap: the lexical stage's cost stays flat as the genome grows.

Why: the full-text vocabulary (fts5vocab) answers a word's document count by walking
the word's whole posting list, so a query's common words cost time in proportion to
the genome (a word in half of 1M genes walks 500k entries, for each query). Retrieval
only needs to know a word's count exactly while it is rare; past the cap it is
"common" and never searched on its own. Reading the first cap+1 matching rows in rowid
order stops after cap+1 postings (measured on 82k genes: 0.1-0.2 ms for a word in 48k
genes, against 2-10 ms for the vocabulary lookup and ~100 ms to rank it by BM25).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from helix_context.genome.fts_text import quote_term


class LexiconMixin:
    """`doc_count_upto` and `word_doc_counts_upto` as genome methods (both genomes; the team genome
    answers the counts from its per-generation memory instead: pg/counts.py). Needs `conn`."""

    conn: Any

    def doc_count_upto(self, expr: str, cap: int) -> int:
        """Genes matching the FTS5 expression `expr`, counted up to cap + 1 (more means 'over the cap')."""
        try:
            row = self.conn.execute("SELECT COUNT(*) FROM (SELECT rowid FROM genes_fts WHERE genes_fts MATCH ? LIMIT ?)",
                                    (expr, cap + 1)).fetchone()
        except sqlite3.OperationalError:
            return 0
        return int(row[0])

    def prefetch_counts(self, words: Iterable[str]) -> None:
        """Read these words' counts together before they are asked one by one (SQLite: nothing to gain)."""

    def start_gene_facts(self, rowids: Iterable[int]) -> Callable[[], object]:
        """Send the read of these genes' paths and marks now, to read it later (SQLite: nothing to gain;
        the team genome's is in pg/gene_facts.py)."""
        return dict

    def warm_reads(self, min_genes: int) -> int:
        """Hold what questions would read one by one before the first question. SQLite: nothing to hold
        (FTS5 merges its compressed lists in C on each question, and a gene's type is a row away).
        Returns the ids read: none."""
        return 0

    def word_doc_counts_upto(self, words: Iterable[str], cap: int) -> dict[str, int]:
        """Word (an FTS token as written) → genes holding it, at most cap + 1; words no gene holds are left out."""
        out: dict[str, int] = {}
        words = list(dict.fromkeys(words))
        self.prefetch_counts(words)
        for word in words:
            n = self.doc_count_upto(quote_term(word), cap)
            if n:
                out[word] = n
        return out


class Counts(Protocol):
    """What the per-generation memories below read through: the genome (either backend)."""

    def word_doc_counts(self, words: Sequence[str]) -> dict[str, int]: ...

    def doc_count_upto(self, expr: str, cap: int) -> int: ...

    def prefetch_counts(self, words: Iterable[str]) -> None: ...


class PerGeneration:
    """Answers remembered until the genome's generation changes (an ingest, a retire), so no answer
    ever uses a stale one. Retention: at most `limit` entries, emptied when a write would pass it."""

    def __init__(self, generation: Callable[[], int], limit: int = 20_000) -> None:
        self._generation = generation
        self._limit = limit
        self._lock = threading.Lock()
        self._seen_at = -1
        self._counts: dict[Any, Any] = {}  # a word (or a search) → what the subclass remembers for it

    def _counts_for(self, generation: int) -> dict[Any, Any]:
        """Under the lock: the memory for `generation`, emptied first if that changed."""
        if generation != self._seen_at:
            self._counts, self._seen_at = {}, generation
        return self._counts

    def _remember(self, generation: int, found: dict[Any, Any]) -> None:
        with self._lock:
            if self._seen_at == generation:  # an ingest in between: these counts belong to the old genome
                if len(self._counts) + len(found) > self._limit:
                    self._counts = {}
                self._counts.update(found)


class ExactDocCounts(PerGeneration):
    """Exact genes-per-word counts (fts5vocab), remembered per generation, by the word as written.

    The verdicts' relevance weighs a query's words by idf, so it needs exact counts;
    fts5vocab walks a word's whole posting list for one (tens of ms for a common word
    at 1M genes), and questions share their common words ("where", "code", "call").
    """

    def __init__(self, genome: Counts, generation: Callable[[], int], limit: int = 20_000) -> None:
        super().__init__(generation, limit)
        self._genome = genome

    def get(self, words: Sequence[str]) -> dict[str, int]:
        """Word as written (never stemmed: the genome's tokenizer does that) → genes holding it; words no
        gene holds are left out (as genome.word_doc_counts), from the genome this memory was made for."""
        generation = self._generation()
        with self._lock:
            counts = self._counts_for(generation)
            known = {t: counts[t] for t in words if t in counts}
        missing = [t for t in dict.fromkeys(words) if t not in known]
        if missing:
            found = self._genome.word_doc_counts(missing)
            read = {t: found.get(t, 0) for t in missing}
            self._remember(generation, read)
            known.update(read)
        return {t: n for t, n in known.items() if n}


class CappedCounts(PerGeneration):
    """`word_doc_counts_upto`, remembered per generation: the same numbers, read once.

    Questions share their common words, and a common word's capped count is its most
    expensive lookup (cap+1 postings; at 1M genes the all-common path reads up to 24k
    for each of six words). A count read under cap C is exact when it is ≤ C and means
    "more than C" otherwise, so it answers any later cap it is known to satisfy; other
    words and caps are read from the index.
    """

    def get(self, genome: Counts, words: Iterable[str], cap: int) -> dict[str, int]:
        """As genome.word_doc_counts_upto(words, cap)."""
        generation = self._generation()
        out: dict[str, int] = {}
        missing: list[str] = []
        with self._lock:
            counts = self._counts_for(generation)  # word → (count read, cap it was read under)
            for word in dict.fromkeys(words):
                known = counts.get(word)
                if known is not None and (known[0] <= known[1] or cap <= known[1]):
                    n = min(known[0], cap + 1)
                    if n:
                        out[word] = n
                else:
                    missing.append(word)
        if missing:
            genome.prefetch_counts(missing)  # PostgreSQL: every word's count in one round trip
        found = {w: genome.doc_count_upto(quote_term(w), cap) for w in missing}
        self._remember(generation, {w: (n, cap) for w, n in found.items()})
        out.update({w: n for w, n in found.items() if n})
        return out


class Searches(PerGeneration):
    """Full-text searches (`fts_search`) remembered per generation: the same hits, searched once.

    Why: questions about one tree keep writing the same few path words (its top folder is in
    every traceback frame), and the path signal searches the rarest of them, which walks that
    word's whole posting list and ranks thousands of genes by BM25 for each question: a third of
    a pasted issue's full-text cost. A search is answered from the index as long as nothing was
    ingested or retired since (the generation), so a remembered answer is the answer. Retention:
    at most `limit` searches (each ≤ its limit of hits: 128 × 200 hits is about 2 MB), emptied when full.
    """

    def __init__(self, generation: Callable[[], int], limit: int = 128) -> None:
        super().__init__(generation, limit)

    def start(self, genome: Any, match: str, limit: int, column: str | None = None
              ) -> Callable[[], list[tuple[int, float]]]:
        """As genome.start_fts_search(match, limit, column): a remembered answer, or the search sent now
        and its answer remembered when it is read."""
        generation = self._generation()
        key = (match, limit, column)
        with self._lock:
            hits = self._counts_for(generation).get(key)
        if hits is not None:
            return lambda: list(hits)
        pending = genome.start_fts_search(match, limit, column)

        def read() -> list[tuple[int, float]]:
            found = tuple(pending())
            self._remember(generation, {key: found})
            return list(found)
        return read


class CodeRows(PerGeneration):
    """Which genes hold code (`code_rowids`), remembered per generation: the same answer, read once.

    Why: fusion asks it of every candidate of every question (~500 for a pasted issue), and the
    questions about one tree keep meeting the same genes. A gene's content type never changes, but
    a SQLite rowid freed by a retire can name another gene later; a retire moves the generation,
    which empties this memory first. Retention: at most `limit` genes, emptied when full."""

    def __init__(self, generation: Callable[[], int], limit: int = 200_000) -> None:
        super().__init__(generation, limit)

    def get(self, genome: Any, rowids: Iterable[int]) -> set[int]:
        """As genome.code_rowids(rowids)."""
        generation = self._generation()
        ids = list(dict.fromkeys(map(int, rowids)))
        with self._lock:
            known = self._counts_for(generation)  # rowid → holds code
            code = {r for r in ids if known.get(r)}
            missing = [r for r in ids if r not in known]
        if missing:
            found = genome.code_rowids(missing)
            self._remember(generation, {r: r in found for r in missing})
            code |= found
        return code
