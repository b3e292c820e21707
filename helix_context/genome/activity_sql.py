"""The activity record: what any process (the server, the `helix` CLI, a script) did to the genome.

The dashboard runs in the server, but ingests and packets also happen in other
processes that share the genome file; their telemetry never reaches the
server. Each of those events leaves one small row here instead, which the
dashboard reads. Retention: the newest KEEP_ROWS rows are kept; older ones are
deleted on the next write (a range delete on the integer key).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping
from typing import Any

from helix_context.genome.backend import ActivityLog

KEEP_ROWS = 2_000
KINDS = ("ingest", "packet", "context")  # the table: schema.V3_ACTIVITY


def record(tx: Any, kind: str, actor: str, summary: str, counts: Mapping[str, Any], *,
           keep: int = KEEP_ROWS, at: float | None = None) -> int:
    """Insert one event inside the caller's transaction and apply the retention rule; returns its id."""
    cur = tx.execute("INSERT INTO activity(at, kind, actor, summary, counts) VALUES (?, ?, ?, ?, ?)",
                     (time.time() if at is None else at, kind, actor[:120], summary[:500],
                      json.dumps(dict(counts), separators=(",", ":"))))
    rowid = int(cur.lastrowid)
    tx.execute("DELETE FROM activity WHERE id <= ?", (rowid - keep,))
    return rowid


def _row(r: tuple[Any, ...]) -> dict[str, Any]:
    return {"id": r[0], "at": r[1], "kind": r[2], "actor": r[3], "summary": r[4], "counts": json.loads(r[5] or "{}")}


def recent(conn: sqlite3.Connection, limit: int = 20, kind: str | None = None) -> list[dict[str, Any]]:
    """Newest first."""
    if kind is None:
        rows = conn.execute("SELECT id, at, kind, actor, summary, counts FROM activity ORDER BY id DESC LIMIT ?",
                            (limit,))
    else:
        rows = conn.execute("SELECT id, at, kind, actor, summary, counts FROM activity WHERE kind = ? "
                            "ORDER BY id DESC LIMIT ?", (kind, limit))
    return [_row(r) for r in rows]


def totals(conn: sqlite3.Connection, kind: str, keys: tuple[str, ...], since: float = 0.0) -> dict[str, float]:
    """Sum of each counts key over the kept events of one kind (since a unix time)."""
    out = {k: 0.0 for k in keys}
    events = 0
    for (counts,) in conn.execute("SELECT counts FROM activity WHERE kind = ? AND at >= ?", (kind, since)):
        data = json.loads(counts or "{}")
        events += 1
        for k in keys:
            value = data.get(k)
            if isinstance(value, (int, float)):
                out[k] += value
    out["events"] = events
    return out


def log_event(genome: Any, kind: str, actor: str, summary: str, counts: Mapping[str, Any]) -> None:
    """Record one event in its own short transaction (bookkeeping: the genes' caches stay valid)."""
    if isinstance(genome, ActivityLog):  # the PostgreSQL genome keeps its own, per party
        genome.log_activity(kind, actor, summary, counts)
        return
    with genome.transaction(changes_genes=False) as tx:
        record(tx, kind, actor, summary, counts)


def read(genome: Any, limit: int = 20) -> dict[str, Any]:
    """What the dashboard shows: recent events, the last ingests, verdict and live-check totals."""
    if isinstance(genome, ActivityLog):
        return genome.read_activity(limit)
    conn = genome.conn
    return {
        "recent": recent(conn, limit),
        "ingests": recent(conn, 10, "ingest"),
        "verdicts": totals(conn, "packet", ("verified", "stale_risk", "needs_refresh", "known_empty")),
        "live_check": totals(conn, "context", ("refreshed_from_disk", "stale_dropped")),
        "kept_rows": KEEP_ROWS,
    }
