"""The live source check: does a gene's file still hold what was indexed?

stat() first; the file is hashed only when its mtime moved or it was written
right around ingest ("racy clean"). One SourceCache per answer makes each file
cost at most one stat and one hash however many of its genes are served.
"""

from __future__ import annotations

import hashlib
import os
import stat as stat_mod
from dataclasses import dataclass

from helix_context.models import Gene
from helix_context.safe_open import FileBytes, ReadRule, Refusal, read_file
from helix_context.sources.roots import RootMap, is_shared

SOURCE_STATUSES = ("unchanged", "changed", "missing", "unknown")

# A file whose mtime is this close to (or after) the moment it was indexed may
# have been rewritten within the same mtime tick right after ingest hashed it
# (FAT keeps 2 s, some network filesystems 1 s). Such files are hashed even
# when the recorded mtime still matches ("racy clean", as git calls it).
_RACY_WINDOW_S = 2.0
_MTIME_TOLERANCE_S = 1e-6

@dataclass(frozen=True)
class SourceCheck:
    status: str  # unchanged | changed | missing | unknown
    detail: str


class SourceCache:
    """Per-packet memo of stat() and sha256 results, keyed by absolute path.

    Many genes come from the same file; each file is stat'ed at most once and
    hashed at most once per packet. ``stats`` and ``hashes`` count the real
    system calls made (useful to check the cache does its job).

    Bytes are read through safe_open: the recorded file itself, through no link swapped in since
    ingest, a regular file of at most ``max_bytes`` (a larger one cannot be what was indexed), within
    ``timeout_s`` (a FIFO or a hung file never holds up an answer).

    ``roots``: this machine's map of a team genome's shared roots (sources/roots.py): a gene stored as
    ``@api/src/x.py`` is checked against the file in this machine's checkout of ``api``, so the
    developer's own uncommitted edits are what the check sees.
    """

    def __init__(self, max_bytes: int = 2_000_000, timeout_s: float = 10.0, roots: RootMap | None = None) -> None:
        self.roots = roots or RootMap({})
        self._stat: dict[str, os.stat_result | OSError] = {}
        self._read: dict[str, FileBytes | Refusal] = {}
        self._hash: dict[str, str | OSError] = {}
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.stats = 0
        self.hashes = 0

    def local(self, path: str) -> str | None:
        """The file a stored path names on this machine: a shared name through the root map (None when
        its root is not mapped here), any other path as it is."""
        if is_shared(path):
            found = self.roots.local_path(path)
            return str(found) if found is not None else None
        return path

    def key(self, path: str) -> str:
        local = self.local(path)
        return os.path.abspath(os.path.expanduser(local if local is not None else path))

    def stat(self, path: str) -> os.stat_result | OSError:
        key = self.key(path)
        if key not in self._stat:
            self.stats += 1
            try:
                self._stat[key] = os.stat(key)
            except OSError as exc:
                self._stat[key] = exc
        return self._stat[key]

    def read(self, path: str) -> FileBytes | Refusal:
        """The file's bytes, read once per packet (see the class docstring)."""
        key = self.key(path)
        if key not in self._read:
            self.hashes += 1
            self._read[key] = read_file(key, ReadRule.exact(key, max_bytes=self.max_bytes, timeout_s=self.timeout_s))
        return self._read[key]

    def sha256(self, path: str) -> str | OSError:
        key = self.key(path)
        if key not in self._hash:
            got = self.read(key)
            if isinstance(got, Refusal) and (got.link or got.reason.startswith("too large")):
                # a link or a file larger than any indexed one is not what was indexed: it matches no hash
                self._hash[key] = f"not the indexed file: {got.reason}"
            elif isinstance(got, Refusal):
                self._hash[key] = (FileNotFoundError(2, got.reason) if got.gone
                                   else OSError(0, f"not read: {got.reason}"))
            else:
                self._hash[key] = hashlib.sha256(got.data).hexdigest()
        return self._hash[key]


def _normal_hash(value: str) -> str:
    value = value.strip().lower()
    return value[len("sha256:"):] if value.startswith("sha256:") else value


def _is_gone(exc: OSError) -> bool:
    return isinstance(exc, (FileNotFoundError, NotADirectoryError))


def _failed(exc: OSError, verb: str, path: str) -> SourceCheck:
    """A stat or read that failed: the file is gone, or it could not be checked."""
    if _is_gone(exc):
        return SourceCheck("missing", f"{path} no longer exists")
    return SourceCheck("unknown", f"cannot {verb} {path}: {exc.strerror or exc}")


def check_source(gene: Gene, cache: SourceCache | None = None) -> SourceCheck:
    """Does the gene's source file still hold what was indexed?

    - ``unknown``: not a file source, or nothing was recorded at ingest to
      compare with, or the file cannot be read (permissions, I/O error).
    - ``missing``: the file (or a directory on its path) is gone, or it is no
      longer a regular file.
    - ``changed``: the content differs from the sha256 recorded at ingest (or the
      mtime moved and no hash was recorded, so it cannot be shown unchanged).
    - ``unchanged``: the recorded mtime still matches and the file was not
      rewritten right around ingest time, or the content hash matches (a
      ``touch`` or a save without edits moves the mtime but changes nothing).

    Relative source paths are resolved against the current directory.
    """
    cache = cache if cache is not None else SourceCache()
    prov = gene.provenance
    path = gene.source_path
    if prov.source_kind != "file" or not path:
        what = f"source kind {prov.source_kind!r}" if prov.source_kind != "file" else "gene"
        return SourceCheck("unknown", f"{what} has no file to check")

    if cache.local(path) is None:  # a shared name whose root this machine has not mapped
        return SourceCheck("unknown", cache.roots.describe(path))
    st = cache.stat(path)
    if isinstance(st, OSError):
        return _failed(st, "stat", path)
    if not stat_mod.S_ISREG(st.st_mode):
        return SourceCheck("missing", f"{path} is no longer a regular file")

    recorded_hash = _normal_hash(prov.source_hash) if prov.source_hash else None
    recorded_mtime = prov.source_mtime
    if recorded_hash is None and recorded_mtime is None:
        return SourceCheck("unknown", f"no mtime or hash of {path} was recorded at ingest")

    # ingest may record st_mtime or st_mtime_ns / 1e9, which differ in the last
    # bits of a double; anything within a microsecond is the same stamp
    mtime_same = recorded_mtime is not None and abs(st.st_mtime_ns / 1e9 - recorded_mtime) <= _MTIME_TOLERANCE_S
    indexed_at = prov.observed_at or prov.last_verified_at
    racy = mtime_same and (not indexed_at or st.st_mtime >= indexed_at - _RACY_WINDOW_S)
    if mtime_same and not racy:
        return SourceCheck("unchanged", "mtime matches ingest")

    if recorded_hash is None:
        # mtime moved (or is racy) and there is no content hash to settle it
        if mtime_same:
            return SourceCheck("unknown", f"{path} was written around ingest time and no hash was recorded")
        return SourceCheck("changed", f"mtime of {path} moved since ingest and no hash was recorded to compare")

    digest = cache.sha256(path)
    if isinstance(digest, OSError):
        return _failed(digest, "read", path)
    if digest == recorded_hash:
        why = "mtime moved" if not mtime_same else "mtime unchanged"
        return SourceCheck("unchanged", f"content hash matches ingest ({why})")
    return SourceCheck("changed", f"content of {path} differs from what was indexed")

