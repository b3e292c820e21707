"""PostgreSQL's own full-text search over the genome's text: kept only to measure it against the postings.

Why it exists: issue 27 asks for the lexical design to be chosen by measurement. This builds a
tsvector per live gene from the same identifier-split text (english stemming; body A, path B,
tags C weights) with a GIN index, and answers an OR of words ranked by ts_rank_cd, so
benchmarks/bench_team.py can print its agreement with SQLite's FTS5 and its latency beside the
postings design (lexical.py). Retrieval never calls it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from helix_context.genome import fts_text
from helix_context.genome.stored_form import unpack_text

_WORD = re.compile(r"[a-z0-9_]+")


def build(conn: Any) -> None:
    """The probe's table from the live genes (replaced if present)."""
    conn.execute("DROP TABLE IF EXISTS lex_tsv")
    conn.execute("CREATE TABLE lex_tsv (gene bigint PRIMARY KEY, doc tsvector NOT NULL)")
    rows = conn.execute("SELECT id, content, tags, source_path FROM genes WHERE retired_at IS NULL").fetchall()
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO lex_tsv(gene, doc) VALUES (%s, setweight(to_tsvector('english', %s), 'A') || "
            "setweight(to_tsvector('english', %s), 'B') || setweight(to_tsvector('english', %s), 'C'))",
            [(gid, fts_text.body_text(unpack_text(bytes(content))), fts_text.path_text(path),
              fts_text.tags_text(tags.split("\n") if tags else [])) for gid, content, tags, path in rows])
    conn.execute("CREATE INDEX lex_tsv_doc ON lex_tsv USING gin (doc)")
    conn.execute("ANALYZE lex_tsv")


def search(conn: Any, words: Sequence[str], limit: int) -> list[tuple[int, float]]:
    """(gene id, ts_rank_cd) best first for genes holding any of `words`."""
    clean = [w for w in dict.fromkeys(_WORD.findall(" ".join(words).lower())) if w]
    if not clean:
        return []
    rows = conn.execute("SELECT gene, ts_rank_cd(doc, q) AS r FROM lex_tsv, to_tsquery('english', %s) AS q "
                        "WHERE doc @@ q ORDER BY r DESC, gene LIMIT %s", (" | ".join(clean), limit)).fetchall()
    return [(int(g), float(r)) for g, r in rows]
