"""Genome export / import: one versioned, compressed, checksummed file that keeps everything
that shapes an answer, and an import that treats that file as hostile input.

File layout (bytes)::

    HELIX-GENOME-EXPORT\\n                    magic line
    {"format": "helix-genome-export", ...}\\n  header: one JSON line (format, version, schema_version,
                                              roots, counts, compression, payload_bytes, payload_sha256)
    <payload>                                gzip of JSON lines, one record each, in this order:
        gene, file, symbol, link, source, session, activity, vector_change, end

The package, by concern:
    fileformat.py  magic, header, checksum, the record stream
    paths.py       paths relative to named roots (never absolute in the file)
    export.py      `helix export`
    convert.py     versioned converters for exports of older Helix versions
    validate.py    record shapes (corrupt file: refused whole) and claims (hostile record: refused alone)
    importer.py    `helix import` and `--dry-run`
    summary.py     the lines the CLI prints
SQL lives in genome/portable_sql.py.
"""

from helix_context.errors import ExportFormatError
from helix_context.portable.export import export_genome
from helix_context.portable.fileformat import FORMAT_NAME, FORMAT_VERSION, MAGIC, read_header, verify_checksum
from helix_context.portable.importer import STRATEGIES, import_genome
from helix_context.portable.summary import format_summary
from helix_context.portable.validate import TYPES, parse_remap

_GENE_TYPES = TYPES["gene"]  # the fields a gene record must carry (tests check the store has no others)

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "MAGIC", "STRATEGIES", "ExportFormatError", "export_genome",
           "format_summary", "import_genome", "parse_remap", "read_header", "verify_checksum"]
