"""A PostgreSQL connection as genome/'s SQLite-style modules use it, and the lexical counts FTS5 answers there.

Why a rewrite of `IN (?, ?, …)`: the shared SQL modules (symbols_sql.py, projects_sql.py) send
candidate lists as one placeholder per id, which SQLite binds for free. On PostgreSQL each
distinct list length is a new statement text to adapt, send and plan, so a question's id lists
cost more than the lookups themselves. Here such a list becomes one array parameter
(`= ANY(%s)`): one statement text whatever the length, which psycopg prepares on the server
after a few uses. Other `?` become `%s`. The SQL text is the caller's; only its placeholders change.

The counts (genome/backend.LexicalCounts) come from the per-generation memory of read_stats.py,
so a word's count costs a round trip once per generation, not once per question.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import psycopg

from helix_context.genome.pg import lexical
from helix_context.genome.pg.read_stats import CodeKinds, PostingSets, ReadStats

_SLOT = re.compile(r"(\bNOT\s+)?\bIN\s*\(\s*\?(?:\s*,\s*\?)*\s*\)|\?", re.IGNORECASE)


@lru_cache(maxsize=512)
def rewrite(sql: str) -> tuple[str, tuple[int, ...]]:
    """(PostgreSQL text, how many of the caller's arguments each `%s` takes: 0 = one plain argument)."""
    slots: list[int] = []

    def one(m: re.Match[str]) -> str:
        text = m.group(0)
        if text == "?":
            slots.append(0)
            return "%s"
        slots.append(text.count("?"))
        return "<> ALL(%s)" if m.group(1) else "= ANY(%s)"

    return _SLOT.sub(one, sql), tuple(slots)


def bind(slots: tuple[int, ...], args: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    at = 0
    for width in slots:
        if width == 0:
            out.append(args[at])
            at += 1
        else:
            out.append(list(args[at:at + width]))
            at += width
    return out


class QmarkConnection:
    """A thread's connection: `execute(sql with ?, args)`, and the lexical counts of backend.LexicalCounts."""

    def __init__(self, raw: psycopg.Connection[tuple[Any, ...]], stats: ReadStats, kinds: CodeKinds,
                 postings: PostingSets) -> None:
        self.raw = raw
        self._stats = stats
        self._kinds = kinds
        self._postings = postings

    def execute(self, sql: str, args: Sequence[Any] = ()) -> psycopg.Cursor[tuple[Any, ...]]:
        text, slots = rewrite(sql)
        return self.raw.execute(text, bind(slots, list(args)) if slots else None)

    def _single(self, expr: str) -> str | None:
        """The stemmed term of a one-word expression, else None."""
        query = lexical.parse(expr)
        if len(query.groups) == 1 and len(query.groups[0]) == 1:
            return query.groups[0][0]
        return None

    def prefetch(self, words: Iterable[str]) -> None:
        """Read the document counts of all these words in one statement (before asking for each)."""
        terms = [t for w in words for t in lexical.tokens(w)]
        if terms:
            self._stats.doc_freqs(self.raw, terms)

    def doc_count_upto(self, expr: str, cap: int) -> int:
        term = self._single(expr)
        if term is not None:
            return min(self._stats.doc_freqs(self.raw, [term])[term][0], cap + 1)
        query = lexical.parse(expr)
        if len(query.disjuncts) == 1 and all(len(g) == 1 for g in query.groups):  # words ANDed (terms.py)
            held = self._postings.holding_all(self.raw, [g[0] for g in query.groups])
            return min(len(held), cap + 1)
        return lexical.doc_count_upto(self.raw, expr, cap, stats=self._stats.corpus(self.raw),
                                      freqs=lambda terms: self._stats.doc_freqs(self.raw, terms))

    def term_doc_counts(self, terms: Sequence[str]) -> dict[str, int]:
        counts = self._stats.doc_freqs(self.raw, list(terms))
        return {t: n[0] for t, n in counts.items() if n[0]}

    def code_rowids(self, rowids: Sequence[int]) -> set[int]:
        return self._kinds.code_rowids(self.raw, rowids)
