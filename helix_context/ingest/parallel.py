"""Parse files on several cores while the main process reads and writes.

Chunking, tagging and fact extraction are pure Python and hold the GIL, so threads
cannot spread them over cores; worker processes can (plain subprocesses, so the same
code runs on Windows). With workers, the main process reads files and writes the
genome, and parses only a file no worker may take at that moment: on a big tree the
writes were ~40 % of its time, and a main process that parsed as well fell behind
and left the workers waiting for files (measured: 1.7 of 2 cores busy). Workers
pull: each keeps a few files in hand, the earliest it may take, and a finished file
brings it the next one at once (from its result thread), so no worker waits for the
main process to come round. Small ingests never start workers. Files that need the
NER model go to the first worker only (it loads the model when it meets such a
file: one more copy, ~100 MB, not one per core) or to the main process, where the
model is loaded already: a tree of prose (the kernel's 64 MB of documentation) is
then read on two cores, not one.

Results come back in file order, so the genome is written in the same order, and is
the same, whichever process parsed a file.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import IO, Any

from helix_context.config import Settings
from helix_context.genome.stored_form import StoredForm, stored_form
from helix_context.ingest.detect import detect_type
from helix_context.ingest.genes import TaggerLike, make_genes
from helix_context.ingest.tag import NER_CONTENT_TYPES  # NER runs on these: the main process and first worker
from helix_context.models import Gene, Provenance

log = logging.getLogger("helix.ingest")



@dataclass(frozen=True)
class ParseJob:
    path: str
    text: str
    project: str | None
    provenance: Provenance
    payload: Any = None  # the caller's own data for this file, carried back with the result


@dataclass
class Parsed:
    genes: list[Gene]
    forms: dict[str, StoredForm] = field(default_factory=dict)


def parse(job: ParseJob, settings: Settings, tagger: TaggerLike | None) -> Parsed:
    genes = make_genes(job.text, settings=settings, tagger=tagger, path=job.path, content_type=None,
                       project=job.project, provenance=job.provenance)
    team = bool(settings.genome.url)  # a team genome: the postings are tokenized here too, off the writer
    return Parsed(genes, {g.gene_id: stored_form(g.content, postings_for=("\n".join(g.tags), g.source_path) if team
                                                 else None) for g in genes})


def default_workers(configured: int) -> int:
    """Parse worker processes for `[ingest] workers` (processes that parse files): 1 = none, the
    main process parses; N >= 2 = N workers, the main process reads and writes; 0 = one per core
    (at most 8), none on a single core."""
    if configured > 0:
        return configured if configured >= 2 else 0
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return min(cores, 8) if cores >= 2 else 0


class WorkerGone(RuntimeError):
    """A parse worker exited or its pipe broke; the scheduler parses in-process from then on."""


class _Worker:
    """One `python -m helix_context.ingest.parse_worker` process, fed pickled jobs over a pipe.

    A plain subprocess rather than multiprocessing: a spawned multiprocessing child
    re-imports the caller's main script, which runs a script without a __main__ guard a
    second time. This process runs only the parse worker module. Jobs are written by a
    thread of their own, so `submit` never blocks on a full pipe (a worker still starting
    up reads nothing for ~0.1 s) and results are read by another.
    """

    def __init__(self, settings: Settings, tagger: TaggerLike | None) -> None:
        flags = getattr(subprocess, "CREATE_NO_WINDOW", 0)
        self.proc = subprocess.Popen([sys.executable, "-m", "helix_context.ingest.parse_worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, creationflags=flags)
        self._pending: deque[Future[Parsed]] = deque()
        self._lock = threading.Lock()  # guards _pending and _gone
        self._gone: WorkerGone | None = None
        self._frames: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        try:
            self._frames.put(pickle.dumps((settings, tagger), protocol=pickle.HIGHEST_PROTOCOL))
        except Exception as exc:  # an unpicklable tagger
            self.proc.kill()
            self.proc.wait()
            _close_pipes(self.proc.stdin, self.proc.stdout)
            raise WorkerGone(f"cannot start a parse worker: {type(exc).__name__}: {exc}") from exc
        self._writer = threading.Thread(target=self._write_jobs, name="helix-parse-jobs", daemon=True)
        self._reader = threading.Thread(target=self._read_results, name="helix-parse-results", daemon=True)
        self._writer.start()
        self._reader.start()

    @property
    def inflight(self) -> int:
        return len(self._pending)

    def submit(self, job: ParseJob) -> Future[Parsed]:
        future: Future[Parsed] = Future()
        # the payload stays here: it is the caller's, and unpickling it could import modules
        # (the genome store, numpy) that a worker has no use for
        frame = pickle.dumps(replace(job, payload=None), protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            if self._gone is not None:
                raise self._gone
            self._pending.append(future)
            self._frames.put(frame)
        return future

    def _write_jobs(self) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            while (frame := self._frames.get()) is not None:
                stdin.write(frame)
                stdin.flush()
            stdin.close()  # EOF: the worker finishes the job in hand and exits
        except (OSError, ValueError) as exc:
            self._fail_pending(WorkerGone(f"parse worker {self.proc.pid} cannot take work: {exc}"))

    def _read_results(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        try:
            while True:
                ok, value = pickle.load(stdout)
                with self._lock:
                    future = self._pending.popleft()
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)
        except Exception as exc:  # EOF, a broken pipe, an unreadable frame: this worker is done
            self._fail_pending(WorkerGone(f"parse worker {self.proc.pid} stopped ({type(exc).__name__}: {exc})"))

    def _fail_pending(self, gone: WorkerGone) -> None:
        with self._lock:
            self._gone = self._gone or gone
            pending, self._pending = list(self._pending), deque()
        for future in pending:
            if not future.done():
                future.set_exception(gone)

    def close(self) -> None:
        self._frames.put(None)
        self._writer.join(timeout=5)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=5)
        # this side of the pipes, where no thread still uses them (the reader's ends at the worker's
        # exit): unclosed, each is a descriptor per worker per ingest until the collector finds it
        _close_pipes(*(pipe for pipe, user in ((self.proc.stdin, self._writer), (self.proc.stdout, self._reader))
                       if not user.is_alive()))


def _close_pipes(*pipes: IO[bytes] | None) -> None:
    for pipe in pipes:
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


class ParsePool:
    """Parse worker processes, started on first use and kept for later ingests."""

    def __init__(self, settings: Settings, tagger: TaggerLike | None, workers: int) -> None:
        self.settings = settings
        self.tagger = tagger
        self.workers = workers
        self._procs: list[_Worker] = []

    @property
    def started(self) -> bool:
        return bool(self._procs)

    def start(self) -> None:
        """Start the worker processes now; they import the parser while the caller does other
        work (loading models), instead of at the first large ingest. Returns at once."""
        if not self._procs:
            self._procs = [_Worker(self.settings, self.tagger) for _ in range(self.workers)]

    def idle_workers(self, depth: int) -> list[tuple[_Worker, bool]]:
        """Workers with fewer than `depth` files in hand, fewest first, each with whether it may
        take files that need the NER model (the first worker only)."""
        able = [(w, i == 0) for i, w in enumerate(self._procs) if w.inflight < depth]
        return sorted(able, key=lambda pair: pair[0].inflight)

    def close(self) -> None:
        procs, self._procs = self._procs, []
        for worker in procs:
            worker.close()


@dataclass
class _Slot:
    job: ParseJob
    future: Future[Parsed] | None = None  # set when a worker took it
    result: Parsed | BaseException | None = None
    local: bool = False  # the main process took it
    prose: bool | None = None  # needs the NER model (worked out once, on first look)

    @property
    def free(self) -> bool:
        """Nobody has taken it yet."""
        return self.future is None and self.result is None and not self.local


class Scheduler:
    """Yields (job, Parsed or the exception its parse raised) in job order.

    The window of read-ahead files is shared with the workers' result threads, which
    hand a worker its next file the moment it returns one; `_lock` guards the window.
    """

    def __init__(self, pool: ParsePool | None, settings: Settings, tagger: TaggerLike | None, *,
                 start_after: int = 8, depth: int = 3) -> None:
        self.pool = pool if pool is not None and pool.workers > 0 else None
        self.settings = settings
        self.tagger = tagger
        self.start_after = start_after  # fewer waiting files than this: not worth starting workers
        # Files a worker holds: one being parsed, the rest already in its pipe, so it never
        # waits for this process (which holds the GIL for up to a switch interval) to send more.
        self.depth = depth
        # Files read ahead of the next write. Deep enough that the main process has files of its
        # own to parse while the workers start (~0.1-0.2 s) instead of waiting; bounded in bytes too:
        # a parsed file waiting for its turn weighs 3-5x its text (genes, packed and full-text forms),
        # and a run of large generated headers (the kernel's AMD register maps) filled a 32 MB window
        # with ~130 MB of results.
        self.window = max(start_after, 64) if self.pool else 1
        self.window_bytes = 8_000_000
        self._slots: deque[_Slot] = deque()
        self._lock = threading.RLock()
        self._failed: BaseException | None = None  # a worker failure seen on a result thread
        self._closed = False

    def run(self, jobs: Iterable[ParseJob]) -> Iterator[tuple[ParseJob, Parsed | BaseException]]:
        try:
            yield from self._run(jobs)
        finally:
            with self._lock:
                self._closed = True  # late results must not hand out more files

    def _run(self, jobs: Iterable[ParseJob]) -> Iterator[tuple[ParseJob, Parsed | BaseException]]:
        source = iter(jobs)
        window = self._slots
        exhausted = False
        held = 0  # characters of text in the window
        while True:
            while not exhausted and len(window) < self.window and held < self.window_bytes:
                job = next(source, None)
                if job is None:
                    exhausted = True
                else:
                    with self._lock:
                        window.append(_Slot(job))
                    held += len(job.text)
            if not window:
                return
            if self._failed is not None:
                self._broken(self._failed)
            try:
                self._feed()
            except (WorkerGone, OSError) as exc:
                self._broken(exc)
            head = window[0]
            if head.result is None and head.future is not None:
                if not head.future.done():
                    # prose only the first worker may take: while the head is parsed elsewhere,
                    # this process (the NER model loaded already) reads the next such file
                    prose = self._claim_local(self._needs_ner)
                    if prose is not None:
                        prose.result = self._parse_here(prose.job)
                        continue
                head.result = self._collect(head)
            if head.result is not None:
                with self._lock:
                    window.popleft()
                held -= len(head.job.text)
                yield head.job, head.result
                continue
            if self._claim_local(lambda s: s is head):  # noqa: B023 - called at once, inside this iteration; no worker could take it: this process parses it
                head.result = self._parse_here(head.job)

    def _feed(self) -> None:
        """Top every worker up to `depth` files, the earliest each may take."""
        with self._lock:
            pool = self.pool
            if pool is None or self._closed:
                return
            if not pool.started:
                if sum(1 for s in self._slots if self._for_pool(s, takes_prose=True)) < self.start_after:
                    return
                pool.start()
            while True:
                for worker, takes_prose in pool.idle_workers(self.depth):  # noqa: B007 - used after the break below
                    slot = next((s for s in self._slots if self._for_pool(s, takes_prose)), None)
                    if slot is not None:
                        break
                else:
                    return  # every worker has its fill, or nothing left that they may take
                slot.future = worker.submit(slot.job)
                slot.future.add_done_callback(self._refill)

    def _refill(self, _done: Future[Parsed]) -> None:
        # runs on a worker's result thread: a file came back, so hand out the next one now
        try:
            self._feed()
        except (WorkerGone, OSError) as exc:
            self._failed = exc  # the main loop stops using the workers

    def _for_pool(self, slot: _Slot, takes_prose: bool = False) -> bool:
        return slot.free and (takes_prose or not self._needs_ner(slot))

    def _needs_ner(self, slot: _Slot) -> bool:
        # by the type the parse will see, not the suffix: a Kconfig.debug or a README.ath9k read
        # as prose in any worker would load the NER model there too (another copy, ~100 MB)
        if slot.prose is None:
            slot.prose = (getattr(self.tagger, "ner_enabled", False) is not False
                          and detect_type(slot.job.path, slot.job.text)[0] in NER_CONTENT_TYPES)
        return slot.prose

    def _claim_local(self, wanted: Callable[[_Slot], bool]) -> _Slot | None:
        """The earliest file nobody has taken that `wanted` accepts, now this process's to parse."""
        with self._lock:
            slot = next((s for s in self._slots if s.free and wanted(s)), None)
            if slot is not None:
                slot.local = True
            return slot

    def _collect(self, slot: _Slot) -> Parsed | BaseException:
        assert slot.future is not None
        try:
            return slot.future.result()
        except WorkerGone as exc:
            self._broken(exc)
            return self._parse_here(slot.job)
        except Exception as exc:  # the parse itself failed in the worker: reported like a local failure
            return exc

    def _parse_here(self, job: ParseJob) -> Parsed | BaseException:
        try:
            return parse(job, self.settings, self.tagger)
        except Exception as exc:  # a parser bug on one file must not stop the ingest
            log.exception("failed to parse %s", job.path)
            return exc

    def _broken(self, exc: BaseException) -> None:
        with self._lock:
            pool, self.pool = self.pool, None
        self._failed = None
        if pool is not None:
            log.warning("parse workers stopped (%s); this ingest parses in the main process from here on", exc)
            pool.close()  # the next ingest starts fresh workers
