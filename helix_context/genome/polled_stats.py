"""The genome's counts for pollers (/stats, telemetry gauges), computed at most a small share of the time.

Why: Genome.stats() scans the whole genes table (counts by tier, kind, project, the
stored bytes): ~0.5 s at 100k genes, seconds at 1M, and every page of the table
passes through the memory map into the server's resident memory. The supervisor
asks for /stats every 5 s. The answer is kept until the genome's generation changes
(an ingest, a retire), and even then, when counting is costly (over `CHEAP_S`), recomputed
only once the last one is older than `DUTY` times what it cost, so polling spends at most
~1/DUTY of a core on it.
Changes that keep the generation (aging moves tiers) show within `MAX_AGE_S`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

DUTY = 20  # recompute no sooner than this many times the last computation's cost
MAX_AGE_S = 60.0  # ... and at least this often while polled, whatever the generation says
CHEAP_S = 0.02  # a count cheaper than this is always redone after a change: a small genome's stats are never stale


class PolledStats:
    def __init__(self, compute: Callable[[], dict[str, Any]], generation: Callable[[], int]) -> None:
        self._compute = compute
        self._generation = generation
        self._lock = threading.Lock()
        self._cached: tuple[int, float, float, dict[str, Any]] | None = None  # generation, at, cost, stats

    def get(self) -> dict[str, Any]:
        """The genome's stats, with `stats_age_s`: how old the counts are."""
        with self._lock:  # one computation at a time; the others wait for its answer
            now = time.monotonic()
            generation = self._generation()
            if self._cached is not None:
                seen, at, cost, data = self._cached
                age = now - at
                if age < MAX_AGE_S and (seen == generation or (cost >= CHEAP_S and age < DUTY * cost)):
                    return {**data, "stats_age_s": round(age, 1)}
            started = time.monotonic()
            data = self._compute()
            self._cached = (generation, started, time.monotonic() - started, data)
            return {**data, "stats_age_s": 0.0}
