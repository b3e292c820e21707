"""The team genome's side of learning.py: a batch of deliveries' co-activation pairs in one statement,
after the batch's genes are locked in one order.

Why: a delivery of 24 genes is 276 pairs. SQLite runs a statement per pair in-process for
microseconds each; on PostgreSQL each is a statement the server parses, plans and executes
(pipelined, but still one execution each), which made the delivery record most of the server's
CPU per question (bench_team.py). One INSERT … SELECT over two arrays does the same upserts
in one execution, in the same (sorted) order, so two backends recording at once cannot deadlock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from helix_context.genome.retention import PartyScope


class PgLearningMixin:
    """Overrides LearningMixin._live_delivered and _count_pairs; placed before it in PgGenome's bases."""

    party_scope: PartyScope

    def _live_delivered(self, tx: Any, wanted: Sequence[int]) -> set[int]:
        """The live delivered genes, their rows locked in id order before anything is written.

        Why: a batch bumps its genes' access counts in a statement per use count, each locking its rows
        in no set order. Two backends recording overlapping answers at once then took each other's rows
        in opposite orders and deadlocked (8 client backends at 96k genes: batches lost, "delivery
        record(s) not written", and a second's wait each time). Locked here in one order, the second
        waits for the first."""
        return {int(r[0]) for r in tx.execute(
            "SELECT id FROM genes WHERE retired_at IS NULL AND id = ANY(?::bigint[]) ORDER BY id FOR UPDATE",
            (list(wanted),)).fetchall()}

    def _count_pairs(self, tx: Any, pairs: Sequence[tuple[int, int, int]], now: float) -> None:
        if not pairs:
            return
        scope = self.party_scope
        tx.execute(f"INSERT INTO coactivation({scope.column}a, b, count, last_at) "
                   f"SELECT {scope.mark}p.a, p.b, p.n, ?::float8 "
                   "FROM unnest(?::bigint[], ?::bigint[], ?::float8[]) AS p(a, b, n) "
                   f"ON CONFLICT({scope.column}a, b) DO UPDATE SET count = coactivation.count + excluded.count, "
                   "last_at = excluded.last_at",
                   (*scope.values, now, [a for a, _, _ in pairs], [b for _, b, _ in pairs], [float(n) for _, _, n in pairs]))
