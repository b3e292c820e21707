"""What a genome connection answers besides SQL: the seam that lets the PostgreSQL genome sit under
the reads retrieval makes through `genome.conn` (lexicon.py, symbols_sql.py).

Why: retrieval counts a word's genes with FTS5 expressions on the SQLite connection. A backend
without FTS5 hands out a connection that also answers these two questions itself; the SQLite
path is untouched (a sqlite3.Connection never matches this Protocol).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class LexicalCounts(Protocol):
    def doc_count_upto(self, expr: str, cap: int) -> int:
        """Genes matching the FTS5-style expression, counted up to cap + 1."""
        ...

    def term_doc_counts(self, terms: Sequence[str]) -> dict[str, int]:
        """Stemmed term → genes holding it; terms no gene holds are left out."""
        ...

    def prefetch(self, words: Iterable[str]) -> None:
        """Read these words' counts together (one round trip) before they are asked for one by one."""
        ...


@runtime_checkable
class CodeRows(Protocol):
    """A connection that knows which genes hold code without a statement per question (PostgreSQL's:
    a gene's content type never changes, so what was read once is kept)."""

    def code_rowids(self, rowids: Sequence[int]) -> set[int]:
        ...


@runtime_checkable
class ConnectionHealth(Protocol):
    """A genome behind a network connection (the PostgreSQL one): up, or reconnecting with backoff."""

    def connection_state(self) -> dict[str, Any]:
        ...
