"""The activity record on PostgreSQL: one developer's events, never another's (the `party` column).

Same rows and retention as genome/activity_sql.py (the newest KEEP_ROWS per party are kept,
older ones deleted at write time), with psycopg placeholders.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import psycopg

from helix_context.genome.activity_sql import KEEP_ROWS

_COLUMNS = "id, at, kind, actor, summary, counts"


def record(conn: psycopg.Connection[tuple[Any, ...]], party: str, kind: str, actor: str, summary: str,
           counts: Mapping[str, Any]) -> None:
    """Insert one event and apply the retention rule, in one transaction."""
    with conn.transaction():
        row = conn.execute("INSERT INTO activity(party, at, kind, actor, summary, counts) "
                           "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
                           (party, time.time(), kind, actor[:120], summary[:500],
                            json.dumps(dict(counts), separators=(",", ":")))).fetchone()
        if row is not None:
            conn.execute("DELETE FROM activity WHERE party = %s AND id <= %s", (party, int(row[0]) - KEEP_ROWS))


def _recent(conn: psycopg.Connection[tuple[Any, ...]], party: str, limit: int,
            kind: str | None = None) -> list[dict[str, Any]]:
    rows = conn.execute(f"SELECT {_COLUMNS} FROM activity WHERE party = %s AND (%s::text IS NULL OR kind = %s) "
                        "ORDER BY id DESC LIMIT %s", (party, kind, kind, limit)).fetchall()
    return [{"id": r[0], "at": r[1], "kind": r[2], "actor": r[3], "summary": r[4], "counts": json.loads(r[5] or "{}")}
            for r in rows]


def _totals(conn: psycopg.Connection[tuple[Any, ...]], party: str, kind: str,
            keys: tuple[str, ...]) -> dict[str, float]:
    out = {k: 0.0 for k in keys}
    events = 0
    for (counts,) in conn.execute("SELECT counts FROM activity WHERE party = %s AND kind = %s", (party, kind)):
        data = json.loads(counts or "{}")
        events += 1
        for k in keys:
            if isinstance(data.get(k), (int, float)):
                out[k] += data[k]
    out["events"] = events
    return out


def read(conn: psycopg.Connection[tuple[Any, ...]], party: str, limit: int) -> dict[str, Any]:
    return {"recent": _recent(conn, party, limit), "ingests": _recent(conn, party, 10, "ingest"),
            "verdicts": _totals(conn, party, "packet", ("verified", "stale_risk", "needs_refresh", "known_empty")),
            "live_check": _totals(conn, party, "context", ("refreshed_from_disk", "stale_dropped")),
            "kept_rows": KEEP_ROWS}
