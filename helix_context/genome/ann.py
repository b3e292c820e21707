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
- Memory: the saved graph is memory-mapped read-only (usearch's view), not loaded: ~530 MB at
  1M genes that the OS pages in as searches touch them and may drop again, instead of process
  memory that stays. Changes since the file was written go to a small in-memory graph (the
  delta) and a set of file keys that left or changed; searches ask both. When the delta holds
  `MERGE_AT` changes it is folded into the file in a thread of its own, beside the queries (a
  copy of the graph loaded whole for that moment, written to a temp file, os.replace, mapped
  again; only that swap holds the lock); at server start and on close, in the caller's thread.
- Retention: a removed key leaves a tombstone in the graph; once removals since the last build
  pass `COMPACT_AFTER` and half the live count, the next load (server start) rebuilds it compact.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from helix_context.genome import vectors
from helix_context.genome.scan import scan_connection

log = logging.getLogger("helix.genome.ann")

FORMAT = 1
SYNC_BATCH = 20_000  # change-log entries replayed per query at most
MERGE_AT = 50_000  # changes held in memory (delta + file keys gone) that trigger a merge into the file
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


def _usearch_index_class() -> Any:  # usearch ships no type information
    """usearch's Index class, loaded after onnxruntime.

    Measured: creating an onnxruntime session in a process that loaded
    usearch.compiled first crashes (segfault, usearch 2.26 / onnxruntime 1.2x on
    Linux); with onnxruntime loaded first both work. The embedder may be loaded
    after the first search, so the order is fixed here.
    """
    try:
        import onnxruntime  # noqa: F401 - imported for its side effect: onnxruntime must load before usearch (see the docstring)
    except ImportError:
        pass
    from usearch.index import Index

    return Index


def _new_index() -> Any:  # a usearch Index (untyped)
    return _usearch_index_class()(ndim=vectors.EMBED_DIM, metric="cos", dtype="i8", connectivity=CONNECTIVITY,
                 expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH)


def _prefetch(path: Path) -> None:
    """Ask the OS to read the graph file into its page cache now (Linux; a hint elsewhere skipped).

    A mapped graph is paged in by the searches that touch it; after a restart, or when
    the OS had dropped the file, the first few hundred searches would each wait on disk.
    One sequential read-ahead at load costs ~1 s for 1M genes and keeps those waits out
    of queries. The pages stay the OS cache's: they enter the server's resident memory
    only as searches touch them, and can be dropped again under memory pressure.
    """
    if not hasattr(os, "posix_fadvise"):
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
    except OSError:
        pass
    finally:
        os.close(fd)


def _behind_the_log(conn: sqlite3.Connection, seq: int, first: int | None) -> bool:
    """Whether changes after `seq` were trimmed from the log (by a process whose file holds them)."""
    if first is not None:
        return first > seq + 1
    return vectors.last_change(conn) > seq  # an empty log: trimmed up to its newest entry


def _as_float(codes: np.ndarray) -> np.ndarray:
    # usearch quantises floats to int8 as round(x * 127): hand it the codes scaled to [-1, 1]
    return codes.astype(np.float32) / 127.0


class VectorIndex:
    """One genome's dense index: the mapped graph file plus an in-memory delta. Thread-safe; one per Genome."""

    def __init__(self, genome_path: Path, connect: Callable[[], sqlite3.Connection],
                 trim: Callable[[int], None] | None = None, *, model: int = 1) -> None:
        self.genome_path = Path(genome_path)
        self.model = model  # vector_models id: the index holds only this model's vectors (a file of another is rebuilt)
        self.path = Path(str(genome_path) + ".ann")
        self.meta_path = Path(str(genome_path) + ".ann.json")
        self._connect = connect
        self._trim = trim
        self._lock = threading.RLock()
        self._base: Any = None  # the graph as saved: a read-only map of the file (or in memory if it cannot be saved)
        self._mapped = False
        self._delta: Any = None  # vectors that appeared or changed since the file was written
        self._delta_keys: set[int] = set()
        self._gone: set[int] = set()  # keys of the file's graph that were removed or changed since
        self._seq = 0  # change-log position applied (file + delta)
        self._saved_seq = 0  # change-log position the file holds
        self._removed = 0  # tombstones in the file's graph (removals since it was built)
        self.rebuilds = 0  # times built from the genes table (tests and /health read it)
        self.merges = 0  # times the delta was folded into the file
        self._merging: threading.Thread | None = None  # a fold into the file running beside the queries

    # ── loading ──

    def _load(self, *, rebuild: bool = False) -> None:
        conn = self._connect()
        index, seq, removed = (None, 0, 0) if rebuild else self._read_file()
        first = vectors.first_change(conn)
        if index is not None and _behind_the_log(conn, seq, first):
            log.warning("dense index %s is older than the change log kept (%d < %s): rebuilding", self.path, seq, first)
            index = None
        if index is not None and removed > max(COMPACT_AFTER, len(index) // 2):
            log.info("dense index %s: %d removals since it was built: rebuilding it compact", self.path, removed)
            index = None  # retention: tombstones never outgrow the live vectors for long
        self._drop_base()
        self._delta, self._delta_keys, self._gone = _new_index(), set(), set()
        if index is None:
            seq = vectors.last_change(conn)  # before the scan: what comes after is replayed, twice is harmless
            full = self._build()
            self._seq = self._saved_seq = 0
            self._removed = 0
            self._install(full, seq)
            return
        self._base, self._mapped = index, True
        self._seq = self._saved_seq = seq
        self._removed = removed

    def _read_file(self) -> tuple[Any, int, int]:
        try:
            meta = json.loads(self.meta_path.read_text())
            if meta.get("format") != FORMAT or meta.get("dim") != vectors.EMBED_DIM:
                return None, 0, 0
            if meta.get("model", 1) != self.model:
                log.info("dense index %s holds another embedding model's vectors: rebuilding it", self.path)
                return None, 0, 0
            _prefetch(self.path)
            index = _usearch_index_class().restore(str(self.path), view=True)
            if index is None or index.ndim != vectors.EMBED_DIM or len(index) != int(meta["count"]):
                raise ValueError(f"holds {None if index is None else len(index)} vectors, "
                                 f"its sidecar says {meta.get('count')}")
            index.expansion_search = EXPANSION_SEARCH
            return index, int(meta["seq"]), int(meta.get("removed", 0))
        except FileNotFoundError:
            return None, 0, 0
        except Exception as exc:  # any unreadable file is rebuilt, never fatal
            log.warning("dense index %s cannot be read (%s): rebuilding it from the genome", self.path, exc)
            return None, 0, 0

    def _build(self) -> Any:
        """The graph of every live vector, read through a connection without the memory map (genome/scan.py)."""
        started = time.perf_counter()
        index = _new_index()
        total = 0
        conn = scan_connection(self.genome_path)
        try:
            for rowids, codes in vectors.iter_live_vectors(conn, self.model):
                index.add(rowids.astype(np.uint64), _as_float(codes))
                total += len(rowids)
        finally:
            conn.close()
        self.rebuilds += 1
        log.info("dense index %s: built from %d vectors in %.1f s", self.path, total, time.perf_counter() - started)
        return index

    def _drop_base(self) -> None:
        if self._base is not None and self._mapped:
            try:
                self._base.reset()  # unmaps the file (Windows cannot replace a mapped file)
            except Exception:  # an index already gone
                pass
        self._base, self._mapped = None, False

    def _tmp_path(self, *, fold: bool = False) -> Path:
        """Where a new graph file is written before it replaces the old: the fold beside the queries has a name
        of its own, since it writes outside the lock while a rebuild may write under it. Fixed names: a
        process that dies mid-write leaves one file that the next write replaces, not one per process."""
        return self.path.with_name(self.path.name + (".fold.tmp" if fold else ".tmp"))

    def _install(self, full: Any, seq: int, *, written: bool = False) -> None:
        """Write `full` (in memory, holding everything up to `seq`) to the file and map it instead.

        `written`: the caller already saved it to `_tmp_path(fold=True)` (the fold does, before the lock).
        If it cannot be written (full disk, read-only folder), it stays in memory as the
        base: nothing is lost, the change log keeps what the file lacks.
        """
        tmp = self._tmp_path(fold=written)
        try:
            if not written:
                full.save(str(tmp))
            self._drop_base()
            os.replace(tmp, self.path)
            meta = {"format": FORMAT, "dim": vectors.EMBED_DIM, "seq": seq, "count": len(full),
                    "removed": self._removed, "model": self.model}
            tmp_meta = self.meta_path.with_name(self.meta_path.name + ".tmp")
            tmp_meta.write_text(json.dumps(meta))
            os.replace(tmp_meta, self.meta_path)
            mapped = _usearch_index_class().restore(str(self.path), view=True)
            if mapped is None:
                raise OSError("the file just written cannot be mapped")
        except (OSError, RuntimeError) as exc:  # usearch reports a failed write (full disk, ...) as RuntimeError
            log.warning("dense index %s not saved (%s); it is rebuilt or replayed on the next start", self.path, exc)
            self._drop_base()
            self._base, self._mapped = full, False
            self._seq = max(self._seq, seq)
            return
        mapped.expansion_search = EXPANSION_SEARCH
        self._base, self._mapped = mapped, True
        self._seq = max(self._seq, seq)
        self._saved_seq = seq
        if self._trim is not None:
            self._trim(seq)

    # ── keeping in step ──

    def sync(self, *, batch: int | None = None, conn: sqlite3.Connection | None = None, merge: bool = True) -> None:
        """Replay the change log after what this index holds (at most `batch`, default SYNC_BATCH, entries);
        past MERGE_AT changes held, start folding them into the file beside the queries (unless `merge` is False:
        the caller folds them itself)."""
        batch = SYNC_BATCH if batch is None else batch
        with self._lock:
            if self._delta is None:
                self._load()
            conn = conn or self._connect()
            if _behind_the_log(conn, self._seq, vectors.first_change(conn)):
                self._load()  # another process trimmed past us: its saved file is newer
            seq, rowids = vectors.changes_after(conn, self._seq, batch)
            if not rowids:
                return
            live_ids, codes = vectors.live_vectors_of(conn, rowids, self.model)
            stale = [k for k in rowids if k in self._delta_keys]
            if stale:
                self._delta.remove(np.asarray(stale, dtype=np.uint64))
                self._delta_keys.difference_update(stale)
            if self._base is not None and len(self._base):
                self._gone.update(k for k in rowids if k not in self._gone and k in self._base)
            if len(live_ids):
                self._delta.add(live_ids.astype(np.uint64), _as_float(codes))
                self._delta_keys.update(live_ids.tolist())
            self._seq = seq
            if merge and len(self._delta_keys) + len(self._gone) >= MERGE_AT:
                self._merge_beside()

    def _merge(self, conn: sqlite3.Connection) -> None:
        """Fold the delta and the keys gone into the graph file (loaded whole for the moment it takes)."""
        if not self._delta_keys and not self._gone:
            return
        started = time.perf_counter()
        if self._mapped:
            full = self._file_copy(len(self._base))
            if full is None:  # replaced by another process: start from it
                self._load()
                return
        else:
            full = self._base if self._base is not None else _new_index()
        removed, added = self._fold_into(full, conn, sorted(self._delta_keys), self._gone)
        self._removed += removed
        self._delta, self._delta_keys, self._gone = _new_index(), set(), set()
        self._install(full, self._seq)
        self.merges += 1
        log.info("dense index %s: %d changes merged in %.1f s", self.path, removed + added,
                 time.perf_counter() - started)

    def _file_copy(self, count: int) -> Any:
        """The graph file loaded whole (not mapped), or None when it no longer holds `count` vectors."""
        full = _usearch_index_class().restore(str(self.path), view=False)
        if full is None or len(full) != count:
            return None
        full.expansion_search = EXPANSION_SEARCH
        return full

    def _fold_into(self, full: Any, conn: sqlite3.Connection, keys: list[int],
                   gone: Iterable[int]) -> tuple[int, int]:
        """Remove `gone` from `full` and add the genome's current codes of `keys`: (removed, added)."""
        drop = [k for k in gone if k in full]
        if drop:
            full.remove(np.asarray(drop, dtype=np.uint64))
        ids, codes = vectors.live_vectors_of(conn, keys, self.model)
        if len(ids):
            full.add(ids.astype(np.uint64), _as_float(codes))
        return len(drop), len(ids)

    def _merge_beside(self) -> None:
        """Fold the delta into the file in a thread of its own (lock held by the caller).

        Why: adding the held vectors to a copy of the graph takes seconds (50k changes: 7.6 s at 100k genes,
        docs/performance.md, "A model change"), and under the lock every query waited for it. Beside the queries,
        they go on searching the file and the delta; only installing the new file takes the lock. An index that
        lives in memory (its file could not be written) is folded in place, as before.
        """
        if self._merging is not None:
            return
        if not self._mapped or self._base is None:
            self._merge(self._connect())
            return
        snapshot = (self._seq, sorted(self._delta_keys), sorted(self._gone), len(self._base), self._saved_seq)
        self._merging = threading.Thread(target=self._fold, args=snapshot, name="helix-ann-merge", daemon=True)
        self._merging.start()

    def _fold(self, seq: int, keys: list[int], gone: list[int], count: int, saved: int) -> None:
        """The background half of `_merge_beside`: build from the file as of `seq`, then install unless overtaken."""
        started = time.perf_counter()
        conn = scan_connection(self.genome_path)
        try:
            stamp = self._file_stamp()
            full = self._file_copy(count)
            if full is None:  # another process replaced the file: start from its file
                with self._lock:
                    if self._delta is not None and self._saved_seq == saved:
                        self._load()
                return
            removed, added = self._fold_into(full, conn, keys, gone)
            written = self._save_beside(full)  # the slow write (~400 MB at 1M genes) before the lock, too
            with self._lock:
                if self._delta is None or self._saved_seq != saved:  # closed, reloaded or saved meanwhile
                    return
                if self._file_stamp() != stamp:  # another process wrote a newer file meanwhile: never overwrite it
                    self._load()
                    return
                self._removed += removed
                self._install(full, seq, written=written)
                # what changed after the snapshot was applied to the delta being dropped: the next sync replays it
                self._delta, self._delta_keys, self._gone = _new_index(), set(), set()
                self._seq = seq
                self.merges += 1
            log.info("dense index %s: %d changes merged in %.1f s, beside the queries", self.path,
                     removed + added, time.perf_counter() - started)
        except Exception as exc:  # the delta stays in memory and the change log keeps it: nothing is lost
            log.warning("dense index %s: merge failed (%s); the changes stay in memory", self.path, exc)
        finally:
            conn.close()
            with self._lock:
                self._merging = None
                with contextlib.suppress(OSError):  # saved but not installed (overtaken, closed)
                    self._tmp_path(fold=True).unlink(missing_ok=True)

    def _save_beside(self, full: Any) -> bool:
        """Save `full` to the fold's temporary file; False when it cannot be (`_install` then tries again and,
        failing too, keeps the index in memory)."""
        try:
            full.save(str(self._tmp_path(fold=True)))
        except (OSError, RuntimeError) as exc:  # as in _install
            log.debug("dense index %s: not saved beside the queries (%s)", self.path, exc)
            return False
        return True

    def _file_stamp(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def wait_for_merge(self, timeout: float | None = None) -> None:
        """Until a fold running beside the queries is done (close, tests)."""
        thread = self._merging
        if thread is not None:
            thread.join(timeout)

    def warm(self) -> None:
        """Load the index, replay every pending change and fold it into the file (server start)."""
        with self._lock:
            if self._delta is None:
                self._load()
            behind = vectors.last_change(self._connect()) - self._seq
            if behind > max(REBUILD_AFTER, self.held()):
                # more changed than the graph holds (a big ingest by the CLI): building afresh is faster
                log.info("dense index %s: %d changes to replay: rebuilding it", self.path, behind)
                self._load(rebuild=True)
            scan = scan_connection(self.genome_path)  # the whole catch-up reads through no memory map
            try:
                while True:
                    before = self._seq
                    self.sync(conn=scan, merge=False)  # folded once below, in this thread
                    if self._seq == before:
                        break
                self._merge(scan)
            finally:
                scan.close()

    def save(self) -> None:
        """Fold what is held in memory into the file (which trims the change log it now holds)."""
        with self._lock:
            if self._delta is not None:
                self._merge(self._connect())

    # ── queries ──

    def held(self) -> int:
        """Live vectors held now, without replaying what changed since."""
        with self._lock:
            base = len(self._base) if self._base is not None else 0
            return base - len(self._gone) + len(self._delta_keys)

    def __len__(self) -> int:
        """Live vectors held, after replaying the changes not yet applied."""
        self.sync()
        return self.held()

    def search(self, query: np.ndarray, k: int, *, exact_below: int = 20_000, exact: bool | None = None,
               rescore: bool = True) -> Hits:
        """The `k` nearest live genes by cosine; exact under `exact_below` vectors (or when asked).

        usearch keeps cosine vectors as int8 of the *unit* vector, about 3-4 bits per
        dimension for MiniLM's flat vectors: good enough to find candidates, not to rank
        them. So `OVERSAMPLE`·k candidates are taken from it and rescored against the
        genome's own int8 codes (per-vector scale, full 8 bits) with the float query —
        the scores the exact scan of the genome gives. Retired genes drop out here too.
        Candidates come from the file's graph (less the keys gone since) and the delta.
        """
        self.sync()
        with self._lock:
            n = self.held()
            if n <= 0 or k <= 0:
                return Hits(np.zeros(0, np.int64), np.zeros(0, np.float32), True)
            use_exact = n < exact_below if exact is None else exact
            q = np.asarray(query, dtype=np.float32).reshape(-1)
            peak = float(np.max(np.abs(q))) or 1.0
            want = min(k * (OVERSAMPLE if rescore else 1), n)
            keys_parts: list[np.ndarray] = []
            dist_parts: list[np.ndarray] = []
            for index, extra in ((self._base, len(self._gone)), (self._delta, 0)):
                if index is None or len(index) == 0:
                    continue
                found = index.search(q / peak, min(want + min(extra, want), len(index)), exact=use_exact)
                keys = np.asarray(found.keys, dtype=np.int64)
                dist = np.asarray(found.distances, dtype=np.float32)
                if extra:
                    keep = np.fromiter((int(x) not in self._gone for x in keys), dtype=bool, count=len(keys))
                    keys, dist = keys[keep], dist[keep]
                keys_parts.append(keys)
                dist_parts.append(dist)
        keys = np.concatenate(keys_parts) if keys_parts else np.zeros(0, np.int64)
        dist = np.concatenate(dist_parts) if dist_parts else np.zeros(0, np.float32)
        if not rescore:
            order = np.argsort(dist, kind="stable")[:k]
            return Hits(keys[order], 1.0 - dist[order], use_exact)
        ids, codes = vectors.live_vectors_of(self._connect(), list(dict.fromkeys(keys.tolist())), self.model)
        if len(ids) == 0:
            return Hits(np.zeros(0, np.int64), np.zeros(0, np.float32), use_exact)
        unit = codes.astype(np.float32)
        sims = (unit @ q) / (np.maximum(np.linalg.norm(unit, axis=1), 1e-9) * max(float(np.linalg.norm(q)), 1e-9))
        order = np.argsort(-sims, kind="stable")[:k]
        return Hits(ids[order], sims[order].astype(np.float32), use_exact)

    def describe(self, exact_below: int) -> dict[str, Any]:
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
            if self._delta is None:
                return {**info, "status": "not loaded"}
            n = self.held()
            return {**info, "status": "ok", "kind": "exact" if n < exact_below else "hnsw", "vectors": n,
                    "file_mapped": self._mapped, "in_memory_changes": len(self._delta_keys) + len(self._gone)}
        finally:
            self._lock.release()

    def close(self) -> None:
        self.wait_for_merge()
        with self._lock:
            try:
                if self._delta is not None:
                    self.sync(merge=False)  # the file then holds everything: the next start replays nothing
                    self.save()
            except sqlite3.Error as exc:
                log.warning("dense index %s: change log not trimmed (%s)", self.path, exc)
            self._drop_base()
            self._delta, self._delta_keys, self._gone = None, set(), set()
