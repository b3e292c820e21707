"""What the genome learns from use: co-activation links between genes delivered together, and sessions.

A mixin of both genomes (store.py, pg/store.py): these writes are bookkeeping
(`changes_genes=False`), so a chat never invalidates the caches that depend on the genes
themselves. On the team genome every row carries its party (user@device) and every statement
here is narrowed to the backend's own (`party_scope`): nobody reads another's sessions, chat
buffer or co-activation.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from helix_context.genome.deliveries import Delivery, DeliveryBatcher
from helix_context.genome.retention import PartyScope, WriteCaps, cap_buffer, cap_edges, cap_sessions
from helix_context.models import Gene


_BATCHER_LOCK = threading.Lock()  # the first queued delivery of each genome makes its batcher once
MAX_DELIVERED = 24  # genes of one answer whose pairs are counted (24 genes: 276 pairs)


def _delivered(rowids: Sequence[int]) -> tuple[int, ...]:
    return tuple(sorted(set(int(r) for r in rowids))[:MAX_DELIVERED])


class LearningMixin:
    """Needs `conn`, `transaction`, `get_gene`, `genes_by_rowid` and `caps` from Genome.

    Every write here applies its retention cap in its own transaction (genome/retention.py), so the
    tables never exceed the caps between two prunes."""

    conn: Any
    transaction: Any
    caps: WriteCaps
    party_scope: PartyScope
    get_gene: Callable[[str], Gene | None]  # Genome's, declared here for the type checker
    genes_by_rowid: Callable[[Iterable[int]], dict[int, Gene]]

    # ── co-activation ──

    def coactivated(self, seeds: Sequence[int], limit: int = 50) -> dict[int, float]:
        if not seeds:
            return {}
        marks = ",".join("?" * len(seeds))
        scope = self.party_scope
        rows = self.conn.execute(
            f"SELECT b, SUM(count) FROM coactivation WHERE {scope.where}a IN ({marks}) GROUP BY b "
            f"UNION ALL SELECT a, SUM(count) FROM coactivation WHERE {scope.where}b IN ({marks}) GROUP BY a",
            (*scope.values, *seeds, *scope.values, *seeds)).fetchall()
        scores: dict[int, float] = {}
        for rowid, count in rows:
            scores[int(rowid)] = scores.get(int(rowid), 0.0) + float(count)
        for seed in seeds:
            scores.pop(seed, None)
        return dict(sorted(scores.items(), key=lambda kv: -kv[1])[:limit])

    def record_delivery(self, rowids: Sequence[int]) -> None:
        """Genes delivered together: bump access counts and pairwise co-activation, now."""
        ids = _delivered(rowids)
        if ids:
            self._write_deliveries([Delivery(ids, time.time())])

    def queue_delivery(self, rowids: Sequence[int]) -> None:
        """As record_delivery, written off the request path within a moment (deliveries.py says why)."""
        ids = _delivered(rowids)
        if ids and not getattr(self, "readonly", False):  # a read-only genome (a full disk) learns nothing
            self._deliveries().add(ids)

    def flush_deliveries(self) -> None:
        """Write every queued delivery now (before reading what was learned)."""
        batcher = self.__dict__.get("_delivery_batcher")
        if batcher is not None:
            batcher.flush()

    def close_deliveries(self) -> None:
        batcher = self.__dict__.pop("_delivery_batcher", None)
        if batcher is not None:
            batcher.close()

    def _deliveries(self) -> DeliveryBatcher:
        batcher: DeliveryBatcher | None = self.__dict__.get("_delivery_batcher")
        if batcher is None:
            with _BATCHER_LOCK:
                batcher = self.__dict__.get("_delivery_batcher")
                if batcher is None:
                    batcher = self.__dict__["_delivery_batcher"] = DeliveryBatcher(
                        self._write_deliveries, name=f"genome {getattr(self, 'path', '')}")
        return batcher

    def _write_deliveries(self, batch: Sequence[Delivery]) -> None:
        """Deliveries in one transaction: each live gene's access count + its deliveries, each pair's
        co-activation + its deliveries (one upsert per pair, in order: no two writers deadlock), then
        the edge cap over every gene touched. A gene retired or removed since is left out."""
        wanted = sorted({g for d in batch for g in d.genes})
        if not wanted:
            return
        now = max(d.at for d in batch)
        with self.transaction(changes_genes=False, durable=False) as tx:
            live = self._live_delivered(tx, wanted)
            uses: Counter[int] = Counter()
            pairs: Counter[tuple[int, int]] = Counter()
            for d in batch:
                ids = [g for g in d.genes if g in live]
                uses.update(ids)
                pairs.update((a, b) for i, a in enumerate(ids) for b in ids[i + 1:])
            by_uses: dict[int, list[int]] = {}
            for gene, n in sorted(uses.items()):
                by_uses.setdefault(n, []).append(gene)
            for n, genes in sorted(by_uses.items()):
                marks = ",".join("?" * len(genes))
                tx.execute(f"UPDATE genes SET access_count = access_count + ?, last_access_at = ?, "
                           f"tier = CASE WHEN tier = 'aging' THEN 'open' ELSE tier END WHERE id IN ({marks})",
                           (n, now, *genes))
            self._count_pairs(tx, sorted((a, b, n) for (a, b), n in pairs.items()), now)
            if uses:
                cap_edges(tx, self.caps.coactivation_per_gene, sorted(uses), self.party_scope)
        self._after_deliveries()

    def _after_deliveries(self) -> None:
        """After a batch is written: nothing for SQLite (the team genome's: pg/learning.py)."""

    def _live_delivered(self, tx: Any, wanted: Sequence[int]) -> set[int]:
        """Which of the delivered genes (sorted) are live; SQLite's transaction holds the whole file, the
        team genome's locks their rows in order here (pg/learning.py)."""
        marks = ",".join("?" * len(wanted))
        return {int(r[0]) for r in tx.execute(
            f"SELECT id FROM genes WHERE retired_at IS NULL AND id IN ({marks})", list(wanted)).fetchall()}

    def _count_pairs(self, tx: Any, pairs: Sequence[tuple[int, int, int]], now: float) -> None:
        """Each pair's co-activation count + n: a statement per pair, run in-process by SQLite (the team
        genome sends one statement for all of them: pg/learning.py)."""
        scope = self.party_scope
        tx.executemany(
            f"INSERT INTO coactivation({scope.column}a, b, count, last_at) VALUES ({scope.mark}?, ?, ?, ?) "
            f"ON CONFLICT({scope.column}a, b) DO UPDATE SET count = coactivation.count + excluded.count, "
            "last_at = excluded.last_at", [(*scope.values, a, b, n, now) for a, b, n in pairs])

    def coactivation_links(self) -> list[tuple[str, str, int, float]]:
        self.flush_deliveries()
        scope = self.party_scope
        return [tuple(r) for r in self.conn.execute(
            "SELECT ga.gene_id, gb.gene_id, c.count, c.last_at FROM coactivation c "
            f"JOIN genes ga ON ga.id = c.a JOIN genes gb ON gb.id = c.b{scope.only.replace('party', 'c.party')}",
            scope.values)]

    def neighbors(self, gene_id: str, limit: int = 10) -> list[tuple[Gene, float]]:
        self.flush_deliveries()
        gene = self.get_gene(gene_id)
        if gene is None or gene.rowid is None:
            return []
        scores = self.coactivated([gene.rowid], limit=limit)
        genes = self.genes_by_rowid(scores)
        return [(genes[r], s) for r, s in scores.items() if r in genes]

    # ── sessions ──

    def touch_session(self, session_id: str, agent: str, genes_delivered: int) -> None:
        now = time.time()
        scope = self.party_scope
        with self.transaction(changes_genes=False) as tx:
            tx.execute(
                f"INSERT INTO sessions({scope.column}session_id, agent, first_seen, last_seen, requests, "
                f"genes_delivered) VALUES ({scope.mark}?, ?, ?, ?, 1, ?) ON CONFLICT({scope.column}session_id) "
                "DO UPDATE SET last_seen = excluded.last_seen, requests = sessions.requests + 1, "
                "genes_delivered = sessions.genes_delivered + excluded.genes_delivered, "
                "agent = CASE WHEN excluded.agent != '' THEN excluded.agent ELSE sessions.agent END",
                (*scope.values, session_id, agent, now, now, genes_delivered))
            cap_sessions(tx, self.caps.max_sessions, scope)

    def buffer_exchange(self, session_id: str, messages: Sequence[tuple[str, str]]) -> None:
        now = time.time()
        scope = self.party_scope
        with self.transaction(changes_genes=False) as tx:
            tx.executemany(f"INSERT INTO session_buffer({scope.column}session_id, role, content, at) "
                           f"VALUES ({scope.mark}?, ?, ?, ?)",
                           [(*scope.values, session_id, role, content, now) for role, content in messages])
            cap_buffer(tx, self.caps.max_buffer_rows, scope)

    def sessions(self, limit: int = 50) -> list[dict[str, Any]]:
        scope = self.party_scope
        rows = self.conn.execute(
            f"SELECT session_id, agent, first_seen, last_seen, requests, genes_delivered FROM sessions{scope.only} "
            "ORDER BY last_seen DESC LIMIT ?", (*scope.values, limit))
        keys = ("session_id", "agent", "first_seen", "last_seen", "requests", "genes_delivered")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def pending_exchanges(self, limit: int = 500) -> list[tuple[int, str, str, str]]:
        scope = self.party_scope
        return [tuple(r) for r in self.conn.execute(
            f"SELECT id, session_id, role, content FROM session_buffer WHERE {scope.where}consolidated = 0 "
            "ORDER BY id LIMIT ?", (*scope.values, limit))]

    def mark_consolidated(self, ids: Sequence[int]) -> None:
        scope = self.party_scope
        with self.transaction(changes_genes=False) as tx:
            tx.executemany(f"UPDATE session_buffer SET consolidated = 1 WHERE {scope.where}id = ?",
                           [(*scope.values, i) for i in ids])
