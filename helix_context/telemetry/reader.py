"""Reading metrics back in process: one metric into the snapshot's shape, and percentiles from buckets.

Why apart: the built-in dashboard shows what the in-memory reader holds without a collector;
turning OTel's data points into plain dicts and quantiles is its own job.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics.export import Gauge, Histogram, Sum

QUANTILES = (0.5, 0.9, 0.95, 0.99)


def quantile_from_buckets(q: float, bounds: list[float] | tuple[float, ...], counts: list[int] | tuple[int, ...],
                          lo: float | None = None, hi: float | None = None) -> float | None:
    """Estimate a quantile from explicit-bucket counts (linear within a bucket).

    ``counts`` has ``len(bounds) + 1`` entries (the last is the overflow bucket);
    ``lo``/``hi`` (observed min/max, when known) bound the first and last buckets.
    """
    total = sum(counts)
    if total <= 0:
        return None
    rank = q * total
    seen = 0.0
    for i, count in enumerate(counts):
        if count <= 0:
            continue
        if seen + count >= rank:
            lower = bounds[i - 1] if i > 0 else (lo if lo is not None else min(0.0, bounds[0] if bounds else 0.0))
            upper = bounds[i] if i < len(bounds) else (hi if hi is not None else (bounds[-1] if bounds else 0.0))
            if lo is not None:
                lower = max(lower, lo)
            if hi is not None:
                upper = min(upper, hi)
            if upper < lower:
                upper = lower
            frac = (rank - seen) / count
            return lower + (upper - lower) * max(0.0, min(1.0, frac))
        seen += count
    return hi



def add_metric(out: dict[str, Any], metric: Any) -> None:
    """One metric from the in-memory reader into a snapshot's counters, gauges or histograms."""
    body = metric.data
    head = {"unit": metric.unit, "description": metric.description}
    if isinstance(body, Histogram):
        series = []
        for p in body.data_points:
            bounds = [float(b) for b in p.explicit_bounds]
            counts = [int(c) for c in p.bucket_counts]
            lo = float(p.min) if p.count else None
            hi = float(p.max) if p.count else None
            item = {"attrs": dict(p.attributes or {}), "count": int(p.count), "sum": float(p.sum),
                    "min": lo, "max": hi, "bounds": bounds, "buckets": counts}
            for q in QUANTILES:
                item[f"p{int(q * 100)}"] = quantile_from_buckets(q, bounds, counts, lo, hi)
            series.append(item)
        out["histograms"][metric.name] = {**head, "series": series}
    elif isinstance(body, Sum):
        kind = "counters" if body.is_monotonic else "gauges"
        out[kind][metric.name] = {**head, "series": [
            {"attrs": dict(p.attributes or {}), "value": p.value} for p in body.data_points]}
    elif isinstance(body, Gauge):
        out["gauges"][metric.name] = {**head, "series": [
            {"attrs": dict(p.attributes or {}), "value": p.value} for p in body.data_points]}
