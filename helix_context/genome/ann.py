"""The dense index: every live gene's vector in a usearch HNSW graph, saved next to the genome.

Why usearch: it stores int8 vectors (384 bytes a gene: the genome's own int8 codes,
since cosine ignores each vector's scale), searches them exactly or approximately from
the same structure, removes keys in place, and saves/loads one file.
benchmarks/bench_ann.py measured it against hnswlib (float32 only: 4x the memory).

- Below `exact_below` live vectors a query scans them all (exact; ~1 ms at 20k);
  above it the HNSW graph answers (recall@100 against the exact scan is reported by
  benchmarks/bench_scale.py).
- The file `<genome>.ann` carries a JSON sidecar with the change-log sequence it holds;
  on open the log entries after it are replayed (genome/vectors.py). A missing, corrupt
  or foreign file is rebuilt from the genes table in batches.
- Replays run inside the query that finds the genome changed, at most `SYNC_BATCH`
  genes per query, so one query never pays for a whole ingest; until the rest is
  replayed the index may still return a gene that was retired, which retrieval drops
  (it reads every candidate's row anyway).
- Saved (temp file + os.replace) when `SAVE_EVERY` changes are pending and on close.
- Retention: a removed key leaves a tombstone in the graph; once removals since the last build
  pass `COMPACT_AFTER` and half the live count, the next load (server start) rebuilds it compact.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from helix_context.genome import vectors
from helix_context.genome.scan import scan_connection

log = logging.getLogger("helix.genome.ann")

FORMAT = 1
SYNC_BATCH = 20_000  # change-log entries replayed per query at most
SAVE_EVERY = 50_000  # pending changes that trigger a save during queries
OVERSAMPLE = 2  # graph candidates per wanted neighbour, rescored with the genome's own codes
REBUILD_AFTER = 100_000  # at start, more pending changes than this (and than the graph holds): build afresh
COMPACT_AFTER = 10_000  # removals (and at least half the live count) after which a load rebuilds the graph
CONNECTIVITY = 16
EXPANSION_ADD = 128
# search width, measured on 90k real code genes with 150 natural-language questions (recall@100
# against the exact scan / median ms): 160 → 0.936 / 0.6; 256 → 0.964 / 1.0; 384 → 0.980 / 1.3; 512 → 0.987 / 1.6
EXPANSION_SEARCH = 384


@dataclass(frozen=True)
class Hits:
    rowids: np.ndarray  # int64, best first
    similarities: np.ndarray  # float32 cosine
    exact: bool


def _usearch_index_class():  # noqa: ANN202
    """usearch's Index class, loaded after onnxruntime.

    Measured: creating an onnxruntime session in a process that loaded
    usearch.compiled first crashes (segfault, usearch 2.26 / onnxruntime 1.2x on
    Linux); with onnxruntime loaded first both work. The embedder may be loaded
    after the first search, so the order is fixed here.
    """
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        pass
    from usearch.index import Index

    return Index


def _new_index():  # noqa: ANN202 - usearch types are optional at import time
    return _usearch_index_class()(ndim=vectors.EMBED_DIM, metric="cos", dtype="i8", connectivity=CONNECTIVITY,
                 expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH)


def _as_float(codes: np.ndarray) -> np.ndarray:
    # usearch quantises floats to int8 as round(x * 127): hand it the codes scaled to [-1, 1]
    return codes.astype(np.float32) / 127.0


class VectorIndex:
    """One genome's dense index. Thread-safe; one per Genome object."""

    def __init__(self, genome_path: Path, connect: Callable[[], sqlite3.Connection],
                 trim: Callable[[int], None] | None = None) -> None:
        self.genome_path = Path(genome_path)
        self.path = Path(str(genome_path) + ".ann")
        self.meta_path = Path(str(genome_path) + ".ann.json")
        self._connect = connect
        self._trim = trim
        self._lock = threading.RLock()
        self._index = None
        self._seq = 0  # change-log position applied
        self._saved_seq = 0
        self._pending = 0  # changes applied since the last save
        self._removed = 0  # keys removed since the graph was built: removal leaves a tombstone in it
        self.rebuilds = 0  # times built from the genes table (tests and /health read it)

    # ── loading ──

    def _load(self, *, rebuild: bool = False) -> None:
        conn = self._connect()
        index, seq, removed = (None, 0, 0) if rebuild else self._read_file()
        first = vectors.first_change(conn)
        if index is not None and first is not None and first > seq + 1:
            log.warning("dense index %s is older than the change log kept (%d < %d): rebuilding", self.path, seq, first)
            index = None
        if index is not None and removed > max(COMPACT_AFTER, len(index) // 2):
            log.info("dense index %s: %d removals since it was built: rebuilding it compact", self.path, removed)
            index = None  # retention: tombstones never outgrow the live vectors for long
        if index is None:
            seq = vectors.last_change(conn)  # before the scan: what comes after is replayed, twice is harmless
            index = self._build()
            self._index, self._seq, self._saved_seq, self._pending, self._removed = index, seq, 0, 1, 0
            self.save()
            return
        self._index, self._seq, self._saved_seq, self._pending, self._removed = index, seq, seq, 0, removed

    def _read_file(self):  # noqa: ANN202
        try:
            meta = json.loads(self.meta_path.read_text())
            if meta.get("format") != FORMAT or meta.get("dim") != vectors.EMBED_DIM:
                return None, 0, 0
            index = _usearch_index_class().restore(str(self.path))
            if index is None or index.ndim != vectors.EMBED_DIM or len(index) != int(meta["count"]):
                raise ValueError(f"holds {None if index is None else len(index)} vectors, "
                                 f"its sidecar says {meta.get('count')}")
            index.expansion_search = EXPANSION_SEARCH
            return index, int(meta["seq"]), int(meta.get("removed", 0))
        except FileNotFoundError:
            return None, 0, 0
        except Exception as exc:  # noqa: BLE001 - any unreadable file is rebuilt, never fatal
            log.warning("dense index %s cannot be read (%s): rebuilding it from the genome", self.path, exc)
            return None, 0, 0

    def _build(self):  # noqa: ANN202
        """The graph of every live vector, read through a connection without the memory map (genome/scan.py)."""
        started = time.perf_counter()
        index = _new_index()
        total = 0
        conn = scan_connection(self.genome_path)
        try:
            for rowids, codes in vectors.iter_live_vectors(conn):
                index.add(rowids.astype(np.uint64), _as_float(codes))
                total += len(rowids)
        finally:
            conn.close()
        self.rebuilds += 1
        log.info("dense index %s: built from %d vectors in %.1f s", self.path, total, time.perf_counter() - started)
        return index

    # ── keeping in step ──

    def sync(self, *, batch: int | None = None, conn: sqlite3.Connection | None = None) -> None:
        """Replay the change log after what this index holds (at most `batch`, default SYNC_BATCH, entries)."""
        batch = SYNC_BATCH if batch is None else batch
        with self._lock:
            if self._index is None:
                self._load()
            conn = conn or self._connect()
            first = vectors.first_change(conn)
            if first is not None and first > self._seq + 1:
                self._index = None  # another process trimmed past us: its saved file is newer
                self._load()
            seq, rowids = vectors.changes_after(conn, self._seq, batch)
            if not rowids:
                return
            live_ids, codes = vectors.live_vectors_of(conn, rowids)
            keys = np.asarray(rowids, dtype=np.uint64)
            present = np.fromiter((k in self._index for k in rowids), dtype=bool, count=len(rowids))
            if present.any():
                self._index.remove(keys[present])
                self._removed += int(present.sum())
            if len(live_ids):
                self._index.add(live_ids.astype(np.uint64), _as_float(codes))
            self._seq = seq
            self._pending += len(rowids)
            if self._pending >= SAVE_EVERY:
                self.save()

    def warm(self) -> None:
        """Load the index and replay every pending change now (server start), not in the first queries."""
        with self._lock:
            if self._index is None:
                self._load()
            if vectors.last_change(self._connect()) - self._seq > max(REBUILD_AFTER, len(self._index)):
                # more changed than the graph holds (a big ingest by the CLI): building afresh is faster
                log.info("dense index %s: %d changes to replay: rebuilding it", self.path,
                         vectors.last_change(self._connect()) - self._seq)
                self._load(rebuild=True)
            scan = scan_connection(self.genome_path)  # the whole catch-up reads through no memory map (see _build)
            try:
                while True:
                    before = self._seq
                    self.sync(conn=scan)
                    if self._seq == before:
                        return
            finally:
                scan.close()

    def save(self) -> None:
        """Write the index and its sidecar atomically, then drop the log entries it now holds."""
        with self._lock:
            if self._index is None or self._pending == 0:
                return
            tmp = self.path.with_name(self.path.name + ".tmp")
            try:
                self._index.save(str(tmp))
                os.replace(tmp, self.path)
                meta = {"format": FORMAT, "dim": vectors.EMBED_DIM, "seq": self._seq, "count": len(self._index),
                        "removed": self._removed}
                tmp_meta = self.meta_path.with_name(self.meta_path.name + ".tmp")
                tmp_meta.write_text(json.dumps(meta))
                os.replace(tmp_meta, self.meta_path)
            except OSError as exc:  # full disk, read-only folder: the log keeps what the file lacks
                log.warning("dense index %s not saved (%s); it is rebuilt or replayed on the next start", self.path, exc)
                return
            self._saved_seq, self._pending = self._seq, 0
            if self._trim is not None:
                self._trim(self._seq)

    # ── queries ──

    def __len__(self) -> int:
        """Live vectors held, after replaying the changes not yet applied."""
        self.sync()
        with self._lock:
            return len(self._index)

    def search(self, query: np.ndarray, k: int, *, exact_below: int = 20_000, exact: bool | None = None,
               rescore: bool = True) -> Hits:
        """The `k` nearest live genes by cosine; exact under `exact_below` vectors (or when asked).

        usearch keeps cosine vectors as int8 of the *unit* vector, about 3-4 bits per
        dimension for MiniLM's flat vectors: good enough to find candidates, not to rank
        them. So `OVERSAMPLE`·k candidates are taken from it and rescored against the
        genome's own int8 codes (per-vector scale, full 8 bits) with the float query —
        the scores the exact scan of the genome gives. Retired genes drop out here too.
        """
        self.sync()
        with self._lock:
            n = len(self._index)
            if n == 0 or k <= 0:
                return Hits(np.zeros(0, np.int64), np.zeros(0, np.float32), True)
            use_exact = n < exact_below if exact is None else exact
            q = np.asarray(query, dtype=np.float32).reshape(-1)
            peak = float(np.max(np.abs(q))) or 1.0
            found = self._index.search(q / peak, min(k * (OVERSAMPLE if rescore else 1), n), exact=use_exact)
        keys = np.asarray(found.keys, dtype=np.int64)
        if not rescore:
            return Hits(keys, 1.0 - np.asarray(found.distances, dtype=np.float32), use_exact)
        ids, codes = vectors.live_vectors_of(self._connect(), keys.tolist())
        if len(ids) == 0:
            return Hits(np.zeros(0, np.int64), np.zeros(0, np.float32), use_exact)
        unit = codes.astype(np.float32)
        sims = (unit @ q) / (np.maximum(np.linalg.norm(unit, axis=1), 1e-9) * max(float(np.linalg.norm(q)), 1e-9))
        order = np.argsort(-sims, kind="stable")[:k]
        return Hits(ids[order], sims[order].astype(np.float32), use_exact)

    def describe(self, exact_below: int) -> dict:
        """What /health shows: how a query searches (exact scan or HNSW graph), vectors held, file size.

        Never waits: while the index is being loaded or rebuilt (server start on a big
        genome) it says "loading" instead of blocking the health check on the lock.
        """
        try:
            size = self.path.stat().st_size
        except OSError:
            size = 0
        info = {"file": str(self.path), "file_bytes": size, "threshold": exact_below}
        if not self._lock.acquire(blocking=False):
            return {**info, "status": "loading"}
        try:
            if self._index is None:
                return {**info, "status": "not loaded"}
            n = len(self._index)
            return {**info, "status": "ok", "kind": "exact" if n < exact_below else "hnsw", "vectors": n,
                    "memory_bytes": int(self._index.memory_usage), "pending_changes": self._pending}
        finally:
            self._lock.release()

    def close(self) -> None:
        with self._lock:
            try:
                if self._index is not None:
                    self.sync()  # the file then holds everything: the next start replays nothing
                self.save()
            except sqlite3.Error as exc:
                log.warning("dense index %s: change log not trimmed (%s)", self.path, exc)
            self._index = None
