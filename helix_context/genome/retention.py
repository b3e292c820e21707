"""Retention of the genome's bookkeeping tables: co-activation edges, sessions, the chat buffer.

Why: every /context call adds co-activation pairs and every chat adds buffer rows with its full
text; left alone they grow for as long as the server runs. The rules ([retention] in helix.toml):

- co-activation: weights decay exponentially (half-life), edges that fall below a floor are
  deleted, and each gene keeps only its strongest edges;
- sessions and the chat buffer: rows not seen for ``session_ttl_days`` are deleted, and only the
  most recent ``max_sessions`` / ``max_buffer_rows`` are kept;
- consolidated buffer rows (already distilled into session-notes genes) are deleted at once.

Genes themselves are not touched here: they follow their files (ingest retires them).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from helix_context.config import RetentionSettings
    from helix_context.genome.store import Genome

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


def delete_consolidated(genome: Genome) -> int:
    """Chat-buffer rows already distilled into session notes: their text lives on in the notes gene."""
    with genome.transaction(changes_genes=False) as tx:
        return tx.execute("DELETE FROM session_buffer WHERE consolidated = 1").rowcount


def prune(genome: Genome, cfg: RetentionSettings, now: float | None = None) -> PruneReport:
    """Apply every retention rule once, in one transaction (a few indexed deletes: milliseconds)."""
    started = time.perf_counter()
    now = time.time() if now is None else now
    report = PruneReport()
    ttl_s = cfg.session_ttl_days * 86_400.0
    with genome.transaction(changes_genes=False) as tx:
        row = tx.execute("SELECT value FROM meta WHERE key = ?", (_DECAYED_AT,)).fetchone()
        last = float(row[0]) if row else now
        half_life_s = cfg.coactivation_half_life_days * 86_400.0
        factor = 0.5 ** (max(0.0, now - last) / half_life_s) if half_life_s > 0 else 1.0
        if factor < 0.999:  # decay in steps worth writing; the time left over carries to the next prune
            report.coactivation_decayed = tx.execute("UPDATE coactivation SET count = count * ?", (factor,)).rowcount
            last = now
        if row is None or last == now:
            tx.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (_DECAYED_AT, repr(last)))
        report.coactivation_deleted += tx.execute("DELETE FROM coactivation WHERE count < ?",
                                                  (cfg.coactivation_min_weight,)).rowcount
        # per gene, only its strongest edges: an edge goes when it is past the cap of either end
        report.coactivation_deleted += tx.execute(
            "DELETE FROM coactivation WHERE (a, b) IN ("
            " SELECT a, b FROM ("
            "  SELECT a, b, ROW_NUMBER() OVER (PARTITION BY g ORDER BY count DESC, last_at DESC) AS r FROM ("
            "   SELECT a AS g, a, b, count, last_at FROM coactivation"
            "   UNION ALL SELECT b AS g, a, b, count, last_at FROM coactivation))"
            " WHERE r > ?)", (cfg.coactivation_per_gene,)).rowcount

        report.buffer_deleted += tx.execute(
            "DELETE FROM session_buffer WHERE consolidated = 1 OR at < ?", (now - ttl_s,)).rowcount
        report.buffer_deleted += tx.execute(
            "DELETE FROM session_buffer WHERE id <= (SELECT id FROM session_buffer ORDER BY id DESC "
            "LIMIT 1 OFFSET ?)", (cfg.max_buffer_rows,)).rowcount
        report.sessions_deleted += tx.execute("DELETE FROM sessions WHERE last_seen < ?", (now - ttl_s,)).rowcount
        report.sessions_deleted += tx.execute(
            "DELETE FROM sessions WHERE session_id IN (SELECT session_id FROM sessions "
            "ORDER BY last_seen DESC LIMIT -1 OFFSET ?)", (cfg.max_sessions,)).rowcount
    report.seconds = time.perf_counter() - started
    return report


def table_rows(genome: Genome) -> dict[str, int]:
    """Row counts of the tables retention bounds (for tests, benchmarks and `helix stats`)."""
    conn = genome.conn
    return {table: conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]  # fixed names
            for table in ("coactivation", "sessions", "session_buffer")}


class RetentionClock:
    """Runs `prune` every `prune_every` deliveries and at least every `prune_interval_s`.

    Why a counter and a clock: a busy server prunes in proportion to what it writes, an idle one
    still expires old sessions. `tick()` is called on the request path and costs a counter bump;
    only one prune runs at a time, and a failing prune is logged, never raised to a request.
    """

    def __init__(self, genome: Genome, cfg: RetentionSettings) -> None:
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
            report = prune(self.genome, self.cfg)
            self.runs += 1
            self.last_report = report
            return report
        except Exception as exc:  # retention is housekeeping: log it, keep serving
            log.warning("retention prune failed (will retry): %s", exc)
            return None
        finally:
            self._lock.release()
