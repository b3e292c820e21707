"""Every source belongs to a project: the name given, else its git top level's name, else the folder's.

Questions are answered from one project's genes (retrieve/scope.py), so a source without a
project would be invisible to every scoped question. `ensure_projects` is the start-up
migration: sources recorded before projects were required get their default name, and
their genes and files are relabelled to match.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePath

from helix_context.errors import SourceError
from helix_context.genome.storage import GenomeStore
from helix_context.sources.roots import is_shared

log = logging.getLogger("helix.sources")

MAX_GIT_LEVELS = 40  # how far up a folder's parents the git top level is looked for


def check_project_name(name: str | None) -> str | None:
    """`name` stripped, or None for none; SourceError for a name no question could name back.

    Why: a scope is written `a,b` (retrieve/scope.py), so a comma splits a name in two; a control
    character (a NUL, a newline) prints as something else in every list and header."""
    if name is None or not name.strip():
        return None
    name = name.strip()
    if "," in name or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise SourceError(f"project name {name[:100]!r} holds a comma or a control character, which a scope "
                          "(`--project a,b`, X-Helix-Project) cannot name; choose another")
    return name


def default_project(folder: str | Path) -> str:
    """The git top level's name for a folder inside a repository, else the folder's own name."""
    path = Path(folder)
    for level, parent in enumerate([path, *path.parents]):
        if level > MAX_GIT_LEVELS:
            break
        try:
            if (parent / ".git").exists():
                return parent.name or str(parent)
        except OSError:
            break
    return path.name or str(path)


def ensure_projects(genome: GenomeStore) -> list[tuple[str, str]]:
    """Give each source without a project its default one, and its genes that project; (path, project) each.

    Idempotent: a second run finds nothing to do."""
    done: list[tuple[str, str]] = []
    for row in genome.list_sources():
        if row.project:
            continue
        name = default_project(row.path)
        moved = genome.set_project(row.path, name)
        log.info("source %s: project %r (%d genes relabelled)", row.path, name, moved)
        done.append((row.path, name))
    return done


def assign(genome: GenomeStore, folder: str, project: str | None, *, local: Path | None = None) -> str:
    """The source's project after an add: the one given, else the one it has, else its default
    (from `local`, the folder on this machine, when `folder` is a team genome's shared name);
    its genes follow (a re-add with another name relabels them, which an unchanged file's re-ingest
    would not)."""
    row = genome.get_source(folder)
    name = (project or "").strip() or (row.project if row is not None and row.project
                                       else default_project(local or folder))
    genome.set_project(folder, name)
    return name


@dataclass(frozen=True)
class ProjectState:
    """What the sources say about one project: its folders, and whether any of them can answer now."""

    name: str
    folders: tuple[str, ...]
    unavailable: tuple[str, ...]  # folders paused or missing, each with why
    paused: bool

    @property
    def silent_reason(self) -> str | None:
        """Why a question scoped to this project gets nothing, or None when one of its folders is usable."""
        if not self.folders or len(self.unavailable) < len(self.folders):
            return None
        return (f"every source of project {self.name!r} is paused or missing ({'; '.join(self.unavailable)}): "
                "resume indexing or restore the folder")


def project_states(genome: GenomeStore) -> dict[str, ProjectState]:
    """Each project that has sources, with its folders' availability (a stat per folder)."""
    paused = genome.sources_paused()
    folders: dict[str, list[str]] = {}
    unavailable: dict[str, list[str]] = {}
    for row in genome.list_sources():
        if row.state == "removing":
            continue
        name = row.project or default_project(row.path)
        folders.setdefault(name, []).append(row.path)
        # a team genome's shared source (`@api/…`) is answered from the shared genes wherever it is checked out
        missing = row.state == "missing" or (not is_shared(row.path) and not Path(row.path).is_dir())
        if missing:
            unavailable.setdefault(name, []).append(f"{row.path} is missing")
        elif paused:
            unavailable.setdefault(name, []).append(f"{row.path} is paused")
    return {name: ProjectState(name, tuple(paths), tuple(unavailable.get(name, ())), paused)
            for name, paths in folders.items()}


def projects_for_paths(sources: Iterable[tuple[str, str | None]], paths: Iterable[str | PurePath]) -> tuple[str, ...]:
    """Projects of the sources that hold one of `paths` or lie inside one (a workspace root above
    several checkouts scopes to all of them). `sources`: (folder, project) pairs."""
    wanted = [_pure(p) for p in paths]
    found: list[str] = []
    for folder, project in sources:
        if not project:
            continue
        root = _pure(folder)
        if any(p == root or root in p.parents or p in root.parents for p in wanted):
            found.append(project)
    return tuple(dict.fromkeys(found))


def _pure(path: str | PurePath) -> PurePath:
    try:
        return Path(path).expanduser().resolve()
    except (OSError, RuntimeError):
        return Path(path).absolute()


def cwd_projects(genome: GenomeStore, cwd: Path | None = None,
                 folder_of: Callable[[str], Path | None] | None = None) -> tuple[str, ...]:
    """Projects of the sources holding the current directory (the CLI's scope when none is named).
    `folder_of`: where a stored source is on this machine (a team genome's `@ROOT/…`: sources/names.py)."""
    here = cwd or Path.cwd()
    where = folder_of or Path
    rows = [(str(folder), r.project) for r in genome.list_sources()
            if r.state != "removing" and (folder := where(r.path)) is not None]
    inside = [(folder, project) for folder, project in rows if _pure(here) == _pure(folder)
              or _pure(folder) in _pure(here).parents]
    return projects_for_paths(inside, [here])
