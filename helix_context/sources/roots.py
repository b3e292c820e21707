"""Shared roots: a team genome names files relative to a named root; each machine maps the root to its checkout.

Why: ten developers index one repository, but each has it at another place (`/home/ana/code/api`,
`C:\\work\\api`). The team genome stores `@api/src/server.py`; this machine's map
(`helix sources map api ~/code/api`) says where `@api` is here. The map is per machine, so it
lives in HELIX_HOME/roots.json, never in the shared database.

A stored name comes from the database, which other people write: `@api/../../etc/passwd` or an
absolute part must never reach a file outside the mapped checkout (`local_path` refuses both).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from helix_context.errors import InvalidRequest
from helix_context.signals import write_json_atomic

PREFIX = "@"
MAX_ROOTS = 256  # a map is typed by hand; this bounds a damaged file, not a real use
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
FILE_NAME = "roots.json"


def check_name(name: str) -> str:
    if not _NAME.match(name or ""):
        raise InvalidRequest(f"root name {name!r}: use letters, digits, '.', '_' or '-' (at most 64, "
                             "starting with a letter or digit), e.g. `helix sources map api ~/code/api`")
    return name


def is_shared(path: str | None) -> bool:
    return bool(path) and str(path).startswith(PREFIX)


def split_shared(path: str) -> tuple[str, str] | None:
    """`@api/src/x.py` → ("api", "src/x.py"); None for any other form (or a hostile one)."""
    if not is_shared(path):
        return None
    name, _, rel = path[len(PREFIX):].partition("/")
    if not _NAME.match(name):
        return None
    parts = PurePosixPath(rel).parts
    if not rel or rel.startswith("/") or ".." in parts or "\\" in rel or ":" in rel:
        return None
    return name, rel


def split_root(key: str) -> tuple[str, str] | None:
    """A shared folder's name: `@api` → ("api", ""), `@api/docs` → ("api", "docs"); None for any other
    (or a hostile) form. A source or an export's root is a folder, so the root itself is valid here."""
    if is_shared(key) and "/" not in key:
        return (key[len(PREFIX):], "") if _NAME.match(key[len(PREFIX):]) else None
    return split_shared(key)


@dataclass(frozen=True)
class RootMap:
    """This machine's map: root name → the folder of its checkout here."""

    roots: dict[str, Path]

    @classmethod
    def load(cls, home: Path) -> RootMap:
        """The map in HELIX_HOME (empty when none was made); a damaged file reads as empty, never raises."""
        try:
            raw = json.loads((home / FILE_NAME).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls({})
        items = raw.get("roots", {}) if isinstance(raw, dict) else {}
        roots = {str(k): Path(str(v)) for k, v in list(items.items())[:MAX_ROOTS]
                 if isinstance(v, str) and _NAME.match(str(k))}
        return cls(roots)

    def save(self, home: Path) -> None:
        home.mkdir(parents=True, exist_ok=True)
        write_json_atomic(home / FILE_NAME, {"roots": {k: str(v) for k, v in sorted(self.roots.items())}})

    def mapped(self, name: str, folder: Path) -> RootMap:
        check_name(name)
        folder = folder.expanduser().resolve()
        if not folder.is_dir():
            raise InvalidRequest(f"{folder} is not a folder: map the root to your checkout of it")
        if name not in self.roots and len(self.roots) >= MAX_ROOTS:
            raise InvalidRequest(f"at most {MAX_ROOTS} roots can be mapped; unmap one first")
        return RootMap({**self.roots, name: folder})

    def unmapped(self, name: str) -> RootMap:
        if name not in self.roots:
            known = ", ".join(sorted(self.roots)) or "none"
            raise InvalidRequest(f"root {name!r} is not mapped on this machine (mapped: {known})")
        return RootMap({k: v for k, v in self.roots.items() if k != name})

    def local_path(self, stored: str) -> Path | None:
        """Where a shared name's file is on this machine; None when its root is not mapped here or the
        name would leave the checkout (`..`, an absolute part, a link pointing outside)."""
        parts = split_shared(stored)
        if parts is None or parts[0] not in self.roots:
            return None
        root = self.roots[parts[0]]
        candidate = root.joinpath(*PurePosixPath(parts[1]).parts)
        try:
            candidate.resolve().relative_to(root.resolve())
        except (ValueError, OSError):
            return None
        return candidate

    def local_folder(self, key: str) -> Path | None:
        """Where a shared folder (`@api` or `@api/docs`) is on this machine; None when its root is not
        mapped here or the name would leave the checkout (as `local_path`)."""
        parts = split_root(key)
        if parts is None or parts[0] not in self.roots:
            return None
        return self.roots[parts[0]] if not parts[1] else self.local_path(key)

    def shared_name(self, local: Path) -> str | None:
        """The shared name of a file under a mapped checkout (the deepest root that holds it), else None."""
        try:
            here = local.expanduser().absolute()
        except OSError:
            return None
        best: tuple[int, str] | None = None
        for name, root in self.roots.items():
            try:
                rel = here.relative_to(root)
            except ValueError:
                continue
            if best is None or len(root.parts) > best[0]:
                tail = rel.as_posix()
                best = (len(root.parts), f"{PREFIX}{name}" + ("" if tail == "." else f"/{tail}"))
        return best[1] if best else None

    def describe(self, stored: str) -> str:
        """Why a shared name has no local file here, in words that say what to do."""
        parts = split_shared(stored)
        if parts is None:
            return f"{stored} is not a valid shared name"
        if parts[0] not in self.roots:
            return f"root {parts[0]!r} is not mapped on this machine: helix sources map {parts[0]} PATH-OF-YOUR-CHECKOUT"
        return f"{stored} would leave the checkout of root {parts[0]!r}"
