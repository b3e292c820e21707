"""The activity record: what any process (the server, the `helix` CLI, a script) did to the genome.

The dashboard runs in the server, but ingests and packets also happen in other
processes that share the genome file; their telemetry never reaches the
server. Each of those events leaves one small row here instead, which the
dashboard reads. Retention: the newest KEEP_ROWS rows are kept; older ones are
deleted on the next write (a range delete on the integer key).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from helix_context.genome.retention import EVERYONE, PartyScope
from helix_context.genome.write_door import DoorTx

KEEP_ROWS = 2_000
KINDS = ("ingest", "packet", "context")  # the table: schema.V3_ACTIVITY (pg/schema.py: with its party)


def record(tx: DoorTx, kind: str, actor: str, summary: str, counts: Mapping[str, Any], *,
           keep: int = KEEP_ROWS, at: float | None = None, scope: PartyScope = EVERYONE) -> int:
    """Insert one event inside the caller's transaction and apply the retention rule; returns its id.

    On a team genome `scope` names the writer's party: its newest `keep` rows are kept."""
    row = tx.execute(f"INSERT INTO activity({scope.column}at, kind, actor, summary, counts) "
                     f"VALUES ({scope.mark}?, ?, ?, ?, ?) RETURNING id",
                     (*scope.values, time.time() if at is None else at, kind, actor[:120], summary[:500],
                      json.dumps(dict(counts), separators=(",", ":")))).fetchone()
    rowid = int(row[0])
    tx.execute(f"DELETE FROM activity WHERE {scope.where}id <= ?", (*scope.values, rowid - keep))
    return rowid


def _row(r: tuple[Any, ...]) -> dict[str, Any]:
    return {"id": r[0], "at": r[1], "kind": r[2], "actor": r[3], "summary": r[4], "counts": json.loads(r[5] or "{}")}


def recent(conn: Any, limit: int = 20, kind: str | None = None, scope: PartyScope = EVERYONE) -> list[dict[str, Any]]:
    """Newest first."""
    if kind is None:
        rows = conn.execute(f"SELECT id, at, kind, actor, summary, counts FROM activity{scope.only} "
                            "ORDER BY id DESC LIMIT ?", (*scope.values, limit))
    else:
        rows = conn.execute(f"SELECT id, at, kind, actor, summary, counts FROM activity WHERE {scope.where}kind = ? "
                            "ORDER BY id DESC LIMIT ?", (*scope.values, kind, limit))
    return [_row(r) for r in rows]


def totals(conn: Any, kind: str, keys: tuple[str, ...], since: float = 0.0,
           scope: PartyScope = EVERYONE) -> dict[str, float]:
    """Sum of each counts key over the kept events of one kind (since a unix time)."""
    out = {k: 0.0 for k in keys}
    events = 0
    for (counts,) in conn.execute(f"SELECT counts FROM activity WHERE {scope.where}kind = ? AND at >= ?",
                                  (*scope.values, kind, since)):
        data = json.loads(counts or "{}")
        events += 1
        for k in keys:
            value = data.get(k)
            if isinstance(value, (int, float)):
                out[k] += value
    out["events"] = events
    return out


class ActivityMixin:
    """The activity record of both genomes (store.py, pg/store.py); needs `conn`, `transaction`,
    `readonly` and `party_scope`. On a team genome each developer sees their own events."""

    conn: Any
    transaction: Any
    readonly: bool
    party_scope: PartyScope

    def log_activity(self, kind: str, actor: str, summary: str, counts: Mapping[str, Any]) -> None:
        """Record one event in its own short transaction (bookkeeping: the genes' caches stay valid)."""
        with self.transaction(changes_genes=False) as tx:
            record(tx, kind, actor, summary, counts, scope=self.party_scope)

    def read_activity(self, limit: int = 20) -> dict[str, Any]:
        """What the dashboard shows: recent events, the last ingests, verdict and live-check totals."""
        conn, scope = self.conn, self.party_scope
        return {
            "recent": recent(conn, limit, scope=scope),
            "ingests": recent(conn, 10, "ingest", scope=scope),
            "verdicts": totals(conn, "packet", ("verified", "stale_risk", "needs_refresh", "known_empty"), scope=scope),
            "live_check": totals(conn, "context", ("refreshed_from_disk", "stale_dropped"), scope=scope),
            "kept_rows": KEEP_ROWS,
        }
