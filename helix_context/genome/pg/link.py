"""The state of a backend's link to the team genome's server: up, or down and retried with backoff.

Why: when the database server goes away (restart, network, failover), a question must fail at
once with a message that says so, not hang or end in a 500; the backend must come back by
itself when the server does; and /health (and through the supervisor, the tray) must say what
is happening. One Link per PgGenome sees every connection's fate: the change listener's
(team.py, which polls the server every second, so an outage shows within ~1 s even while no
question is asked) and the request connections' (connect.py's GuardedConnection). While the
server is down, new connections are tried on a backoff schedule; requests in between fail fast.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from helix_context.errors import GenomeError
from helix_context.genome.pg.url import safe_url

BACKOFF_S = (0.5, 1.0, 2.0, 5.0, 10.0)  # waits between tries while the server stays unreachable


class TeamGenomeUnreachable(GenomeError):
    """The team genome's server does not answer; Helix keeps retrying (see /health)."""


class Link:
    def __init__(self, url: str, clock: Any = time.monotonic) -> None:
        self._url = safe_url(url)
        self._clock = clock
        self._lock = threading.Lock()
        self._failures = 0
        self._down_since: float | None = None  # wall time of the first failure of this outage
        self._next_try = 0.0
        self._error = ""
        self._outages = 0
        self.epoch = 0  # moves at every failure: connections opened before it may be dead (connections_from)

    def failed(self, exc: BaseException | str) -> None:
        """A connection was lost or could not be made (the text is already free of credentials)."""
        with self._lock:
            self.epoch += 1
            if self._down_since is None:
                self._down_since = time.time()
                self._outages += 1
            wait = BACKOFF_S[min(self._failures, len(BACKOFF_S) - 1)]
            self._failures += 1
            self._next_try = self._clock() + wait
            self._error = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__

    def succeeded(self) -> None:
        with self._lock:
            self._failures, self._down_since, self._next_try, self._error = 0, None, 0.0, ""

    @property
    def down(self) -> bool:
        with self._lock:
            return self._down_since is not None

    def gate(self) -> None:
        """Before a new connection: raise at once while the backoff says not to try yet."""
        with self._lock:
            if self._down_since is None or self._clock() >= self._next_try:
                return
            wait = self._next_try - self._clock()
            raise TeamGenomeUnreachable(self._message(f"next try in {wait:.1f} s"))

    def unreachable(self) -> TeamGenomeUnreachable:
        """The error a request gets when its connection was just lost."""
        with self._lock:
            return TeamGenomeUnreachable(self._message("retrying with backoff"))

    def _message(self, then: str) -> str:
        since = time.strftime("%H:%M:%S", time.localtime(self._down_since or time.time()))
        return (f"the team genome at {self._url} is unreachable since {since} ({self._error}); "
                f"a running backend retries by itself ({then}); nothing was changed. Check that the database "
                "server runs and is reachable, then ask again")

    def state(self) -> dict[str, Any]:
        """For /health: status ok | reconnecting, since when, tries so far, the last error (redacted)."""
        with self._lock:
            if self._down_since is None:
                return {"status": "ok", "url": self._url, "outages": self._outages}
            return {"status": "reconnecting", "url": self._url, "since": self._down_since, "tries": self._failures,
                    "next_try_s": round(max(0.0, self._next_try - self._clock()), 1), "error": self._error,
                    "outages": self._outages}
