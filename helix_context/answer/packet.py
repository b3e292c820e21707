"""Agent-facing packets, importable as in the original Helix:

    from helix_context.answer.packet import build_context_packet, get_refresh_targets
    packet = build_context_packet("where is the port set?", task_type="edit", genome=helix.genome)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from helix_context.config import Settings, load_config
from helix_context.genome.storage import GenomeStore
from helix_context.models import Pointer, QuerySignals
from helix_context.retrieve.locate import GROUP_BY, file_hit_dict, rank_files
from helix_context.retrieve.retriever import EmbedderSource, Retriever
from helix_context.retrieve.scope import Scope
from helix_context.sources.roots import RootMap
from helix_context.weigh import Packet, PacketItem, RefreshTarget, SourceCache, validate_task_type, weigh_retrieval
from helix_context.weigh.overlay import mark_items, overlay_shared
from helix_context.retrieve.silence_gate import scoped_term_weights


def build_context_packet(query: str, task_type: str = "edit", genome: GenomeStore | None = None, *,
                         settings: Settings | None = None, project: str | Sequence[str] | Scope | None = None,
                         party: str | None = None,
                         max_genes: int | None = None, retriever: Retriever | None = None,
                         embedder: EmbedderSource | None = None,
                         group_by: str = "symbol") -> Packet:
    """Pointers with a verdict each (verified / stale_risk / needs_refresh) and a refresh plan.

    With only a genome, retrieval uses the dense signal when `embedder` is given
    (e.g. ``embedder=helix.embedder_part``), lexical signals otherwise.
    """
    task = validate_task_type(task_type)
    settings = settings or load_config()
    if retriever is None:
        if genome is None:
            raise ValueError("build_context_packet needs a genome (genome=helix.genome) or a retriever")
        retriever = Retriever(genome, settings, embedder_part=embedder)
    if group_by not in GROUP_BY:
        raise ValueError(f"group_by must be one of {', '.join(GROUP_BY)}, got {group_by!r}")
    retrieval = retriever.retrieve(query, max_genes=max_genes, project=project, party=party, pointers=True)
    cache = SourceCache(settings.ingest.max_file_bytes, settings.ingest.read_timeout_s, RootMap.load(settings.home))
    overlay = overlay_shared(retrieval, cache, max_chunk_chars=settings.ingest.max_chunk_chars)  # team genomes
    retrieval = overlay.retrieval
    packet = weigh_retrieval(retrieval, task, settings.weigh,
                             term_weights=query_term_weights(retriever, retrieval.query, retrieval.project), source_cache=cache)
    packet = mark_items(packet, overlay.text_from, cache)
    packet = dataclasses.replace(packet, project=retrieval.project)
    if retrieval.silence:  # the message is about nothing in the scoped project: say why first
        packet = dataclasses.replace(packet, known_empty=True, notes=(f"silent: {retrieval.silence}", *packet.notes))
    return point_at_symbols(packet, retrieval.pointers, group_by, retrieval.file_mass, retriever.locate_weights.mass)


def query_term_weights(retriever: Retriever, qs: QuerySignals, project: str | None = None) -> dict[str, float]:
    """The query's words → idf in the project that answered (`project`: "a" or "a,b"; None: the genome),
    for the relevance half of each verdict (retrieve/silence_gate.py says why the project's own counts).

    The counts are exact, remembered per generation (a count of live genes scans the genes table:
    ~80 ms at 100k genes, on every packet before).
    """
    return scoped_term_weights(retriever, qs, tuple(project.split(",")) if project else ())


def point_at_symbols(packet: Packet, pointers: Sequence[Pointer], group_by: str = "symbol",
                     mass: dict[str, float] | None = None, mass_weight: float = 0.0) -> Packet:
    """Each item points at the symbol of its gene that matched best, not at the whole stored gene.

    The verdict stays the gene's (freshness and the live source check are per stored text).
    """
    best: dict[str, Pointer] = {}
    for p in pointers:
        best.setdefault(p.gene.gene_id, p)

    def narrow(item: PacketItem) -> PacketItem:
        p = best.get(item.gene_id)
        if p is None or p.path != item.source_id:
            return item
        return dataclasses.replace(item, symbol=p.symbol, kind=p.kind, start_line=p.start_line, end_line=p.end_line,
                                   src=f"{p.path}:{p.start_line}-{p.end_line}")

    files: tuple[dict[str, Any], ...] = ()
    if group_by == "file":
        shown = {i.gene_id for i in packet.items}
        files = tuple(file_hit_dict(h) for h in rank_files([p for p in pointers if p.gene.gene_id in shown],
                                                           mass=mass, mass_weight=mass_weight))
    return dataclasses.replace(packet, verified=tuple(map(narrow, packet.verified)),
                               stale_risk=tuple(map(narrow, packet.stale_risk)), files=files)


def get_refresh_targets(query: str, genome: GenomeStore | None = None, *, task_type: str = "edit",
                        **kwargs: Any) -> list[RefreshTarget]:
    """Only the refresh plan: what an agent should re-read or re-ingest before trusting the answer."""
    return list(build_context_packet(query, task_type, genome, **kwargs).refresh_targets)
