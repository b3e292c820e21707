"""One thread per watched folder: watchfiles' events, filtered and gathered into bursts.

watchfiles already debounces: a batch is handed over once no change came for
`quiet_ms`, or after `debounce_ms` at most, so a `git checkout` of 500 files
arrives as a handful of batches rather than 500 wake-ups. Native events
(inotify / ReadDirectoryChangesW / FSEvents) by default; polling when
[sources] force_polling is set (network drives).

A folder that vanishes is reported once and then looked for every
`missing_check_s` — a stat, nothing logged — until it comes back.

Events can be lost, and then a watcher says so instead of pretending:
- a file name that is not valid UTF-8 makes the Rust watcher raise for the whole
  batch (every path of that moment goes with it) and then again on every later
  call, because the bad path stays in its pending set. The watch is rebuilt at
  once (still native) and `on_lost` asks for a reconciliation pass — a walk
  that compares the folder with the index, which also lists the bad name as
  skipped with its reason.
- any other failure of the native watch falls back to polling; the watcher is
  then `degraded` (the source shows `watching: false, polling: true` and the
  error) and `on_lost` asks for the same pass.
`on_lost` is called only after the new watch is in place, so a write that lands
between the failure and the pass is either seen by the new watch or by the walk.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from helix_context.config import SourcesSettings

log = logging.getLogger("helix.sources")


class FolderWatcher:
    def __init__(self, root: Path, settings: SourcesSettings, *, wanted: Callable[[str], bool],
                 on_changes: Callable[[str, set[str]], None], on_missing: Callable[[str], None],
                 on_back: Callable[[str], None], on_lost: Callable[[str, str], None], key: str | None = None) -> None:
        self.root = root
        self.key = key or str(root)  # the source's stored name, handed to the callbacks (a team genome: `@api`)
        self.settings = settings
        self._wanted = wanted
        self._on_changes = on_changes
        self._on_missing = on_missing
        self._on_back = on_back
        self._on_lost = on_lost
        self._lost = ""  # why events were lost; reported through on_lost once the next watch is in place
        self._stop = threading.Event()
        self.ready = threading.Event()  # set once the first watch is in place (tests, benchmarks)
        self.polling = settings.force_polling
        self.error = ""  # the last reason a watch failed (shown with the source)
        self.degraded = False  # native events failed and this folder is polled instead
        self.bad_names = 0  # batches lost to a name that is not valid UTF-8 (tests, the activity record)
        self._thread = threading.Thread(target=self._run, name=f"helix-watch-{root.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def describe(self, *, missing: bool, last_error: str | None) -> dict[str, object]:
        """How the folder is watched, for its source's description: `missing` (its folder is gone) means not
        watching; `last_error` is the source's own, which a failed watch's reason replaces when it explains more."""
        data: dict[str, object] = {"watching": self.alive and not missing and not self.degraded,
                                   "polling": self.polling, "watch_failed": self.degraded}
        if self.error and (self.degraded or not last_error):
            data["last_error"] = f"watching failed: {self.error}" + ("; polling instead" if self.degraded else "")
        return data

    def _run(self) -> None:
        missing = False
        last_error = ""
        key = self.key
        while not self._stop.is_set():
            if not self.root.is_dir():
                self._lost = ""  # its return is a pass of its own (_on_back)
                if not missing:
                    missing = True
                    log.warning("watched folder %s is gone; looking for it every %.0f s", key,
                                self.settings.missing_check_s)
                    self._on_missing(key)
                self.ready.set()
                self._stop.wait(self.settings.missing_check_s)
                continue
            if missing:
                missing = False
                log.info("watched folder %s is back", key)
                self._on_back(key)
            try:
                self._watch(key)
            except FileNotFoundError:  # removed under the watch (or between the check and it): the loop reports it,
                self._lost = "the folder was replaced"  # and a folder already made again is rescanned when watched
                continue
            except Exception as exc:  # a watch that breaks must not take the backend with it
                self.error = f"{type(exc).__name__}: {exc}"
                self._lost = self.error
                if not self.polling:
                    # native events can run out (inotify's max_user_watches on a huge tree): poll instead
                    log.warning("native file events failed for %s (%s); polling it instead and rescanning",
                                key, self.error)
                    self.polling = True
                    self.degraded = True
                    continue
                if self.error != last_error:
                    log.warning("watching %s failed (%s); retrying every %.0f s", key, self.error,
                                self.settings.missing_check_s)
                last_error = self.error
                self._stop.wait(self.settings.missing_check_s)

    def _watch(self, key: str) -> None:
        folder = str(self.root)
        # the Rust watcher itself (what watchfiles.watch wraps): its constructor returns once the OS watch is
        # in place, so `ready` means "a write from now on is seen" — what tests and benchmarks wait for
        from watchfiles._rust_notify import RustNotify

        cfg = self.settings
        watched = _identity(self.root)
        with RustNotify([folder], False, self.polling, cfg.poll_interval_ms, True, True) as notify:
            self.ready.set()
            if self._lost:  # the new watch is in place: now a walk finds whatever the old one missed
                lost, self._lost = self._lost, ""
                self._on_lost(key, lost)
            while not self._stop.is_set():
                try:
                    raw = notify.watch(cfg.debounce_ms, cfg.quiet_ms, int(cfg.missing_check_s * 1000), self._stop)
                except Exception as exc:
                    if not undecodable(exc):
                        raise
                    # the batch is gone and this watcher stays poisoned: rebuild it (the caller's loop) and rescan
                    self.bad_names += 1
                    self._lost = f"a file name that is not valid UTF-8 ({exc})"
                    log.info("a file name under %s is not valid UTF-8; rescanning the folder", key)
                    return
                if raw in ("stop", "signal"):
                    return
                root_deleted = False
                if not isinstance(raw, str):  # a set of (change, path); "timeout" otherwise
                    root_deleted = any(change == DELETED and path == folder for change, path in raw)
                    paths = {path for _change, path in raw if self._wanted(path)}
                    if paths:
                        self._on_changes(key, paths)
                if root_deleted or _identity(self.root) != watched:
                    # gone, or deleted and made again (`rm -rf d && git clone … d`; the new folder may even reuse
                    # the old one's inode): the OS watch stays on the old folder, which never speaks again, and
                    # whatever the new one got before the next watch is in place is found by the rescan
                    self._lost = "the folder was replaced"
                    log.info("watched folder %s is gone or was replaced; watching it anew", key)
                    return


DELETED = 3  # watchfiles' Change.deleted, as the Rust watcher reports it


def _identity(folder: Path) -> tuple[int, int] | None:
    """Which folder is at the path (device and inode; None when none is)."""
    try:
        st = folder.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def undecodable(exc: BaseException) -> bool:
    """watchfiles' error for a path it cannot turn into text (raised for the whole batch)."""
    return type(exc).__name__ == "WatchfilesRustInternalError" and "decode path" in str(exc)
