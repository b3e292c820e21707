"""POST /context, /context/packet, /context/refresh-plan, /fingerprint, /ingest; GET /stats."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fastapi import Depends

from helix_context.config import Settings
from helix_context.manager import HelixContextManager
from helix_context.query_text import echo
from helix_context.server.deps import get_helix, get_settings
from helix_context.errors import Forbidden, InvalidRequest, NotFound, UnprocessableRequest
from helix_context.server.bodies import ContextRequest, FingerprintRequest, IngestRequest, PacketRequest

_SURROGATE = re.compile("[\ud800-\udfff]")


def context(body: ContextRequest, helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    """Expressed context for a query, with ContextHealth and the tier used."""
    window = helix.build_context(body.query, budget_tokens=body.budget_tokens, model=body.model,
                                 project=body.project, party=body.party, prompt_tokens=body.prompt_tokens,
                                 context_window=body.context_window)
    return {**window.to_dict(), "query": echo(body.query)}  # its length as sent, not as searched


def context_packet(body: PacketRequest, helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    """Pointers with a trust verdict each, and what to refresh."""
    packet = helix.packet(body.query, body.task_type, project=body.project, party=body.party,
                          max_genes=body.max_genes, group_by=body.group_by)
    return {**packet.to_dict(), "query": echo(body.query)}


def refresh_plan(body: PacketRequest, helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    """Only what to re-read or re-ingest before trusting an answer to this query."""
    data = context_packet(body, helix)
    return {"query": echo(body.query), "task_type": data["task_type"], "refresh_targets": data["refresh_targets"],
            "known_empty": data["known_empty"], "notes": data["notes"]}


def fingerprint(body: FingerprintRequest, helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    results = helix.fingerprint(body.query, body.max_results, project=body.project, party=body.party,
                                group_by=body.group_by)
    return {"query": echo(body.query), "group_by": body.group_by, "results": results}


def _allowed(path: Path, settings: Settings) -> bool:
    return any(path.is_relative_to(Path(root).expanduser().resolve()) for root in settings.server.allowed_ingest_roots)


def ingest(body: IngestRequest, helix: HelixContextManager = Depends(get_helix),
           settings: Settings = Depends(get_settings)) -> dict[str, Any]:
    """Text with metadata, or {path} of a file or folder under an allowed root."""
    if (body.content is None) == (body.path is None):
        raise UnprocessableRequest("send either 'content' (text to ingest) or 'path' (a file or folder), not both")
    if body.path is not None:
        if "\x00" in body.path:
            raise UnprocessableRequest("path holds a NUL character, which no file name can: send the file's path")
        path = Path(body.path).expanduser()
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError):
            raise InvalidRequest(f"cannot resolve {body.path}") from None
        if not _allowed(resolved, settings):
            roots = ", ".join(settings.server.allowed_ingest_roots) or "none configured"
            raise Forbidden(f"{resolved} is not under an allowed ingest root ({roots}); add its folder to "
                            "[server] allowed_ingest_roots in helix.toml, or use `helix ingest PATH`")
        if not resolved.exists():
            raise NotFound(f"{resolved} does not exist")
        # a followed symlink may point anywhere under the allowed roots, never outside them
        root_paths = [Path(root).expanduser().resolve() for root in settings.server.allowed_ingest_roots]
        helix.refuse_off_branch([resolved])  # a team genome follows one branch: IngestRefused, 409
        report = helix.ingest_path(resolved, project=body.project, embed=body.embed, confine_to=root_paths)
        return report.to_dict()
    if not body.content or not body.content.strip():
        raise UnprocessableRequest("content is empty: nothing to ingest")
    if "\x00" in body.content:
        raise UnprocessableRequest("content contains NUL bytes: send text, not binary data")
    if not body.content.isascii() and _SURROGATE.search(body.content):  # JSON's "\ud800": not storable as UTF-8
        raise UnprocessableRequest("content holds a lone surrogate (a \\ud800-\\udfff escape without its pair), "
                                   "which is not text: send the text as UTF-8")
    metadata = body.metadata_dict()
    if body.project and "project" not in metadata:
        metadata["project"] = body.project
    report = helix.ingest(body.content, body.content_type, metadata, embed=body.embed)  # IngestRefused: 409
    return report.to_dict()


def stats(helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    return helix.stats()
