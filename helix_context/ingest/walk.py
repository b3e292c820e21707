"""Walk folders the way a developer expects: .gitignore respected, build junk skipped.

Yields plain records: a file to look at, or a path skipped with the reason, so
the pipeline can report every skip instead of silently dropping it.

A walked folder may be hostile: symlinks pointing at secrets elsewhere, names that
are not valid text. With ``follow_symlinks = false`` no symlink below a walked root is
followed, file or folder; with ``true`` a link is followed only when its target lies
inside the walked root (or inside ``confine_to``, the allowed ingest roots of the
server). A name that cannot be stored as UTF-8 text is skipped with its reason.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pathspec

from helix_context.safe_open import within

# folders no user wants indexed; matched against every directory name
DEFAULT_IGNORED_DIRS = frozenset({
    ".git", ".hg", ".svn", ".bzr", ".venv", "venv", ".env", "env", "node_modules", "__pycache__",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".nox", ".eggs", "build", "dist", "target",
    ".idea", ".vscode", ".next", ".nuxt", ".cache", ".gradle", "coverage", ".coverage", "htmlcov",
    ".terraform", ".helix", "site-packages", "bower_components", ".DS_Store",
})
DEFAULT_IGNORED_SUFFIXES = (".egg-info", ".pyc", ".pyo", ".so", ".dll", ".dylib", ".o", ".a", ".class", ".jar",
                            ".exe", ".bin", ".png", ".jpg", ".jpeg", ".gif", ".ico", ".pdf", ".zip", ".gz",
                            ".tar", ".7z", ".whl", ".db", ".sqlite", ".sqlite3", ".db-wal", ".db-shm", ".lock",
                            ".woff", ".woff2", ".ttf", ".mp3", ".mp4", ".onnx", ".safetensors", ".pt", ".npy")


@dataclass(frozen=True)
class FileEntry:
    path: Path  # absolute
    root: Path  # the argument it was found under
    size: int
    mtime_ns: int
    roots: tuple[Path, ...] = ()  # where its real path may lie when read (safe_open.ReadRule); () = (root,)


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


@dataclass(frozen=True)
class WalkedRoot:
    """A folder argument that was walked completely (so missing files under it were deleted)."""

    root: Path


class IgnoreRules:
    """Stack of .gitignore specs, each relative to the folder that holds it."""

    def __init__(self, extra_patterns: Sequence[str], respect_gitignore: bool) -> None:
        self.respect_gitignore = respect_gitignore
        self.extra = pathspec.GitIgnoreSpec.from_lines(extra_patterns) if extra_patterns else None

    def load(self, folder: Path) -> pathspec.GitIgnoreSpec | None:
        if not self.respect_gitignore:
            return None
        gitignore = folder / ".gitignore"
        try:
            lines = gitignore.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return None
        return pathspec.GitIgnoreSpec.from_lines(lines)

    def ignored(self, specs: list[tuple[Path, pathspec.GitIgnoreSpec]], root: Path, path: Path, is_dir: bool) -> bool:
        name = path.name
        if is_dir and (name in DEFAULT_IGNORED_DIRS or name.endswith(".egg-info")):
            return True
        if not is_dir and name.lower().endswith(DEFAULT_IGNORED_SUFFIXES):
            return True
        suffix = "/" if is_dir else ""
        if self.extra is not None:
            rel = path.relative_to(root).as_posix() + suffix
            if self.extra.match_file(rel):
                return True
        for base, spec in specs:
            try:
                rel = path.relative_to(base).as_posix() + suffix
            except ValueError:
                continue
            if spec.match_file(rel):
                return True
        return False


def shown(path: str | Path) -> str:
    """A path as text that can be stored, printed and sent as JSON: bytes that are not UTF-8
    (kept by the OS as lone surrogates) are written as \\xNN escapes."""
    text = os.fspath(path)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape" if os.name != "nt" else "surrogatepass").decode(
            "utf-8", "backslashreplace")


_CONTROL = {c: f"\\x{c:02x}" for c in (*range(32), 127)} | {9: "\\t", 10: "\\n", 13: "\\r"}


def shown_line(path: str | Path) -> str:
    """`shown`, with control characters as escapes: a file may be named `new\\nline.py`, and a line of output
    (or a `<GENE src=...>` opening) must stay one line."""
    return shown(path).translate(_CONTROL)


def bad_name(path: str | Path) -> bool:
    """True when the name cannot be stored as UTF-8 text (the genome keys every gene by its path)."""
    try:
        os.fspath(path).encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


BAD_NAME = "file name is not valid UTF-8 (it cannot be stored or shown as text); rename it to index it"


def walk(paths: Sequence[str | Path], *, max_file_bytes: int, ignore: Sequence[str] = (),
         respect_gitignore: bool = True, follow_symlinks: bool = False,
         confine_to: Sequence[str | Path] | None = None) -> Iterator[FileEntry | Skipped | WalkedRoot]:
    """`confine_to`: where a followed symlink may point (resolved folders); None = each walked root itself."""
    rules = IgnoreRules(ignore, respect_gitignore)
    confine = None if confine_to is None else [Path(c).expanduser().resolve() for c in confine_to]
    for raw in paths:
        if bad_name(raw):
            yield Skipped(shown(raw), BAD_NAME)
            continue
        root = Path(raw).expanduser()
        try:
            root = root.resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            reason = "symlink loop" if isinstance(exc, RuntimeError) or "loop" in str(exc).lower() else "does not exist"
            yield Skipped(str(raw), f"{reason}: check the path")
            continue
        if bad_name(root):
            yield Skipped(shown(root), BAD_NAME)
            continue
        if root.is_file():
            refused = _single_file_refusal(Path(raw).expanduser(), root, follow_symlinks, confine)
            if refused is not None:
                yield Skipped(str(Path(os.path.abspath(Path(raw).expanduser()))), refused)
                continue
            yield _file_entry(root, root.parent, max_file_bytes, tuple(confine) if confine else (root.parent,))
            continue
        if not root.is_dir():
            yield Skipped(str(root), "not a regular file or folder")
            continue
        complete = True
        links = _LinkRule(follow_symlinks, confine if confine is not None else [root])
        for item in _walk_dir(root, rules, max_file_bytes, links):
            if isinstance(item, Skipped) and item.reason.startswith("unreadable folder"):
                complete = False
            yield item
        if complete:
            yield WalkedRoot(root)


def _single_file_refusal(asked: Path, real: Path, follow: bool, confine: Sequence[Path] | None) -> str | None:
    """A file named on its own (a watcher event, an API path): judged like a file met in a walk when
    `confine` says where files may be (the server); the CLI's own argument is the user's choice."""
    if confine is None:
        return None
    if not follow and real != Path(os.path.abspath(asked)):
        return "symlink not followed ([ingest] follow_symlinks = false)"
    if not within(real, confine):
        return (f"symlink target {shown(real)} is outside the walked folders "
                f"({', '.join(shown(c) for c in confine)}): not followed")
    return None


def _file_entry(path: Path, root: Path, max_file_bytes: int, roots: tuple[Path, ...]) -> FileEntry | Skipped:
    try:
        st = path.stat()
    except OSError as exc:
        return Skipped(str(path), f"unreadable: {exc.strerror or exc}")
    if not stat.S_ISREG(st.st_mode):
        return Skipped(str(path), "not a regular file")
    if st.st_size > max_file_bytes:
        return Skipped(str(path), f"too large: {st.st_size} bytes > [ingest] max_file_bytes {max_file_bytes}")
    return FileEntry(path, root, st.st_size, st.st_mtime_ns, roots)


def _stat(entry: os.DirEntry[str]) -> os.stat_result | str:
    """The entry's stat through symlinks, or why it cannot be had (the reason a skip reports)."""
    try:
        return entry.stat(follow_symlinks=True)
    except OSError as exc:
        return "symlink loop" if "loop" in str(exc).lower() else f"unreadable: {exc.strerror or exc}"


@dataclass(frozen=True)
class _LinkRule:
    follow: bool
    confine: Sequence[Path]

    def refusal(self, link: Path) -> str | None:
        """Why this symlink is not followed, or None when it may be."""
        if not self.follow:
            return "symlink not followed ([ingest] follow_symlinks = false)"
        try:
            target = link.resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            return "symlink loop" if isinstance(exc, RuntimeError) or "loop" in str(exc).lower() \
                else "broken symlink: its target does not exist"
        if not within(target, self.confine):
            return (f"symlink target {shown(target)} is outside the walked folder"
                    f"{'s' if len(self.confine) > 1 else ''} ({', '.join(shown(c) for c in self.confine)}): not followed")
        return None


def _walk_dir(root: Path, rules: IgnoreRules, max_file_bytes: int, links: _LinkRule) -> Iterator[FileEntry | Skipped]:
    # explicit stack instead of recursion: deep trees must not hit the recursion limit
    root_spec = rules.load(root)
    stack: list[tuple[Path, list[tuple[Path, pathspec.GitIgnoreSpec]]]] = [
        (root, [(root, root_spec)] if root_spec else [])]
    visited: set[tuple[int, int]] = set()
    try:
        st = root.stat()
        visited.add((st.st_dev, st.st_ino))
    except OSError:
        pass
    while stack:
        folder, specs = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            yield Skipped(str(folder), f"unreadable folder: {exc.strerror or exc}")
            continue
        subdirs: list[Path] = []
        for entry in entries:
            path = Path(entry.path)
            if bad_name(entry.name):
                yield Skipped(shown(path), BAD_NAME)
                continue
            try:
                # a Windows junction redirects a folder like a symlink does (Python 3.12+ can tell)
                is_link = entry.is_symlink() or bool(getattr(entry, "is_junction", lambda: False)())
                is_dir = entry.is_dir(follow_symlinks=links.follow)
            except OSError as exc:
                yield Skipped(str(path), f"unreadable: {exc.strerror or exc}")
                continue
            if rules.ignored(specs, root, path, is_dir):
                continue
            if is_link:
                refused = links.refusal(path)
                if refused is not None:
                    yield Skipped(str(path), refused)
                    continue
            if is_dir:
                entry_st = _stat(entry)
                if isinstance(entry_st, str):
                    yield Skipped(str(path), entry_st)
                    continue
                key = (entry_st.st_dev, entry_st.st_ino)
                if key in visited:
                    yield Skipped(str(path), "symlink loop: folder already walked")
                    continue
                visited.add(key)
                subdirs.append(path)
                continue
            entry_st = _stat(entry)
            if isinstance(entry_st, str):
                yield Skipped(str(path), entry_st)
                continue
            if not stat.S_ISREG(entry_st.st_mode):
                yield Skipped(str(path), "not a regular file")
                continue
            if entry_st.st_size > max_file_bytes:
                yield Skipped(str(path), f"too large: {entry_st.st_size} bytes > [ingest] max_file_bytes {max_file_bytes}")
                continue
            yield FileEntry(path, root, entry_st.st_size, entry_st.st_mtime_ns, tuple(links.confine))
        for sub in reversed(subdirs):
            spec = rules.load(sub)
            stack.append((sub, specs + [(sub, spec)] if spec else specs))
