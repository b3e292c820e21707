"""The agent-facing packet's plain data: items with a verdict, refresh targets, the packet."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from helix_context.query_text import echo

VERDICTS = ("verified", "stale_risk", "needs_refresh")


@dataclass(frozen=True)
class PacketItem:
    gene_id: str
    source_id: str | None  # the source path, None for non-file genes
    start_line: int
    end_line: int
    src: str  # "path:a-b"
    verdict: str  # verified | stale_risk | needs_refresh
    live_truth: float
    freshness: float
    authority: float
    specificity: float
    source_check: str  # unchanged | changed | missing | unknown
    score: float
    signals: dict[str, float] = field(default_factory=dict)
    reason: str = ""
    preview: str = ""
    symbol: str | None = None  # the function / method / class / constant that matched (its span is start..end)
    kind: str | None = None
    relevance: float = 1.0  # share of the query's idf mass the item holds (weigh/relevance.py)
    project: str | None = None  # the project the item's gene belongs to
    # a team genome's shared gene (weigh/overlay.py): "shared" (the team's indexed text) or "local"
    # (this machine's file differs, and its text was used); empty for a machine's own genome
    text_from: str = ""
    local_path: str | None = None  # where a shared gene's file is on this machine

    def to_dict(self) -> dict[str, Any]:
        return {
            "gene_id": self.gene_id,
            "source_id": self.source_id,
            "project": self.project,
            "symbol": self.symbol,
            "kind": self.kind,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "src": self.src,
            "verdict": self.verdict,
            "relevance": round(self.relevance, 4),
            "live_truth": round(self.live_truth, 4),
            "freshness": round(self.freshness, 4),
            "authority": round(self.authority, 4),
            "specificity": round(self.specificity, 4),
            "source_check": self.source_check,
            "score": round(float(self.score), 4),
            "signals": {k: round(float(v), 4) for k, v in self.signals.items()},
            "reason": self.reason,
            "preview": self.preview,
            **({"text_from": self.text_from, "local_path": self.local_path} if self.text_from else {}),
        }


@dataclass(frozen=True)
class RefreshTarget:
    target_kind: str  # file | gene | query
    source_id: str | None  # a path (file), a gene id (gene), a path to ingest or None (query)
    reason: str
    priority: int  # 1 = most urgent

    def to_dict(self) -> dict[str, Any]:
        return {
            "target_kind": self.target_kind,
            "source_id": self.source_id,
            "reason": self.reason,
            "priority": self.priority,
        }


@dataclass(frozen=True)
class Packet:
    query: str
    task_type: str
    verified: tuple[PacketItem, ...]
    stale_risk: tuple[PacketItem, ...]  # includes needs_refresh items (their verdict says so)
    refresh_targets: tuple[RefreshTarget, ...]
    notes: tuple[str, ...]
    coordinate_confidence: float
    known_empty: bool
    tier: str
    files: tuple[dict[str, Any], ...] = ()  # with group_by="file": files ranked by their symbols' evidence
    project: str | None = None  # the project answered from: the scope named, else the one the evidence led to

    @property
    def needs_refresh(self) -> tuple[PacketItem, ...]:
        return tuple(i for i in self.stale_risk if i.verdict == "needs_refresh")

    @property
    def items(self) -> tuple[PacketItem, ...]:
        return self.verified + self.stale_risk

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": echo(self.query),
            "task_type": self.task_type,
            "tier": self.tier,
            "project": self.project,
            "known_empty": self.known_empty,
            "coordinate_confidence": round(self.coordinate_confidence, 4),
            "verified": [i.to_dict() for i in self.verified],
            "stale_risk": [i.to_dict() for i in self.stale_risk],
            "refresh_targets": [t.to_dict() for t in self.refresh_targets],
            "notes": list(self.notes),
            **({"files": list(self.files)} if self.files else {}),
        }

