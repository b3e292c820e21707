"""What the MCP tools show a model: the backend's answers, each fact said once, in few tokens.

Every token an answer spends is a token of the agent's context window. The HTTP answers
are made for programs (every field, every time); an agent reads them better without
repeats, so these renderers:

- say each path once: a packet's items are grouped by file, and `/context`'s gene ids sit
  in the `<GENE>` tags that already carry the path instead of in a second list;
- give a verdict once per group and a reason once per group (an item names its own reason
  only when it differs from its group's);
- drop what an agent does not act on (per-signal scores, `src` that repeats path and
  lines, the whole query echoed back);
- write compact JSON, one unit per line.

Each renderer returns *units*: the pieces a page may be cut between. A page never ends
inside an item (or inside a `<GENE>` block) unless that one unit alone exceeds a page.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from helix_context.models import STATUS_WORDS

GROUPS = ("verified", "stale_risk", "needs_refresh")
ITEMS_PER_UNIT = 8  # one file's items per line, at most this many (a line must fit in a page)


_GENE_OPEN = re.compile(r'<GENE src="([^"]*)"')
_LIVE_NUMBER = re.compile(r"\blive_truth \d+(?:\.\d+)? ")


def compact(data: Any) -> str:
    """JSON without spaces or indentation (15 % and more below the indented form)."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)


# ── /context ──


def context_units(data: dict[str, Any]) -> list[str]:
    """The expressed context cut into its `<GENE>` blocks, each tag carrying its gene id, then one health line."""
    text = str(data.get("expressed_context") or "")
    pending: dict[str, list[str]] = {}
    for gene in data.get("genes") or []:
        pending.setdefault(str(gene.get("src")), []).append(str(gene.get("gene_id")))

    def with_id(match: re.Match[str]) -> str:
        ids = pending.get(match.group(1))
        return f'<GENE id="{ids.pop(0)}" src="{match.group(1)}"' if ids else match.group(0)

    text = _GENE_OPEN.sub(with_id, text).rstrip()
    units = _split_blocks(text)
    unplaced = [gid for ids in pending.values() for gid in ids]  # a gene whose tag was not found
    health = data.get("context_health") or {}
    status = str(health.get("status") or "")
    footer = (f"[helix: {STATUS_WORDS.get(status, status)}; {health.get('genes_expressed', 0)} of "
              f"{health.get('genes_available', 0)} matching chunks shown, {data.get('tokens', 0)} tokens. "
              "Open one whole with helix_gene_get(id)")
    footer += f"; also delivered: {' '.join(unplaced)}]" if unplaced else "]"
    return [*units, footer]


def _split_blocks(text: str) -> list[str]:
    """Lines grouped so that each `<GENE …>…</GENE>` block is one unit."""
    units: list[str] = []
    block: list[str] = []
    for line in text.split("\n"):
        if block:
            block.append(line)
            if line.rstrip().endswith("</GENE>"):
                units.append("\n".join(block))
                block = []
        elif line.startswith("<GENE") and not line.rstrip().endswith("</GENE>"):
            block = [line]
        else:
            units.append(line)
    if block:
        units.append("\n".join(block))
    return units


# ── /context/packet ──


PREVIEW_CHARS = 160  # a packet item's preview: enough to recognise the code, small enough to page whole


def _reason(text: str) -> str:
    """The reason without the item's own live_truth number (the item carries that number once)."""
    return _LIVE_NUMBER.sub("live_truth ", str(text or ""))


def _item(item: dict[str, Any], group_reason: str) -> dict[str, Any]:
    out: dict[str, Any] = {"gene_id": item.get("gene_id")}
    if item.get("symbol"):
        out["symbol"] = item["symbol"]
    if item.get("kind"):
        out["kind"] = item["kind"]
    out["lines"] = f"{item.get('start_line')}-{item.get('end_line')}"
    out["relevance"] = round(float(item.get("relevance") or 0.0), 2)
    out["live_truth"] = round(float(item.get("live_truth") or 0.0), 2)
    if item.get("source_check") not in (None, "unchanged"):
        out["source_check"] = item["source_check"]
    reason = _reason(item.get("reason", ""))
    if reason != group_reason:
        out["reason"] = reason
    if item.get("preview"):
        out["preview"] = _short_preview(str(item["preview"]))
    return out


def _short_preview(text: str) -> str:
    """A preview of at most PREVIEW_CHARS, cut at a line end where one is near: it says where to read,
    it is not the text (the agent opens the file); a short item always fits one page whole."""
    if len(text) <= PREVIEW_CHARS:
        return text
    cut = text.rfind("\n", 0, PREVIEW_CHARS)
    return text[: cut if cut > PREVIEW_CHARS // 2 else PREVIEW_CHARS].rstrip() + " …"


def _grouped(data: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {name: [] for name in GROUPS}
    for item in [*(data.get("verified") or []), *(data.get("stale_risk") or [])]:
        groups.setdefault(str(item.get("verdict") or "stale_risk"), []).append(item)
    return groups


def packet_units(data: dict[str, Any]) -> list[str]:
    """Head line, then per verdict group: its line (verdict and reason, once), then its items by file."""
    head: dict[str, Any] = {"confidence": round(float(data.get("coordinate_confidence") or 0.0), 2),
                            "tier": data.get("tier")}
    if data.get("known_empty"):
        head["known_empty"] = True  # nothing relevant is indexed: do not act on the items
    if data.get("notes"):
        head["notes"] = list(data["notes"])
    units = [compact(head)]
    for verdict, items in _grouped(data).items():
        if not items:
            continue
        reason = Counter(_reason(i.get("reason", "")) for i in items).most_common(1)[0][0]
        units.append(compact({"group": verdict, "items": len(items), "reason": reason}))
        by_file: dict[str, list[dict[str, Any]]] = {}
        for item in items:
            by_file.setdefault(str(item.get("source_id")), []).append(_item(item, reason))
        for path, rows in by_file.items():
            for start in range(0, len(rows), ITEMS_PER_UNIT):
                units.append(compact({"file": path, "items": rows[start:start + ITEMS_PER_UNIT]}))
    units.extend(compact({"file_rank": f}) for f in data.get("files") or [])
    units.extend(compact({"refresh": t}) for t in data.get("refresh_targets") or [])
    return units


def refresh_units(data: dict[str, Any]) -> list[str]:
    """/context/refresh-plan: the targets, most urgent first, one per line; no query echo."""
    head: dict[str, Any] = {}
    if data.get("known_empty"):
        head["known_empty"] = True
    if data.get("notes"):
        head["notes"] = list(data["notes"])
    units = [compact(head)] if head else []
    targets = sorted(data.get("refresh_targets") or [], key=lambda t: t.get("priority", 9))
    units.extend(compact(t) for t in targets)
    return units or ["[helix: nothing to refresh]"]


def mapping_units(data: Any) -> list[str]:
    """A JSON object as one `key: value` line per top-level key (stats, health)."""
    if not isinstance(data, dict):
        return [compact(data)]
    return [f"{key}: {compact(value)}" for key, value in data.items()]
