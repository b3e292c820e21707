"""What the genome learns from use: co-activation links between genes delivered together, and sessions.

A mixin of `Genome` (store.py): these writes are bookkeeping (`changes_genes=False`),
so a chat never invalidates the caches that depend on the genes themselves.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from helix_context.models import Gene


class LearningMixin:
    """Needs `conn`, `transaction`, `get_gene`, `genes_by_rowid` from Genome."""

    conn: Any
    transaction: Any
    get_gene: Callable[[str], Gene | None]  # Genome's, declared here for the type checker
    genes_by_rowid: Callable[[Iterable[int]], dict[int, Gene]]

    # ── co-activation ──

    def coactivated(self, seeds: Sequence[int], limit: int = 50) -> dict[int, float]:
        if not seeds:
            return {}
        marks = ",".join("?" * len(seeds))
        rows = self.conn.execute(
            f"SELECT b, SUM(count) FROM coactivation WHERE a IN ({marks}) GROUP BY b "
            f"UNION ALL SELECT a, SUM(count) FROM coactivation WHERE b IN ({marks}) GROUP BY a",
            (*seeds, *seeds)).fetchall()
        scores: dict[int, float] = {}
        for rowid, count in rows:
            scores[rowid] = scores.get(rowid, 0.0) + float(count)
        for seed in seeds:
            scores.pop(seed, None)
        return dict(sorted(scores.items(), key=lambda kv: -kv[1])[:limit])

    def record_delivery(self, rowids: Sequence[int]) -> None:
        """Genes delivered together: bump access counts and pairwise co-activation."""
        ids = sorted(set(int(r) for r in rowids))[:24]
        if not ids:
            return
        now = time.time()
        pairs = [(a, b, now) for i, a in enumerate(ids) for b in ids[i + 1:]]
        with self.transaction(changes_genes=False) as tx:
            tx.executemany("UPDATE genes SET access_count = access_count + 1, last_access_at = ?, "
                           "tier = CASE WHEN tier = 'aging' THEN 'open' ELSE tier END WHERE id = ?",
                           [(now, r) for r in ids])
            tx.executemany(
                "INSERT INTO coactivation(a, b, count, last_at) VALUES (?, ?, 1, ?) "
                "ON CONFLICT(a, b) DO UPDATE SET count = count + 1, last_at = excluded.last_at", pairs)

    def coactivation_links(self) -> list[tuple[str, str, int, float]]:
        return [tuple(r) for r in self.conn.execute(
            "SELECT ga.gene_id, gb.gene_id, c.count, c.last_at FROM coactivation c "
            "JOIN genes ga ON ga.id = c.a JOIN genes gb ON gb.id = c.b")]

    def neighbors(self, gene_id: str, limit: int = 10) -> list[tuple[Gene, float]]:
        gene = self.get_gene(gene_id)
        if gene is None or gene.rowid is None:
            return []
        scores = self.coactivated([gene.rowid], limit=limit)
        genes = self.genes_by_rowid(scores)
        return [(genes[r], s) for r, s in scores.items() if r in genes]

    # ── sessions ──

    def touch_session(self, session_id: str, agent: str, genes_delivered: int) -> None:
        now = time.time()
        with self.transaction(changes_genes=False) as tx:
            tx.execute(
                "INSERT INTO sessions(session_id, agent, first_seen, last_seen, requests, genes_delivered) "
                "VALUES (?, ?, ?, ?, 1, ?) ON CONFLICT(session_id) DO UPDATE SET last_seen = excluded.last_seen, "
                "requests = requests + 1, genes_delivered = genes_delivered + excluded.genes_delivered, "
                "agent = CASE WHEN excluded.agent != '' THEN excluded.agent ELSE agent END",
                (session_id, agent, now, now, genes_delivered))

    def buffer_exchange(self, session_id: str, messages: Sequence[tuple[str, str]]) -> None:
        now = time.time()
        with self.transaction(changes_genes=False) as tx:
            tx.executemany("INSERT INTO session_buffer(session_id, role, content, at) VALUES (?, ?, ?, ?)",
                           [(session_id, role, content, now) for role, content in messages])

    def sessions(self, limit: int = 50) -> list[dict[str, Any]]:
        rows = self.conn.execute(
            "SELECT session_id, agent, first_seen, last_seen, requests, genes_delivered FROM sessions "
            "ORDER BY last_seen DESC LIMIT ?", (limit,))
        keys = ("session_id", "agent", "first_seen", "last_seen", "requests", "genes_delivered")
        return [dict(zip(keys, r)) for r in rows]

    def pending_exchanges(self, limit: int = 500) -> list[tuple[int, str, str, str]]:
        return [tuple(r) for r in self.conn.execute(
            "SELECT id, session_id, role, content FROM session_buffer WHERE consolidated = 0 ORDER BY id LIMIT ?",
            (limit,))]

    def mark_consolidated(self, ids: Sequence[int]) -> None:
        with self.transaction(changes_genes=False) as tx:
            tx.executemany("UPDATE session_buffer SET consolidated = 1 WHERE id = ?", [(i,) for i in ids])
