"""One thread per watched folder: watchfiles' events, filtered and gathered into bursts.

watchfiles already debounces: a batch is handed over once no change came for
`quiet_ms`, or after `debounce_ms` at most, so a `git checkout` of 500 files
arrives as a handful of batches rather than 500 wake-ups. Native events
(inotify / ReadDirectoryChangesW / FSEvents) by default; polling when
[sources] force_polling is set (network drives).

A folder that vanishes is reported once and then looked for every
`missing_check_s` — a stat, nothing logged — until it comes back.
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
                 on_back: Callable[[str], None]) -> None:
        self.root = root
        self.settings = settings
        self._wanted = wanted
        self._on_changes = on_changes
        self._on_missing = on_missing
        self._on_back = on_back
        self._stop = threading.Event()
        self.ready = threading.Event()  # set once the first watch is in place (tests, benchmarks)
        self.polling = settings.force_polling
        self.error = ""  # the last reason a watch failed (shown with the source)
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

    def _run(self) -> None:
        missing = False
        last_error = ""
        key = str(self.root)
        while not self._stop.is_set():
            if not self.root.is_dir():
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
            except FileNotFoundError:
                continue  # removed between the check and the watch: the loop reports it
            except Exception as exc:  # a watch that breaks must not take the backend with it
                self.error = f"{type(exc).__name__}: {exc}"
                if not self.polling:
                    # native events can run out (inotify's max_user_watches on a huge tree): poll instead
                    log.warning("native file events failed for %s (%s); polling it instead", key, self.error)
                    self.polling = True
                    continue
                if self.error != last_error:
                    log.warning("watching %s failed (%s); retrying every %.0f s", key, self.error,
                                self.settings.missing_check_s)
                last_error = self.error
                self._stop.wait(self.settings.missing_check_s)

    def _watch(self, key: str) -> None:
        # the Rust watcher itself (what watchfiles.watch wraps): its constructor returns once the OS watch is
        # in place, so `ready` means "a write from now on is seen" — what tests and benchmarks wait for
        from watchfiles._rust_notify import RustNotify

        cfg = self.settings
        with RustNotify([key], False, self.polling, cfg.poll_interval_ms, True, True) as notify:
            self.ready.set()
            while not self._stop.is_set():
                raw = notify.watch(cfg.debounce_ms, cfg.quiet_ms, int(cfg.missing_check_s * 1000), self._stop)
                if isinstance(raw, str):  # "stop", "signal" or "timeout"
                    if raw in ("stop", "signal"):
                        return
                else:
                    paths = {path for _change, path in raw if self._wanted(path)}
                    if paths:
                        self._on_changes(key, paths)
                if not self.root.is_dir():
                    return
