"""Versioned converters: an export written by an older Helix is brought up to the current format
before it is checked, so validate.py and importer.py know one format only.

Each converter takes (header, records) of version N and returns those of N + 1; `upgrade` chains
them. Records are a re-readable stream (a function returning an iterator), because a converter
may need a first look at every record (v1 → v2 chooses the roots from all paths).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from helix_context.errors import ExportFormatError
from helix_context.portable.fileformat import FORMAT_VERSION
from helix_context.portable.paths import ExportRoots, is_absolute_anywhere

Records = Callable[[], Iterator[tuple[int, dict[str, Any]]]]
Converter = Callable[[dict[str, Any], Records], tuple[dict[str, Any], Records]]


def _v1_to_v2(header: dict[str, Any], records: Records) -> tuple[dict[str, Any], Records]:
    """v1 kept absolute paths and carried genes, files and links only. Its file paths become
    [root, rel] under roots chosen from the paths themselves (a v1 file names no sources)."""
    paths: set[str] = set()
    for _, record in records():
        if record["t"] == "file" and isinstance(record.get("path"), str):
            paths.add(record["path"])
        elif record["t"] == "gene" and record.get("source_kind") == "file":
            candidates = [record.get("source_path")] + [s[0] for s in record.get("sources") or []
                                                        if isinstance(s, list) and s]
            paths.update(p for p in candidates if isinstance(p, str))
    roots = ExportRoots((), (p for p in paths if is_absolute_anywhere(p)))

    def disk(value: Any) -> Any:
        if isinstance(value, str) and is_absolute_anywhere(value):
            return roots.ref(value) or value
        return value

    def converted() -> Iterator[tuple[int, dict[str, Any]]]:
        for lineno, record in records():
            if record["t"] == "file":
                record = {**record, "path": disk(record.get("path"))}
            elif record["t"] == "gene" and record.get("source_kind") == "file":
                spans = record.get("sources")
                record = {**record, "source_path": disk(record.get("source_path")),
                          "sources": [[disk(s[0]), *s[1:]] if isinstance(s, list) and s else s
                                      for s in spans] if isinstance(spans, list) else spans}
            yield lineno, record

    counts = dict(header.get("counts") or {})
    if "sources" in counts:  # v1 counted spans as "sources"
        counts["spans"] = counts.pop("sources")
    return {**header, "version": 2, "roots": roots.header(), "counts": counts}, converted


CONVERTERS: dict[int, Converter] = {1: _v1_to_v2}


def upgrade(header: dict[str, Any], records: Records) -> tuple[dict[str, Any], Records]:
    """(header, records) in FORMAT_VERSION, through every converter from the file's version on."""
    version = int(header["version"])
    original = version
    while version < FORMAT_VERSION:
        converter = CONVERTERS.get(version)
        if converter is None:
            raise ExportFormatError(f"no converter from export format version {version}")
        header, records = converter(header, records)
        version = int(header["version"])
    if original != version:
        header = {**header, "converted_from": original}
    return header, records
