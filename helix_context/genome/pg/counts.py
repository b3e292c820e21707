"""The team genome's answers to the counting questions retrieval asks (symbols_sql.py, lexicon.py), from memory.

Why overrides: SQLite answers a word's document count from FTS5 in-process; on PostgreSQL each
would be a round trip per word per question. The counts are kept per generation (read_stats.py:
a write anywhere moves the generation, so none is older than the last write seen) and a gene's
code-ness is kept for good (its id names one content). FTS5-style expressions are parsed with
lexical.py's tokenizer, so the numbers are the ones FTS5 gives.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import psycopg

from helix_context.errors import GenomeError
from helix_context.genome.pg import lexical
from helix_context.genome.pg.posting_sets import PostingSets
from helix_context.genome.pg.read_stats import CodeKinds, ReadStats

log = logging.getLogger(__name__)


class PgCountsMixin:
    """Placed before SymbolReadsMixin and LexiconMixin in PgGenome's bases. Needs the genome's
    `_raw`, `_stats`, `_kinds` and `_postings`."""

    _stats: ReadStats
    _kinds: CodeKinds
    _postings: PostingSets
    _raw: Callable[[], Any]  # PgGenome's: this thread's connection

    def prefetch_counts(self, words: Iterable[str]) -> None:
        """Read the document counts of all these words in one statement (before asking for each)."""
        terms = [t for w in words for t in lexical.tokens(w)]
        if terms:
            self._stats.doc_freqs(self._raw(), terms)

    def warm_reads(self, min_genes: int) -> int:
        """Before the first question, hold what questions would read one by one: the ids of the words in
        more than `min_genes` genes (posting_sets.py) and which genes hold code (read_stats.CodeKinds).
        Returns the ids read."""
        try:
            raw = self._raw()
            return self._postings.warm(raw, min_genes) + self._kinds.warm(raw)
        except (GenomeError, psycopg.Error) as exc:  # only a head start: each question still reads what it needs
            log.warning("team genome: could not read the common words ahead of the first question (%s)", exc)
            return 0

    def doc_count_upto(self, expr: str, cap: int) -> int:
        raw = self._raw()
        query = lexical.parse(expr)
        if len(query.groups) == 1 and len(query.groups[0]) == 1:
            term = query.groups[0][0]
            return min(self._stats.doc_freqs(raw, [term])[term][0], cap + 1)
        if len(query.disjuncts) == 1 and all(len(g) == 1 for g in query.groups):  # words ANDed (terms.py)
            held = self._postings.holding_all(raw, [g[0] for g in query.groups])
            return min(len(held), cap + 1)
        return lexical.doc_count_upto(raw, expr, cap, stats=self._stats.corpus(raw),
                                      freqs=lambda terms: self._stats.doc_freqs(raw, terms))

    def index_terms(self, words: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """Each written word → the posting terms it is (lexical.py's tokenizer, which built the postings)."""
        return {w: tuple(dict.fromkeys(lexical.tokens(w))) for w in dict.fromkeys(words)}

    def term_doc_counts(self, terms: Sequence[str]) -> dict[str, int]:
        counts = self._stats.doc_freqs(self._raw(), list(terms))
        return {t: n[0] for t, n in counts.items() if n[0]}

    def code_rowids(self, rowids: Iterable[int]) -> set[int]:
        return self._kinds.code_rowids(self._raw(), list(dict.fromkeys(int(r) for r in rowids)))
