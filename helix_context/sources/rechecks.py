"""Polling's second look (sources/service.py): files indexed in the second they were written.

Polling sees a file's modification time to the second only, so a second write within the same
second as the one just indexed would go unseen. The files indexed less than two seconds after they
were written are therefore looked at again (a stat each) once that second has passed; the sources
worker asks `take` when `due` says so, and queues the files whose size or mtime now differ from the
record. Kept apart so the service reads as its life cycle; nothing here runs a thread.
"""

from __future__ import annotations

import os
import threading
import time

from helix_context.config import SourcesSettings
from helix_context.genome.storage import GenomeStore
from helix_context.sources.names import SourceNames


class Rechecks:
    def __init__(self, genome: GenomeStore, cfg: SourcesSettings) -> None:
        self.genome = genome
        self.cfg = cfg
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[float, set[str]]] = {}  # source → (when, files on this machine to stat again)

    def schedule(self, *, key: str, paths: set[str], names: SourceNames) -> None:
        """`paths`: files on this machine just indexed (none: a full pass, whose recent files are found in
        the index). Called by the worker itself, whose next wait (`due`) includes them."""
        if not self.cfg.force_polling or not self.cfg.watch:
            return
        cutoff = time.time_ns() - 2_000_000_000
        recent = {local for p, r in self.genome.file_records(under=key.rstrip("/\\") + os.sep).items()
                  if r.mtime_ns > cutoff and (local := names.local(p))} if not paths else set(paths)
        if not recent:
            return
        with self._lock:
            when, pending = self._pending.get(key, (0.0, set()))
            self._pending[key] = (max(when, time.monotonic() + 1.2), pending | recent)

    def due(self) -> float | None:
        with self._lock:
            return min((when for when, _ in self._pending.values()), default=None)

    def take(self, *, now: float, names: SourceNames) -> dict[str, set[str]]:
        """Per source, its due files whose size or mtime now differ from the record (or that are gone)."""
        with self._lock:
            ready = {key: paths for key, (when, paths) in self._pending.items() if when <= now}
            for key in ready:
                del self._pending[key]
        found: dict[str, set[str]] = {}
        for key, paths in ready.items():
            changed = set()
            for raw in paths:
                record = self.genome.file_record(names.stored(raw))
                try:
                    st = os.stat(raw)
                except OSError:
                    if record is not None:
                        changed.add(raw)
                    continue
                if record is None or not record.stat_matches(st.st_size, st.st_mtime_ns):
                    changed.add(raw)
            if changed:
                found[key] = changed
        return found
