"""One question's reads in one snapshot, and the snapshot's COMMIT sent without waiting for its answer.

Why one snapshot: a question reads in several statements (postings, vectors, genes, spans); without
one, another backend's re-index committing between them can delete the genes a search just found,
and the answer comes back empty. So each question is a REPEATABLE READ, READ ONLY transaction.

Why the COMMIT is not waited for: every round trip a question makes costs the network's round-trip
time (a LAN ~0.5 ms, a VPN 10–50 ms: `benchmarks/bench_team_rtt.py`) and, on a busy server, a turn
for a core twice. The BEGIN already travels with the first read (pipeline mode); the COMMIT went
with the pipeline's closing Sync, whose answer psycopg waits for: one round trip for nothing the
question uses. Here the COMMIT and a Sync are sent at once and the pipeline stays open: the server
ends the transaction on arrival (the session is idle, holding no snapshot), and their answers are
read with the next question's first results.

The open pipeline is kept on the connection (`GuardedConnection.lingering`), which closes it before
any other statement, transaction or pipeline: nothing outside a question can run inside it.

Sending without waiting uses two methods psycopg keeps private (`_enqueue_sync`, `_communicate_gen`,
in every 3.x release) and reads its `result_queue`. Where they are missing, or a statement's answer
was never read (its error must not go unseen), the COMMIT's round trip is paid as before
(tests/genome/pg/test_pg_snapshot.py fails if the saving stops holding with the installed psycopg).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from helix_context.genome.pg.connect import GuardedConnection

log = logging.getLogger("helix.genome")

_BEGIN = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"
_IDLE = psycopg.pq.TransactionStatus.IDLE


def can_send_without_waiting(pipeline: Any) -> bool:
    """Whether this psycopg has the pipeline internals the saving needs (every 3.x release so far)."""
    return all(hasattr(pipeline, name) for name in ("_enqueue_sync", "_communicate_gen", "result_queue"))


@contextmanager
def read_snapshot(raw: GuardedConnection) -> Iterator[None]:
    """The reads inside run in one REPEATABLE READ, READ ONLY transaction. Nested use keeps the outer
    snapshot, and a write transaction open on this connection keeps that transaction."""
    held = raw.lingering  # the last question's pipeline, reused: its answers are read with this one's
    raw.lingering = None
    if held is None:
        if raw.info.transaction_status != _IDLE:
            yield  # inside a snapshot or a write transaction already: its reads see what it sees
            return
        block = raw.pipeline()
        held = (block, block.__enter__(), set())
    block, pipeline, ours = held
    exited = False
    try:
        ours.add(raw.execute(_BEGIN))  # queued: it travels with the question's first read
        yield
        # only when every statement's answer has been read can none of them still fail unseen; a
        # statement whose answer was never read gets the full Sync and wait, which raises its error.
        # Not counted: this snapshot's own BEGIN, COMMIT and Sync, and the last question's (a question
        # answered from caches alone reads nothing from the server)
        answered = can_send_without_waiting(pipeline) and all(
            pending is None or pending[0] in ours for pending in pipeline.result_queue)
        commit = raw.execute("COMMIT")
        if answered:
            with raw.lock:
                pipeline._enqueue_sync()
                raw.wait(pipeline._communicate_gen())  # sends what is queued; waits for no answer
            raw.lingering = (block, pipeline, {commit})
            return
        exited = True
        block.__exit__(None, None, None)
    except BaseException:
        if not exited:  # the pipeline's closing Sync lets the server go on after an error
            try:
                block.__exit__(*sys.exc_info())
            except Exception:  # the error itself is raised below; a second one from the Sync says no more
                log.debug("closing a failed question's pipeline", exc_info=True)
        if not (raw.closed or raw.broken) and raw.info.transaction_status != _IDLE:
            raw.execute("ROLLBACK")
        raise
