"""Trust verdicts for the agent-facing packet (`/context/packet`) and the live
source check that `/context` applies before serving a gene.

Retrieval says *what* is relevant; this package says *how far an agent may
trust it right now*. Per delivered gene: live_truth = freshness × authority ×
specificity (scores.py), a live check that the source file still holds what was
indexed (live_check.py), and how relevant the item is to the query
(relevance.py). For the whole answer: coordinate confidence (coordinates.py).
verdicts.py turns these into verified / stale_risk / needs_refresh per task
type, a refresh plan, and a first-class "known empty" answer; packet.py holds
the plain data. live_serve.py re-reads changed sources for `/context`.
"""

from helix_context.weigh.coordinates import coordinate_confidence, uncovered_path_tokens
from helix_context.weigh.live_check import SOURCE_STATUSES, SourceCache, SourceCheck, check_source
from helix_context.weigh.packet import VERDICTS, Packet, PacketItem, RefreshTarget
from helix_context.weigh.scores import authority, freshness, live_truth, specificity
from helix_context.weigh.verdicts import (
    TASK_TYPES,
    refresh_targets,
    relevance_threshold,
    validate_task_type,
    verified_threshold,
    weigh_retrieval,
)

__all__ = [
    "TASK_TYPES",
    "VERDICTS",
    "SOURCE_STATUSES",
    "SourceCheck",
    "SourceCache",
    "PacketItem",
    "RefreshTarget",
    "Packet",
    "freshness",
    "authority",
    "specificity",
    "live_truth",
    "check_source",
    "coordinate_confidence",
    "uncovered_path_tokens",
    "verified_threshold",
    "relevance_threshold",
    "validate_task_type",
    "weigh_retrieval",
    "refresh_targets",
]
