"""The export file itself: magic line, one JSON header line, a gzip payload of JSON lines.

Reading checks the magic, the header, the format version, the compression, the payload
length and its sha256 before anything is decompressed, and hashes the payload again
while the records stream out (a file changed in between is caught at its end).
Records come out as plain dicts of the file's own version; convert.py brings older
versions up to date and validate.py decides what may be stored.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from helix_context.errors import ExportFormatError

FORMAT_NAME = "helix-genome-export"
FORMAT_VERSION = 2
MAGIC = b"HELIX-GENOME-EXPORT\n"
MAX_HEADER_BYTES = 1 << 20
CHUNK = 1 << 20
RECORD_KINDS = ("gene", "file", "symbol", "link", "source", "session", "activity", "vector_change", "end")


class HashingWriter:
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


class HashingReader:
    """Reads at most `limit` bytes of `raw`, hashing what passes through."""

    def __init__(self, raw: BinaryIO, limit: int) -> None:
        self.raw = raw
        self.left = limit
        self.sha = hashlib.sha256()

    def read(self, size: int | None = -1) -> bytes:
        if self.left <= 0:
            return b""
        size = self.left if size is None or size < 0 else min(size, self.left)
        data = self.raw.read(size)
        self.left -= len(data)
        self.sha.update(data)
        return data

    def drain(self) -> None:
        while self.read(CHUNK):
            pass


def line(record: dict[str, Any]) -> bytes:
    # ensure_ascii keeps lone surrogates (possible in stored text) representable
    return json.dumps(record, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"


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
        named = header.get("format") if isinstance(header, dict) else None
        raise ExportFormatError(f"{path}: the header names format {named!r}, not {FORMAT_NAME!r}: "
                                "not a Helix genome export")
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


def _mismatch(path: Path) -> ExportFormatError:
    return ExportFormatError(f"{path}: checksum mismatch (sha256 of the payload differs from the header); "
                             "the file is corrupt")


def verify_checksum(path: Path, header: dict[str, Any], offset: int) -> None:
    """sha256 of the payload bytes against the header, before anything is decompressed."""
    with open(path, "rb") as f:
        f.seek(offset)
        reader = HashingReader(f, header["payload_bytes"])
        reader.drain()
    if reader.sha.hexdigest() != header["payload_sha256"]:
        raise _mismatch(path)


# The longest payload line read: a gene's text is at most MAX_GENE_CHARS (validate.py), six bytes each as a JSON
# escape, with its vector and tags. Why a bound: gzip turns a 300 KB file into a 300 MB line.
MAX_RECORD_BYTES = 1 << 20


def raw_records(path: Path, header: dict[str, Any], offset: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """(payload line number, record) for every record before the end record; the checksum is checked when
    the payload ends. Only the envelope is checked here (a JSON object with a known `t`)."""
    with open(path, "rb") as f:
        f.seek(offset)
        if f.read(2) != b"\x1f\x8b":
            raise ExportFormatError(f"{path}: the payload is not gzip-compressed although the header says so; "
                                    "the file is corrupt or was not written by Helix")
        f.seek(offset)
        reader = HashingReader(f, header["payload_bytes"])
        ended = False
        try:
            with gzip.GzipFile(fileobj=reader, mode="rb") as gz:  # type: ignore[call-overload]  # duck-typed reader
                lineno = 0
                while text := gz.readline(MAX_RECORD_BYTES + 1):  # bounded: a tiny file may hold a huge line
                    lineno += 1
                    if len(text) > MAX_RECORD_BYTES:
                        raise ExportFormatError(f"{path}: payload line {lineno} is over {MAX_RECORD_BYTES} bytes, "
                                                "longer than any record Helix writes; the file is corrupt")
                    if ended:
                        raise ExportFormatError(f"{path}: records after the end record (line {lineno}); corrupt")
                    try:
                        record = json.loads(text)
                    except ValueError:
                        raise ExportFormatError(f"{path}: payload line {lineno} is not JSON; "
                                                "the file is corrupt") from None
                    if not isinstance(record, dict) or record.get("t") not in RECORD_KINDS:
                        raise ExportFormatError(f"{path}: payload line {lineno}: not a record of a known kind; "
                                                "the file is corrupt")
                    if record["t"] == "end":
                        ended = True
                        check_end(record, header, path)
                        continue
                    yield lineno, record
            reader.drain()
        except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
            reader.drain()
            if reader.sha.hexdigest() != header["payload_sha256"]:
                raise _mismatch(path) from None
            raise ExportFormatError(f"{path}: the payload cannot be decompressed ({exc}); the file is corrupt") from None
        if reader.sha.hexdigest() != header["payload_sha256"]:
            raise _mismatch(path)
        if not ended:
            raise ExportFormatError(f"{path}: the payload has no end record; the file is truncated")


def check_end(record: dict[str, Any], header: dict[str, Any], path: Path) -> None:
    """The end record's counts against the header's (every kind both name)."""
    counts = header.get("counts") or {}
    for key, value in record.items():
        if key != "t" and key in counts and value != counts[key]:
            raise ExportFormatError(f"{path}: the payload holds {value} {key} but the header announces "
                                    f"{counts[key]}; the file is corrupt")
