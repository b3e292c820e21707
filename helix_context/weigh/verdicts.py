"""Verdicts per item and task type, the refresh plan, and the packet as a whole.

- ``verified``       trust it for this task;
- ``stale_risk``     probably right, but re-read the source before acting on it;
- ``needs_refresh``  the source changed or vanished since ingest — do not use it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence

from helix_context.config import WeighSettings
from helix_context.errors import InvalidRequest
from helix_context.models import Gene, Retrieval, ScoredGene
from helix_context.query_text import echo
from helix_context.weigh.coordinates import _covers, _coverage, _query_tokens
from helix_context.weigh.live_check import SourceCache, check_source
from helix_context.weigh.packet import Packet, PacketItem, RefreshTarget
from helix_context.weigh.relevance import gene_words, query_words, relevance
from helix_context.weigh.scores import authority, freshness, specificity, verified_at_of, weigh_settings


# Task types and how strict each one is, as a multiplier of
# WeighSettings.verified_threshold. Planning and explaining survive a slightly
# dated or indirect item (the agent will read the code before acting anyway);
# editing, debugging, operating and quoting act on the exact text, so they need
# more. "review" sits at the configured threshold.
TASK_TYPES = ("plan", "explain", "review", "edit", "debug", "ops", "quote")
_TOLERANT = 0.6
_STANDARD = 1.0
_STRICT = 1.2
_TASK_FACTOR: dict[str, float] = {
    "plan": _TOLERANT,
    "explain": _TOLERANT,
    "review": _STANDARD,
    "edit": _STRICT,
    "debug": _STRICT,
    "ops": _STRICT,
    "quote": _STRICT,
}
# tasks for which a source that cannot be checked live is never "verified"
_NEEDS_CHECKED_SOURCE = frozenset({"quote", "edit"})
_PREVIEW_CHARS = 200
# reasons for a downgrade that concern the answer as a whole, not the item's own
# source: such items get no per-item refresh target (the "query" target covers them)
_OFF_TARGET_PREFIX = "off target:"
_ABSTAIN_PREFIX = "retrieval abstained:"
_EMPTY_PREFIX = "nothing relevant:"
_RELEVANCE_PREFIX = "relevance "  # the item is fresh but holds too little of the query: re-ingesting won't help
_QUERY_LEVEL_PREFIXES = (_OFF_TARGET_PREFIX, _ABSTAIN_PREFIX, _EMPTY_PREFIX, _RELEVANCE_PREFIX)
# how far a task's strictness moves the relevance bar (a quarter as far as it moves the live_truth
# bar: relevance is measured, not decayed; bench_verdicts.py showed a plan bar below 0.45 lets
# questions about absent tools through)
_RELEVANCE_STRICTNESS = 0.25

def validate_task_type(task_type: str) -> str:
    """Normalise a task type; InvalidRequest (a ValueError) naming the valid ones otherwise."""
    name = task_type.strip().lower() if isinstance(task_type, str) else ""
    if name not in _TASK_FACTOR:
        raise InvalidRequest(f"unknown task_type {task_type!r}; valid task types: {', '.join(TASK_TYPES)}")
    return name


def verified_threshold(task_type: str, settings: WeighSettings) -> float:
    """The live_truth an item needs to be "verified" for this task."""
    settings = weigh_settings(settings)
    return min(1.0, settings.verified_threshold * _TASK_FACTOR[validate_task_type(task_type)])


def relevance_threshold(task_type: str, settings: WeighSettings) -> float:
    """The relevance an item needs to be "verified" for this task."""
    settings = weigh_settings(settings)
    factor = 1.0 + (_TASK_FACTOR[validate_task_type(task_type)] - 1.0) * _RELEVANCE_STRICTNESS
    return min(1.0, settings.relevance_verified * factor)




def _age_text(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def _preview(text: str) -> str:
    if len(text) <= _PREVIEW_CHARS:
        return text
    return text[:_PREVIEW_CHARS].rstrip() + "…"


def _weigh_item(
    sg: ScoredGene,
    task: str,
    threshold: float,
    settings: WeighSettings,
    now: float,
    cache: SourceCache,
    cap: str | None,
    rel: float,
    rel_threshold: float,
) -> PacketItem:
    gene = sg.gene
    check = check_source(gene, cache)
    # A byte-for-byte match with the file just now is a re-verification for
    # sources whose file *is* the truth (code, docs, config: stable / medium).
    # A hot source (a log, a status dump) goes stale because the world moves on,
    # not because the file is edited, so it keeps its ingest age.
    reverified = check.status == "unchanged" and gene.provenance.volatility_class in ("stable", "medium")
    fr = freshness(gene, now, settings, verified_at=now if reverified else None)
    au = authority(gene)
    sp = specificity(gene)
    lt = fr * au * sp

    if check.status == "changed":
        verdict, reason = "needs_refresh", f"source changed since ingest: {check.detail}"
    elif check.status == "missing":
        verdict, reason = "needs_refresh", f"source is gone: {check.detail}"
    elif lt >= threshold:
        verdict = "verified"
        how = "source re-checked unchanged" if check.status == "unchanged" else f"source not checkable ({check.detail})"
        reason = f"live_truth {lt:.2f} >= {threshold:.2f} for {task}; {how}"
    else:
        verdict = "stale_risk"
        seen = verified_at_of(gene)
        age = f"{_age_text(max(0.0, now - seen))} since last verified" if seen else "never verified"
        parts = []
        if fr < 0.999:
            parts.append(f"{gene.provenance.volatility_class} source, {age}")
        if au < 1.0:
            parts.append(f"{gene.provenance.authority_class} content")
        reason = f"live_truth {lt:.2f} < {threshold:.2f} for {task}" + (f" ({'; '.join(parts)})" if parts else "")

    if verdict == "verified" and check.status == "unknown" and task in _NEEDS_CHECKED_SOURCE:
        verdict = "stale_risk"
        reason = f"{task} needs a source checked live, and this one cannot be: {check.detail}"
    if verdict == "verified" and cap is not None:
        # a reason about the whole answer (off-target coordinates, abstention, nothing relevant)
        verdict = "stale_risk"
        reason = cap
    if verdict == "verified" and rel < rel_threshold:
        verdict = "stale_risk"
        reason = (f"{_RELEVANCE_PREFIX}{rel:.2f} < {rel_threshold:.2f} for {task}: the item holds too little "
                  "of what the query asks about; read it before relying on it")

    return PacketItem(
        gene_id=gene.gene_id,
        source_id=gene.source_path,
        start_line=gene.start_line,
        end_line=gene.end_line,
        src=gene.src,
        verdict=verdict,
        live_truth=lt,
        freshness=fr,
        authority=au,
        specificity=sp,
        source_check=check.status,
        score=float(sg.score),
        signals=dict(sg.signals),
        reason=reason,
        preview=_preview(gene.content),
        relevance=rel,
        project=gene.project,
    )


def refresh_targets(
    items: Packet | Iterable[PacketItem],
    *,
    uncovered_paths: Iterable[str] = (),
    query_text: str = "",
    known_empty: bool = False,
) -> tuple[RefreshTarget, ...]:
    """The refresh plan, most urgent first, one target per source.

    Given a Packet, returns its plan. Given items: changed / missing files →
    "file" targets, priority 1; stale_risk items → their file (or, without a
    file, the gene) at priority 2; paths the query names that nothing came from
    (``uncovered_paths``) → "query" targets at priority 3. With ``known_empty``
    and no uncovered path, one "query" target for the query as a whole.
    A file named by several items appears once, at its most urgent priority.
    """
    if isinstance(items, Packet):
        return items.refresh_targets
    best: dict[tuple[str, str | None], RefreshTarget] = {}

    def add(target: RefreshTarget) -> None:
        key = (target.target_kind, target.source_id)
        old = best.get(key)
        if old is None or target.priority < old.priority:
            best[key] = target

    for item in items:
        if item.verdict == "needs_refresh":
            if item.source_check == "missing":
                why = "source file is gone; restore it or re-ingest its folder so its genes are retired"
            else:
                why = "source file changed since ingest; re-ingest it before using these lines"
            add(RefreshTarget("file", item.source_id, why, 1) if item.source_id
                else RefreshTarget("gene", item.gene_id, why, 1))
        elif item.verdict == "stale_risk" and not item.reason.startswith(_QUERY_LEVEL_PREFIXES):
            why = f"stale: {item.reason}; re-read the source or re-ingest it to re-verify"
            if item.source_id:
                add(RefreshTarget("file", item.source_id, why, 2))
            else:
                add(RefreshTarget("gene", item.gene_id, why, 2))
    for path in uncovered_paths:
        add(RefreshTarget(
            "query", path,
            f"the query names {path!r} but nothing indexed comes from it; ingest the file or folder that holds it",
            1 if known_empty else 3,
        ))
    if known_empty and not any(t.target_kind == "query" for t in best.values()):
        what = f" for {echo(query_text)!r}" if query_text else ""  # a short prefix: never the whole query
        add(RefreshTarget(
            "query", None,
            f"nothing relevant is indexed{what}; ingest the files that hold the answer or broaden the query",
            1,
        ))
    return tuple(sorted(best.values(), key=lambda t: t.priority))



def weigh_retrieval(
    retrieval: Retrieval,
    task_type: str,
    settings: WeighSettings,
    now: float | None = None,
    *,
    term_weights: Mapping[str, float] | None = None,
    source_cache: SourceCache | None = None,
    pieces: Mapping[str, Sequence[Gene]] | None = None,
) -> Packet:
    """Turn a retrieval into the agent-facing packet for ``task_type``.

    ValueError (listing the valid task types) for an unknown task type. Each
    source file is stat'ed — and hashed only when its mtime moved or it was
    written right around ingest — at most once per call.

    ``term_weights``: the query's stemmed words → idf in this genome
    (relevance.idf_weights); without them every query word weighs the same.
    ``pieces``: gene id → the other stored genes of the one definition the item stands for (a function
    too long for one gene, answer/packet.py folds its pieces into one item); its relevance counts their
    words too, as the function holds them.
    An item is verified only when it is fresh enough *and* relevant enough for
    the task. An abstaining or empty retrieval, or one whose best item holds
    less than ``relevance_floor`` of the query, gives ``known_empty=True`` with a
    note and a "query" refresh target; items it still carries are listed as weak
    leads, never as verified.
    """
    task = validate_task_type(task_type)
    settings = weigh_settings(settings)
    now = time.time() if now is None else now
    threshold = verified_threshold(task, settings)
    rel_threshold = relevance_threshold(task, settings)
    query = retrieval.query
    items = tuple(retrieval.items)
    weights = dict(term_weights) if term_weights is not None else {w: 1.0 for w in query_words(query)}
    pieces = pieces or {}
    held = [gene_words(sg.gene).union(*(gene_words(g) for g in pieces.get(sg.gene.gene_id, ()))) for sg in items]
    rels = [relevance(weights, words) for words in held]
    best_rel = max(rels, default=0.0)
    abstained = not items or retrieval.tier == "abstain"
    nothing_relevant = not abstained and best_rel < settings.relevance_floor
    known_empty = abstained or nothing_relevant
    notes: list[str] = []

    path_conf, uncovered = _coverage(query, items)
    named_paths = bool(_query_tokens(query))
    low_coordinates = named_paths and path_conf < settings.coordinate_floor
    # the answer is in the right place when it comes from where the query points (when it names
    # places) and holds what the query asks about; an empty answer is in no place at all
    conf = 0.0 if not items else min(path_conf, best_rel) if named_paths else best_rel
    # an item that is itself at a coordinate the query names is on target even
    # when the answer as a whole misses most of them
    named_tokens = [t for t in _query_tokens(query) if t.kind != "ext"]
    cache = source_cache if source_cache is not None else SourceCache()  # reads bounded as ingest's (safe_open)
    weighed: list[PacketItem] = []
    for sg, rel in zip(items, rels):
        cap = None
        path = sg.gene.source_path
        if abstained:
            cap = f"{_ABSTAIN_PREFIX} retrieval judged nothing relevant enough; this item is a weak lead only"
        elif nothing_relevant:
            cap = (f"{_EMPTY_PREFIX} no item holds as much as {settings.relevance_floor:.2f} of what the query asks "
                   f"about (best {best_rel:.2f}); this item is a weak lead only")
        elif low_coordinates and not (path and any(_covers(t, path) for t in named_tokens)):
            cap = (
                f"{_OFF_TARGET_PREFIX} the query names {', '.join(uncovered) or 'other paths'} but this item comes "
                f"from {path or 'no file'} (path coverage {path_conf:.2f} < {settings.coordinate_floor:.2f})"
            )
        weighed.append(_weigh_item(sg, task, threshold, settings, now, cache, cap, rel, rel_threshold))

    verified = tuple(i for i in weighed if i.verdict == "verified")
    stale = tuple(i for i in weighed if i.verdict != "verified")
    n_refresh = sum(1 for i in stale if i.verdict == "needs_refresh")

    if known_empty:
        named = f" (the query names {', '.join(uncovered)})" if uncovered else ""
        missing = [w for w in sorted(weights, key=lambda w: -weights[w])
                   if not any(w in words for words in held)][:5]
        why = (f"; no indexed item holds more than {best_rel:.0%} of it"
               + (f" (not found: {', '.join(missing)})" if missing else "")) if nothing_relevant else ""
        notes.append(
            "known empty: nothing relevant is indexed for this query"
            + named + why
            + ". Ingest the files that hold the answer (helix ingest PATH) or broaden the query."
        )
    else:
        notes.append(
            f"{len(verified)} verified, {len(stale) - n_refresh} stale_risk, {n_refresh} needs_refresh "
            f"for task {task!r} (verified needs live_truth >= {threshold:.2f} and relevance >= {rel_threshold:.2f})"
        )
    if n_refresh:
        notes.append(
            f"{n_refresh} item(s) come from files that changed or vanished since ingest; "
            "do not use their text: re-read those files or re-ingest them"
        )
    if uncovered and not known_empty:
        notes.append(
            f"the query names {', '.join(uncovered)} but no delivered item comes from "
            + ("it" if len(uncovered) == 1 else "them")
            + (f"; path coverage {path_conf:.2f} is below {settings.coordinate_floor:.2f}, so verdicts were downgraded"
               if low_coordinates else "")
        )
    if items and not verified and not n_refresh and not known_empty:
        notes.append("nothing here is verified for this task; treat every item as a lead to re-read, not as fact")

    targets = refresh_targets(
        weighed,
        uncovered_paths=uncovered if (low_coordinates or known_empty) else (),
        query_text=query.text,
        known_empty=known_empty,
    )
    return Packet(
        query=query.text,
        task_type=task,
        verified=verified,
        stale_risk=stale,
        refresh_targets=targets,
        notes=tuple(notes),
        coordinate_confidence=conf,
        known_empty=known_empty,
        tier=retrieval.tier,
    )
