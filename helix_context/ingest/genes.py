"""Text → genes: chunk, tag, extract facts, attach provenance and attribution.

A pure function of the text and the settings, kept apart from the pipeline so a
parse worker process imports only what parsing needs (no SQLite, no numpy).
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections.abc import Sequence
from typing import Protocol

from helix_context.config import Settings
from helix_context.ingest.chunk import chunk_text
from helix_context.ingest.detect import detect_type
from helix_context.ingest.facts import extract_facts
from helix_context.ingest.symbols import find_symbols
from helix_context.models import CONTENT_TYPES, Chunk, Gene, Provenance, Symbol

_VOLATILITY = {"log": "hot", "config": "medium", "json": "medium", "diff": "medium"}


class TaggerLike(Protocol):
    def tag_many(self, chunks: Sequence[Chunk], path: str | None) -> list[tuple[str, ...]]: ...


def gene_id_for(content: str, source_kind: str = "file", project: str | None = None) -> str:
    """The content hash; text that did not come from a file on disk hashes with its kind in front, and
    text of a project with the project's name.

    Why: identical chunks are stored once, and the first writer's provenance stays on the row. Kept
    apart, API text (or a session note) that copies a chunk of a file can never own that file's gene
    and make it look like API text (unverifiable, pointing at another name). Likewise a gene has one
    project: a file whose text another project already held (a second checkout, a vendored copy)
    joined nothing of its own, so its project stayed unknown and questions scoped to it were answered
    from the other project's files. Within a project identical chunks are still stored once.
    """
    data = content if source_kind == "file" else f"{source_kind}\x00{content}"
    if project:  # length-prefixed: no name and text can spell another name and text
        data = f"{len(project)}:{project}\x00{data}"
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def make_genes(text: str, *, settings: Settings, tagger: TaggerLike | None, path: str | None,
               content_type: str | None, language: str | None = None, project: str | None,
               provenance: Provenance) -> list[Gene]:
    detected_type, detected_lang = detect_type(path, text)
    ctype = content_type if content_type in CONTENT_TYPES else detected_type
    lang = language or detected_lang
    chunks = chunk_text(text, ctype, lang, settings.ingest.max_chunk_chars)
    if not chunks:
        return []
    tags = tagger.tag_many(chunks, path) if tagger is not None else [() for _ in chunks]
    attribution = settings.attribution
    volatility = provenance.volatility_class
    if volatility == "stable" and ctype in _VOLATILITY:
        volatility = _VOLATILITY[ctype]
    prov = Provenance(
        source_kind=provenance.source_kind,
        volatility_class=volatility,
        authority_class=provenance.authority_class,
        observed_at=provenance.observed_at,
        last_verified_at=provenance.last_verified_at,
        source_mtime=provenance.source_mtime,
        source_hash=provenance.source_hash,
    )
    held = _symbols_by_chunk(chunks, find_symbols(text, ctype, lang))
    genes = []
    for chunk, chunk_tags, symbols in zip(chunks, tags, held):
        facts = tuple(extract_facts(chunk.content, chunk.content_type, chunk.language))
        genes.append(Gene(
            gene_id=gene_id_for(chunk.content, provenance.source_kind, project),
            content=chunk.content,
            content_type=chunk.content_type,
            language=chunk.language,
            source_path=path,
            project=project,
            start_line=chunk.start_line,
            end_line=chunk.end_line,
            symbol=chunk.symbol,
            tags=tuple(chunk_tags),
            facts=facts,
            provenance=prov,
            org=attribution.org,
            device=attribution.device,
            user=attribution.user,
            agent=attribution.agent,
            symbols=symbols,
        ))
    return genes


def _symbols_by_chunk(chunks: Sequence[Chunk], symbols: list[Symbol]) -> list[tuple[Symbol, ...]]:
    """Each symbol goes with the chunk that holds its first line (or the next chunk, past a gap)."""
    held: list[list[Symbol]] = [[] for _ in chunks]
    if not symbols:
        return [()] * len(chunks)
    starts = [c.start_line for c in chunks]
    for sym in symbols:
        i = bisect_right(starts, sym.start_line) - 1
        if i < 0 or chunks[i].end_line < sym.start_line:
            i += 1
        if 0 <= i < len(chunks):
            held[i].append(sym)
    return [tuple(h) for h in held]
