"""Each answer's delivery record (usage counts, co-activation), written off the request path in batches.

Why: recording which genes an answer delivered is a write transaction per question (the genes' access
counts, up to 276 co-activation pairs, the edge cap). Measured in `build_context` on 10k genes: on
the team genome five round trips, ~2.8 ms of a 13.5 ms question (`profile_team_reads.py`); on SQLite
~0.55 ms of a 4.7 ms one, and a write lock every question takes from the indexer. Nothing in the
answer depends on it, so the question returns first and a worker writes what piled up, many
deliveries in one transaction (pairs delivered twice are one upsert).

Contract:
- `add` never waits for the database. What is pending is bounded (`max_pending` deliveries; past
  it the oldest are dropped, said once in the log): learning is best effort, answers are not.
- A delivery is written within `flush_after_s` of being added (at once when `max_batch` are pending),
  by one worker thread, in one transaction through `write` (the genome's `_write_deliveries`).
- `flush()` returns once everything added before it is written: whoever shows what was learned
  (co-activation links, neighbours, stats, retention counts, an export) calls it first, and
  `close()` does, so nothing added is lost by a clean shutdown. A killed process loses at most
  the last `flush_after_s` of usage counts, as SQLite's synchronous = NORMAL would.
- The worker ends after `idle_exit_s` with nothing to write, and the next `add` starts one: an idle
  backend holds no thread, and no connection through it, for this.
- A batch whose write fails is logged and dropped, for its reason: the genome is busy or its disk
  full (GenomeError) or anything else. The worker goes on with the next.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from helix_context.errors import GenomeError

log = logging.getLogger("helix.genome.deliveries")

FLUSH_AFTER_S = 0.5
MAX_BATCH = 64
MAX_PENDING = 4096
IDLE_EXIT_S = 30.0  # a worker with nothing to write this long ends (its connection and the genome can go)


@dataclass(frozen=True)
class Delivery:
    genes: tuple[int, ...]  # sorted gene ids delivered together
    at: float  # when (time.time())


class DeliveryBatcher:
    def __init__(self, write: Callable[[Sequence[Delivery]], None], *, flush_after_s: float = FLUSH_AFTER_S,
                 max_batch: int = MAX_BATCH, max_pending: int = MAX_PENDING, idle_exit_s: float = IDLE_EXIT_S,
                 name: str = "genome") -> None:
        self._write = write
        self._flush_after_s = flush_after_s
        self._max_batch = max(1, max_batch)
        self._max_pending = max(1, max_pending)
        self._idle_exit_s = idle_exit_s
        self._name = name
        self._pending: list[Delivery] = []
        self._cond = threading.Condition()
        self._writing = threading.Lock()  # one batch at a time: a flush waits for the worker's batch in flight
        self._worker: threading.Thread | None = None
        self._closed = False
        self._dropped = 0
        self._failing = False  # the last batch failed: the next failures are logged quietly until one is written

    def add(self, genes: Sequence[int], at: float | None = None) -> None:
        delivery = Delivery(tuple(genes), time.time() if at is None else at)
        with self._cond:
            if self._closed:
                return
            self._pending.append(delivery)
            if len(self._pending) > self._max_pending:
                del self._pending[0]
                self._dropped += 1
                if self._dropped == 1:
                    log.warning("%s: delivery records pile up faster than they are written; the oldest are "
                                "dropped (usage counts only, never a gene)", self._name)
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, name="helix-deliveries", daemon=True)
                self._worker.start()
            self._cond.notify()

    def working(self) -> bool:
        """Whether a worker thread is running (it ends after `idle_exit_s` with nothing to write)."""
        with self._cond:
            return self._worker is not None and self._worker.is_alive()

    def pending(self) -> int:
        with self._cond:
            return len(self._pending)

    def flush(self) -> None:
        """Write everything added so far before returning (in the caller's thread)."""
        with self._writing:
            with self._cond:
                batch, self._pending = self._pending, []
            self._write_batch(batch)

    def close(self) -> None:
        """Write what is pending and stop the worker; later `add`s are ignored."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        worker = self._worker
        if worker is not None and worker is not threading.current_thread():
            worker.join(timeout=10)
        self.flush()

    def _run(self) -> None:
        while True:
            with self._cond:
                idle_until = time.monotonic() + self._idle_exit_s
                while not self._pending and not self._closed:
                    left = idle_until - time.monotonic()
                    if left <= 0:  # idle: end; the next add() starts a worker again
                        self._worker = None
                        return
                    self._cond.wait(left)
                if self._closed:
                    return  # close() writes the rest
                deadline = self._pending[0].at + self._flush_after_s
                while len(self._pending) < self._max_batch and not self._closed:
                    left = deadline - time.time()
                    if left <= 0:
                        break
                    self._cond.wait(left)
            with self._writing:
                with self._cond:
                    batch, self._pending = self._pending[:self._max_batch], self._pending[self._max_batch:]
                self._write_batch(batch)

    def _write_batch(self, batch: list[Delivery]) -> None:
        if not batch:
            return
        try:
            self._write(batch)
        except GenomeError as exc:  # busy past its timeout, a full disk, read-only: these counts are lost
            (log.debug if self._failing else log.warning)(
                "%s: %d delivery record(s) not written (%s)%s", self._name, len(batch), exc,
                "" if self._failing else "; usage counts are skipped until the genome takes writes again")
            self._failing = True
        except Exception:  # a bug must not stop the worker: the next batch is tried
            log.exception("%s: %d delivery record(s) not written", self._name, len(batch))
        else:
            if self._failing:
                log.info("%s: delivery records are written again", self._name)
            self._failing = False
