"""The backend's living index: every source indexed at once, watched, and kept fresh.

One worker thread does all the indexing, through the same ingest as `helix
ingest` (HelixContextManager.ingest_path), so the backend stays the genome's
one writer and a watched file becomes exactly the genes a manual ingest would
make. Watchers only hand over paths; work is kept per source and merged, so a
burst that arrives while a folder is being indexed is one more batch, not
hundreds.

Kinds of work, per source (merged while waiting):
  forget  – retire the folder's genes and drop it from the list (`remove --forget`)
  full    – an incremental pass over the whole folder (added, start, resume, a folder
            appeared or was renamed inside it): unchanged files cost a stat
  paths   – the changed files of a burst: re-ingested, or retired when gone

Polling (network drives) sees a file's modification time to the second only: the
files indexed in the second they were written are looked at again (rechecks.py).

On a team genome a source whose checkout is on another branch than the one the team
genome follows is held back: nothing of it is written (branch.py says why), and the
worker's timer looks at its checkout again until it is back.

Pausing stops the watchers and interrupts the running ingest between two files
(what was written stays); resuming restarts the watchers and queues a full pass
per source, which catches up on whatever changed meanwhile.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helix_context.config import Settings
from helix_context.genome import sources_sql
from helix_context.genome.storage import GenomeStore
from helix_context.errors import GenomeError, SourceNotFound
from helix_context.genome.pg.link import TeamGenomeUnreachable
from helix_context.ingest.pipeline import IngestReport, find_project
from helix_context.sources.branch import BranchGate
from helix_context.sources.filters import PathFilter, confined
from helix_context.sources.projects import assign, check_project_name, ensure_projects
from helix_context.sources.names import SourceNames
from helix_context.sources.rechecks import Rechecks
from helix_context.sources.registry import find, inside_folder, resolve_folder
from helix_context.sources.summary import IndexState, disk_full_reason, no_space, summary_line
from helix_context.sources.watcher import FolderWatcher
from helix_context.sources.work import Indexer, Interrupted, Progress, Work
from helix_context.weigh import Packet, PacketItem

log = logging.getLogger("helix.sources")

_GONE = "does not exist"
CLAIM_RETRY_S = 5.0  # a folder another backend of the team genome is indexing: asked for again this much later


class SourcesService:
    """The living index. Built before the manager (which annotates packets through it) and started
    with the manager as its Indexer, so neither sets anything on the other."""

    def __init__(self, genome: GenomeStore, settings: Settings) -> None:
        self.genome = genome
        self.settings = settings
        self.cfg = settings.sources
        self._indexer: Indexer | None = None  # given by start()
        self._cond = threading.Condition()
        self._work: dict[str, Work] = {}
        self._watchers: dict[str, FolderWatcher] = {}
        self._watch_lock = threading.RLock()  # watchers start and stop from request threads and the worker
        self._filters: dict[str, PathFilter] = {}
        self._skips: dict[str, dict[str, str]] = {}
        self._missing: set[str] = set()
        self._lost: dict[str, tuple[int, str]] = {}  # source → (which loss, why): cleared when its rescan ends
        self._losses = 0
        self._failed: dict[str, str] = {}  # source → why its last pass failed, kept here: recording it may fail too
        self._cancel: set[str] = set()
        self._progress = Progress()
        self._paused = self.genome.sources_paused()
        self._stopping = False
        self._busy = False
        self._thread: threading.Thread | None = None
        self._rechecks = Rechecks(genome, self.cfg)  # polling: files to stat again
        self._branches = BranchGate(team=self.names().team, follow=self.cfg.follow_branch,
                                    every_s=self.cfg.missing_check_s)  # a team genome follows one branch
        self._known: set[str] = set()  # the sources this backend took up (queued, watched)
        self.batches = 0  # bursts handed over by the watchers (benchmarks, tests)
        self.ignored_events = 0  # events dropped by the filter before anything was queued

    # ── life cycle ──

    def start(self, indexer: Indexer) -> None:
        """Apply changes recorded while no backend ran, queue a reconciling pass per source, start watching."""
        self._indexer = indexer
        ensure_projects(self.genome)  # sources recorded before projects were required get one
        names = self.names()
        for row in self.genome.list_sources():
            self._skips[row.path] = {s.get("path", ""): s.get("reason", "") for s in row.skipped}
            if row.pending == "forget":
                self._queue(row.path, Work(forget=True))
                continue
            if names.folder(row.path) is None:  # not on this machine (names.py): the list says how to map it
                continue
            self._take_up(row.path)
        self._thread = threading.Thread(target=self._worker, name="helix-sources", daemon=True)
        self._thread.start()

    def names(self) -> SourceNames:
        """This machine's naming of sources (a team genome: its root map, read afresh: no restart after a map)."""
        return SourceNames.of(self.settings)

    def _index(self) -> Indexer:
        if self._indexer is None:
            raise RuntimeError("SourcesService.start(indexer) was not called")  # a bug in the caller
        return self._indexer

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cancel.update(self._work)
            if self._progress.source:
                self._cancel.add(self._progress.source)
            self._cond.notify_all()
        for watcher in list(self._watchers.values()):
            watcher.stop()
        self._watchers.clear()
        if self._thread is not None:
            self._thread.join(timeout=30)

    # ── user actions ──

    def add(self, raw: str, project: str | None = None) -> dict[str, Any]:
        project = check_project_name(project)
        path = resolve_folder(raw, home=self.settings.home, absolute_only=True)
        key = self.names().key(path)  # a team genome: `@ROOT/rel`, refused outside the mapped roots (names.py)
        self.genome.add_source(key, project or None, time.time())
        assign(self.genome, key, project, local=path)
        row = self.genome.get_source(key)
        assert row is not None
        with self._cond:
            self._cancel.discard(key)
            self._missing.discard(key)
        self._skips.setdefault(key, {})
        self._take_up(key)
        return self._describe(row)

    def remove(self, raw: str, *, forget: bool = False) -> dict[str, Any]:
        row = find(self.genome, raw, self.names())
        if row is None:
            raise SourceNotFound(f"{raw} is not a source; GET /sources (or `helix sources list`) shows them")
        key = row.path
        self._drop(key)
        if forget:
            self.genome.set_source_pending(key, "forget")
            self.genome.set_source_state(key, "removing")
            self._queue(key, Work(forget=True))
        else:
            self.genome.delete_source(key)
            self._skips.pop(key, None)
        return {"path": key, "removed": not forget, "forget": forget,
                "detail": "its genes are being retired" if forget else "no longer watched; its genes stay"}

    def pause(self) -> dict[str, Any]:
        self.genome.set_sources_paused(True)
        with self._cond:
            self._paused = True
            if self._progress.source:
                self._cancel.add(self._progress.source)
            self._cond.notify_all()
        for key in list(self._watchers):
            self._unwatch(key)
        return self.status()

    def resume(self) -> dict[str, Any]:
        self.genome.set_sources_paused(False)
        with self._cond:
            self._paused = False
        names = self.names()
        for row in self.genome.list_sources():
            if row.pending == "forget" or names.folder(row.path) is None:
                continue
            self._take_up(row.path)  # catch up on what changed while paused
        return self.status()

    # ── what the tray, the dashboard and the CLI show ──

    def status(self) -> dict[str, Any]:
        with self._cond:
            progress = Progress(self._progress.source, self._progress.done, self._progress.total,
                                self._progress.kind)
            queued = [k for k, w in self._work.items() if not w.forget]
            busy = self._busy
        known = set(self._known)
        rows = self.genome.list_sources()
        names = self.names()
        self._follow_sources_table(rows, names, known)
        sources = [self._describe(row, progress, names) for row in rows]
        summary = summary_line(IndexState(
            self._paused, bool(busy and progress.source), progress.done, progress.total, len(queued),
            len(self._lost), any(no_space(why) for why in self._failed.values()), sources))
        return {
            "paused": self._paused,
            "indexing": bool(busy or queued),
            "summary": summary,
            "disk_full": self.genome.disk_full or any(no_space(why) for why in self._failed.values()),
            # the one count of indexed items (live genes): /stats, /health, the dashboard and the tray show it too
            "indexed_genes": self.genome.live_gene_count(),
            "progress": {"source": progress.source, "done": progress.done, "total": progress.total,
                         "kind": progress.kind} if busy else None,
            "queued": queued,
            "watch": self.cfg.watch,
            "force_polling": self.cfg.force_polling,
            "sources": sources,
        }

    def _follow_sources_table(self, rows: list[sources_sql.SourceRow], names: SourceNames, known: set[str]) -> None:
        """The sources table is written by others too: a team genome's by every backend, any genome's by `helix
        import` (the export's sources). When this backend next reads it (`helix sources map` and `helix import`
        make it read, the tray and the dashboard poll it), a source added elsewhere or newly mapped here is taken
        up, and one removed elsewhere or unmapped here is dropped. `known`: taken up before `rows` were read (one
        added since stays)."""
        if self._stopping:
            return
        here = {row.path for row in rows if row.pending is None and names.folder(row.path) is not None}
        for key in sorted(known - here):
            log.info("%s is no longer a source here (removed by another backend, or its root unmapped)", key)
            self._drop(key)
        if self._paused:
            return
        for row in rows:
            if row.path in here and row.path not in self._known:
                self._take_up(row.path)

    def _take_up(self, key: str) -> None:
        """Index a source here from now on: one full pass to reconcile it, and its watcher unless paused."""
        self._known.add(key)
        self._queue(key, Work(full=True))
        if not self._paused:
            self._watch(key)

    def _drop(self, key: str) -> None:
        """Stop watching and indexing a source here; its genes and its row are left as they are."""
        self._known.discard(key)
        self._unwatch(key)
        self._branches.forget(key)
        with self._cond:
            self._work.pop(key, None)
            self._lost.pop(key, None)
            self._missing.discard(key)
            if self._progress.source == key:
                self._cancel.add(key)

    def _describe(self, row: sources_sql.SourceRow, progress: Progress | None = None,
                  names: SourceNames | None = None) -> dict[str, Any]:
        data = sources_sql.as_dict(row)
        key = row.path
        names = names or self.names()
        folder = names.folder(key)
        data["folder"] = None if folder is None else str(folder)  # where it is on this machine
        if (branch := self._branches.last(key)) is not None:  # a team genome: the branch it follows (branch.py)
            data["branch"] = {"name": branch.branch, "follows": branch.followed, "note": branch.why}
        if folder is None and row.state != "removing":
            data["state"], data["last_error"] = "unmapped", names.why_not_here(key)
        elif row.state != "removing":
            if key in self._lost:
                data["catching_up"] = self._lost[key][1]
            if branch is not None and self._branches.holds(key):  # nothing of it is written from here
                data["state"], data["last_error"] = "other_branch", branch.why
            elif key in self._failed:  # shown even when the genome could not record it (a full disk)
                data["state"], data["last_error"] = "error", self._failed[key]
            elif key in self._missing:
                data["state"] = "missing"
                data["last_error"] = f"folder not found: looked for again every {self.cfg.missing_check_s:g} s"
            elif self._paused:
                data["state"] = "paused"
            elif progress is not None and progress.source == key:
                data["state"] = "indexing"
            elif key in self._work:
                data["state"] = "queued"
        watcher = self._watchers.get(key)
        data.update({"watching": False, "polling": False, "watch_failed": False} if watcher is None else
                    watcher.describe(missing=key in self._missing, last_error=data.get("last_error")))
        if progress is not None and progress.source == key:
            data["progress"] = {"done": progress.done, "total": progress.total}
        return data

    def annotate(self, packet: Packet) -> Packet:
        """Items of a watched folder whose file changed on disk say that the watcher is replacing them
        (or that indexing is paused); they are never `verified` (weigh.py's live check sees the change)."""
        roots = [key.rstrip("/\\") + os.sep for key in self._watchers
                 if key not in self._missing and not self._branches.holds(key)]
        if not roots and not self._paused:
            return packet
        if self._paused:
            roots = [r.path.rstrip("/\\") + os.sep for r in self.genome.list_sources()]
            note = "its folder is watched, but indexing is paused: resume indexing to refresh it"
        else:
            note = (f"its folder is watched: the new text replaces this within about "
                    f"{(self.cfg.debounce_ms + 1000) / 1000:g} s")

        def mark(item: PacketItem) -> PacketItem:
            if item.verdict != "needs_refresh" or not item.source_id or not item.source_id.startswith(tuple(roots)):
                return item
            return dataclasses.replace(item, reason=f"{item.reason}; {note}")

        return dataclasses.replace(packet, stale_risk=tuple(map(mark, packet.stale_risk)))

    def wait_idle(self, timeout: float) -> bool:
        """True once nothing is queued or running (tests and benchmarks)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._work or self._busy:
                left = deadline - time.monotonic()
                if left <= 0 or (self._paused and not self._busy):
                    return not (self._work or self._busy)
                self._cond.wait(min(left, 0.05))
        return True

    def wait_watching(self, timeout: float) -> bool:
        """True once every watcher has its OS watch in place."""
        deadline = time.monotonic() + timeout
        for watcher in list(self._watchers.values()):
            if not watcher.ready.wait(max(0.0, deadline - time.monotonic())):
                return False
        return True

    # ── watchers ──

    def _watch(self, key: str) -> None:
        with self._watch_lock:
            if not self.cfg.watch or self._stopping or self._paused:
                return
            current = self._watchers.get(key)
            if current is not None and current.alive:
                return
            root = self.names().folder(key)
            if root is None:  # a shared root not mapped on this machine
                return
            filt = PathFilter(root, self.settings.ingest, never=[self.settings.home])
            self._filters[key] = filt

            def wanted(path: str) -> bool:
                if filt.wanted(path):
                    return True
                self.ignored_events += 1
                return False

            watcher = FolderWatcher(root, self.cfg, wanted=wanted, on_changes=self._on_changes,
                                    on_missing=self._on_missing, on_back=self._on_back, on_lost=self._on_lost,
                                    key=key)
            self._watchers[key] = watcher
            watcher.start()

    def _unwatch(self, key: str) -> None:
        with self._watch_lock:
            watcher = self._watchers.pop(key, None)
            self._filters.pop(key, None)
        if watcher is not None:
            watcher.stop()

    def _on_changes(self, key: str, paths: set[str]) -> None:
        self.batches += 1
        # a changed .gitignore may bring files in: one pass over the folder applies the new rules
        full = any(Path(p).name == ".gitignore" for p in paths)
        self._queue(key, Work(full=full, paths=paths))

    def _on_missing(self, key: str) -> None:
        with self._cond:
            self._missing.add(key)
        self._queue(key, Work(full=True))  # the pass sees the folder gone and retires its files

    def _on_lost(self, key: str, reason: str) -> None:
        """File events were lost (watcher.py): a full pass compares the folder with the index at once."""
        with self._cond:
            self._losses += 1
            self._lost[key] = (self._losses, reason)
        self._queue(key, Work(full=True))

    def _on_back(self, key: str) -> None:
        with self._cond:
            self._missing.discard(key)
        self._queue(key, Work(full=True))

    # ── the worker ──

    def _queue(self, key: str, work: Work) -> None:
        with self._cond:
            if self._stopping:
                return
            if key in self._work:
                self._work[key].merge(work)
            else:
                self._work[key] = work
            self._cond.notify_all()

    def _next(self) -> tuple[str, Work] | None:
        with self._cond:
            while True:
                if self._stopping:
                    return None
                ready = [k for k, w in self._work.items() if w.forget or not self._paused]
                if ready:
                    key = next((k for k in ready if self._work[k].forget), ready[0])
                    self._busy = True
                    self._cancel.discard(key)
                    return key, self._work.pop(key)
                due = min((d for d in (self._rechecks.due(), self._branches.due()) if d is not None), default=None)
                if due is not None and not self._paused:
                    wait = due - time.monotonic()
                    if wait <= 0:
                        self._queue_due()
                        continue
                    self._cond.wait(wait)
                else:
                    self._cond.wait()

    def _queue_due(self) -> None:
        """Under the lock: polling's files to stat again, and held-back sources whose checkout is back."""
        now = time.monotonic()
        for key, changed in self._rechecks.take(now=now, names=self.names()).items():
            self._work.setdefault(key, Work()).paths |= changed
        for key in self._branches.returned(now=now):
            self._work.setdefault(key, Work()).full = True  # one pass reconciles what changed meanwhile

    def _worker(self) -> None:
        while (job := self._next()) is not None:
            key, work = job
            try:
                self._run(key, work)
            except Interrupted:
                with self._cond:
                    cancelled = key in self._cancel
                if not cancelled and not self._stopping:
                    self._queue(key, work)  # paused: picked up again on resume
            except TeamGenomeUnreachable as exc:  # the change waits for the server, not for the next edit
                self._retry(key, work, f"the team genome is unreachable ({exc})")
            except (GenomeError, OSError) as exc:
                log.warning("indexing %s failed: %s", key, exc)
                self._failed[key] = disk_full_reason(self.genome.path, exc) or f"{exc}"
                self._set_state(key, "error", self._failed[key])
            except Exception as exc:  # one folder's failure must not stop the others
                log.exception("indexing %s failed", key)
                self._set_state(key, "error", f"{type(exc).__name__}: {exc}")
            finally:
                with self._cond:
                    self._busy = False
                    self._progress = Progress()
                    self._cond.notify_all()

    def _set_state(self, key: str, state: str, error: str | None = None) -> None:
        try:
            self.genome.set_source_state(key, state, last_error=error)
        except GenomeError as exc:
            log.warning("could not record the state of %s: %s", key, exc)

    def _run(self, key: str, work: Work) -> None:
        if work.forget:
            self._forget(key)
            return
        row = self.genome.get_source(key)
        if row is None or row.pending == "forget":  # being forgotten (by another backend, on a team genome)
            return
        names = self.names()
        folder = names.folder(key)
        if folder is None:  # its root was unmapped here since: never "missing" (that would retire the team's files)
            log.info("%s is not indexed on this machine: %s", key, names.why_not_here(key))
            return
        admitted = self._branches.admit(key=key, folder=folder)  # a team genome: its followed branch only
        if admitted == "hold":  # nothing written, nothing retired: the timer looks again
            return
        work.full |= admitted == "resume"  # back on it: one pass reconciles what changed meanwhile
        with self.genome.claim_source(key) as claim:
            if not claim.held:  # a team genome: another backend indexes this folder now; look again later
                self._retry(key, work)
                return
            self._run_claimed(key, folder, row, work, names)

    def _retry(self, key: str, work: Work, why: str = "it is being indexed by another backend") -> None:
        log.info("%s: %s; trying again in %.0f s", key, why, CLAIM_RETRY_S)
        retry = threading.Timer(CLAIM_RETRY_S, self._queue, (key, work))
        retry.daemon = True
        retry.start()

    def _run_claimed(self, key: str, root: Path, row: sources_sql.SourceRow, work: Work, names: SourceNames) -> None:
        """`key` as stored, `root` the folder on this machine (the same on a SQLite genome)."""
        if not root.is_dir():
            self._vanished(key)
            return
        if work.full or any(Path(p).is_dir() for p in work.paths):
            # a folder appeared, or was renamed, inside the source: one pass applies every rule of the walk
            self._full(key, root, row.project)
        else:
            self._paths(key, root, row.project, work.paths, names)

    def _progress_cb(self, key: str, root: Path, kind: str, offset: int = 0, total: int | None = None
                     ) -> Callable[[int, int, str], None]:
        def progress(index: int, count: int, _path: str) -> None:
            with self._cond:
                if key in self._cancel or self._paused or self._stopping:
                    raise Interrupted()
                self._progress = Progress(key, offset + index, total if total is not None else count, kind)
            if self._branches.moved(key=key, folder=root):  # a team genome: a checkout switched under the pass
                raise Interrupted()  # queued again: admit waits for git, then holds or indexes
        return progress

    def _full(self, key: str, root: Path, project: str | None) -> None:
        with self._cond:
            self._progress = Progress(key, 0, 0, "full")
        self._set_state(key, "indexing", None)
        with self._cond:
            lost = self._lost.get(key)
        report = self._index().ingest_path(root, project=project, progress=self._progress_cb(key, root, "full"))
        with self._cond:
            if self._lost.get(key) == lost:  # events lost during this pass ask for one more
                self._lost.pop(key, None)
        self._skips[key] = {s["path"]: s["reason"] for s in report.files_skipped if not s["reason"].startswith(_GONE)}
        self._record(key, report)
        self._rechecks.schedule(key=key, paths=set(), names=self.names())  # the worker's next wait sees it

    def _paths(self, key: str, root: Path, project: str | None, paths: set[str], names: SourceNames) -> None:
        """The watcher's changed files (paths on this machine; stored under `names.stored` of each)."""
        files: list[str] = []
        skips = self._skips.setdefault(key, {})
        for raw in sorted(paths):
            path = Path(raw)
            stored = names.stored(raw)
            if path.exists() and not confined(root, path, follow_symlinks=self.settings.ingest.follow_symlinks):
                # a symlink (to ~/.ssh, to /etc …) is never followed unless [ingest] follow_symlinks says so,
                # exactly as the walk does; a file it replaced retires, and the folder's list shows the link
                if self.genome.file_record(stored) is not None:
                    self.genome.retire_source(stored)
                skips[raw] = "symlink not followed ([ingest] follow_symlinks = false)"
                continue
            if path.exists() or self.genome.file_record(stored) is not None:
                files.append(raw)
            else:  # a folder that was deleted or renamed away: each file it held retires
                skips.pop(raw, None)  # a skipped file deleted is no longer skipped
                files.extend(local for p in self.genome.paths_under(stored) if (local := names.local(p)))
        if not files:
            if paths:  # counts and the skipped list follow what was retired or refused
                self._record(key, IngestReport())
            return
        groups: dict[str | None, list[str]] = {}
        for raw in dict.fromkeys(files):
            name = project or find_project(Path(raw), root)
            groups.setdefault(name, []).append(raw)
        total = sum(len(g) for g in groups.values())
        if total >= 8 and not self.settings.embedding.enabled:
            self._index().start_parse_workers()  # a checkout without embeddings: parsed on every core
        done = 0
        last: IngestReport | None = None
        with self._cond:
            self._progress = Progress(key, 0, total, "changes")
        for group_project, group in groups.items():
            # each event is judged like a file met in the walk: no link out of the folder, read safely
            last = self._index().ingest_path(group, project=group_project, confine_to=[root],
                                          progress=self._progress_cb(key, root, "changes", done, total))
            done += len(group)
            for raw in group:
                skips.pop(raw, None)
            for item in last.files_skipped:
                if not item["reason"].startswith(_GONE):
                    skips[item["path"]] = item["reason"]
        if last is not None:
            self._record(key, last)
        self._rechecks.schedule(key=key, paths=set(files), names=names)

    def _record(self, key: str, report: IngestReport) -> None:
        self._failed.pop(key, None)
        skips = self._skips.get(key, {})
        state = "watching" if self.cfg.watch else "indexed"
        self.genome.record_source_index(key, at=time.time(),
                                 skipped=[{"path": p, "reason": r} for p, r in sorted(skips.items())],
                                 skipped_total=len(skips), last_error=None, state=state,
                                 max_skipped=self.cfg.max_skipped)

    def _vanished(self, key: str) -> None:
        """The folder is gone: its files' genes retire (they would be served as stale otherwise)."""
        with self._cond:
            self._missing.add(key)
        gone = self.genome.paths_under(key)
        for path in gone:
            self.genome.retire_source(path)
        self.genome.record_source_index(key, at=time.time(), skipped=[], skipped_total=0,
                                 last_error=f"folder not found: {key}", state="missing",
                                 max_skipped=self.cfg.max_skipped)
        if self.cfg.watch and key not in self._watchers and not self._paused:
            self._watch(key)  # its watcher looks for it and reports when it is back

    def _forget(self, key: str) -> None:
        """Under the source's claim (a team genome): a pass of another backend still storing its files would
        leave every file it stores after the retiring live, with no source left to retire them."""
        with self.genome.claim_source(key) as claim:
            if not claim.held:
                self._retry(key, Work(forget=True))
                return
            row = self.genome.get_source(key)
            if self.names().team and row is not None and row.pending != "forget":
                return  # added again (by any backend) while this waited for the claim: the add wins
            # a source around this one (a folder and its subfolder both added) keeps these files: its pass
            # indexes them again under its own project instead
            around = [r.path for r in self.genome.list_sources() if r.path != key and inside_folder(key, r.path)]
            if not around:
                for path in self.genome.paths_under(key):
                    self.genome.retire_source(path)
            self.genome.delete_source(key)
        self._skips.pop(key, None)
        for outer in around:
            self._queue(outer, Work(full=True))
