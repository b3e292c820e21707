"""The session recorder: each proxied exchange into the genome's session buffer, off the request path.

Why apart: recording is the proxy's one write to the genome, and it must never slow a chat or
fail one. It goes through the store's public methods (``buffer_exchange``, ``touch_session``);
the SQL stays in :mod:`helix_context.genome`. :func:`helix_context.llm.ribosome.consolidate`
later distils the buffer into genes.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from helix_context.manager import HelixContextManager

log = logging.getLogger("helix.proxy")

# (session id, agent, genes delivered, [(role, text), …]) for one proxied request
_Record = tuple[str, str, int, list[tuple[str, str]]]


class SessionRecorder:
    """Writes exchanges to the session buffer off the request path, batched, in one worker.

    ``flush()`` waits until everything recorded so far is in the genome (GET
    /sessions and POST /consolidate call it, so they always see the latest chat).
    """

    def __init__(self, helix: HelixContextManager) -> None:
        self.helix = helix
        self._queue: asyncio.Queue[_Record] | None = None
        self._worker: asyncio.Task[None] | None = None

    def record(self, session_id: str, agent: str, genes: int, exchange: list[tuple[str, str]]) -> None:
        if self._queue is None:
            self._queue = asyncio.Queue()
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._run(self._queue))
        self._queue.put_nowait((session_id, agent, genes, exchange))

    async def _run(self, queue: asyncio.Queue[_Record]) -> None:
        while True:
            batch = [await queue.get()]
            while not queue.empty():
                batch.append(queue.get_nowait())
            try:
                await anyio.to_thread.run_sync(self._write, batch)
            except Exception:
                log.exception("could not record %d exchange(s) in the session buffer", len(batch))
            finally:
                for _ in batch:
                    queue.task_done()

    def _write(self, batch: list[_Record]) -> None:
        genome = self.helix.genome
        messages: dict[str, list[tuple[str, str]]] = {}
        for session_id, _, _, exchange in batch:  # one transaction per session, in arrival order
            messages.setdefault(session_id, []).extend(exchange)
        for session_id, rows in messages.items():
            if rows:
                genome.buffer_exchange(session_id, rows)
        for session_id, agent, genes, _ in batch:  # one per request: it counts requests
            genome.touch_session(session_id, agent, genes)

    async def flush(self) -> None:
        if self._queue is not None and self._worker is not None and not self._worker.done():
            await self._queue.join()

    async def aclose(self) -> None:
        try:
            await asyncio.wait_for(self.flush(), timeout=10)
        except (TimeoutError, Exception):
            log.warning("session recorder did not drain before shutdown")
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except (asyncio.CancelledError, Exception):
                pass
