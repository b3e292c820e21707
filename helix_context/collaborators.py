"""The manager's collaborators, as the manager sees them: typed Protocols passed to its constructor.

Why: the manager used to hold ``telemetry: Any`` and ``sources: Any`` that the server set from
outside after construction, so neither an import nor a type checker showed the tie. Each Protocol
names exactly the calls the manager makes; the real classes (``telemetry.Telemetry``,
``sources.service.SourcesService``, ``manager.Part``) satisfy them without importing this module,
and a test may pass any object with these methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from helix_context.retrieve.retriever import EmbedderSource
from helix_context.weigh import Packet

if TYPE_CHECKING:
    from helix_context.ingest.embed import Embedder

__all__ = ["EmbedderPart", "ManagerTelemetry", "PacketAnnotator"]


class ManagerTelemetry(Protocol):
    """What the manager records per ingest, retrieval, compression and packet (telemetry.Telemetry)."""

    def record_ingest(self, bytes_: int, files: int, genes: int, seconds: float) -> None: ...

    def record_retrieval(self, stage_seconds: dict[str, float], genes_delivered: int, tier: str,
                         zone_cap: int | None) -> None: ...

    def record_compression(self, original_tokens: int, compressed_tokens: int, critical_total: int,
                           critical_kept: int) -> None: ...

    def record_verdicts(self, counts: dict[str, int]) -> None: ...


class PacketAnnotator(Protocol):
    """Adds what the living index knows to a packet (sources.service.SourcesService: "being replaced")."""

    def annotate(self, packet: Packet) -> Packet: ...


class EmbedderPart(EmbedderSource, Protocol):
    """The dense embedder as an optional part: loaded on first use, its status shown in /health."""

    name: str

    def get(self) -> Embedder | None: ...

    @property
    def loaded(self) -> bool: ...

    def report(self) -> dict[str, str]: ...
