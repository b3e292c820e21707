"""Paths in an export: relative to a named root, never absolute.

Why: a genome moves between machines (a laptop, a teammate's checkout, CI) and the
same tree lives under different folders there; and an export is input from
elsewhere, so it must not be able to name an arbitrary file of the importing
machine. Every path of a file on disk travels as [root name, relative posix path];
the header lists each root with the folder it was on the exporting machine, and the
importer maps each root to a local folder (the same one, or `--remap OLD=NEW`).

Roots are the exporting genome's sources (the folders the user chose) plus, for
files ingested outside every source (`helix ingest FILE`), the folder holding them.

A team genome stores its files as `@ROOT/rel` (sources/roots.py): names that are already
machine-independent. They travel the same way, under a root whose folder is the shared name
(`{"name": "@api", "path": "@api"}`), and the importer keeps them (a team genome) or finds them
through the importing machine's own root map (a SQLite genome): validate.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from helix_context.sources.roots import PREFIX, split_root

PathRef = list[str]  # [root name, relative posix path]


def _parts(path: str) -> tuple[str, ...]:
    return PurePosixPath(path).parts if path.startswith("/") or "\\" not in path else PureWindowsPath(path).parts


def _is_under(path: str, folder: str) -> bool:
    base = folder.rstrip("/\\")
    return path == base or path.startswith(base + "/") or path.startswith(base + "\\")


class ExportRoots:
    """The roots of one export, chosen from the source folders and the file paths it holds."""

    def __init__(self, sources: Iterable[str], paths: Iterable[str]) -> None:
        folders = sorted(set(sources), key=len)
        extra: set[str] = set()
        for path in paths:
            if any(_is_under(path, f) for f in folders):
                continue
            shared = split_root(path)
            if shared is not None:  # a team genome's file outside its sources: its root travels
                extra.add(PREFIX + shared[0])
            elif is_absolute_anywhere(path):
                extra.add(os.path.dirname(path.rstrip("/\\")) or path)
        for folder in sorted(extra, key=len):
            if not any(_is_under(folder, f) for f in folders):
                folders.append(folder)
        self.by_name: dict[str, str] = {}
        for folder in sorted(folders, key=len, reverse=True):  # longest first: a nested source wins
            stem = _parts(folder)[-1] if _parts(folder) else "root"
            name, n = stem.replace("/", "_").replace("\\", "_") or "root", 1
            while name in self.by_name:
                n += 1
                name = f"{stem}-{n}"
            self.by_name[name] = folder
        self._ordered = sorted(self.by_name.items(), key=lambda kv: -len(kv[1]))

    def ref(self, path: str) -> PathRef | None:
        """[root, relative posix path] for an absolute path under a root; None for anything else."""
        for name, folder in self._ordered:
            if _is_under(path, folder):
                rest = path[len(folder.rstrip("/\\")):].lstrip("/\\")
                rel = "/".join(_parts(rest)) if rest else ""
                return [name, rel]
        return None

    def header(self) -> list[dict[str, Any]]:
        return [{"name": name, "path": folder} for name, folder in sorted(self.by_name.items())]


def is_absolute_anywhere(path: str) -> bool:
    """Absolute on any system Helix runs on: /x, \\x, ~, C:\\x, //server/share."""
    return (path.startswith(("/", "\\", "~")) or PurePosixPath(path).is_absolute()
            or bool(PureWindowsPath(path).drive))


def relative_refusal(rel: str, *, allow_empty: bool = False) -> str | None:
    """Why a relative path from an export may not be joined to a local folder, or None."""
    if not rel:
        return None if allow_empty else "an empty path"
    if "\x00" in rel:
        return "a path with a NUL character"
    if is_absolute_anywhere(rel):
        return f"an absolute path ({rel[:200]!r}) where a path relative to its root is required"
    parts = set(PurePosixPath(rel).parts) | set(PureWindowsPath(rel).parts)
    if ".." in parts:
        return f"a path that climbs out of its root with '..' ({rel[:200]!r})"
    return None


def join(folder: Path, rel: str) -> Path:
    return folder.joinpath(*PurePosixPath(rel).parts) if rel else folder


def inside(path: Path, folders: Iterable[Path]) -> bool:
    """The path, with every symlink on its way resolved, lies in one of the (resolved) folders."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError):
        return False
    return any(real == f or f in real.parents for f in folders)
