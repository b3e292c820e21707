"""The persisted list of sources, and the changes a CLI records while no backend runs.

The backend owns indexing and watching; without a running backend the CLI
only writes the list (and, for `--forget`, a pending mark), and the next
backend start applies it. Paths are stored resolved, so `~/code/x`,
`./x` and a symlink to it name one source.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from helix_context.genome.sources_sql import SourceRow
from helix_context.genome.storage import GenomeStore
from helix_context.errors import SourceError, SourceNotFound
from helix_context.sources import projects
from helix_context.sources.names import SourceNames
from helix_context.sources.roots import is_shared


def resolve_folder(raw: str | Path, *, home: Path | None = None, absolute_only: bool = False) -> Path:
    """The folder as stored: absolute, symlinks resolved; refused with a reason when it cannot be watched.

    `absolute_only` is for paths that come over HTTP: relative to what? The backend's working folder
    is not the caller's (the CLI resolves a relative path itself before sending it)."""
    text = str(raw).strip()
    if not text or "\x00" in text:
        raise SourceError("give the path of a folder to index")
    path = Path(text).expanduser()
    if absolute_only and not path.is_absolute():
        raise SourceError(f"{text} is a relative path: give the folder's absolute path")
    try:
        path = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise SourceError(f"{text} does not exist: give the path of an existing folder") from None
    if not path.is_dir():
        raise SourceError(f"{path} is a file, not a folder: add the folder that holds it (or `helix ingest` the file)")
    if path == Path(path.anchor):
        raise SourceError(f"{path} is the root of a drive: pick a project folder instead")
    try:
        user_home = Path.home().resolve()
    except (OSError, RuntimeError):
        user_home = None
    if path == user_home:
        raise SourceError(f"{path} is your whole home folder: pick the project folders in it instead")
    if home is not None:
        try:
            resolved_home = home.expanduser().resolve()
        except OSError:
            resolved_home = home
        if path == resolved_home or resolved_home in path.parents:
            raise SourceError(f"{path} is inside Helix's own folder ({resolved_home}): pick another folder")
    return path


def lookup_key(raw: str | Path) -> str:
    """The stored key of a source the user names (it may no longer exist on disk, so no strict resolve);
    a team genome's shared name (`@api/docs`) is kept as it is."""
    if "\x00" in str(raw):
        raise SourceError("the path holds a NUL character, which no file name can: give the folder's path")
    text = str(raw).strip()
    if is_shared(text) and not Path(text).expanduser().exists():  # not a folder here that happens to start with @
        return text
    path = Path(str(raw).strip()).expanduser()
    try:
        return str(path.resolve())
    except (OSError, RuntimeError):
        return str(path.absolute())


def find(genome: GenomeStore, raw: str | Path, names: SourceNames | None = None) -> SourceRow | None:
    """The source the user names: by its folder here, as stored, or (team genome) by its shared name."""
    for key in (names or SourceNames(None)).candidates(str(raw), lookup_key(raw)):
        row = genome.get_source(key)
        if row is not None:
            return row
    return None


def record_add(genome: GenomeStore, raw: str | Path, project: str | None, *, home: Path | None = None,
               names: SourceNames | None = None) -> SourceRow:
    """Without a backend: put the folder on the list; the next start indexes and watches it."""
    path = resolve_folder(raw, home=home)
    key = (names or SourceNames(None)).key(path)
    genome.add_source(key, project or None, time.time())
    projects.assign(genome, key, project, local=path)
    row = genome.get_source(key)
    assert row is not None
    return row


def record_remove(genome: GenomeStore, raw: str | Path, *, forget: bool,
                  names: SourceNames | None = None) -> dict[str, Any]:
    """Without a backend: stop watching at once; with `forget`, the next start retires the folder's genes."""
    row = find(genome, raw, names)
    if row is None:
        raise SourceNotFound(f"{raw} is not a source; `helix sources list` shows them")
    if forget:
        genome.set_source_pending(row.path, "forget")
        genome.set_source_state(row.path, "removing", last_error=None)
        return {"path": row.path, "removed": False, "pending": "forget"}
    genome.delete_source(row.path)
    return {"path": row.path, "removed": True, "pending": None}


def inside_folder(path: str, folder: str) -> bool:
    """`path` is `folder` or lies under it (stored names: absolute paths, or `@ROOT/…` on a team genome)."""
    return path == folder or path.startswith(folder.rstrip("/\\") + ("\\" if "\\" in folder else "/"))

