"""The terms FTS5 indexes for written words, made by FTS5 itself.

Why: a word's document count is read from the vocabulary (fts5vocab) by the term the
index stores. Python's porter (PyStemmer) is not FTS5's: they part on "-logy" and "-bly"
words, on words under three letters, on diacritics; and porter is not idempotent, so
handing FTS5 a word already stemmed stems it twice ("region_invoice" → "region_invoic" →
"region_invo", which no gene holds). A private in-memory FTS5 table with the genome's own
tokenizer turns words into terms with the code that built the index, once each.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence

from helix_context.genome.schema import FTS_TOKENIZER

_LOCAL = threading.local()  # one private connection per thread (no lock; nothing shared)


def _connection() -> sqlite3.Connection:
    conn: sqlite3.Connection | None = getattr(_LOCAL, "conn", None)
    if conn is None:
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.execute(f"CREATE VIRTUAL TABLE words USING fts5(word, tokenize={_sql_string(FTS_TOKENIZER)})")
        conn.execute("CREATE VIRTUAL TABLE terms USING fts5vocab(words, 'instance')")
        _LOCAL.conn = conn
    return conn


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def fts5_terms(words: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Each word → the terms FTS5 indexes for it, in order (usually one; none for punctuation)."""
    wanted = list(dict.fromkeys(words))
    if not wanted:
        return {}
    conn = _connection()
    found: dict[int, list[str]] = {}
    conn.execute("BEGIN")
    try:
        conn.executemany("INSERT INTO words(rowid, word) VALUES (?, ?)", enumerate(wanted))
        for doc, term in conn.execute("SELECT doc, term FROM terms ORDER BY doc, offset"):
            found.setdefault(int(doc), []).append(str(term))
    finally:
        conn.execute("ROLLBACK")  # the table stays empty: nothing kept between calls
    return {word: tuple(dict.fromkeys(found.get(i, ()))) for i, word in enumerate(wanted)}
