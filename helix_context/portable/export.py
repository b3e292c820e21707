"""`helix export`: the whole genome, everything that shapes an answer, in one file.

What travels: every gene (content, provenance, attribution, tier, access counts,
retirement, facts, tags, the vector exactly as stored) with its spans; the files
table; the symbols (an answer points at a symbol's span: without them pointers lose
their names and lines); co-activation links; the sources; sessions; the activity
record; the vector change log. Rowids differ between genomes, so every reference
between records is a gene id, and every path of a file on disk is [root, relative
path] (paths.py). One read transaction: a backend writing meanwhile cannot tear it. Either backend
exports (`genome.export_reads()`: the team genome's is pg/portable.py), to the same file format.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from helix_context.genome import portable_sql as sql
from helix_context.genome.schema import SCHEMA_VERSION
from helix_context.genome.portable_sql import ExportReads
from helix_context.genome.storage import GenomeStore
from helix_context.errors import InvalidRequest
from helix_context.genome.vectors import EMBED_DIM
from helix_context.portable.fileformat import CHUNK, FORMAT_NAME, FORMAT_VERSION, MAGIC, HashingWriter, line
from helix_context.portable.paths import ExportRoots

COUNTED = ("genes", "files", "symbols", "links", "sources", "sessions", "activity", "vector_changes")


def _disk(roots: ExportRoots, kind: str, path: str | None) -> Any:
    """A file gene's path as [root, rel]; an API name stays the name it is."""
    if path is None or kind != "file":
        return path
    return roots.ref(path) or path


def _gene_record(row: dict[str, Any], spans: list[list[Any]], roots: ExportRoots) -> dict[str, Any]:
    record: dict[str, Any] = {"t": "gene"}
    kind = row["source_kind"]
    for name in sql.GENE_FIELDS:
        value = row[name]
        if name == "tags":
            value = sql.decode_tags(value)
        elif name == "facts":
            value = sql.decode_facts(value)
        elif name == "embedding":
            value = base64.b64encode(value).decode("ascii") if value else None
        elif name == "source_path":
            value = _disk(roots, kind, value)
        record[name] = value
    record["sources"] = [[_disk(roots, kind, p), start, end] for p, start, end in spans]
    return record


def _payload(reads: ExportReads, gz: Any, counts: dict[str, int], roots: ExportRoots) -> None:
    def put(kind: str, record: dict[str, Any]) -> None:
        gz.write(line(record))
        counts[kind] += 1

    for row, spans in reads.genes():
        put("genes", _gene_record(row, spans, roots))
        counts["retired_genes"] += row["retired_at"] is not None
        counts["with_embeddings"] += row["embedding"] is not None
        counts["spans"] += len(spans)
    for row in reads.files():
        put("files", {"t": "file", **row, "path": roots.ref(row["path"]) or row["path"]})
    for row in reads.symbols():
        put("symbols", {"t": "symbol", **row, "path": roots.ref(row["path"]) or row["path"]})
    for a, b, count, last_at in reads.links():
        put("links", {"t": "link", "a": a, "b": b, "count": count, "last_at": last_at})
    for row in reads.sources():
        ref = roots.ref(row["path"])
        if ref is not None:  # every source is a root (ExportRoots): this is only a guard
            put("sources", {"t": "source", "root": ref[0], "project": row["project"], "added_at": row["added_at"]})
    for row in reads.sessions():
        put("sessions", {"t": "session", **row})
    for row in reads.activity():
        put("activity", {"t": "activity", **row})
    for gene_id in reads.vector_changes():
        put("vector_changes", {"t": "vector_change", "gene": gene_id})


def _writable_target(target: Path) -> Path:
    """Where the export file goes: `target`, or the file a symbolic link there names (the link stays).

    Why: the file is renamed into place, which replaces whatever sits at the name. A link
    (`latest.helix -> /mnt/nas/...`) became a local file, and a device or a pipe (`/dev/null`,
    `/dev/stdout`, run as root) was deleted and replaced by a regular file."""
    if target.is_symlink():
        target = target.resolve()
    if target.exists() and not target.is_file():
        kind = "a folder" if target.is_dir() else "a device, pipe or socket"
        raise InvalidRequest(f"{target} is {kind}, not a file: give the name of the export file to write")
    return target


def export_genome(genome: GenomeStore, path: str | Path) -> dict[str, Any]:
    """Write the whole genome to `path` (atomically: a temp file renamed into place). Returns a summary."""
    started = time.perf_counter()
    target = _writable_target(Path(path).expanduser())
    target.parent.mkdir(parents=True, exist_ok=True)
    counts = dict.fromkeys((*COUNTED, "retired_genes", "with_embeddings", "spans"), 0)
    fd, payload_name = tempfile.mkstemp(prefix=".helix-export-", suffix=".payload", dir=target.parent)
    final_name = None
    try:
        with os.fdopen(fd, "wb") as raw:
            hashing = HashingWriter(raw)
            with gzip.GzipFile(fileobj=hashing, mode="wb", compresslevel=6, mtime=0) as gz:
                with genome.export_reads() as reads:  # one snapshot, on either backend
                    roots = ExportRoots((r["path"] for r in reads.sources()), reads.disk_paths())
                    _payload(reads, gz, counts, roots)
                    generation = genome.generation()
                gz.write(line({"t": "end", **{k: counts[k] for k in COUNTED}}))
        header = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "created_at": time.time(),
            "schema_version": SCHEMA_VERSION,
            "genome_generation": generation,
            "compression": "gzip",
            "payload_bytes": hashing.bytes,
            "payload_sha256": hashing.sha.hexdigest(),
            "embedding": {"encoding": "int8+f32scale", "dim": EMBED_DIM},
            "roots": roots.header(),
            "counts": counts,
        }
        fd, final_name = tempfile.mkstemp(prefix=".helix-export-", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "wb") as out, open(payload_name, "rb") as payload:
            out.write(MAGIC)
            out.write(json.dumps(header, sort_keys=True).encode("ascii") + b"\n")
            while chunk := payload.read(CHUNK):
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.replace(final_name, target)
        final_name = None
    finally:
        for leftover in (payload_name, final_name):
            if leftover:
                try:
                    os.unlink(leftover)
                except OSError:
                    pass
    return {"path": str(target), "format": FORMAT_NAME, "version": FORMAT_VERSION, **counts,
            "roots": header["roots"], "bytes": target.stat().st_size, "payload_sha256": header["payload_sha256"],
            "seconds": round(time.perf_counter() - started, 3)}
