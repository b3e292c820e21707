"""Which changed paths under a watched folder are worth indexing: the walk's own rules, applied per event.

The watcher calls `PathFilter.wanted` for every raw event before anything is
queued, so a write under `.git/`, `node_modules/` or a gitignored build folder
costs one dictionary lookup and a few string comparisons — never a read, a
hash or an ingest. The rules are exactly the walk's (`IgnoreRules`), so what a
watcher indexes and what a full pass indexes cannot drift apart.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pathspec

from helix_context.config import IngestSettings
from helix_context.ingest.walk import DEFAULT_IGNORED_DIRS, IgnoreRules


class PathFilter:
    def __init__(self, root: Path, ingest: IngestSettings, *, never: Sequence[Path] = ()) -> None:
        self.root = root
        self._rules = IgnoreRules(ingest.ignore, ingest.respect_gitignore)
        # folders never indexed whatever the rules say (HELIX_HOME: its logs would feed the watcher forever)
        self._never = [p for p in map(_resolved, never) if p != root]
        self._specs: dict[Path, pathspec.GitIgnoreSpec | None] = {}
        self._lock = threading.Lock()

    def _spec(self, folder: Path) -> pathspec.GitIgnoreSpec | None:
        with self._lock:
            if folder not in self._specs:
                self._specs[folder] = self._rules.load(folder)
            return self._specs[folder]

    def forget_gitignore(self, folder: Path) -> None:
        """A .gitignore changed: read it again next time."""
        with self._lock:
            self._specs.pop(folder, None)

    def wanted(self, raw: str) -> bool:
        path = Path(raw)
        try:
            rel = path.relative_to(self.root)
        except ValueError:
            return False
        if not rel.parts:
            return False
        for never in self._never:
            if path == never or never in path.parents:
                return False
        # cheapest test first: a component that is always ignored (.git, node_modules, __pycache__ …)
        for part in rel.parts[:-1]:
            if part in DEFAULT_IGNORED_DIRS or part.endswith(".egg-info"):
                return False
        if path.name == ".gitignore":
            self.forget_gitignore(path.parent)
        specs: list[tuple[Path, pathspec.GitIgnoreSpec]] = []
        folder = self.root
        spec = self._spec(folder)
        if spec is not None:
            specs.append((folder, spec))
        for part in rel.parts[:-1]:
            folder = folder / part
            if self._rules.ignored(specs, self.root, folder, True):
                return False
            spec = self._spec(folder)
            if spec is not None:
                specs.append((folder, spec))
        is_dir = path.is_dir() or (not path.exists() and path.name in DEFAULT_IGNORED_DIRS)
        return not self._rules.ignored(specs, self.root, path, is_dir)


def _resolved(path: Path) -> Path:
    try:
        return path.expanduser().resolve()
    except (OSError, RuntimeError):
        return path


def confined(root: Path, path: Path, *, follow_symlinks: bool) -> bool:
    """The path is what it says: no symlink on the way (unless followed by choice), under the source."""
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return False
    if not follow_symlinks and real != path.absolute():
        return False
    return real == root or root in real.parents
