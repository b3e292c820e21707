"""Genome export / import: one versioned, compressed, checksummed file.

File layout (bytes)::

    HELIX-GENOME-EXPORT\\n                    magic line
    {"format": "helix-genome-export", ...}\\n  header: one JSON line (format, version, counts,
                                              compression, payload_bytes, payload_sha256)
    <payload>                                gzip of JSON lines, one record each:
        {"t": "gene", <every genes column>, "tags": [...], "facts": [[k, v], ...],
         "embedding": <base64 of the stored int8 vector> | null, "sources": [[path, start, end], ...]}
        {"t": "file", <files columns>}
        {"t": "link", "a": gene_id, "b": gene_id, "count": n, "last_at": t}
        {"t": "end", "genes": n, "files": n, "links": n}

Everything the store keeps about a gene travels: content, provenance,
attribution (org / device / user / agent), tier, access counts, last access,
retirement, facts, tags, the embedding exactly as stored, every source span,
plus the files table and the co-activation links (by gene id, since rowids
differ between genomes). Sessions and the session buffer are not exported.

Import checks the magic, the header, the format version, the compression,
the payload length and its sha256, and parses every record before it writes
anything; then it writes everything in one genome transaction, hashing the
payload again as it reads (a file changed in between rolls the import back).
Gene ids are content hashes, so a gene already stored is the same gene: the
strategy decides whose metadata wins (skip_existing: ours; overwrite: the
file's; newest: the one verified last).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from helix_context.errors import ExportFormatError, InvalidRequest
from helix_context.genome import portable_sql as sql
from helix_context.genome.schema import SCHEMA_VERSION
from helix_context.genome.store import EMBED_DIM, Genome

FORMAT_NAME = "helix-genome-export"
FORMAT_VERSION = 1
MAGIC = b"HELIX-GENOME-EXPORT\n"
MAX_HEADER_BYTES = 1 << 20
STRATEGIES = ("skip_existing", "overwrite", "newest")
EXAMPLES = 10  # ids listed per category in a summary
EMBEDDING_BYTES = 4 + EMBED_DIM  # float32 scale + int8 per dimension (store.encode_vector)
_BATCH = 500
_CHUNK = 1 << 20


# ── hashing streams ──


class _HashingWriter:
    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.sha = hashlib.sha256()
        self.bytes = 0

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.bytes += len(data)
        return self.raw.write(data)

    def flush(self) -> None:
        self.raw.flush()


class _HashingReader:
    """Reads at most `limit` bytes of `raw`, hashing what passes through."""

    def __init__(self, raw: BinaryIO, limit: int) -> None:
        self.raw = raw
        self.left = limit
        self.sha = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        if self.left <= 0:
            return b""
        size = self.left if size is None or size < 0 else min(size, self.left)
        data = self.raw.read(size)
        self.left -= len(data)
        self.sha.update(data)
        return data

    def drain(self) -> None:
        while self.read(_CHUNK):
            pass


# ── export ──


def _gene_record(row: dict[str, Any], sources: list[list]) -> dict[str, Any]:
    record: dict[str, Any] = {"t": "gene"}
    for name in sql.GENE_FIELDS:
        value = row[name]
        if name == "tags":
            value = sql.decode_tags(value)
        elif name == "facts":
            value = sql.decode_facts(value)
        elif name == "embedding":
            value = base64.b64encode(value).decode("ascii") if value else None
        record[name] = value
    record["sources"] = sources
    return record


def _line(record: dict[str, Any]) -> bytes:
    # ensure_ascii keeps lone surrogates (possible in stored text) representable
    return json.dumps(record, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"


def export_genome(genome: Genome, path: str | Path) -> dict[str, Any]:
    """Write the whole genome to `path` (atomically: a temp file renamed into place). Returns a summary."""
    started = time.perf_counter()
    target = Path(path).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    counts = {"genes": 0, "retired_genes": 0, "sources": 0, "files": 0, "links": 0, "with_embeddings": 0}
    fd, payload_name = tempfile.mkstemp(prefix=".helix-export-", suffix=".payload", dir=target.parent)
    final_name = None
    try:
        with os.fdopen(fd, "wb") as raw:
            hashing = _HashingWriter(raw)
            with gzip.GzipFile(fileobj=hashing, mode="wb", compresslevel=6, mtime=0) as gz:
                with sql.snapshot(genome) as conn:
                    for row, sources in sql.iter_gene_rows(conn):
                        gz.write(_line(_gene_record(row, sources)))
                        counts["genes"] += 1
                        counts["retired_genes"] += row["retired_at"] is not None
                        counts["with_embeddings"] += row["embedding"] is not None
                        counts["sources"] += len(sources)
                    for row in sql.iter_file_rows(conn):
                        gz.write(_line({"t": "file", **row}))
                        counts["files"] += 1
                    for a, b, count, last_at in sql.iter_coactivation_rows(conn):
                        gz.write(_line({"t": "link", "a": a, "b": b, "count": count, "last_at": last_at}))
                        counts["links"] += 1
                    generation = genome.generation()
                gz.write(_line({"t": "end", "genes": counts["genes"], "files": counts["files"],
                                "links": counts["links"]}))
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
            "counts": counts,
        }
        fd, final_name = tempfile.mkstemp(prefix=".helix-export-", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "wb") as out, open(payload_name, "rb") as payload:
            out.write(MAGIC)
            out.write(json.dumps(header, sort_keys=True).encode("ascii") + b"\n")
            while chunk := payload.read(_CHUNK):
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
    return {
        "path": str(target),
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        **counts,
        "bytes": target.stat().st_size,
        "payload_sha256": header["payload_sha256"],
        "seconds": round(time.perf_counter() - started, 3),
    }


# ── reading and verifying ──


def read_header(path: str | Path) -> tuple[dict[str, Any], int]:
    """(header, payload offset) after checking the magic, the header and the version; ExportFormatError otherwise."""
    path = Path(path).expanduser()
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            magic = f.read(len(MAGIC))
            header_line = f.readline(MAX_HEADER_BYTES + 1)
    except FileNotFoundError:
        raise ExportFormatError(f"{path} does not exist") from None
    except IsADirectoryError:
        raise ExportFormatError(f"{path} is a folder, not an export file") from None
    except OSError as exc:
        raise ExportFormatError(f"cannot read {path}: {exc.strerror or exc}") from None
    if size == 0:
        raise ExportFormatError(f"{path} is empty: not a Helix genome export")
    if magic != MAGIC:
        what = "a bare gzip file" if magic[:2] == b"\x1f\x8b" else \
            "a SQLite database (copy genome.db instead, or export it first)" if magic.startswith(b"SQLite format") \
            else "some other file"
        raise ExportFormatError(f"{path} is not a Helix genome export (wrong magic: it looks like {what}); "
                                f"create one with `helix export FILE`")
    if not header_line.endswith(b"\n"):
        raise ExportFormatError(f"{path}: the header is truncated or corrupt (no end of line within "
                                f"{MAX_HEADER_BYTES} bytes)")
    try:
        header = json.loads(header_line)
    except ValueError:
        raise ExportFormatError(f"{path}: the header is not valid JSON; the file is corrupt") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        raise ExportFormatError(f"{path}: the header names format {header.get('format') if isinstance(header, dict) else None!r}, "
                                f"not {FORMAT_NAME!r}: not a Helix genome export")
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ExportFormatError(f"{path}: invalid format version {version!r}; the file is corrupt")
    if version > FORMAT_VERSION:
        raise ExportFormatError(f"{path} has export format version {version}, but this Helix reads up to "
                                f"{FORMAT_VERSION}: it was written by a newer Helix. Upgrade helix-context to "
                                "import it")
    if header.get("compression") != "gzip":
        raise ExportFormatError(f"{path}: unsupported compression {header.get('compression')!r} "
                                "(this Helix reads gzip)")
    payload_bytes, digest = header.get("payload_bytes"), header.get("payload_sha256")
    if not isinstance(payload_bytes, int) or payload_bytes < 0 or not isinstance(digest, str) or len(digest) != 64:
        raise ExportFormatError(f"{path}: the header lacks a valid payload_bytes / payload_sha256; the file is corrupt")
    offset = len(MAGIC) + len(header_line)
    actual = size - offset
    if actual < payload_bytes:
        raise ExportFormatError(f"{path} is truncated: the header announces {payload_bytes} payload bytes, the file "
                                f"holds {actual}. Copy or export it again")
    if actual > payload_bytes:
        raise ExportFormatError(f"{path} has {actual - payload_bytes} unexpected bytes after the payload; "
                                "the file is corrupt")
    return header, offset


def verify_checksum(path: Path, header: dict[str, Any], offset: int) -> None:
    """sha256 of the payload bytes against the header, before anything is decompressed."""
    with open(path, "rb") as f:
        f.seek(offset)
        reader = _HashingReader(f, header["payload_bytes"])
        reader.drain()
    if reader.sha.hexdigest() != header["payload_sha256"]:
        raise ExportFormatError(f"{path}: checksum mismatch (sha256 of the payload differs from the header); "
                                "the file is corrupt")


def _records(path: Path, header: dict[str, Any], offset: int) -> Iterator[dict[str, Any]]:
    """Every record of the payload, validated; the checksum is checked when the payload ends."""
    with open(path, "rb") as f:
        f.seek(offset)
        if f.read(2) != b"\x1f\x8b":
            raise ExportFormatError(f"{path}: the payload is not gzip-compressed although the header says so; "
                                    "the file is corrupt or was not written by Helix")
        f.seek(offset)
        reader = _HashingReader(f, header["payload_bytes"])
        ended = False
        try:
            # _HashingReader offers read(), all GzipFile uses; the stub asks for a whole file object
            with gzip.GzipFile(fileobj=reader, mode="rb") as gz:  # type: ignore[call-overload]
                for lineno, line in enumerate(gz, 1):
                    if ended:
                        raise ExportFormatError(f"{path}: records after the end record (line {lineno}); corrupt")
                    try:
                        record = json.loads(line)
                    except ValueError:
                        raise ExportFormatError(f"{path}: payload line {lineno} is not JSON; the file is corrupt") from None
                    _validate(record, path, lineno)
                    if record["t"] == "end":
                        ended = True
                        _check_end(record, header, path)
                        continue
                    yield record
            reader.drain()
        except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
            reader.drain()
            if reader.sha.hexdigest() != header["payload_sha256"]:
                raise ExportFormatError(f"{path}: checksum mismatch (sha256 of the payload differs from the header); "
                                        "the file is corrupt") from None
            raise ExportFormatError(f"{path}: the payload cannot be decompressed ({exc}); the file is corrupt") from None
        if reader.sha.hexdigest() != header["payload_sha256"]:
            raise ExportFormatError(f"{path}: checksum mismatch (sha256 of the payload differs from the header); "
                                    "the file is corrupt")
        if not ended:
            raise ExportFormatError(f"{path}: the payload has no end record; the file is truncated")


def _check_end(record: dict[str, Any], header: dict[str, Any], path: Path) -> None:
    counts = header.get("counts") or {}
    for key in ("genes", "files", "links"):
        if key in counts and record.get(key) != counts[key]:
            raise ExportFormatError(f"{path}: the payload holds {record.get(key)} {key} but the header announces "
                                    f"{counts[key]}; the file is corrupt")


_STR, _OPT_STR, _INT, _NUM, _OPT_NUM = "str", "str?", "int", "num", "num?"
_GENE_TYPES: dict[str, str] = {
    "gene_id": _STR, "content": _STR, "content_type": _STR, "language": _OPT_STR, "source_path": _OPT_STR,
    "project": _OPT_STR, "start_line": _INT, "end_line": _INT, "symbol": _OPT_STR, "source_kind": _STR,
    "volatility_class": _STR, "authority_class": _STR, "observed_at": _NUM, "last_verified_at": _NUM,
    "source_mtime": _OPT_NUM, "source_hash": _OPT_STR, "org": _STR, "device": _STR, "user": _STR, "agent": _STR,
    "tier": _STR, "access_count": _INT, "last_access_at": _OPT_NUM, "retired_at": _OPT_NUM, "source_changed": _INT,
}
_FILE_TYPES: dict[str, str] = {"path": _STR, "project": _OPT_STR, "size": _INT, "mtime_ns": _INT,
                               "content_hash": _STR, "genes": _INT, "ingested_at": _NUM}
_LINK_TYPES: dict[str, str] = {"a": _STR, "b": _STR, "count": _INT, "last_at": _NUM}


def _type_ok(value: Any, kind: str) -> bool:
    if kind.endswith("?") and value is None:
        return True
    kind = kind.rstrip("?")
    if kind == "str":
        return isinstance(value, str)
    if isinstance(value, bool):
        return False
    if kind == "int":
        return isinstance(value, int)
    return isinstance(value, (int, float))


def _validate(record: Any, path: Path, lineno: int) -> None:
    def bad(what: str) -> ExportFormatError:
        return ExportFormatError(f"{path}: payload line {lineno}: {what}; the file is corrupt")

    if not isinstance(record, dict) or record.get("t") not in ("gene", "file", "link", "end"):
        raise bad("not a gene / file / link / end record")
    kind = record["t"]
    types = {"gene": _GENE_TYPES, "file": _FILE_TYPES, "link": _LINK_TYPES}.get(kind, {})
    for name, expected in types.items():
        if name not in record:
            raise bad(f"{kind} record without {name!r}")
        if not _type_ok(record[name], expected):
            raise bad(f"{kind} field {name!r} has the wrong type ({type(record[name]).__name__})")
    if kind != "gene":
        return
    if not record["gene_id"] or len(record["gene_id"]) > 128:
        raise bad("gene_id is empty or too long")
    tags = record.get("tags")
    if not isinstance(tags, list) or not all(isinstance(t, str) and "\n" not in t for t in tags):
        raise bad("tags must be a list of one-line strings")
    facts = record.get("facts")
    if not isinstance(facts, list) or not all(
            isinstance(f, list) and len(f) == 2 and all(isinstance(x, str) for x in f) for f in facts):
        raise bad("facts must be a list of [key, value] strings")
    sources = record.get("sources")
    if not isinstance(sources, list) or not all(
            isinstance(s, list) and len(s) == 3 and isinstance(s[0], str) and _type_ok(s[1], _INT)
            and _type_ok(s[2], _INT) for s in sources):
        raise bad("sources must be a list of [path, start_line, end_line]")
    embedding = record.get("embedding", None)
    if embedding is not None:
        try:
            blob = base64.b64decode(embedding, validate=True) if isinstance(embedding, str) else b""
        except ValueError:
            blob = b""
        if len(blob) != EMBEDDING_BYTES:
            raise bad(f"embedding is not a base64 vector of {EMBEDDING_BYTES} bytes")


def _store_row(record: dict[str, Any]) -> dict[str, Any]:
    row = {name: record.get(name) for name in sql.GENE_FIELDS}
    row["tags"] = sql.encode_tags(record["tags"])
    row["facts"] = sql.encode_facts(record["facts"])
    row["embedding"] = base64.b64decode(record["embedding"]) if record.get("embedding") else None
    return row


# ── import ──


class _Plan:
    """Decisions and counts for one import; also what a dry run reports."""

    def __init__(self) -> None:
        self.genes = {"new": 0, "skipped": 0, "overwritten": 0}
        self.files = {"new": 0, "skipped": 0, "overwritten": 0}
        self.links = {"new": 0, "updated": 0, "kept": 0, "dangling": 0}
        self.sources_added = 0
        self.examples: dict[str, list[str]] = {"new": [], "skipped": [], "overwritten": []}

    def gene(self, outcome: str, gene_id: str) -> None:
        self.genes[outcome] += 1
        if len(self.examples[outcome]) < EXAMPLES:
            self.examples[outcome].append(gene_id)

    @property
    def changes(self) -> bool:
        return bool(self.genes["new"] or self.genes["overwritten"] or self.files["new"] or self.files["overwritten"]
                    or self.links["new"] or self.links["updated"] or self.sources_added)


def _newer(incoming: tuple[float, ...], stored: tuple[float, ...]) -> bool:
    return tuple(float(x or 0.0) for x in incoming) > tuple(float(x or 0.0) for x in stored)


def _decide(strategy: str, stored: tuple[float, ...] | None, incoming: tuple[float, ...]) -> str:
    if stored is None:
        return "new"
    if strategy == "overwrite" or (strategy == "newest" and _newer(incoming, stored)):
        return "overwritten"
    return "skipped"


class _NothingToDo(Exception):
    """Rolls back an import that changed nothing, so the genome's generation stays put."""


def _apply(conn: Any, records: Iterator[dict[str, Any]], strategy: str, plan: _Plan, *, write: bool) -> None:
    """Walk the records, deciding (and, when write, writing) each; the file lists genes, then files, then links."""
    genes: list[dict[str, Any]] = []
    files: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    planned: set[str] = set()  # genes a dry run would have added (they exist for the links that follow)

    def flush_genes() -> None:
        stored = sql.existing_genes(conn, [r["gene_id"] for r in genes])
        for record in genes:
            gid = record["gene_id"]
            known = stored.get(gid)
            if known is None and gid in planned:  # listed twice in one file: the second is a repeat
                known = (0, float("inf"), float("inf"))
            outcome = _decide(strategy, None if known is None else known[1:],
                              (record["last_verified_at"], record["observed_at"]))
            known_rowid = 0 if known is None else known[0]
            plan.gene(outcome, gid)
            if outcome == "skipped":
                continue
            if not write:
                planned.add(gid)
                plan.sources_added += (len(record["sources"]) if outcome == "new" or known_rowid <= 0
                                       else sql.missing_sources(conn, known_rowid, record["sources"]))
                continue
            row = _store_row(record)
            if outcome == "new":
                rowid = sql.insert_gene(conn, row)
                stored[gid] = (rowid, row["last_verified_at"], row["observed_at"])
            else:
                rowid = known_rowid
                sql.overwrite_gene(conn, rowid, row)
            plan.sources_added += sql.add_sources(conn, rowid, record["sources"])
        genes.clear()

    def flush_files() -> None:
        stored = sql.existing_files(conn, [r["path"] for r in files])
        for record in files:
            outcome = _decide(strategy, None if record["path"] not in stored else (stored[record["path"]],),
                              (record["ingested_at"],))
            plan.files[outcome] += 1
            if write and outcome != "skipped":
                sql.upsert_file(conn, record)
                stored[record["path"]] = record["ingested_at"]
        files.clear()

    def flush_links() -> None:
        rowids = sql.rowids_for(conn, [gid for r in links for gid in (r["a"], r["b"])])
        for record in links:
            a, b = rowids.get(record["a"]), rowids.get(record["b"])
            if a is None and record["a"] in planned:
                a = -1
            if b is None and record["b"] in planned:
                b = -1
            if a is None or b is None or record["a"] == record["b"]:
                plan.links["dangling"] += 1
                continue
            state = sql.link_state(conn, a, b) if a > 0 and b > 0 else None
            if state is None:
                outcome = "new"
            elif strategy == "overwrite" or (strategy == "newest" and _newer((record["last_at"],), (state[1],))):
                outcome = "updated"
            else:
                outcome = "kept"
            plan.links[outcome] += 1
            if write and outcome != "kept":
                sql.write_link(conn, a, b, record["count"], record["last_at"])
        links.clear()

    for record in records:
        kind = record["t"]
        if kind == "gene":
            genes.append(record)
            if len(genes) >= _BATCH:
                flush_genes()
        elif kind == "file":
            files.append(record)
            if len(files) >= _BATCH:
                flush_files()
        else:
            if genes:  # links refer to genes: all genes before them must be in place
                flush_genes()
            links.append(record)
            if len(links) >= _BATCH:
                flush_links()
    flush_genes()
    flush_files()
    flush_links()


def import_genome(genome: Genome, path: str | Path, strategy: str = "skip_existing",
                  dry_run: bool = False) -> dict[str, Any]:
    """Merge an export into `genome`. dry_run: report what would change and write nothing.

    strategy for a gene / file / link already stored: skip_existing keeps ours, overwrite takes the
    file's, newest keeps whichever was verified (genes), ingested (files) or co-activated (links) last.
    Raises ExportFormatError (a ValueError) for a file that is not a valid export; nothing is written then.
    """
    if strategy not in STRATEGIES:
        raise InvalidRequest(f"unknown import strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
    started = time.perf_counter()
    source = Path(path).expanduser()
    header, offset = read_header(source)
    verify_checksum(source, header, offset)
    generation_before = genome.generation()

    # pass 1: checksum, decompression and every record, before anything is written
    plan = _Plan()
    _apply(genome.conn, _records(source, header, offset), strategy, plan, write=False)
    if not dry_run and plan.changes:
        # pass 2: the same walk in one transaction; the payload is hashed again as it is read
        plan = _Plan()
        try:
            with genome.transaction() as tx:
                _apply(tx, _records(source, header, offset), strategy, plan, write=True)
                if not plan.changes:
                    raise _NothingToDo
        except _NothingToDo:
            pass
    return {
        "path": str(source),
        "strategy": strategy,
        "dry_run": dry_run,
        "format_version": header["version"],
        "created_at": header.get("created_at"),
        "in_file": header.get("counts", {}),
        "genes": plan.genes,
        "files": plan.files,
        "links": plan.links,
        "sources_added": plan.sources_added,
        "examples": plan.examples,
        "would_change": plan.changes,
        "changed": plan.changes and not dry_run,
        "generation_before": generation_before,
        "generation_after": genome.generation(),
        "seconds": round(time.perf_counter() - started, 3),
    }


def format_summary(summary: dict[str, Any]) -> str:
    """Human lines for `helix export` / `helix import` (the CLI prints them; --json prints the dict)."""
    if "payload_sha256" in summary:
        return (f"exported {summary['genes']} genes ({summary['retired_genes']} retired, "
                f"{summary['with_embeddings']} with embeddings), {summary['sources']} sources, {summary['files']} "
                f"files, {summary['links']} co-activation links to {summary['path']} ({summary['bytes']} bytes, "
                f"sha256 {summary['payload_sha256'][:12]}…)")
    g, f, k = summary["genes"], summary["files"], summary["links"]
    if summary["dry_run"]:
        head = "dry run, nothing written: " + ("the import would change the genome" if summary["would_change"]
                                               else "the import would change nothing")
    else:
        head = "imported: the genome changed" if summary["changed"] else "imported: nothing to change"
    lines = [
        f"{head} (strategy {summary['strategy']})",
        f"genes   new {g['new']}, skipped {g['skipped']}, overwritten {g['overwritten']}; "
        f"sources added {summary['sources_added']}",
        f"files   new {f['new']}, skipped {f['skipped']}, overwritten {f['overwritten']}",
        f"links   new {k['new']}, updated {k['updated']}, kept {k['kept']}, dangling {k['dangling']}",
    ]
    for outcome, ids in summary["examples"].items():
        if ids:
            lines.append(f"e.g. {outcome}: " + ", ".join(ids))
    return "\n".join(lines)
