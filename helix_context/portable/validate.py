"""An export is input from elsewhere: checked as hostile before anything of it is stored.

Two kinds of problem, handled differently:
- a record of the wrong shape (a missing field, a wrong type, a bad vector) means the file is
  corrupt or not Helix's: the whole import is refused (ExportFormatError), nothing is written;
- a well-formed record that asks for something this machine does not allow is refused on its own,
  counted and listed with its reason, and the rest goes on:
    * a gene id that is not a content hash (32 hex digits) — ids end up in URLs and file names;
    * a path that is absolute or climbs with '..' where a path relative to a root is required;
    * a file under a root that maps to a folder outside every source of this machine (and
      outside [server] allowed_ingest_roots), unless the user confirmed that root with
      `--remap OLD=NEW` — then the folder becomes a source, so everything imported lies inside
      a current source before anything reads it from disk (refresh, compact, the live check);
    * a source_kind that disagrees with the path: `file` genes name files under a root, every
      other kind (API text, session notes) names a relative name and never a file on disk;
    * a team genome's shared root (`@api`, `@api/docs`: a root whose folder is a shared name) that is
      not a valid shared name, or a path under it that is empty, absolute or climbs with '..'.

A shared root keeps its names on a team genome (every backend finds them in its own checkout) and,
on a SQLite genome, is found through this machine's root map (`helix sources map`), with the same
refusals as any root (a path leading out of the checkout through '..' or a symlink). A shared root
that this machine does not map refuses the **whole** import, before anything is written
(`unmapped_refusal`). Why not import the rest and list those files as refused: they are the team's
index, usually all of it; a personal genome holding a silent part of it answers differently from
the team's with no sign why, and the fix is one command (`helix sources map ROOT PATH`) and the same
import again. A record that is hostile is still refused on its own, as above.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helix_context.errors import ExportFormatError, InvalidRequest
from helix_context.genome.vectors import EMBED_DIM
from helix_context.portable.paths import inside, is_absolute_anywhere, join, relative_refusal
from helix_context.sources.roots import RootMap, is_shared, split_root, split_shared

GENE_ID = re.compile(r"[0-9a-f]{32}")
# Longer than any chunk Helix stores ([ingest] max_chunk_chars is at most 20,000): a gene's whole text is read,
# tokenized and compressed for every answer it is in, so one 20 MB "chunk" made every question take 85 s.
MAX_GENE_CHARS = 65_536
_SQLITE_INT = (-(2 ** 63), 2 ** 63 - 1)
EMBEDDING_BYTES = 4 + EMBED_DIM  # float32 scale + int8 per dimension (store.encode_vector)
REFUSALS_LISTED = 50

_STR, _OPT_STR, _INT, _NUM, _OPT_NUM, _ANY_PATH, _DICT = "str", "str?", "int", "num", "num?", "path", "dict"
TYPES: dict[str, dict[str, str]] = {
    "gene": {"gene_id": _STR, "content": _STR, "content_type": _STR, "language": _OPT_STR,
             "source_path": _ANY_PATH, "project": _OPT_STR, "start_line": _INT, "end_line": _INT,
             "symbol": _OPT_STR, "source_kind": _STR, "volatility_class": _STR, "authority_class": _STR,
             "observed_at": _NUM, "last_verified_at": _NUM, "source_mtime": _OPT_NUM, "source_hash": _OPT_STR,
             "org": _STR, "device": _STR, "user": _STR, "agent": _STR, "tier": _STR, "access_count": _INT,
             "last_access_at": _OPT_NUM, "retired_at": _OPT_NUM, "source_changed": _INT},
    "file": {"path": _ANY_PATH, "project": _OPT_STR, "size": _INT, "mtime_ns": _INT, "content_hash": _STR,
             "genes": _INT, "ingested_at": _NUM},
    "symbol": {"gene": _STR, "path": _ANY_PATH, "name": _STR, "leaf": _STR, "kind": _STR, "start_line": _INT,
               "end_line": _INT},
    "link": {"a": _STR, "b": _STR, "count": _NUM, "last_at": _NUM},  # a weight: decay makes it a fraction
    "source": {"root": _STR, "project": _OPT_STR, "added_at": _NUM},
    "session": {"session_id": _STR, "agent": _STR, "first_seen": _NUM, "last_seen": _NUM, "requests": _INT,
                "genes_delivered": _INT},
    "activity": {"at": _NUM, "kind": _STR, "actor": _STR, "summary": _STR, "counts": _DICT},
    "vector_change": {"gene": _STR},
}


def _type_ok(value: Any, kind: str) -> bool:
    if kind.endswith("?") and value is None:
        return True
    kind = kind.rstrip("?")
    if kind == "path":
        return value is None or isinstance(value, str) or (
            isinstance(value, list) and len(value) == 2 and all(isinstance(x, str) for x in value))
    if kind == "str":
        return isinstance(value, str)
    if kind == "dict":
        return isinstance(value, dict)
    if isinstance(value, bool):
        return False
    if kind == "int":  # what SQLite and PostgreSQL store as a 64-bit integer
        return isinstance(value, int) and _SQLITE_INT[0] <= value <= _SQLITE_INT[1]
    return isinstance(value, int | float) and math.isfinite(value)  # JSON's NaN / Infinity are no time or count


def check_shape(record: dict[str, Any], path: Path, lineno: int) -> None:
    """ExportFormatError when a record is not the shape its kind requires (the file is corrupt)."""
    def bad(what: str) -> ExportFormatError:
        return ExportFormatError(f"{path}: payload line {lineno}: {what}; the file is corrupt")

    kind = record["t"]
    for name, expected in TYPES.get(kind, {}).items():
        if name not in record:
            raise bad(f"{kind} record without {name!r}")
        if not _type_ok(record[name], expected):
            raise bad(f"{kind} field {name!r} has the wrong type or is out of range ({str(record[name])[:40]})")
    if kind != "gene":
        return
    if not record["gene_id"] or len(record["gene_id"]) > 128:
        raise bad("gene_id is empty or too long")
    if len(record["content"]) > MAX_GENE_CHARS:
        raise bad(f"a gene of {len(record['content'])} characters, longer than any Helix stores ({MAX_GENE_CHARS})")
    tags = record.get("tags")
    if not isinstance(tags, list) or not all(isinstance(t, str) and "\n" not in t for t in tags):
        raise bad("tags must be a list of one-line strings")
    facts = record.get("facts")
    if not isinstance(facts, list) or not all(
            isinstance(f, list) and len(f) == 2 and all(isinstance(x, str) for x in f) for f in facts):
        raise bad("facts must be a list of [key, value] strings")
    sources = record.get("sources")
    if not isinstance(sources, list) or not all(
            isinstance(s, list) and len(s) == 3 and s[0] is not None and _type_ok(s[0], _ANY_PATH)
            and _type_ok(s[1], _INT) and _type_ok(s[2], _INT) for s in sources):
        raise bad("sources must be a list of [path, start_line, end_line]")
    if not isinstance(record.get("vector_model"), str | None):
        raise bad("vector_model must be a model name or null")
    embedding = record.get("embedding", None)
    if embedding is not None:
        try:
            blob = base64.b64decode(embedding, validate=True) if isinstance(embedding, str) else b""
        except ValueError:
            blob = b""
        if len(blob) != EMBEDDING_BYTES:
            raise bad(f"embedding is not a base64 vector of {EMBEDDING_BYTES} bytes")


@dataclass
class Root:
    name: str
    exported: str  # the folder on the exporting machine
    local: Path | None  # where it lives here (None: refused)
    confirmed: bool  # named by the user's --remap
    adds_source: bool  # confirmed and not yet inside a source: the import adds it as one
    refusal: str | None
    shared: str | None = None  # a team genome's root kept under its shared name (`@api`): no folder here


def parse_remap(items: Sequence[str]) -> dict[str, str]:
    """`--remap OLD=NEW` values: OLD is a root's name or its folder on the exporting machine."""
    out: dict[str, str] = {}
    for item in items:
        old, sep, new = item.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise InvalidRequest(f"--remap {item!r}: write it as OLD=NEW (a root's name or old folder, "
                                 "then the folder on this machine)")
        out[old.strip()] = new.strip()
    return out


class ImportGuard:
    """Decides, record by record, what of an export this machine accepts; keeps the refusals."""

    def __init__(self, roots: Any, remap: Mapping[str, str], *, sources: Sequence[Path],
                 ingest_roots: Sequence[Path], check_folder: Any, machine_roots: RootMap | None = None,
                 keep_shared: bool = False) -> None:
        """`sources`: resolved folders of the current sources; `ingest_roots`: [server] allowed_ingest_roots;
        `check_folder(path) -> Path`: the rules for a new source (registry.resolve_folder), raising
        with the reason. `machine_roots`: this machine's root map, where a shared root (`@api`) is here;
        `keep_shared`: the genome is a team genome, which keeps shared names as they are."""
        if not isinstance(roots, list) or not all(
                isinstance(r, dict) and isinstance(r.get("name"), str) and isinstance(r.get("path"), str)
                for r in roots):
            raise ExportFormatError("the header's roots must be a list of {name, path}; the file is corrupt")
        names = {r["name"] for r in roots} | {r["path"] for r in roots}
        unknown = [old for old in remap if old not in names]
        if unknown:
            listed = ", ".join(f"{r['name']} ({r['path']})" for r in roots) or "none"
            raise InvalidRequest(f"--remap {unknown[0]}=…: the export has no root of that name or folder; "
                                 f"its roots are: {listed}")
        self.machine_roots = machine_roots or RootMap({})
        self.keep_shared = keep_shared
        missing = unmapped_roots(roots, remap, self.machine_roots) if not keep_shared else []
        if missing:
            raise InvalidRequest(unmapped_refusal(missing))
        self.roots: dict[str, Root] = {}
        for r in roots:
            target = remap.get(r["name"], remap.get(r["path"]))
            if is_shared(r["path"]) and target is None:
                self.roots[r["name"]] = self._shared_root(r["name"], r["path"], sources, ingest_roots, check_folder)
            else:
                self.roots[r["name"]] = self._root(r["name"], r["path"], target, sources, ingest_roots, check_folder)
        self.refused = 0
        self.refusals: list[dict[str, str]] = []
        self.reasons: dict[str, int] = {}

    @staticmethod
    def _root(name: str, exported: str, target: str | None, sources: Sequence[Path], ingest_roots: Sequence[Path],
              check_folder: Any) -> Root:
        local_text = target if target is not None else exported
        hint = f"add the folder as a source first, or confirm the root with --remap {name}=FOLDER"
        if "\x00" in local_text or not is_absolute_anywhere(local_text) or not Path(local_text).is_absolute():
            return Root(name, exported, None, target is not None, False,
                        f"root {name} maps to {local_text[:200]!r}, not an absolute folder of this machine")
        local = Path(local_text).expanduser()
        if inside(local, sources):
            return Root(name, exported, local.resolve(), target is not None, False, None)
        if target is None and not inside(local, ingest_roots):
            return Root(name, exported, None, False, False,
                        f"root {name} ({exported}) is outside every source of this machine: {hint}")
        try:
            folder = check_folder(local)
        except ValueError as exc:  # SourceError: the folder cannot be a source (missing, the drive root …)
            return Root(name, exported, None, target is not None, False, f"root {name} cannot map to {local}: {exc}")
        # confirmed by the user (or under [server] allowed_ingest_roots): it becomes a source, so every
        # imported path lies inside a current source before anything reads it
        return Root(name, exported, folder, target is not None, True, None)

    def _shared_root(self, name: str, exported: str, sources: Sequence[Path], ingest_roots: Sequence[Path],
                     check_folder: Any) -> Root:
        """A team genome's root: kept by name (a team genome), or where this machine's map puts it."""
        if split_root(exported) is None:
            return Root(name, exported, None, False, False,
                        f"root {name} names {exported[:200]!r}, not a valid shared root (@NAME or @NAME/folder)")
        if self.keep_shared:
            return Root(name, exported, None, False, False, None, shared=exported)
        local = self.machine_roots.local_folder(exported)
        if local is None:  # mapped (unmapped_roots raised otherwise), so the name leaves the checkout
            return Root(name, exported, None, False, False, f"root {name}: {self.machine_roots.describe(exported)}")
        # mapped by this user on this machine: as confirmed as --remap (it becomes a source if it is not one)
        return self._root(name, exported, str(local), sources, ingest_roots, check_folder)

    def refuse(self, kind: str, ident: str, reason: str) -> None:
        self.refused += 1
        key = reason.split(":")[0]
        self.reasons[key] = self.reasons.get(key, 0) + 1
        if len(self.refusals) < REFUSALS_LISTED:
            self.refusals.append({"record": kind, "id": ident[:200], "reason": reason})

    def shown(self, ref: Any) -> str:
        """A path of the export as the exporting machine named it (for the list of refusals)."""
        if isinstance(ref, list) and len(ref) == 2:
            root = self.roots.get(ref[0])
            base = root.exported.rstrip("/\\") if root else f"<{ref[0]}>"
            return f"{base}/{ref[1]}" if ref[1] else base
        return str(ref)

    def disk_path(self, ref: Any) -> tuple[str | None, str | None]:
        """(local absolute path, None) for a [root, rel] under an accepted root; (None, why) otherwise."""
        if not isinstance(ref, list):
            where = ref if isinstance(ref, str) else None
            return None, (f"a file path given as {where[:200]!r} instead of [root, relative path]" if where
                          else "a file without a path")
        name, rel = ref
        root = self.roots.get(name)
        if root is None:
            return None, f"root {name!r} is not declared in the header"
        if root.refusal or (root.local is None and root.shared is None):
            return None, root.refusal or f"root {name} is refused"
        why = relative_refusal(rel)
        if why:
            return None, why
        if root.shared is not None:  # a name, never read here: each backend's map refuses one leaving its checkout
            named = f"{root.shared}/{rel}"
            return (named, None) if split_shared(named) else (None, f"{named[:200]!r} is not a valid shared name")
        assert root.local is not None
        local = join(root.local, rel)
        if not inside(local, [root.local]):
            return None, f"{rel[:200]!r} leads outside its root {name} (through a symlink)"
        return str(local), None

    @staticmethod
    def name_refusal(value: Any) -> str | None:
        """API text and notes are stored under relative names, never a file on disk."""
        if value is None:
            return None
        if not isinstance(value, str):
            return "API text that names a file on disk ([root, path]); only source_kind 'file' may"
        why = relative_refusal(value)
        return f"source_kind and path disagree: API text under {why}" if why else None

    def gene(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """The gene with local paths, or None (refused and recorded)."""
        gid = record["gene_id"]
        if not GENE_ID.fullmatch(gid):
            self.refuse("gene", gid, "a gene id that is not a content hash (32 lowercase hex digits)")
            return None
        paths = [record["source_path"], *[s[0] for s in record["sources"]]]
        if record["source_kind"] == "file":
            local: list[str | None] = []
            for ref in paths:
                if ref is None:
                    local.append(None)
                    continue
                found, why = self.disk_path(ref)
                if why:
                    self.refuse("gene", gid, f"file gene: {why}")
                    return None
                local.append(found)
            return {**record, "source_path": local[0],
                    "sources": [[p, s[1], s[2]] for p, s in zip(local[1:], record["sources"], strict=True)]}
        for value in paths:
            why = self.name_refusal(value)
            if why:
                self.refuse("gene", gid, f"{record['source_kind']} gene: {why}")
                return None
        return record

    def located(self, kind: str, record: dict[str, Any], ident: str) -> dict[str, Any] | None:
        """A file or symbol record with its local path, or None (refused and recorded)."""
        found, why = self.disk_path(record["path"])
        if why:
            self.refuse(kind, ident, why)
            return None
        if kind == "symbol" and not GENE_ID.fullmatch(record["gene"]):
            self.refuse(kind, ident, "a gene id that is not a content hash (32 lowercase hex digits)")
            return None
        return {**record, "path": found}

    def source(self, record: dict[str, Any]) -> Root | None:
        root = self.roots.get(record["root"])
        if root is None or root.refusal or (root.local is None and root.shared is None):
            self.refuse("source", record["root"], root.refusal if root and root.refusal
                        else f"root {record['root']!r} is not declared in the header")
            return None
        return root


def unmapped_roots(roots: list[dict[str, str]], remap: Mapping[str, str], machine: RootMap) -> list[str]:
    """The shared root names of an export that this machine does not map (and --remap does not place)."""
    found: list[str] = []
    for r in roots:
        parts = split_root(r["path"]) if is_shared(r["path"]) else None
        if parts and parts[0] not in machine.roots and r["name"] not in remap and r["path"] not in remap:
            found.append(parts[0])
    return sorted(set(found))


def unmapped_refusal(names: list[str]) -> str:
    """One message for the whole import: what to map, and that nothing was written."""
    maps = "; ".join(f"`helix sources map {n} PATH-OF-YOUR-CHECKOUT`" for n in names)
    return (f"this export holds a team genome's shared root(s) {', '.join('@' + n for n in names)}, not mapped "
            f"on this machine, so its files have no place here; nothing was imported. Map each to your "
            f"checkout first: {maps} (or place one with --remap @NAME=FOLDER), then import again")
