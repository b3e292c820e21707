"""The dense signal per symbol span: where one stored gene packs several small functions, each is embedded alone.

Why: storage packs small neighbours into one gene (~37 lines on the standard
library, half the code genes hold two or more symbols), and the gene's one vector
blends them all. A question in words ("reload a module that was already imported")
then finds the right gene but cannot tell `reload` from `import_module` beside it,
and a pointer at the wrong one is a miss. So the spans of the best few candidate
genes are embedded one by one, each from the same digest a gene is embedded from
(names as words, comments, then code; ingest/embed_text.py), and their cosine to
the query scores each pointer on its own.

Beyond those genes, the spans whose own words score best (at least WORDED_SHARE of the best span's,
WORDED_SPANS at most) are embedded alone too. A gene's fused score and vector speak for every function
it packs: commander's `configureOutput` ("change where the help and the error output are written") has
the best words of any span, but its gene of four methods ranks 20th and its one vector sits far from
the question, so the pointer counted that blended cosine and ranked 15th. Chosen on the development
data (docs/performance.md, session 30).

Why at query time and not at ingest: embedding every span at ingest would cost
about 2.5x the model time of the genes themselves (3,638 spans in multi-symbol genes
for 1,472 code genes on the standard library) and break the ingest-speed target;
only the spans of the best genes matter to an answer, and a bounded memory of their
vectors (least recently used first out) makes a repeated or related question free.
Vectors are kept per model, so a model change never compares vectors of two models.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from helix_context.config import EmbeddingSettings
from helix_context.ingest.embed_text import embedding_text, embedding_tokens
from helix_context.models import Gene

DENSE_GENES = 12  # best genes of the fused ranking whose spans are embedded one by one
WORDED_SPANS = 8  # beyond those genes, at most this many spans whose own words score best are embedded too
WORDED_SHARE = 0.7  # ... those whose words score at least this share of the best span's
MAX_SPANS_PER_GENE = 16  # a gene packing more symbols than this: the first ones (bounded model work)
CAPACITY = 20_000  # span vectors kept (384 float32 each: ~31 MB at most)

SpanKey = tuple[int, int]  # (gene rowid, first line of the span)


class SpanEmbedder(Protocol):
    def embed(self, texts: Sequence[str], max_tokens: int | Sequence[int] | None = None) -> np.ndarray: ...


class SpanVectors:
    """Least-recently-used memory of span vectors: (model, gene id, first, last line) → unit vector."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = max(1, capacity)
        self._vectors: OrderedDict[tuple[str, str, int, int], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._vectors)

    def get(self, key: tuple[str, str, int, int]) -> np.ndarray | None:
        with self._lock:
            vec = self._vectors.get(key)
            if vec is not None:
                self._vectors.move_to_end(key)
            return vec

    def put(self, key: tuple[str, str, int, int], vec: np.ndarray) -> None:
        with self._lock:
            self._vectors[key] = vec
            self._vectors.move_to_end(key)
            while len(self._vectors) > self.capacity:  # retention: the least recently used go first
                self._vectors.popitem(last=False)


def span_gene(gene: Gene, name: str | None, first: int, last: int) -> Gene:
    """The span as a gene of its own: its lines, its symbol's name (what embed_text reads)."""
    lines = gene.content.split("\n")
    a, b = max(0, first - gene.start_line), max(0, last - gene.start_line + 1)
    return dataclasses.replace(gene, content="\n".join(lines[a:b]), symbol=name or gene.symbol,
                               start_line=first, end_line=last, symbols=())


def model_key(embedder: Any) -> str:
    return str(getattr(embedder, "model_name", None) or getattr(embedder, "model_path", None) or type(embedder).__name__)


def chosen_spans(genes: Sequence[Gene], spans: Mapping[int, Sequence[tuple[Any, ...]]], *, best: int | None = None,
                 worded: int | None = None, share: float = WORDED_SHARE) -> dict[int, list[tuple[Any, ...]]]:
    """Gene rowid → its spans to embed alone for one query: those of the `best` first of `genes` (ranked best
    first; DENSE_GENES), and of the genes after them the `worded` spans whose own words score best (BM25, each
    span's 4th field; WORDED_SPANS), where that is at least `share` of the best span's.

    `spans`: gene rowid → its spans as (symbol or None, first, last, words, ...), as locate cuts them. Only
    code genes packing two spans or more: a gene with one span is scored by its own vector already (the
    dense scorer), and prose is scored by its gene's."""
    best = DENSE_GENES if best is None else best
    worded = WORDED_SPANS if worded is None else worded
    lead = {g.rowid for g in genes[:best]}
    packed = [g for g in genes if g.content_type == "code" and len(spans.get(g.rowid or -1, ())) >= 2]
    out = {g.rowid or -1: list(spans[g.rowid or -1])[:MAX_SPANS_PER_GENE] for g in packed if g.rowid in lead}
    top = max((span[3] for own in spans.values() for span in own), default=0.0)
    if worded <= 0 or top <= 0:
        return out
    rest = [(span[3], n, i) for n, g in enumerate(packed) if (g.rowid or -1) not in out
            for i, span in enumerate(spans[g.rowid or -1]) if span[0] is not None and span[3] >= share * top]
    for _, n, i in sorted(rest, key=lambda r: (-r[0], r[1], r[2]))[:worded]:
        rowid = packed[n].rowid or -1
        out.setdefault(rowid, []).append(spans[rowid][i])
    return out


def span_similarities(embedder: SpanEmbedder, vector: np.ndarray, genes: Sequence[Gene],
                      chosen: Mapping[int, Sequence[tuple[Any, ...]]], cfg: EmbeddingSettings,
                      memory: SpanVectors | None = None) -> dict[SpanKey, float]:
    """(gene rowid, first line) → cosine of that span to the query, for the `chosen` spans (`chosen_spans`)."""
    memory = memory if memory is not None else SpanVectors()
    key = model_key(embedder)
    wanted: list[tuple[SpanKey, tuple[str, str, int, int], Gene]] = []
    for gene in genes:
        for span in chosen.get(gene.rowid or -1, ()):
            sym, first, last = span[0], span[1], span[2]
            wanted.append(((gene.rowid or -1, first), (key, gene.gene_id, first, last),
                           span_gene(gene, getattr(sym, "name", None), first, last)))
    if not wanted:
        return {}
    found: dict[tuple[str, str, int, int], np.ndarray] = {}
    missing: dict[tuple[str, str, int, int], Gene] = {}
    for _, mkey, g in wanted:
        vec = memory.get(mkey)
        if vec is None:
            missing.setdefault(mkey, g)
        else:
            found[mkey] = vec
    if missing:
        texts = [embedding_text(g) for g in missing.values()]
        limits = [embedding_tokens(g, cfg) for g in missing.values()]
        matrix = np.asarray(embedder.embed(texts, limits), dtype=np.float32)
        for mkey, vec in zip(missing, matrix, strict=True):
            memory.put(mkey, vec)
            found[mkey] = vec
    query = np.asarray(vector, dtype=np.float32).reshape(-1)
    keys = [k for k, _, _ in wanted]
    sims = np.stack([found[m] for _, m, _ in wanted]) @ query
    return {k: float(s) for k, s in zip(keys, sims, strict=True)}
