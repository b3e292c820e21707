"""GET /genes/{gene_id} and /genes/{gene_id}/neighbors: one gene in full, and what travels with it.

Used by the MCP tools helix_gene_get / helix_neighbors: an agent holding a
gene id from /context or /context/packet can read the whole gene (content,
provenance, every source span, facts, tags) and the genes delivered together
with it before (co-activation).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import Depends, Query

from helix_context.errors import NotFound, UnprocessableRequest
from helix_context.manager import HelixContextManager
from helix_context.models import Gene
from helix_context.server.deps import get_helix

MAX_GENE_ID_CHARS = 128


def _lookup(helix: HelixContextManager, gene_id: str) -> Gene:
    gene_id = gene_id.strip()
    if not gene_id or len(gene_id) > MAX_GENE_ID_CHARS:
        raise UnprocessableRequest(f"gene_id must be 1-{MAX_GENE_ID_CHARS} characters (the 'gene_id' of a "
                                   "/context gene or /context/packet item)")
    gene = helix.genome.get_gene(gene_id)
    if gene is None:
        raise NotFound(f"no gene {gene_id!r} in the genome; gene ids come from /context 'genes', "
                       "/context/packet items or /fingerprint results")
    return gene


def gene_summary(gene: Gene) -> dict[str, Any]:
    """Pointer-sized description of a gene (no content)."""
    return {
        "gene_id": gene.gene_id,
        "src": gene.src,
        "source_path": gene.source_path,
        "start_line": gene.start_line,
        "end_line": gene.end_line,
        "symbol": gene.symbol,
        "content_type": gene.content_type,
        "project": gene.project,
        "tier": gene.tier,
    }


def gene_detail(gene: Gene, sources: list[tuple[str, int, int]]) -> dict[str, Any]:
    return {
        **gene_summary(gene),
        "language": gene.language,
        "tags": list(gene.tags),
        "facts": [[k, v] for k, v in gene.facts],
        "provenance": asdict(gene.provenance),
        "attribution": {"org": gene.org, "device": gene.device, "user": gene.user, "agent": gene.agent},
        "access_count": gene.access_count,
        "sources": [{"path": p, "start_line": s, "end_line": e} for p, s, e in sources],
        "content": gene.content,
    }


def get_gene(gene_id: str, helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    """The gene with its content, provenance, attribution, every source span, facts and tags."""
    gene = _lookup(helix, gene_id)
    sources = helix.genome.sources_of(gene.rowid) if gene.rowid is not None else []
    return gene_detail(gene, sources)


def gene_neighbors(gene_id: str, limit: int = Query(10, ge=1, le=200, description="most neighbours to return"),
                   helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    """Genes delivered together with this one before, strongest link first (score = times together)."""
    gene = _lookup(helix, gene_id)
    pairs = helix.genome.neighbors(gene.gene_id, limit=limit)
    return {
        "gene": gene_summary(gene),
        "neighbors": [{**gene_summary(other), "coactivation": score} for other, score in pairs],
    }
