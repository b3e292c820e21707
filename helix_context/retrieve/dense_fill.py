"""The dense signal while a re-embed runs: candidates the new model has not reached get their cosine now.

Why: after `[embedding] model` changes, the genome leaves the old model's vectors out of every
search (genome/vector_models.py) and re-embeds them in the background (ingest/reembed.py), which
takes minutes on a big genome. Meanwhile the dense search sees only the genes re-embedded so far,
and the fusion, which weighs dense evidence most for a question in words, pushed every other gene
down: the 66 stdlib questions asked while their genome re-embedded scored strict MRR@10 0.27–0.51,
below the lexical signals alone (0.53), against 0.63 once it was done (docs/performance.md,
"A model change"). So, until the re-embed is done, the best lexical candidates whose vectors another
model made are embedded at query time, each from the text the re-embed will store
(ingest/embed_text.py), and join the dense scores with their cosine. Their vectors are kept in a
bounded memory per model, so the next questions pay only for genes they have not met. Nothing is
written: the re-embed stays the genome's one writer of vectors.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from helix_context.config import EmbeddingSettings
from helix_context.genome.storage import GenomeStore
from helix_context.ingest.embed_text import embedding_text, embedding_tokens
from helix_context.retrieve.span_dense import SpanEmbedder, SpanVectors, model_key

FILL_GENES = 64  # lexical candidates at most whose cosine is computed at query time, best first
WHOLE = -1  # a memory key's line fields for a whole gene (a span's are its first and last line, never -1)


def lexical_leaders(per_signal: Mapping[str, Mapping[int, float]], limit: int) -> list[int]:
    """The candidates of the lexical signals, by their best rank in any one of them (then rowid), `limit` at most."""
    best: dict[int, int] = {}
    for scores in per_signal.values():
        for rank, rowid in enumerate(sorted(scores, key=lambda r: (-scores[r], r))):
            if rank < best.get(rowid, limit):
                best[rowid] = rank
    return sorted(best, key=lambda r: (best[r], r))[:limit]


def stale_cosines(genome: GenomeStore, embedder: SpanEmbedder, vector: np.ndarray,
                  lexical: Mapping[str, Mapping[int, float]], settings: EmbeddingSettings,
                  memory: SpanVectors, *, limit: int = FILL_GENES) -> dict[int, float]:
    """Rowid → cosine to the query of the best lexical candidates whose stored vector another model made
    (asked only while a gene waits for a re-embed: `genome.has_stale_vectors()`, the retriever's check)."""
    stale = genome.stale_vectors_among(lexical_leaders(lexical, limit))
    if not stale:
        return {}
    genes = genome.genes_by_rowid(stale)
    key = model_key(embedder)
    found: dict[int, np.ndarray] = {}
    missing: list[int] = []
    for rowid in (r for r in stale if r in genes):
        vec = memory.get((key, genes[rowid].gene_id, WHOLE, WHOLE))
        if vec is None:
            missing.append(rowid)
        else:
            found[rowid] = vec
    if missing:
        chosen = [genes[rowid] for rowid in missing]
        matrix = np.asarray(embedder.embed([embedding_text(g) for g in chosen],
                                           [embedding_tokens(g, settings) for g in chosen]), dtype=np.float32)
        for gene, vec in zip(chosen, matrix, strict=True):
            memory.put((key, gene.gene_id, WHOLE, WHOLE), vec)
            found[gene.rowid or -1] = vec
    query = np.asarray(vector, dtype=np.float32).reshape(-1)
    return {rowid: float(vec @ query) for rowid, vec in found.items()}
