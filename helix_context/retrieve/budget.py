"""Budget tiers (how many genes the score distribution deserves) and the budget zone
(how much room the caller's context window leaves)."""

from __future__ import annotations

from dataclasses import dataclass

from helix_context.config import BudgetSettings

TIGHT_MAX = 3
FOCUSED_MAX = 6


@dataclass(frozen=True)
class ZoneCap:
    """What the budget zone allows for one request."""

    zone: str  # green | yellow | red | full
    max_tokens: int
    max_genes: int
    prompt_tokens: int
    context_window: int


def pick_tier(scores: list[float], max_genes: int) -> tuple[str, int]:
    """From fused scores (best first, already past the floor) → (tier, genes to deliver).

    A clear winner (the next score under 60 % of it) means the query is
    pinpoint: deliver a tight few. A gentle slope means many genes carry the
    answer: broad.
    """
    if not scores:
        return "abstain", 0
    top = scores[0]
    if len(scores) == 1 or scores[1] < 0.6 * top:
        return "tight", min(TIGHT_MAX, max_genes, len(scores))
    strong = sum(1 for s in scores if s >= 0.75 * top)
    if strong <= FOCUSED_MAX:
        return "focused", min(FOCUSED_MAX, max_genes, len(scores))
    return "broad", min(max_genes, len(scores))


def zone_cap(prompt_tokens: int, context_window: int, token_budget: int, max_genes: int,
             settings: BudgetSettings) -> ZoneCap:
    """Cap genes and tokens so prompt + context + the answer's reserve fit the window."""
    window = max(context_window, 1)
    free = window - max(prompt_tokens, 0) - settings.answer_reserve_tokens
    allowed = max(0, int(free * settings.zone_max_fraction)) if free > 0 else 0
    max_tokens = min(token_budget, allowed)
    used = prompt_tokens / window
    if used < 0.5:
        zone, genes = "green", max_genes
    elif used < 0.75:
        zone, genes = "yellow", max(1, max_genes // 2)
    elif free > 0:
        zone, genes = "red", min(TIGHT_MAX, max_genes)
    else:
        zone, genes = "full", 0
    if max_tokens <= 0:
        genes = 0
    return ZoneCap(zone, max_tokens, genes, prompt_tokens, window)
