"""Dense search on PostgreSQL: pgvector's HNSW graph over halfvec(384), or an exact scan on small genomes.

Why halfvec: half the bytes of `vector` per gene and per graph node, with cosine
differences far below what ranks two MiniLM neighbours apart (the SQLite genome stores
int8 codes for the same reason). The index lives in the database, so every backend of a
team searches the same graph and nothing has to be replayed at start (unlike genome/ann.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import psycopg
from pgvector import HalfVector

from helix_context.genome.ann import EXPANSION_SEARCH, Hits

_MAX_EF = 1000  # pgvector's upper bound for hnsw.ef_search


class PgVectorIndex:
    """The dense index of a PgGenome; `connect` gives the calling thread's connection."""

    def __init__(self, connect: Callable[[], psycopg.Connection[tuple[Any, ...]]]) -> None:
        self._connect = connect

    def held(self) -> int:
        row = self._connect().execute(
            "SELECT count(*) FROM genes WHERE retired_at IS NULL AND embedding IS NOT NULL").fetchone()
        return int(row[0]) if row else 0

    def warm(self) -> None:
        """Nothing to load: the graph is the server's. Touching it pulls its pages into the server's cache."""
        self._connect().execute("SELECT count(*) FROM genes WHERE embedding IS NOT NULL")

    def search(self, query: np.ndarray, k: int, *, exact_below: int = 20_000, exact: bool | None = None,
               rescore: bool = True) -> Hits:
        """The `k` nearest live genes by cosine: an exact scan under `exact_below` vectors, else the HNSW graph."""
        del rescore  # halfvec distances are already the ranking scores (no coarse codes to rescore)
        q = HalfVector(np.asarray(query, dtype=np.float32).reshape(-1))
        conn = self._connect()
        use_exact = self.held() < exact_below if exact is None else exact
        with conn.transaction():
            if use_exact:
                conn.execute("SET LOCAL enable_indexscan = off")
            else:
                conn.execute(f"SET LOCAL hnsw.ef_search = {min(max(EXPANSION_SEARCH, k), _MAX_EF)}")
            rows = conn.execute(
                "SELECT id, 1 - (embedding <=> %s) FROM genes WHERE retired_at IS NULL AND embedding IS NOT NULL "
                "ORDER BY embedding <=> %s LIMIT %s", (q, q, k)).fetchall()
        return Hits(np.asarray([r[0] for r in rows], dtype=np.int64),
                    np.asarray([r[1] for r in rows], dtype=np.float32), use_exact)

    def describe(self, exact_below: int) -> dict[str, Any]:
        n = self.held()
        return {"status": "ok", "kind": "exact" if n < exact_below else "hnsw", "vectors": n,
                "threshold": exact_below, "backend": "pgvector"}

    def close(self) -> None:
        """Nothing held outside the database."""
