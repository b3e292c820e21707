"""A PostgreSQL connection as genome/'s SQLite-style modules use it, and the lexical counts FTS5 answers there.

Why a rewrite of `IN (?, ?, …)`: the shared SQL modules (symbols_sql.py, projects_sql.py) send
candidate lists as one placeholder per id, which SQLite binds for free. On PostgreSQL each
distinct list length is a new statement text to adapt, send and plan, so a question's id lists
cost more than the lookups themselves. Here such a list becomes one array parameter
(`= ANY(%s)`): one statement text whatever the length, which psycopg prepares on the server
after a few uses. Other `?` become `%s`. The SQL text is the caller's; only its placeholders change.

The counting questions FTS5 answers on SQLite are the genome's own methods here (pg/counts.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import psycopg


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
    """A thread's connection: `execute(sql with ?, args)` for the SQL the two genomes share."""

    def __init__(self, raw: psycopg.Connection[tuple[Any, ...]]) -> None:
        self.raw = raw

    def execute(self, sql: str, args: Sequence[Any] = ()) -> psycopg.Cursor[tuple[Any, ...]]:
        text, slots = rewrite(sql)
        return self.raw.execute(text, bind(slots, list(args)) if slots else None)
