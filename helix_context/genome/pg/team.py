"""Team semantics on one shared database: one indexer per source, and every backend told of each write.

One indexer per source: a session-level advisory lock keyed by the source (its name hashed by the
server, so every backend computes the same key; outside the `public` schema the schema's name comes
first, since advisory locks are per database and two genomes in two schemas may name the same
source). Session-level, not transaction-level, on purpose: the lock lives as long as the holder's
connection, so a backend that dies (crash, `kill -9`, lost network) drops it with its connection and
any other backend may take it over.

Changes: a writer commits, advances the `helix_generation` sequence, then sends
NOTIFY helix_genome. Each backend's listener (its own connection) reads the sequence when
told, and at least every POLL_S seconds in case a notification was lost with a connection,
so every cache keyed on `generation()` (retrieval's word counts, the dense index) is dropped
within ~1 s of another backend's write, without a query per call.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import psycopg

from helix_context.genome.pg.connect import connect, safe_url
from helix_context.genome.pg.link import Link

log = logging.getLogger("helix.genome")

NOTIFY_CHANNEL = "helix_genome"
POLL_S = 1.0
_WAKE_S = 0.1  # how often a waiting listener looks at its stop flag
_RECONNECT_S = (0.5, 1.0, 2.0, 5.0)  # backoff while the server is unreachable


def read_generation(conn: psycopg.Connection[tuple[Any, ...]]) -> int:
    row = conn.execute("SELECT last_value, is_called FROM helix_generation").fetchone()
    return int(row[0]) if row and row[1] else 0


def announce_change(conn: psycopg.Connection[tuple[Any, ...]]) -> int:
    """After a commit: advance the generation, then tell every listener; returns the new generation."""
    row = conn.execute("SELECT nextval('helix_generation')").fetchone()
    conn.execute(f"NOTIFY {NOTIFY_CHANNEL}")
    return int(row[0]) if row else 0


# the source's own name in `public` (the key every earlier Helix used there), else schema-qualified
_CLAIM_KEY = ("hashtextextended(CASE WHEN current_schema() = 'public' THEN %(source)s "
              "ELSE current_schema() || '.' || %(source)s END, 0)")


class SourceClaim:
    """`with genome.claim_source(name) as claim:` — `claim.held` says whether this backend indexes it now.

    The lock stays held (on its own connection) until the block ends or the process dies.
    """

    def __init__(self, url: str, source: str) -> None:
        self.source = source
        self.held = False
        self._conn = connect(url)

    def acquire(self) -> bool:
        row = self._conn.execute(f"SELECT pg_try_advisory_lock({_CLAIM_KEY})", {"source": self.source}).fetchone()
        self.held = bool(row and row[0])
        return self.held

    def release(self) -> None:
        try:
            if self.held:
                self._conn.execute(f"SELECT pg_advisory_unlock({_CLAIM_KEY})", {"source": self.source})
        finally:
            self.held = False
            self._conn.close()

    def __enter__(self) -> SourceClaim:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class ChangeListener:
    """A daemon thread holding `generation` current from NOTIFY (and a 1 s poll as a safety net)."""

    def __init__(self, url: str, initial: int, link: Link | None = None) -> None:
        self._url = url
        self._link = link  # told of each loss and return: the listener is the backend's heartbeat
        self.generation = initial
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="helix-genome-listen", daemon=True)
        self._thread.start()

    def seen(self, generation: int) -> None:
        """This backend's own write: its caches move on at once."""
        self.generation = max(self.generation, generation)

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                with connect(self._url) as conn:
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    if self._link is not None:
                        self._link.succeeded()
                    failures = 0
                    while not self._stop.is_set():
                        self.seen(read_generation(conn))
                        self._await_notice(conn)
            except Exception as exc:  # the server went away: retry with backoff; generation() then asks directly
                wait = _RECONNECT_S[min(failures, len(_RECONNECT_S) - 1)]
                failures += 1
                if self._link is not None:
                    self._link.failed(exc)
                log.warning("team genome %s: change listener lost its connection (%s); retrying in %.1f s",
                            safe_url(self._url), exc, wait)
                self._stop.wait(wait)

    def _await_notice(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        """Until a notification, POLL_S, or close(): waits in short slices so that closing a genome (each
        CLI command does) takes a tenth of a second, not a whole poll."""
        deadline = time.monotonic() + POLL_S
        while not self._stop.is_set() and time.monotonic() < deadline:
            if any(True for _ in conn.notifies(timeout=_WAKE_S, stop_after=1)):
                return

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=POLL_S * 3)
