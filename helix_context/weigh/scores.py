"""Per-item trust scores: live_truth = freshness × authority × specificity.

Pure functions over a Gene's provenance and content type; no I/O.
"""

from __future__ import annotations

import math
from typing import Any

from helix_context.config import WeighSettings
from helix_context.models import Gene

_AUTHORITY: dict[str, float] = {"primary": 1.0, "derived": 0.75, "inferred": 0.45}
_UNKNOWN_AUTHORITY = 0.45  # an unlabelled claim is worth no more than a guess


def weigh_settings(settings: Any) -> WeighSettings:
    """Accept the whole Settings object too, so callers cannot pass the wrong layer by accident."""
    inner = getattr(settings, "weigh", None)
    return inner if isinstance(inner, WeighSettings) else settings


def _half_life(volatility: str, settings: WeighSettings) -> float:
    if volatility == "stable":
        return settings.half_life_stable_s
    if volatility == "medium":
        return settings.half_life_medium_s
    # "hot", and anything unrecognised: assume the fastest decay rather than
    # trusting a value nobody vouched for.
    return settings.half_life_hot_s


def verified_at_of(gene: Gene) -> float:
    prov = gene.provenance
    return prov.last_verified_at or prov.observed_at or 0.0


def freshness(gene: Gene, now: float, settings: WeighSettings, *, verified_at: float | None = None) -> float:
    """exp(-age / half_life), half-life chosen by the gene's volatility class.

    age = now - provenance.last_verified_at (or observed_at when it was never
    re-verified). ``verified_at`` lets a caller that has just re-verified the
    gene (e.g. by a matching live source check) use that moment instead when it
    is later. A gene with no timestamp at all was never observed and gets 0.0;
    a timestamp in the future (clock skew) counts as age 0.
    """
    settings = weigh_settings(settings)
    seen = verified_at_of(gene)
    if verified_at is not None and verified_at > seen:
        seen = verified_at
    if not seen or not math.isfinite(seen):
        return 0.0
    age = max(0.0, now - seen)
    half_life = _half_life(gene.provenance.volatility_class, settings)
    if half_life <= 0:
        return 0.0 if age > 0 else 1.0
    return math.exp(-age / half_life)


def authority(gene: Gene) -> float:
    """How directly the content came from its source.

    primary 1.0 (read verbatim from the source), derived 0.75 (computed from it:
    extracted facts, summaries of a parsed structure — faithful but one step
    removed), inferred 0.45 (guessed, e.g. an LLM summary: useful for orientation,
    never on its own enough to act on under the default threshold).
    """
    return _AUTHORITY.get(gene.provenance.authority_class, _UNKNOWN_AUTHORITY)


def specificity(gene: Gene) -> float:
    """How precisely the gene pins down something an agent can act on.

    The scale asks: if this item is right, can the agent point at the exact thing
    (a line to edit, a value to set) without reading around it?

    - code with a symbol 0.95: a whole function/class, named and line-addressed;
      the unit an agent edits or quotes.
    - config / any gene carrying key=value facts 0.95; config without facts 0.90:
      settings are exact values with exact keys.
    - json 0.85, diff 0.85: exact data, but json chunks are often fragments of a
      larger document and a diff describes a change rather than the current state.
    - code without a symbol 0.85: module-level code (imports, constants, glue) —
      exact, but not a self-contained unit.
    - markdown under a heading 0.80, markdown 0.75, plain text 0.70: prose
      explains and is addressable by section, but states things approximately.
    - log 0.65: exact strings and timestamps, but a log block is mostly noise
      around the one line that matters, and it records events, not current state.
    - anything else 0.50.

    The spread is deliberately narrow (0.65-0.95): specificity separates kinds of
    evidence, while freshness and the live source check decide whether it is
    still true.
    """
    kind = gene.content_type
    if kind == "code":
        return 0.95 if gene.symbol else 0.85
    if gene.facts or kind == "config":
        return 0.95 if gene.facts else 0.90
    if kind in ("json", "diff"):
        return 0.85
    if kind == "markdown":
        return 0.80 if gene.symbol else 0.75
    if kind == "text":
        return 0.70
    if kind == "log":
        return 0.65
    return 0.50


def live_truth(gene: Gene, now: float, settings: WeighSettings, *, verified_at: float | None = None) -> float:
    """freshness × authority × specificity, in [0, 1]."""
    return freshness(gene, now, settings, verified_at=verified_at) * authority(gene) * specificity(gene)

