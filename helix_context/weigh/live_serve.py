"""The live source check applied to what `/context` (and so the proxy) is about to serve.

An index is a snapshot; a file edited after ingest makes its genes lie. Before
a gene's text reaches a model, its source is checked the way the packet checks
it (stat first, hash only when the mtime moved — live_check.py), and then:

- unchanged, or not a file (API text, session notes): served as stored;
- changed: the file is re-read and re-chunked with the ingest chunker, and the
  gene's span is located again (the same text at new lines, a chunk that now
  holds its text, the same symbol, or the most similar chunk). Found: the
  current text is served in its place, with its current lines. Not found: the
  gene is left out;
- missing (deleted, renamed away, no longer a regular file): left out.

On a team genome (sources/roots.py) a shared gene is checked against this machine's checkout of
its root: the developer's own uncommitted edits win over the shared text for their paths, and
`text_from` says for each served gene whether its text is the shared index's or the local file's.

Nothing is written to the genome here: re-ingest (the file watcher, `helix
ingest`) stays the one writer. What happened is reported, so ContextHealth and
the expressed context can say so.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass

from helix_context.ingest.chunk import chunk_text
from helix_context.ingest.detect import is_binary
from helix_context.ingest.facts import extract_facts
from helix_context.ingest.genes import gene_id_for
from helix_context.models import Chunk, Gene, ScoredGene
from helix_context.safe_open import Refusal
from helix_context.sources.roots import RootMap, is_shared
from helix_context.weigh.live_check import SourceCache, check_source

# a changed gene is matched to a current chunk only when their lines are this similar
# (difflib ratio over lines): below it the span was rewritten, not edited, and the
# stored gene says nothing reliable about where its answer now is
MIN_SPAN_SIMILARITY = 0.5
_SIMILARITY_CANDIDATES = 400  # chunks compared per changed file, at most


@dataclass(frozen=True)
class ServedSource:
    """What the live check did to one gene about to be served."""

    src: str  # the stored gene's path:lines
    action: str  # refreshed | dropped
    reason: str


@dataclass(frozen=True)
class LiveServe:
    """Genes fit to serve (current text), and what was refreshed or left out on the way."""

    items: tuple[ScoredGene, ...]
    refreshed: tuple[ServedSource, ...] = ()
    dropped: tuple[ServedSource, ...] = ()
    stats: int = 0  # stat() calls made
    hashes: int = 0  # files hashed
    # served gene's src → "shared" (the team genome's text; this checkout holds the same, or its root
    # is not mapped here) or "local" (this machine's file differs: its current text was served)
    text_from: tuple[tuple[str, str], ...] = ()

    @property
    def touched(self) -> bool:
        return bool(self.refreshed or self.dropped)


@dataclass
class _Current:
    """A changed file as it is now: its chunks, or why it cannot be read."""

    chunks: list[Chunk]
    error: str = ""
    mtime: float | None = None
    digest: str | None = None


def _read_current(gene: Gene, cache: SourceCache, max_chunk_chars: int) -> _Current:
    got = cache.read(gene.source_path or "")
    if isinstance(got, Refusal):
        if got.link:
            # never re-read through a link swapped in since ingest: re-ingest decides what to follow
            return _Current([], "it is reached through a symbolic link now; re-ingest it to read it again")
        if got.reason.startswith("too large"):
            return _Current([], f"it grew past [ingest] max_file_bytes ({cache.max_bytes} bytes)")
        return _Current([], f"cannot re-read it: {got.reason}")
    data = got.data
    if is_binary(data):
        return _Current([], "it is now a binary file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return _Current([], "it is no longer valid UTF-8")
    if text.startswith("\ufeff"):
        text = text[1:]
    chunks = chunk_text(text, gene.content_type, gene.language, max_chunk_chars)
    return _Current(chunks, mtime=got.mtime_ns / 1e9, digest=hashlib.sha256(data).hexdigest())


def _similarity(a: str, b: str) -> float:
    matcher = difflib.SequenceMatcher(None, a.splitlines(), b.splitlines(), autojunk=False)
    if matcher.real_quick_ratio() < MIN_SPAN_SIMILARITY or matcher.quick_ratio() < MIN_SPAN_SIMILARITY:
        return 0.0
    return matcher.ratio()


def locate_span(gene: Gene, chunks: Sequence[Chunk]) -> tuple[Chunk | None, str]:
    """The current chunk that holds what the stored gene held, and how it was found."""
    for chunk in chunks:
        if chunk.content == gene.content:
            return chunk, "same text" + ("" if chunk.start_line == gene.start_line else " at new lines")
    old = gene.content.strip()
    if old:
        holding = [c for c in chunks if old in c.content]
        if holding:  # still there verbatim, in a chunk that grew around it
            return holding[0], "same text within a larger span"
    if gene.symbol:
        named = [c for c in chunks if c.symbol == gene.symbol]
        if len(named) == 1:
            return named[0], f"same symbol {gene.symbol}"
    # nearest chunks by position first: an edit rarely moves a span far
    ordered = sorted(chunks, key=lambda c: abs(c.start_line - gene.start_line))[:_SIMILARITY_CANDIDATES]
    best, best_ratio = None, 0.0
    for chunk in ordered:
        ratio = _similarity(gene.content, chunk.content)
        if ratio > best_ratio:
            best, best_ratio = chunk, ratio
    if best is not None and best_ratio >= MIN_SPAN_SIMILARITY:
        return best, f"{best_ratio:.0%} of its lines still there"
    return None, "its text is no longer in the file"


def _refreshed_gene(gene: Gene, chunk: Chunk, current: _Current, now: float) -> Gene:
    prov = dataclasses.replace(gene.provenance, observed_at=now, last_verified_at=now,
                               source_mtime=current.mtime, source_hash=current.digest)
    return dataclasses.replace(
        gene, gene_id=gene_id_for(chunk.content, gene.provenance.source_kind, gene.project), content=chunk.content, start_line=chunk.start_line,
        end_line=chunk.end_line, symbol=chunk.symbol or gene.symbol,
        facts=tuple(extract_facts(chunk.content, chunk.content_type, chunk.language)), provenance=prov)


def live_serve(items: Sequence[ScoredGene], *, max_file_bytes: int, max_chunk_chars: int,
               now: float | None = None, cache: SourceCache | None = None, read_timeout_s: float = 10.0,
               roots: RootMap | None = None) -> LiveServe:
    """Check every gene about to be served against its source file; see the module docstring.

    Order and scores are kept; a refreshed gene that lands on a span already served is served once.
    """
    now = time.time() if now is None else now
    cache = cache if cache is not None else SourceCache(max_file_bytes, read_timeout_s, roots)
    current: dict[str, _Current] = {}
    kept: list[ScoredGene] = []
    refreshed: list[ServedSource] = []
    dropped: list[ServedSource] = []
    spans: set[tuple[str, int, int]] = set()
    text_from: list[tuple[str, str]] = []
    for item in items:
        gene = item.gene
        shared = is_shared(gene.source_path)
        check = check_source(gene, cache)
        if check.status == "missing":
            dropped.append(ServedSource(gene.src, "dropped", f"source is gone: {check.detail}"))
            continue
        if check.status == "changed":
            key = cache.key(gene.source_path or "")
            if key not in current:
                current[key] = _read_current(gene, cache, max_chunk_chars)
            now_file = current[key]
            if now_file.error:
                dropped.append(ServedSource(gene.src, "dropped", f"source changed and {now_file.error}"))
                continue
            chunk, how = locate_span(gene, now_file.chunks)
            if chunk is None:
                dropped.append(ServedSource(gene.src, "dropped", f"source changed and {how}"))
                continue
            gene = _refreshed_gene(gene, chunk, now_file, now)
            said = (f"your local copy ({cache.key(gene.source_path or '')}) differs from the shared index; "
                    f"served your local text of {gene.src} ({how})") if shared else (
                    f"source changed; served {gene.src} as it is now ({how})")
            refreshed.append(ServedSource(item.gene.src, "refreshed", said))
            item = dataclasses.replace(item, gene=gene)
        span = (gene.source_path or gene.gene_id, gene.start_line, gene.end_line)
        if span in spans:
            continue
        spans.add(span)
        kept.append(item)
        if shared:
            text_from.append((gene.src, "local" if check.status == "changed" else "shared"))
    return LiveServe(tuple(kept), tuple(refreshed), tuple(dropped), cache.stats, cache.hashes, tuple(text_from))
