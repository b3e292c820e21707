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
from helix_context.models import Gene, Pointer, QuerySignals, Retrieval, ScoredGene
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
    retrieval, pieces = fold_pieces(retrieval)
    cache = SourceCache(settings.ingest.max_file_bytes, settings.ingest.read_timeout_s, RootMap.load(settings.home))
    overlay = overlay_shared(retrieval, cache, max_chunk_chars=settings.ingest.max_chunk_chars)  # team genomes
    retrieval = overlay.retrieval
    packet = weigh_retrieval(retrieval, task, settings.weigh,
                             term_weights=query_term_weights(retriever, retrieval.query, retrieval.project), source_cache=cache,
                             pieces=pieces)
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


def _best_pointers(pointers: Sequence[Pointer]) -> dict[str, Pointer]:
    """Gene id → the best pointer into that gene (pointers come best first)."""
    best: dict[str, Pointer] = {}
    for p in pointers:
        best.setdefault(p.gene.gene_id, p)
    return best


def fold_pieces(retrieval: Retrieval) -> tuple[Retrieval, dict[str, list[Gene]]]:
    """One item per definition: the genes that only continue a definition another item points at leave the list.

    A function too long for one stored gene is one pointer, named for it and spanning all its lines
    (retrieve/locate.py), but the packet lists genes: it listed `Flask.url_for` (lines 1003-1127) and then two
    nameless items at 1041-1087 and 1089-1127, the same function's lines again, one of them verified where the
    named item was not. An item with no symbol of its own whose lines lie inside the symbol another item points at,
    in the same file, is folded into that item (the first such, best first); returns the retrieval without them
    and, per kept gene id, the genes folded into it, whose words count for its relevance (weigh_retrieval).
    """
    best = _best_pointers(retrieval.pointers)
    named: list[tuple[str, Pointer]] = []  # (gene id, its pointer) of the items that point at a symbol
    for sg in retrieval.items:
        p = best.get(sg.gene.gene_id)
        if p is not None and p.symbol is not None and p.path == sg.gene.source_path:
            named.append((sg.gene.gene_id, p))
    pieces: dict[str, list[Gene]] = {}
    kept: list[ScoredGene] = []
    for sg in retrieval.items:
        gene, p = sg.gene, best.get(sg.gene.gene_id)
        lines = (p.start_line, p.end_line) if p is not None and p.path == gene.source_path else \
            (gene.start_line, gene.end_line)
        into = None if p is not None and p.symbol is not None else next(
            (gid for gid, q in named if gid != gene.gene_id and q.path == gene.source_path
             and q.start_line <= lines[0] and lines[1] <= q.end_line), None)
        if into is None:
            kept.append(sg)
        else:
            pieces.setdefault(into, []).append(gene)
    if not pieces:
        return retrieval, pieces
    return dataclasses.replace(retrieval, items=tuple(kept)), pieces


def point_at_symbols(packet: Packet, pointers: Sequence[Pointer], group_by: str = "symbol",
                     mass: dict[str, float] | None = None, mass_weight: float = 0.0) -> Packet:
    """Each item points at the symbol of its gene that matched best, not at the whole stored gene.

    The verdict stays the gene's (freshness and the live source check are per stored text).
    """
    best = _best_pointers(pointers)

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
