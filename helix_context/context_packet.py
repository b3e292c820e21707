"""Agent-facing packets, importable as in the original Helix:

    from helix_context.context_packet import build_context_packet, get_refresh_targets
    packet = build_context_packet("where is the port set?", task_type="edit", genome=helix.genome)
"""

from __future__ import annotations

from typing import Any

from helix_context.config import Settings, load_config
from helix_context.genome.store import Genome
from helix_context.retrieve.retriever import Retriever
from helix_context.weigh import Packet, RefreshTarget, validate_task_type, weigh_retrieval


def build_context_packet(query: str, task_type: str = "edit", genome: Genome | None = None, *,
                         settings: Settings | None = None, project: str | None = None, party: str | None = None,
                         max_genes: int | None = None, retriever: Retriever | None = None) -> Packet:
    """Pointers with a verdict each (verified / stale_risk / needs_refresh) and a refresh plan.

    With only a genome, retrieval uses the dense signal when the manager that
    owns the genome has attached its embedder, lexical signals otherwise.
    """
    task = validate_task_type(task_type)
    settings = settings or load_config()
    if retriever is None:
        if genome is None:
            raise ValueError("build_context_packet needs a genome (genome=helix.genome) or a retriever")
        retriever = Retriever(genome, settings, embedder_part=getattr(genome, "embedder_part", None))
    retrieval = retriever.retrieve(query, max_genes=max_genes, project=project, party=party)
    return weigh_retrieval(retrieval, task, settings.weigh)


def get_refresh_targets(query: str, genome: Genome | None = None, *, task_type: str = "edit",
                        **kwargs: Any) -> list[RefreshTarget]:
    """Only the refresh plan: what an agent should re-read or re-ingest before trusting the answer."""
    return list(build_context_packet(query, task_type, genome, **kwargs).refresh_targets)
