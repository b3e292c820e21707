"""How a gene's content is stored: zlib-compressed, and as the text its full-text row indexes.

Kept apart from store.py (no SQLite, no numpy) so parse workers can compute it next to
the chunking, leaving the main process only the SQL. Source text compresses 3-4x and
reads back in ~10 µs per gene.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from helix_context.genome import fts_text


# A gene is a few KB at most ([ingest] max_chunk_chars), so a 2 KB window finds the same matches as
# zlib's default 32 KB (ratio 0.398 either way on the stdlib corpus) and halves the time: on inputs
# this small, setting up the window and hash tables costs more than compressing. Level 1 instead of
# 6 takes another quarter off (36 vs 46 ms per 2 MB of code) for a ratio of 0.409 instead of 0.387.
# Any window and level decompress with the default settings, so genes written before read back unchanged.
_WBITS = 11
_LEVEL = 1


def pack_text(text: str) -> bytes:
    return zlib.compress(text.encode("utf-8", "surrogatepass"), _LEVEL, _WBITS)


def unpack_text(blob: bytes | str) -> str:
    if isinstance(blob, str):  # tolerate hand-edited rows
        return blob
    return zlib.decompress(blob).decode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class LexicalRows:
    """A team genome's BM25 postings of one gene (genome/pg/lexical.gene_rows), computed where the gene
    was chunked: a parse worker then does the tokenizing, not the process that writes."""

    tags: str  # the tags ("\n"-joined) and the path they were computed for: a write that indexes
    path: str | None  # the gene under others computes them again
    rows: str  # COPY text, one line per term: term, count in body, tags, path, document length
    length: int
    terms: str  # its distinct terms, space-separated (lex_docs.terms)


@dataclass(frozen=True)
class StoredForm:
    packed: bytes  # the `content` column
    fts_body: str  # the full-text `body`: the content plus the split parts of its identifiers
    postings: LexicalRows | None = None  # only for a team genome (PostgreSQL)


def stored_form(content: str, *, postings_for: tuple[str, str | None] | None = None) -> StoredForm:
    """`postings_for` (tags "\n"-joined, source path): also the gene's postings, for a team genome."""
    body = fts_text.body_text(content)
    if postings_for is None:
        return StoredForm(pack_text(content), body)
    from helix_context.genome.pg.lexical import gene_rows  # tokenizer only (no database client)

    tags, path = postings_for
    rows, length, terms = gene_rows(body, tags, path)
    return StoredForm(pack_text(content), body, LexicalRows(tags, path, rows, length, terms))
