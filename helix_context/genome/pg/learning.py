"""The team genome's side of learning.py: a batch of deliveries' co-activation pairs in one statement,
after the batch's genes are locked in one order.

Why: a delivery of 24 genes is 276 pairs. SQLite runs a statement per pair in-process for
microseconds each; on PostgreSQL each is a statement the server parses, plans and executes
(pipelined, but still one execution each), which made the delivery record most of the server's
CPU per question (bench_team.py). One INSERT … SELECT over two arrays does the same upserts
in one execution, in the same (sorted) order, so two backends recording at once cannot deadlock.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import psycopg

from helix_context.errors import GenomeError
from helix_context.genome.retention import PartyScope

log = logging.getLogger(__name__)


class PgLearningMixin:
    """Overrides LearningMixin's hooks (_live_delivered, _count_pairs, _after_deliveries); placed before
    it in PgGenome's bases."""

    party_scope: PartyScope
    _pairs_have_statistics = False  # per process: set once this backend has seen the table's statistics

    def _raw(self) -> Any: ...  # PgGenome's: this thread's connection

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

    def _after_deliveries(self) -> None:
        """The first batch a backend writes gives the co-activation table statistics, if it has none.

        Why: the table starts empty, and an empty table analyzed (a new team genome, or one copied in)
        has no statistics on its columns, which autovacuum gives it only at its next round, a minute or
        more later. Until then the planner reads a question's co-activation by the wrong index (the
        primary key, skipping over every `a` for each `b`): 1.7 ms instead of 0.7 ms a question at 96k
        genes, on every backend, from the first question. Analyzing a few hundred rows takes
        milliseconds; a role not allowed to analyze leaves it to autovacuum."""
        if self._pairs_have_statistics:
            return
        self._pairs_have_statistics = True
        try:
            _analyze_if_unknown(self._raw(), "coactivation")
        except (psycopg.Error, GenomeError) as exc:  # no MAINTAIN privilege, a lost connection: autovacuum's
            log.info("co-activation statistics left to autovacuum: %s", exc)


def _analyze_if_unknown(raw: Any, table: str) -> None:
    """ANALYZE a table the planner knows as empty (reltuples 0) or never analyzed (-1). On the writer's
    own connection, after its transaction (the connection is in autocommit: an error here aborts
    nothing), not a new one: a new backend costs the server more than the check."""
    row = raw.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", (table,)).fetchone()
    if row is not None and row[0] <= 0:
        raw.execute(f"ANALYZE {table}")
