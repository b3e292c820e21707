"""Assemble expressed context: the best genes, compressed per content type, under a token budget.

Output shape (kept from the original Helix; models and agents parse it):

    <expressed_context>
    <GENE src="path:start-end" facts="k=v; ...">…</GENE>
    </expressed_context>

Small and mixture-of-experts models get an answer slate first: the delivered
genes' key=value facts in the first ~200 tokens, then genes strictly
most-relevant-first, so the answer sits inside every sliding-window layer.
Larger models get genes grouped by file in source order, which reads better.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from html import escape
from typing import Any, Protocol

from helix_context.config import AssemblySettings, WeighSettings
from helix_context.ingest.walk import shown_line
from helix_context.llm.profiles import ModelProfile, profile
from helix_context.models import QuerySignals, Retrieval, ScoredGene
from helix_context.query_text import echo
from helix_context.retrieve.budget import ZoneCap
from helix_context.retrieve.retriever import coverages
from helix_context.tokens import count_tokens, count_tokens_kept, count_with_line_break, truncate_to_tokens
from helix_context.weigh import freshness
from helix_context.weigh.live_serve import LiveServe

MIN_GENE_TOKENS = 40  # below this a gene fragment says nothing useful
MAX_FACTS_PER_GENE = 6
MAX_LIVE_NOTE_LINES = 8

DECODERS = {
    "full": ("The genes below are excerpts of the user's own files, retrieved for this question and compressed. "
             "src gives file:lines; facts lists key=value pairs found there; '…' marks elided lines. "
             "Prefer these over memory, cite src when you use one, and say so when they do not answer."),
    "condensed": "Retrieved excerpts of the user's files (src=file:lines; facts=key=value; … = elided). Cite src.",
    "minimal": "Context:",
    "none": "",
}


class CompressorLike(Protocol):
    def compress(self, text: str, content_type: str, language: str | None = None, *, query: str = "",
                 max_tokens: int | None = None) -> Any: ...


@dataclass(frozen=True)
class ContextHealth:
    coverage: float  # share of query words found in what was delivered
    density: float  # share of delivered tokens from genes that match the query literally
    freshness: float  # mean freshness of delivered genes
    resolution_confidence: float  # how sure we are the best gene answers the query
    # aligned | refreshed | sparse | stale | denatured (nothing relevant) | over_budget (relevant excerpts, none
    # fits the budget) | silent (the message is about nothing indexed)
    status: str
    genes_expressed: int
    genes_available: int
    # the live source check (weigh/live_serve.py): genes left out because their file changed beyond
    # recognition or vanished, and genes served from their file's current text instead of the index
    stale_dropped: int = 0
    refreshed_from_disk: int = 0
    live_check: tuple[str, ...] = ()  # one line per refreshed / dropped gene: src and why
    reason: str = ""  # status "silent" / "over_budget": why the message got no context (weigh/silence.py)



@dataclass(frozen=True)
class DeliveredGene:
    gene_id: str
    src: str
    score: float
    tokens: int
    original_tokens: int
    method: str
    critical_total: int
    critical_kept: int
    critical_kept_raw: int
    signals: dict[str, float] = field(default_factory=dict)
    project: str | None = None


@dataclass(frozen=True)
class ContextWindow:
    query: str
    expressed_context: str
    context_health: ContextHealth
    tier: str
    tokens: int
    budget_tokens: int
    genes: tuple[DeliveredGene, ...]
    model: ModelProfile | None = None
    layout: str = "standard"
    zone: ZoneCap | None = None
    stage_seconds: dict[str, float] = field(default_factory=dict)
    project: str | None = None  # the project answered from (retrieve/scope.py)

    @property
    def critical_keep_rate(self) -> float:
        total = sum(g.critical_total for g in self.genes)
        return 1.0 if total == 0 else sum(g.critical_kept for g in self.genes) / total

    @property
    def compression_ratio(self) -> float:
        original = sum(g.original_tokens for g in self.genes)
        return 1.0 if original == 0 else sum(g.tokens for g in self.genes) / original

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": echo(self.query),
            "project": self.project,
            "expressed_context": self.expressed_context,
            "context_health": asdict(self.context_health),
            "tier": self.tier,
            "tokens": self.tokens,
            "budget_tokens": self.budget_tokens,
            "layout": self.layout,
            "model": self.model.name if self.model else None,
            "genes": [asdict(g) for g in self.genes],
            "zone": asdict(self.zone) if self.zone else None,
            "compression_ratio": round(self.compression_ratio, 4),
            "critical_keep_rate": round(self.critical_keep_rate, 4),
            "stage_seconds": {k: round(v, 6) for k, v in self.stage_seconds.items()},
        }


def _attr(value: str) -> str:
    return escape(value, quote=True)


def _wanted(qs: QuerySignals) -> set[str]:
    """The query's words and names, lowercased: what a fact must mention to come first.

    Made once per answer, not once per gene: a pasted issue has some 150 of them."""
    return {t.lower() for t in (*qs.terms, *qs.identifier_parts, *qs.identifiers)}


def _facts_for(item: ScoredGene, wanted: set[str]) -> list[tuple[str, str]]:
    """The gene's facts, those the query mentions (`wanted`, from _wanted) first."""
    facts = list(item.gene.facts)
    facts.sort(key=lambda kv: 0 if any(w in kv[0].lower() for w in wanted) else 1)
    return facts[:MAX_FACTS_PER_GENE]


_CLOSE = "</GENE>"


def _gene_opening(item: ScoredGene, facts: list[tuple[str, str]]) -> str:
    facts_attr = "; ".join(f"{k}={v}" for k, v in facts)
    attrs = f'src="{_attr(shown_line(item.gene.src))}"'  # one line, whatever the file's name holds
    if facts_attr:
        attrs += f' facts="{_attr(facts_attr)}"'
    return f"<GENE {attrs}>\n"


def _block_tokens(opening: str, opening_tokens: int, body: str, body_tokens: int) -> int:
    """Tokens of a gene block and its line break in the window, from the body's own count: the body
    starts a piece after the opening's line break, and the closing tag one after the body's."""
    if not body or body[0] in "\r\n":  # the opening's line break would join the body's first piece
        return count_tokens(f"{opening}{body}\n{_CLOSE}\n")
    return opening_tokens + count_with_line_break(body, body_tokens) + count_tokens_kept(_CLOSE + "\n")


def _answer_slate(items: Sequence[ScoredGene], qs: QuerySignals, max_tokens: int) -> str:
    lines: list[str] = []
    seen: set[str] = set()
    wanted = _wanted(qs)
    for item in items:
        for key, value in _facts_for(item, wanted):
            line = f"{key}={value}  ({item.gene.source_path or item.gene.gene_id}:{item.gene.start_line})"
            if key in seen:
                continue
            candidate = "\n".join([*lines, line])
            if count_tokens(candidate) > max_tokens:
                break
            seen.add(key)
            lines.append(line)
    return "<answer_slate>\n" + "\n".join(lines) + "\n</answer_slate>" if lines else ""


def _live_fields(live: LiveServe | None) -> dict[str, Any]:
    if live is None:
        return {}
    lines = tuple(f"{s.action} {s.src}: {s.reason}" for s in (*live.dropped, *live.refreshed))
    return {"stale_dropped": len(live.dropped), "refreshed_from_disk": len(live.refreshed), "live_check": lines}


def _health(retrieval: Retrieval, delivered: Sequence[ScoredGene], token_counts: Sequence[int],
            weigh_settings: WeighSettings, now: float, live: LiveServe | None = None,
            too_small: str = "") -> ContextHealth:
    """`too_small`: why nothing was delivered though genes were ranked (the budget has no room for one)."""
    qs = retrieval.query
    if not delivered:
        return ContextHealth(0.0, 0.0, 0.0, 0.0, "over_budget" if too_small else "denatured", 0,
                             retrieval.candidates, **_live_fields(live), reason=too_small)
    wanted = list(dict.fromkeys([*qs.terms, *(i.lower() for i in qs.identifiers)]))
    text = " ".join(i.gene.content.lower() + " " + (i.gene.source_path or "").lower() for i in delivered)
    cov = sum(1 for w in wanted if w in text) / len(wanted) if wanted else 0.0
    per_gene = coverages(qs, [i.gene for i in delivered])
    total_tokens = sum(token_counts) or 1
    density = sum(t for t, c in zip(token_counts, per_gene, strict=False) if c > 0) / total_tokens
    fresh = sum(freshness(i.gene, now, weigh_settings) for i in delivered) / len(delivered)
    resolution = per_gene[0]
    if len(delivered) > 1:
        margin = 1.0 - delivered[1].score / max(delivered[0].score, 1e-9)
        resolution = min(1.0, 0.7 * per_gene[0] + 0.3 * (0.5 + margin))
    if fresh < 0.3:
        status = "stale"
    elif cov < 0.5 or density < 0.3:
        status = "sparse"
    elif live is not None and live.touched:
        status = "refreshed"  # what is served is current, but the index was behind the files
    else:
        status = "aligned"
    return ContextHealth(round(cov, 4), round(density, 4), round(fresh, 4), round(resolution, 4), status,
                         len(delivered), retrieval.candidates, **_live_fields(live))


def _live_note(live: LiveServe | None) -> str:
    """Tells the model what the live check left out or re-read, so it does not take a gap for an answer."""
    if live is None or not live.touched:
        return ""
    lines = [f"- {s.src}: {s.reason}" for s in (*live.dropped, *live.refreshed)][:MAX_LIVE_NOTE_LINES]
    return ("<live_check>\nThese files changed since they were indexed; excerpts below are their current text, "
            "and excerpts that could not be found again were left out:\n" + "\n".join(lines) + "\n</live_check>")


def assemble(retrieval: Retrieval, compressor: CompressorLike | None, *, budget_tokens: int,
             settings: AssemblySettings, weigh_settings: WeighSettings, model: str | None = None,
             zone: ZoneCap | None = None, now: float | None = None, live: LiveServe | None = None) -> ContextWindow:
    """``live``: what the live source check did to ``retrieval.items`` (already applied to them)."""
    started = time.perf_counter()
    now = time.time() if now is None else now
    prof = profile(model, settings.small_model_max_params_b) if model else None
    small = bool(prof and prof.small)
    budget = max(0, budget_tokens if zone is None else min(budget_tokens, zone.max_tokens))
    decoder = DECODERS[settings.decoder_mode]
    qs = retrieval.query
    items = list(retrieval.items)

    header = "<expressed_context>" + (f"\n{decoder}" if decoder else "")
    footer = "</expressed_context>"
    header_tokens, footer_tokens = count_tokens_kept(header), count_tokens_kept(footer)
    used = header_tokens + footer_tokens + 2  # budgeted: each part and its line break counted on its own
    # exact, and no part is read twice: every part after the first opens with "<", where cl100k_base
    # always starts a new piece after a line break, so the joined text counts what its parts and their
    # line breaks count (count_with_line_break)
    in_window = count_with_line_break(header, header_tokens) + footer_tokens
    parts: list[str] = [header]
    note = _live_note(live)
    note_tokens = count_tokens(note) if note else 0
    if note and note_tokens + used < budget // 4:  # never more than a quarter of the budget
        parts.append(note)  # sent even when nothing else is left: the model learns its sources moved
        used += note_tokens + 1
        in_window += count_with_line_break(note, note_tokens)
    if small and items:
        slate = _answer_slate(items, qs, min(settings.answer_slate_tokens, max(0, budget - used)))
        if slate:
            slate_tokens = count_tokens(slate)
            parts.append(slate)
            used += slate_tokens + 1
            in_window += count_with_line_break(slate, slate_tokens)

    blocks: list[tuple[ScoredGene, str, int]] = []
    delivered: list[DeliveredGene] = []
    wanted = _wanted(qs)
    needed = 0  # the budget the first excerpt would have needed, when it found no room
    for item in items:
        remaining = budget - used
        facts = _facts_for(item, wanted)
        opening = _gene_opening(item, facts)
        opening_tokens = count_tokens_kept(opening)
        # the tags, and the line breaks after the body and the block (a break is at most one token more)
        overhead = opening_tokens + count_tokens_kept(_CLOSE) + 2
        room = remaining - overhead
        if remaining < MIN_GENE_TOKENS or room < MIN_GENE_TOKENS // 2:
            if not blocks:
                needed = used + max(MIN_GENE_TOKENS, overhead + MIN_GENE_TOKENS // 2)
            break
        size = count_tokens_kept(item.gene.content)
        if size <= min(room, settings.compress_min_tokens):
            # small and fits: verbatim keeps code readable and every critical token
            body, method, original, body_tokens = item.gene.content, "none", size, size
            kept_total = kept = kept_raw = 0
        elif compressor is not None:
            result = compressor.compress(item.gene.content, item.gene.content_type, item.gene.language,
                                         query=qs.text, max_tokens=room)
            body, method = result.text, result.method
            original, kept_total = result.original_tokens, result.critical_total
            kept, kept_raw, body_tokens = result.critical_kept, result.critical_kept_raw, result.tokens
        else:
            original = size
            body = item.gene.content if original <= room else truncate_to_tokens(item.gene.content, room)
            method = "none" if original <= room else "truncate"
            body_tokens = count_tokens(body)
            kept_total = kept = kept_raw = 0
        if body_tokens > room:
            body = truncate_to_tokens(body, room)
            body_tokens = count_tokens(body)
        stripped = body.rstrip()
        block = f"{opening}{stripped}\n{_CLOSE}"
        block_tokens = body_tokens + overhead
        in_window += _block_tokens(opening, opening_tokens, stripped,
                                   body_tokens if stripped == body else count_tokens(stripped))
        used += block_tokens
        blocks.append((item, block, block_tokens))
        delivered.append(DeliveredGene(item.gene.gene_id, item.gene.src, item.score, body_tokens, original, method,
                                       kept_total, kept, kept_raw, dict(item.signals), item.gene.project))

    if small:
        ordered = blocks  # strictly most relevant first
    else:
        first_seen: dict[str, int] = {}
        for index, (item, _, _) in enumerate(blocks):
            first_seen.setdefault(item.gene.source_path or item.gene.gene_id, index)
        ordered = sorted(blocks, key=lambda b: (first_seen[b[0].gene.source_path or b[0].gene.gene_id],
                                                b[0].gene.start_line))
    parts.extend(block for _, block, _ in ordered)
    parts.append(footer)
    text = "\n".join(parts) if blocks or (note and note in parts) else ""
    kept_items = [b[0] for b in blocks]
    too_small = (f"relevant excerpts were found, but a budget of {budget} tokens has no room for one (the best needs "
                 f"about {needed}): raise budget_tokens") if needed else ""
    health = _health(retrieval, kept_items, [b[2] for b in blocks], weigh_settings, now, live, too_small)
    stages = dict(retrieval.stage_seconds)
    stages["assemble"] = time.perf_counter() - started
    return ContextWindow(
        query=qs.text,
        expressed_context=text,
        context_health=health,
        tier=retrieval.tier if blocks else "abstain",
        tokens=in_window if text else 0,
        budget_tokens=budget,
        genes=tuple(delivered),
        model=prof,
        layout="small" if small else "standard",
        zone=zone,
        stage_seconds=stages,
    )


def estimate_messages_tokens(messages: Sequence[dict[str, Any]]) -> int:
    """Prompt size of an OpenAI-style message list (content text + a few tokens per message)."""
    total = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            total += count_tokens(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    total += count_tokens(part["text"])
        total += 4
    return int(math.ceil(total))
