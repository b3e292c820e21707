"""Retention of the genome's bookkeeping tables: co-activation edges, sessions, the chat buffer.

Why: every /context call adds co-activation pairs and every chat adds buffer rows with its full
text; left alone they grow for as long as the server runs. The rules ([retention] in helix.toml):

- co-activation: weights decay exponentially (half-life), edges that fall below a floor are
  deleted, and each gene keeps only its strongest edges;
- sessions and the chat buffer: rows not seen for ``session_ttl_days`` are deleted, and only the
  most recent ``max_sessions`` / ``max_buffer_rows`` are kept;
- consolidated buffer rows (already distilled into session-notes genes) are deleted at once.

The caps hold at every moment, not only after a prune: the writes themselves (learning.py's
`record_delivery`, `touch_session`, `buffer_exchange`) call `cap_edges`, `cap_sessions` and
`cap_buffer` in the same transaction, so no reader ever sees a table past its cap. `prune` adds
what only time can do (decay, the TTL) and re-applies the caps to the whole table.

Genes themselves are not touched here: they follow their files (ingest retires them).

Both genomes run these rules (SQL both engines take, `?` marks). On the team genome every row
carries its party (user@device): `PartyScope` narrows each statement to the writer's own rows,
so one developer's caps never evict another's; what only time does (decay, the TTL) applies to
every party's rows, so the rows of someone who left the team expire too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from helix_context.genome.write_door import DoorTx
    from helix_context.config import RetentionSettings
    from helix_context.genome.storage import GenomeStore

log = logging.getLogger("helix.genome")

_DECAYED_AT = "coactivation_decayed_at"


@dataclass
class PruneReport:
    coactivation_decayed: int = 0
    coactivation_deleted: int = 0
    buffer_deleted: int = 0
    sessions_deleted: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class PartyScope:
    """Whose bookkeeping rows a statement sees: everyone's (SQLite: one user) or one party's (PostgreSQL)."""

    party: str | None = None

    @property
    def where(self) -> str:
        """A condition to put before others: "party = ? AND " or nothing."""
        return "" if self.party is None else "party = ? AND "

    @property
    def only(self) -> str:
        """A whole WHERE clause: " WHERE party = ?" or nothing."""
        return "" if self.party is None else " WHERE party = ?"

    @property
    def values(self) -> tuple[str, ...]:
        return () if self.party is None else (self.party,)

    @property
    def column(self) -> str:
        """The party column first in an INSERT's column list (and a conflict target): "party, " or nothing."""
        return "" if self.party is None else "party, "

    @property
    def mark(self) -> str:
        return "" if self.party is None else "?, "


EVERYONE = PartyScope()


@dataclass(frozen=True)
class WriteCaps:
    """The caps a write enforces as it writes (the same numbers as [retention])."""

    coactivation_per_gene: int = 32
    max_sessions: int = 5_000
    max_buffer_rows: int = 50_000

    @classmethod
    def of(cls, cfg: RetentionSettings) -> WriteCaps:
        return cls(cfg.coactivation_per_gene, cfg.max_sessions, cfg.max_buffer_rows)


_RANKED_EDGES = (
    "SELECT a, b FROM ("
    " SELECT a, b, ROW_NUMBER() OVER (PARTITION BY g ORDER BY count DESC, last_at DESC) AS r FROM ("
    "  SELECT a AS g, a, b, count, last_at FROM coactivation{where}"
    "  UNION ALL SELECT b AS g, a, b, count, last_at FROM coactivation{where}) AS ends) AS ranked"
    " WHERE r > ?")


def cap_edges(tx: DoorTx, per_gene: int, genes: Sequence[int] | None = None, scope: PartyScope = EVERYONE) -> int:
    """Each gene keeps only its strongest edges (an edge goes when it is past the cap of either end).

    `genes`: only these can have gained edges (the ones just delivered together), so only their
    edges are read (a few hundred rows, through the primary key and the index on b), ranked here,
    and the ones past the cap deleted by key: no scan or window sort of the table on the request
    path (a ranked DELETE … IN tripled the cost of a delivery). None ranks the whole table (prune)."""
    own = scope.values
    if genes is None:
        ranked = _RANKED_EDGES.format(where=scope.only)
        return int(tx.execute(f"DELETE FROM coactivation WHERE {scope.where}(a, b) IN ({ranked})",
                              (*own, *own, *own, per_gene)).rowcount)
    marks = ",".join("?" * len(genes))
    touched = set(genes)
    edges: dict[int, list[tuple[float, float, int, int]]] = {}
    for a, b, count, last_at in tx.execute(
            f"SELECT a, b, count, last_at FROM coactivation WHERE {scope.where}a IN ({marks}) UNION ALL "
            f"SELECT a, b, count, last_at FROM coactivation WHERE {scope.where}b IN ({marks}) AND a NOT IN ({marks})",
            (*own, *genes, *own, *genes, *genes)).fetchall():
        for end in (a, b):
            if end in touched:
                edges.setdefault(end, []).append((-count, -last_at, a, b))
    past: set[tuple[int, int]] = set()
    for ends in edges.values():
        if len(ends) > per_gene:
            ends.sort()  # strongest first: count, then the most recent
            past.update((a, b) for _, _, a, b in ends[per_gene:])
    if past:
        tx.executemany(f"DELETE FROM coactivation WHERE {scope.where}a = ? AND b = ?",
                       [(*own, a, b) for a, b in sorted(past)])
    return len(past)


def cap_sessions(tx: DoorTx, max_sessions: int, scope: PartyScope = EVERYONE) -> int:
    """Only the most recently seen sessions stay."""
    own = scope.values
    return int(tx.execute(f"DELETE FROM sessions WHERE {scope.where}session_id NOT IN (SELECT session_id "
                          f"FROM sessions{scope.only} ORDER BY last_seen DESC LIMIT ?)",
                          (*own, *own, max_sessions)).rowcount)


def cap_buffer(tx: DoorTx, max_rows: int, scope: PartyScope = EVERYONE) -> int:
    """Only the most recent chat-buffer rows stay (the id is the order of arrival)."""
    own = scope.values
    return int(tx.execute(f"DELETE FROM session_buffer WHERE {scope.where}id <= (SELECT id FROM session_buffer"
                          f"{scope.only} ORDER BY id DESC LIMIT 1 OFFSET ?)", (*own, *own, max_rows)).rowcount)


class RetentionMixin:
    """The rules above as methods of both genomes; needs `conn`, `transaction`, `party_scope` and `meta_table`."""

    conn: Any
    transaction: Any
    party_scope: PartyScope
    meta_table: str
    flush_deliveries: Callable[[], None]  # learning.LearningMixin's: queued deliveries written first

    def delete_consolidated(self) -> int:
        """Chat-buffer rows already distilled into session notes: their text lives on in the notes gene."""
        with self.transaction(changes_genes=False) as tx:
            return int(tx.execute("DELETE FROM session_buffer WHERE consolidated = 1").rowcount)

    def prune_retention(self, cfg: RetentionSettings, now: float | None = None) -> PruneReport:
        """Apply every retention rule once, in one transaction (a few indexed deletes: milliseconds)."""
        self.flush_deliveries()  # the queued deliveries first: their edges are capped with the rest
        started = time.perf_counter()
        now = time.time() if now is None else now
        report = PruneReport()
        ttl_s = cfg.session_ttl_days * 86_400.0
        scope, meta = self.party_scope, self.meta_table
        with self.transaction(changes_genes=False) as tx:
            row = tx.execute(f"SELECT value FROM {meta} WHERE key = ?", (_DECAYED_AT,)).fetchone()
            last = float(row[0]) if row else now
            half_life_s = cfg.coactivation_half_life_days * 86_400.0
            factor = 0.5 ** (max(0.0, now - last) / half_life_s) if half_life_s > 0 else 1.0
            if factor < 0.999:  # decay in steps worth writing; the time left over carries to the next prune
                report.coactivation_decayed = tx.execute("UPDATE coactivation SET count = count * ?",
                                                         (factor,)).rowcount
                last = now
            if row is None or last == now:
                tx.execute(f"INSERT INTO {meta}(key, value) VALUES (?, ?) "
                           "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (_DECAYED_AT, repr(last)))
            report.coactivation_deleted += tx.execute("DELETE FROM coactivation WHERE count < ?",
                                                      (cfg.coactivation_min_weight,)).rowcount
            report.coactivation_deleted += cap_edges(tx, cfg.coactivation_per_gene, scope=scope)

            report.buffer_deleted += tx.execute(
                "DELETE FROM session_buffer WHERE consolidated = 1 OR at < ?", (now - ttl_s,)).rowcount
            report.buffer_deleted += cap_buffer(tx, cfg.max_buffer_rows, scope)
            report.sessions_deleted += tx.execute("DELETE FROM sessions WHERE last_seen < ?",
                                                  (now - ttl_s,)).rowcount
            report.sessions_deleted += cap_sessions(tx, cfg.max_sessions, scope)
        report.seconds = time.perf_counter() - started
        return report

    def retention_rows(self) -> dict[str, int]:
        """Row counts of the tables retention bounds (this party's, on a team genome), and the most edges
        any one gene has (for tests, benchmarks and `helix stats`)."""
        self.flush_deliveries()
        conn, scope = self.conn, self.party_scope
        counts: dict[str, int] = {  # fixed table names, no input
            table: int(conn.execute(f"SELECT COUNT(*) FROM {table}{scope.only}", scope.values).fetchone()[0])
            for table in ("coactivation", "sessions", "session_buffer")}
        row = conn.execute(f"SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM (SELECT a AS g FROM coactivation"
                           f"{scope.only} UNION ALL SELECT b FROM coactivation{scope.only}) AS ends GROUP BY g) "
                           "AS per_gene", (*scope.values, *scope.values)).fetchone()
        counts["coactivation_per_gene_max"] = int(row[0] or 0)
        return counts


class RetentionClock:
    """Runs `prune_retention` every `prune_every` deliveries and at least every `prune_interval_s`.

    Why a counter and a clock: a busy server prunes in proportion to what it writes, an idle one
    still expires old sessions. `tick()` is called on the request path and costs a counter bump;
    only one prune runs at a time, and a failing prune is logged, never raised to a request.
    """

    def __init__(self, genome: GenomeStore, cfg: RetentionSettings) -> None:
        self.genome = genome
        self.cfg = cfg
        self._count = 0
        self._last = time.monotonic()
        self._lock = threading.Lock()
        self.runs = 0
        self.last_report: PruneReport | None = None

    def tick(self, writes: int = 1) -> PruneReport | None:
        self._count += writes
        if self._count < self.cfg.prune_every and time.monotonic() - self._last < self.cfg.prune_interval_s:
            return None
        return self.run()

    def due(self) -> bool:
        return time.monotonic() - self._last >= self.cfg.prune_interval_s

    def run(self) -> PruneReport | None:
        if not self._lock.acquire(blocking=False):
            return None  # another thread is pruning right now
        try:
            self._count = 0
            self._last = time.monotonic()
            report = self.genome.prune_retention(self.cfg)
            self.runs += 1
            self.last_report = report
            return report
        except Exception as exc:  # retention is housekeeping: log it, keep serving
            log.warning("retention prune failed (will retry): %s", exc)
            return None
        finally:
            self._lock.release()
