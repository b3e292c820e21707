"""The local overlay of a team genome for the packet: this developer's files win over the shared text.

Why: a shared gene (`@api/src/x.py`, sources/roots.py) holds what the team's indexer saw on the
main branch. The developer asking may have uncommitted edits to that file; for them, their own
file is the truth. Before the packet is weighed, each shared gene is checked against this
machine's checkout (live_serve.py, the same check `/context` makes): a file that differs here is
re-read and the span served from it, a file gone here is left out, and each item says where its
text came from (`text_from`: "shared" or "local") and where the file is on this machine
(`local_path`), so an agent opens the right file. Genes of this machine's own genome are untouched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from helix_context.models import Retrieval, ScoredGene
from helix_context.sources.roots import is_shared
from helix_context.weigh.live_check import SourceCache
from helix_context.weigh.live_serve import LiveServe, ServedSource, live_serve
from helix_context.weigh.packet import Packet, PacketItem


@dataclasses.dataclass(frozen=True)
class Overlay:
    retrieval: Retrieval
    text_from: Mapping[str, str]  # served gene id → "shared" | "local"
    live: LiveServe | None = None


def overlay_shared(retrieval: Retrieval, cache: SourceCache, *, max_chunk_chars: int) -> Overlay:
    """The retrieval with its shared genes checked against this machine's checkout (see the module docstring)."""
    if not any(is_shared(it.gene.source_path) for it in retrieval.items):
        return Overlay(retrieval, {})
    items: list[ScoredGene] = []
    text_from: dict[str, str] = {}
    refreshed: list[ServedSource] = []
    dropped: list[ServedSource] = []
    spans: set[tuple[str, int, int]] = set()
    for item in retrieval.items:
        if not is_shared(item.gene.source_path):
            items.append(item)
            continue
        # one gene at a time, so each answer lines up with its item; the cache reads each file once
        one = live_serve([item], max_file_bytes=cache.max_bytes, max_chunk_chars=max_chunk_chars, cache=cache,
                         read_timeout_s=cache.timeout_s)
        refreshed.extend(one.refreshed)
        dropped.extend(one.dropped)
        if not one.items:  # gone from this checkout, or changed past recognition: left out
            continue
        now = one.items[0]
        span = (now.gene.source_path or "", now.gene.start_line, now.gene.end_line)
        if span in spans:  # a refreshed span that landed on one already served: served once
            continue
        spans.add(span)
        items.append(now)
        text_from[now.gene.gene_id] = dict(one.text_from).get(now.gene.src, "shared")
    live = LiveServe(tuple(items), tuple(refreshed), tuple(dropped), cache.stats, cache.hashes,
                     tuple((it.gene.src, text_from[it.gene.gene_id]) for it in items if it.gene.gene_id in text_from))
    return Overlay(dataclasses.replace(retrieval, items=tuple(items)), text_from, live)


def mark_items(packet: Packet, text_from: Mapping[str, str], cache: SourceCache) -> Packet:
    """Each shared item says where its text came from and where its file is on this machine."""
    if not text_from:
        return packet

    def mark(item: PacketItem) -> PacketItem:
        origin = text_from.get(item.gene_id)
        if origin is None:
            return item
        local = cache.local(item.source_id or "")
        return dataclasses.replace(item, text_from=origin, local_path=cache.key(local) if local else None)

    return dataclasses.replace(packet, verified=tuple(map(mark, packet.verified)),
                               stale_risk=tuple(map(mark, packet.stale_risk)))
