"""Fuse per-scorer scores into one ranking, keeping each signal's contribution.

`weighted` (default): each scorer's scores are divided by that scorer's best
score for this query, then summed with the configured weights; dense cosine is
kept on its absolute scale above a floor, so a weak dense neighbour cannot
look as good as a strong one. `rrf`: reciprocal-rank fusion, rank-only.
benchmarks/bench_retrieval.py measures both on SciFact; the README records why
the default was chosen.

Code and prose get their own weights: a gene of code is weighed with
`code_weights` (chosen on code questions, benchmarks/tune_localization.py), every
other gene with `weights` (chosen on SciFact). Which genes are code is passed in
as `code_rows`, so fusion stays a pure function of its inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

Scores = dict[int, float]
RRF_K = 60.0
DENSE_FLOOR = 0.15  # cosine below this carries no evidence for MiniLM


def _normalise(name: str, scores: Scores) -> Scores:
    if not scores:
        return {}
    if name == "dense":
        top = max(scores.values())
        span = max(top - DENSE_FLOOR, 1e-6)
        return {k: max(0.0, (v - DENSE_FLOOR) / span) * min(1.0, top / 0.5) for k, v in scores.items()}
    top = max(scores.values())
    if top <= 0:
        return {k: 0.0 for k in scores}
    return {k: v / top for k, v in scores.items()}


Fused = dict[int, tuple[float, dict[str, float]]]


def fuse_weighted(per_signal: Mapping[str, Scores], weights: Mapping[str, float],
                  code_rows: Collection[int] = (), code_weights: Mapping[str, float] | None = None) -> Fused:
    fused: Fused = {}
    code_weights = weights if code_weights is None else code_weights
    for name, scores in per_signal.items():
        w, wc = weights.get(name, 0.0), code_weights.get(name, 0.0)
        if w == 0.0 and wc == 0.0:
            continue
        for rowid, value in _normalise(name, scores).items():
            weight = wc if rowid in code_rows else w
            if weight == 0.0:
                continue
            total, parts = fused.get(rowid, (0.0, {}))
            contribution = weight * value
            parts[name] = round(contribution, 6)
            fused[rowid] = (total + contribution, parts)
    return fused


def fuse_rrf(per_signal: Mapping[str, Scores], weights: Mapping[str, float],
             code_rows: Collection[int] = (), code_weights: Mapping[str, float] | None = None) -> Fused:
    fused: Fused = {}
    code_weights = weights if code_weights is None else code_weights
    for name, scores in per_signal.items():
        w, wc = weights.get(name, 0.0), code_weights.get(name, 0.0)
        if w == 0.0 and wc == 0.0:
            continue
        ranked = sorted(scores.items(), key=lambda kv: -kv[1])
        for rank, (rowid, _) in enumerate(ranked, 1):
            weight = wc if rowid in code_rows else w
            if weight == 0.0:
                continue
            total, parts = fused.get(rowid, (0.0, {}))
            contribution = weight / (RRF_K + rank)
            parts[name] = round(contribution, 6)
            fused[rowid] = (total + contribution, parts)
    return fused


FUSERS = {"weighted": fuse_weighted, "rrf": fuse_rrf}


def fuse_added(fused: Fused, name: str, scores: Scores, fuser: Callable[..., Fused], weights: Mapping[str, float],
               code_rows: Collection[int] = (), code_weights: Mapping[str, float] | None = None) -> Fused:
    """`fused` with one more signal fused after the ones it holds: what `fuser` gives for all of them.

    Why: co-activation is scored from the first fusion's best genes, then fused in. Both fusers add
    each signal's contribution to a gene's total in turn, so adding the last signal's to the totals
    makes the same sums in the same order as fusing every signal again, at the cost of that one."""
    out = dict(fused)
    for rowid, (contribution, parts) in fuser({name: scores}, weights, code_rows, code_weights).items():
        total, before = fused.get(rowid, (0.0, {}))
        out[rowid] = (total + contribution, {**before, **parts})
    return out

DENSE_SIGNALS = frozenset({"dense"})
UNBLENDED = frozenset({"coactivation"})  # learnt from use, neither lexical nor dense evidence about the text


def blend_weights(weights: Mapping[str, float], lexicality: float, question_dense: float,
                  question_lexical: float) -> dict[str, float]:
    """The weights for one query: as configured at lexicality 1, scaled for a plain-words question at 0.

    Linear in between (retrieve/question.py says what lexicality is): a smooth blend, so a
    query halfway between the two kinds gets weights halfway between, and one misread
    feature cannot flip the ranking.
    """
    s = min(1.0, max(0.0, lexicality))
    out: dict[str, float] = {}
    for name, w in weights.items():
        if name in UNBLENDED:
            out[name] = w
            continue
        factor = question_dense if name in DENSE_SIGNALS else question_lexical
        out[name] = w * (factor + (1.0 - factor) * s)
    return out
