"""GET /dashboard (the built-in page) and GET /dashboard/data (its JSON).

The page lives in ``server/static/`` (no CDN: the charts are drawn by our own
SVG code) and polls ``/dashboard/data`` every ~2 s. The JSON carries:

* ``snapshot``  — the backend Telemetry's current values (``Telemetry.snapshot()``,
  without the raw bucket arrays unless ``?buckets=1``);
* ``summary``   — the same, folded into the numbers the page shows (totals, lifetime
  percentiles, per-route table, verdict and tier totals, genome, ingest);
* ``history``   — a server-side ring buffer of per-interval points (rates, windowed
  percentiles from bucket deltas, gauges, supervisor numbers) sampled every
  ``SAMPLE_INTERVAL_S`` from app start, so charts have points as soon as the page
  loads; ``?since=<t>`` returns only newer points;
* ``supervisor`` (the raw status document), ``supervisor_view`` (normalised) and
  ``grafana_url``;
* ``activity``  — the genome's activity record (genome/activity_sql.py): recent events of
  every process sharing the genome, the CLI's included; the last ingests with their
  summaries; verdict and live-check totals over the kept rows.

The Telemetry object comes from ``request.app.state.telemetry``; without one the
page still works and shows the supervisor's numbers.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
import time
from pathlib import Path
from typing import Any
from collections.abc import AsyncIterator, Iterable

from fastapi import Query, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response

from helix_context import signals
from helix_context.telemetry import normalize_supervisor_status, quantile_from_buckets

log = logging.getLogger("helix.dashboard")

STATIC_DIR = Path(__file__).resolve().parent / "static"
SAMPLE_INTERVAL_S = 2.0  # history resolution (the page polls at the same pace)
HISTORY_POINTS = 300  # 10 minutes at 2 s
# the dashboard's own polling is left out of the request charts (it is still exported)
SELF_ROUTE_PREFIX = "/dashboard"

_CONTENT_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".html": "text/html; charset=utf-8",
}
_NO_CACHE = {"Cache-Control": "no-cache"}


# ── folding a snapshot into dashboard numbers ────────────────────────────────


def _series(snapshot: dict[str, Any] | None, kind: str, name: str) -> list[dict[str, Any]]:
    if not snapshot:
        return []
    return list(((snapshot.get(kind) or {}).get(name) or {}).get("series") or [])


def _key(attrs: dict[str, Any]) -> tuple:
    return tuple(sorted((str(k), str(v)) for k, v in attrs.items()))


def _merge_hist(points: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """Sum histogram points that share bucket bounds (one instrument's series)."""
    merged: dict[str, Any] | None = None
    for p in points:
        if merged is None:
            merged = {"count": 0, "sum": 0.0, "bounds": list(p.get("bounds") or []),
                      "buckets": [0] * len(p.get("buckets") or []), "min": None, "max": None}
        if len(p.get("buckets") or []) != len(merged["buckets"]):
            continue
        merged["count"] += int(p.get("count") or 0)
        merged["sum"] += float(p.get("sum") or 0.0)
        merged["buckets"] = [a + int(b) for a, b in zip(merged["buckets"], p["buckets"], strict=False)]
        for key, pick in (("min", min), ("max", max)):
            if p.get(key) is not None:
                merged[key] = p[key] if merged[key] is None else pick(merged[key], p[key])
    return merged


def _hist_delta(cur: dict[str, Any] | None, prev: dict[str, Any] | None) -> dict[str, Any] | None:
    """cur − prev for cumulative histograms (prev None, or a reset, ⇒ cur itself)."""
    if cur is None:
        return None
    if prev is None or len(prev["buckets"]) != len(cur["buckets"]) or cur["count"] < prev["count"]:
        return {**cur}
    buckets = [max(0, a - b) for a, b in zip(cur["buckets"], prev["buckets"], strict=False)]
    return {"count": cur["count"] - prev["count"], "sum": max(0.0, cur["sum"] - prev["sum"]),
            "bounds": cur["bounds"], "buckets": buckets, "min": None, "max": None}


def _pcts(h: dict[str, Any] | None, qs: tuple[float, ...] = (0.5, 0.95, 0.99)) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for q in qs:
        name = f"p{int(q * 100)}"
        out[name] = (quantile_from_buckets(q, h["bounds"], h["buckets"], h.get("min"), h.get("max"))
                     if h and h["count"] > 0 else None)
    return out


def _http_points(snapshot: dict[str, Any] | None) -> list[dict[str, Any]]:
    return [p for p in _series(snapshot, "histograms", "http.server.request.duration")
            if not str(p["attrs"].get("http.route", "")).startswith(SELF_ROUTE_PREFIX)]


def _by_attr(points: Iterable[dict[str, Any]], attr: str) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for p in points:
        groups[str(p["attrs"].get(attr, "unknown"))].append(p)
    return groups


def _counter_by(snapshot: dict[str, Any] | None, name: str, attr: str | None) -> dict[str, float]:
    out: dict[str, float] = collections.defaultdict(float)
    for p in _series(snapshot, "counters", name):
        out[str(p["attrs"].get(attr, "")) if attr else ""] += float(p["value"])
    return dict(out)


def _gauge_by(snapshot: dict[str, Any] | None, name: str, attr: str | None) -> dict[str, float]:
    out: dict[str, float] = collections.defaultdict(float)
    for p in _series(snapshot, "gauges", name):
        out[str(p["attrs"].get(attr, "")) if attr else ""] += float(p["value"])
    return dict(out)


def _avg(h: dict[str, Any] | None) -> float | None:
    return h["sum"] / h["count"] if h and h["count"] > 0 else None


def summarize(snapshot: dict[str, Any] | None) -> dict[str, Any]:
    """Lifetime numbers for the page's tiles and tables."""
    http_pts = _http_points(snapshot)
    http_all = _merge_hist(http_pts)
    routes = []
    for (route, method), pts in _group_routes(http_pts).items():
        merged = _merge_hist(pts)
        errors = sum(p["count"] for p in pts if int(p["attrs"].get("http.response.status_code", 0)) >= 500)
        routes.append({"route": route or "(unmatched)", "method": method, "count": merged["count"] if merged else 0,
                       "errors": errors, **_pcts(merged)})
    routes.sort(key=lambda r: -r["count"])
    tokens = {t: sum(p["sum"] for p in pts)
              for t, pts in _by_attr(_series(snapshot, "histograms", "gen_ai.client.token.usage"), "gen_ai.token.type").items()}
    chat = _merge_hist(_series(snapshot, "histograms", "gen_ai.client.operation.duration"))
    models = {m: _merge_hist(pts)["count"] for m, pts in  # type: ignore[index]  # _merge_hist returns a dict for a non-empty series
              _by_attr(_series(snapshot, "histograms", "gen_ai.client.operation.duration"), "gen_ai.request.model").items()}
    stages = {s: {"count": h["count"], **_pcts(h)} for s, pts in
              _by_attr(_series(snapshot, "histograms", "helix.retrieval.duration"), "stage").items()
              if (h := _merge_hist(pts)) is not None}
    zone = _merge_hist(_series(snapshot, "histograms", "helix.budget_zone.cap"))
    delivered = _merge_hist(_series(snapshot, "histograms", "helix.genes.delivered"))
    ingest_runs = _merge_hist(_series(snapshot, "histograms", "helix.ingest.duration"))
    ratio = _merge_hist(_series(snapshot, "histograms", "helix.compression.ratio"))
    keep = _merge_hist(_series(snapshot, "histograms", "helix.compression.critical_keep_rate"))
    comp_tokens = _counter_by(snapshot, "helix.compression.tokens", "type")
    return {
        "http": {"count": http_all["count"] if http_all else 0,
                 "errors": sum(r["errors"] for r in routes), **_pcts(http_all), "routes": routes[:50]},
        "chat": {"count": chat["count"] if chat else 0, **_pcts(chat),
                 "tokens_in": tokens.get("input", 0.0), "tokens_out": tokens.get("output", 0.0), "models": models},
        "retrieval": {"count": sum(_counter_by(snapshot, "helix.budget.tier", "tier").values()),
                      "stages": stages, "tiers": _counter_by(snapshot, "helix.budget.tier", "tier"),
                      "genes_delivered_avg": _avg(delivered),
                      "zone_cap": {"count": zone["count"] if zone else 0, "avg": _avg(zone),
                                   "min": zone["min"] if zone else None, "max": zone["max"] if zone else None}},
        "verdicts": _counter_by(snapshot, "helix.verdicts", "verdict"),
        "ingest": {"bytes": sum(_counter_by(snapshot, "helix.ingest.bytes", None).values()),
                   "files": sum(_counter_by(snapshot, "helix.ingest.files", None).values()),
                   "genes": sum(_counter_by(snapshot, "helix.ingest.genes", None).values()),
                   "runs": ingest_runs["count"] if ingest_runs else 0,
                   "seconds": ingest_runs["sum"] if ingest_runs else 0.0},
        "compression": {"count": ratio["count"] if ratio else 0, "ratio_avg": _avg(ratio),
                        "critical_keep_avg": _avg(keep), "tokens_original": comp_tokens.get("original", 0.0),
                        "tokens_compressed": comp_tokens.get("compressed", 0.0)},
        "genome": {"genes_by_tier": _gauge_by(snapshot, "helix.genome.genes", "tier"),
                   "db_bytes": _gauge_by(snapshot, "helix.genome.db.size", "file").get("main"),
                   "wal_bytes": _gauge_by(snapshot, "helix.genome.db.size", "file").get("wal")},
    }


def _group_routes(points: Iterable[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = collections.defaultdict(list)
    for p in points:
        groups[(str(p["attrs"].get("http.route", "")), str(p["attrs"].get("http.request.method", "")))].append(p)
    return groups


# ── history ring buffer ───────────────────────────────────────────────────────


class DashboardHistory:
    """Per-interval points computed from successive cumulative snapshots."""

    def __init__(self, maxlen: int = HISTORY_POINTS) -> None:
        self.points: collections.deque[dict[str, Any]] = collections.deque(maxlen=maxlen)
        self._prev: dict[str, Any] | None = None
        self._prev_at: float | None = None
        self._lock = threading.Lock()
        self.last_sample_at = 0.0

    def since(self, t: float | None) -> list[dict[str, Any]]:
        with self._lock:
            if t is None:
                return list(self.points)
            return [p for p in self.points if p["t"] > t]

    def sample(self, snapshot: dict[str, Any] | None, supervisor_raw: dict[str, Any] | None,
               now: float | None = None) -> dict[str, Any]:
        with self._lock:
            now = time.time() if now is None else now
            point = self._point(snapshot, self._prev, supervisor_raw, now)
            self.points.append(point)
            if snapshot is not None:
                self._prev, self._prev_at = snapshot, now
            self.last_sample_at = now
            return point

    def _point(self, cur: dict[str, Any] | None, prev: dict[str, Any] | None,
               supervisor_raw: dict[str, Any] | None, now: float) -> dict[str, Any]:
        dt = max(1e-6, now - self._prev_at) if self._prev_at is not None else None
        point: dict[str, Any] = {"t": round(now, 3), "dt": round(dt, 3) if dt else None}
        if cur is not None:
            first = prev is None

            def hdelta(points_cur: list[dict[str, Any]], points_prev: list[dict[str, Any]]) -> dict[str, Any] | None:
                return _hist_delta(_merge_hist(points_cur), None if first else _merge_hist(points_prev))

            # HTTP: requests, errors, windowed percentiles
            http_cur, http_prev = _http_points(cur), _http_points(prev)
            h = hdelta(http_cur, http_prev)
            errors_cur = _merge_hist(p for p in http_cur if int(p["attrs"].get("http.response.status_code", 0)) >= 500)
            errors_prev = _merge_hist(p for p in http_prev if int(p["attrs"].get("http.response.status_code", 0)) >= 500)
            e = _hist_delta(errors_cur, None if first else errors_prev)
            if not first:
                point["http"] = {"requests": h["count"] if h else 0, "errors": e["count"] if e else 0,
                                 "rps": round((h["count"] if h else 0) / dt, 3) if dt else None,
                                 **{k: _r(v) for k, v in _pcts(h).items()}}
                # chat tokens + latency
                tok_cur = _by_attr(_series(cur, "histograms", "gen_ai.client.token.usage"), "gen_ai.token.type")
                tok_prev = _by_attr(_series(prev, "histograms", "gen_ai.client.token.usage"), "gen_ai.token.type")
                tokens = {}
                for kind in ("input", "output"):
                    d = hdelta(tok_cur.get(kind, []), tok_prev.get(kind, []))
                    tokens[kind] = d["sum"] if d else 0.0
                c = hdelta(_series(cur, "histograms", "gen_ai.client.operation.duration"),
                           _series(prev, "histograms", "gen_ai.client.operation.duration"))
                point["chat"] = {"count": c["count"] if c else 0, "tokens_in": tokens["input"],
                                 "tokens_out": tokens["output"], "p95": _r(_pcts(c, (0.95,))["p95"])}
                # retrieval stages (windowed p95), tiers, zone cap, genes delivered
                st_cur = _by_attr(_series(cur, "histograms", "helix.retrieval.duration"), "stage")
                st_prev = _by_attr(_series(prev, "histograms", "helix.retrieval.duration"), "stage")
                stages = {}
                for stage, pts in st_cur.items():
                    d = hdelta(pts, st_prev.get(stage, []))
                    if d and d["count"] > 0:
                        stages[stage] = _r(_pcts(d, (0.95,))["p95"])
                zone = hdelta(_series(cur, "histograms", "helix.budget_zone.cap"),
                              _series(prev, "histograms", "helix.budget_zone.cap"))
                delivered = hdelta(_series(cur, "histograms", "helix.genes.delivered"),
                                   _series(prev, "histograms", "helix.genes.delivered"))
                point["retrieval"] = {
                    "stages_p95": stages,
                    "tiers": _counter_delta(cur, prev, "helix.budget.tier", "tier"),
                    "zone_cap_avg": _r(_avg(zone)), "zone_capped": zone["count"] if zone else 0,
                    "genes_avg": _r(_avg(delivered)),
                }
                point["verdicts"] = _counter_delta(cur, prev, "helix.verdicts", "verdict")
                ingest = {k: sum(_counter_delta(cur, prev, f"helix.ingest.{k}", None).values())
                          for k in ("bytes", "files", "genes")}
                point["ingest"] = ingest
                ratio = hdelta(_series(cur, "histograms", "helix.compression.ratio"),
                               _series(prev, "histograms", "helix.compression.ratio"))
                point["compression"] = {"ratio_avg": _r(_avg(ratio))}
            # cumulative values are useful on every point (ingest progress, genome)
            point["totals"] = {
                "requests": _merge_hist(http_cur)["count"] if http_cur else 0,  # type: ignore[index]  # _merge_hist returns a dict for a non-empty series
                "ingest_files": sum(_counter_by(cur, "helix.ingest.files", None).values()),
                "ingest_genes": sum(_counter_by(cur, "helix.ingest.genes", None).values()),
                "ingest_bytes": sum(_counter_by(cur, "helix.ingest.bytes", None).values()),
            }
            genes_by_tier = _gauge_by(cur, "helix.genome.genes", "tier")
            if genes_by_tier:
                point["genome"] = {"genes_by_tier": genes_by_tier, "genes": sum(genes_by_tier.values())}
        sup = normalize_supervisor_status(supervisor_raw)
        if sup is not None:
            point["supervisor"] = {
                "up": 1 if sup["backend_up"] else 0, "status": sup["backend_status"], "restarts": sup["restarts"],
                "gpu_used": sup["gpu"]["used_bytes"] if sup["gpu"]["available"] else None,
                "gpu_total": sup["gpu"]["total_bytes"] if sup["gpu"]["available"] else None,
                "models_vram": sum(m["size_vram"] for m in sup["models"]),
                "models": len(sup["models"]), "pressure": 1 if sup["pressure"] else 0,
            }
        return point


def _r(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(float(value), digits)


def _counter_delta(cur: dict[str, Any] | None, prev: dict[str, Any] | None, name: str,
                   attr: str | None) -> dict[str, float]:
    now = _counter_by(cur, name, attr)
    before = _counter_by(prev, name, attr) if prev else {}
    out = {}
    for key, value in now.items():
        d = value - before.get(key, 0.0)
        out[key] = value if d < 0 else d  # a reset starts over
    return out


_history_lock = threading.Lock()


def history_for(app: Any) -> DashboardHistory:
    with _history_lock:
        history = getattr(app.state, "dashboard_history", None)
        if history is None:
            history = DashboardHistory()
            app.state.dashboard_history = history
        return history


def _settings_home(app: Any) -> Path | None:
    settings = getattr(app.state, "settings", None)
    return getattr(settings, "home", None)


def take_sample(app: Any) -> dict[str, Any]:
    telemetry = getattr(app.state, "telemetry", None)
    snapshot = telemetry.snapshot() if telemetry is not None else None
    supervisor_raw = signals.read_supervisor_status(_settings_home(app))
    return history_for(app).sample(snapshot, supervisor_raw)


async def _sampler(app: Any) -> None:
    while True:
        try:
            await asyncio.to_thread(take_sample, app)
        except Exception as exc:  # keep sampling whatever one sample did
            log.warning("dashboard sample failed: %s", exc)
        await asyncio.sleep(SAMPLE_INTERVAL_S)


@contextlib.asynccontextmanager
async def lifespan(app: Any) -> AsyncIterator[None]:
    history_for(app)
    task = asyncio.create_task(_sampler(app), name="helix-dashboard-sampler")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task



def _strip_buckets(snapshot: dict[str, Any]) -> dict[str, Any]:
    hists = {}
    for name, body in (snapshot.get("histograms") or {}).items():
        hists[name] = {**body, "series": [{k: v for k, v in p.items() if k not in ("bounds", "buckets")}
                                          for p in body.get("series", [])]}
    return {**snapshot, "histograms": hists}


def dashboard_page() -> Response:
    page = STATIC_DIR / "dashboard.html"
    if not page.is_file():
        return HTMLResponse("<h1>Helix dashboard</h1><p>The page is missing from this install "
                            "(helix_context/server/static/dashboard.html).</p>", status_code=500)
    return FileResponse(page, media_type="text/html; charset=utf-8", headers=_NO_CACHE)


def dashboard_static(filename: str) -> Response:
    allowed = {p.name: p for p in STATIC_DIR.iterdir() if p.is_file()} if STATIC_DIR.is_dir() else {}
    path = allowed.get(filename)
    if path is None or path.suffix not in _CONTENT_TYPES:
        return JSONResponse({"error": {"message": f"no dashboard asset named {filename!r}", "type": "not_found"}},
                            status_code=404)
    return FileResponse(path, media_type=_CONTENT_TYPES[path.suffix], headers=_NO_CACHE)


def dashboard_data(request: Request,
                   since: float | None = Query(None, description="only history points newer than this unix time"),
                   buckets: bool = Query(False, description="include raw histogram buckets in the snapshot")
                   ) -> dict[str, Any]:
    app = request.app
    telemetry = getattr(app.state, "telemetry", None)
    settings = getattr(app.state, "settings", None)
    history = history_for(app)
    now = time.time()
    if now - history.last_sample_at > SAMPLE_INTERVAL_S * 1.5:
        take_sample(app)  # no sampler running (e.g. a test client without lifespan)
    snapshot = telemetry.snapshot() if telemetry is not None else None
    supervisor_raw = signals.read_supervisor_status(_settings_home(app))
    telemetry_settings = getattr(settings, "telemetry", None)
    return {
        "at": now,
        "interval_s": SAMPLE_INTERVAL_S,
        "telemetry": telemetry is not None,
        "service": getattr(telemetry, "service_name", None),
        "export": snapshot["export"] if snapshot else {"enabled": False, "protocol": None, "endpoint": None},
        "summary": summarize(snapshot),
        "indexed": _indexed(app),
        "snapshot": (snapshot if buckets else _strip_buckets(snapshot)) if snapshot else None,
        "history": history.since(since),
        "supervisor": supervisor_raw,
        "supervisor_view": normalize_supervisor_status(supervisor_raw),
        "grafana_url": getattr(telemetry_settings, "grafana_url", "") or "",
        # the helper model (ribosome) is a part only when configured: the page says "not configured" otherwise
        "helper_model": bool(settings is not None and (settings.ribosome.enabled or settings.ribosome.model)),
        "started_at": getattr(app.state, "started_at", None),
        "activity": _activity(app),
    }


def _indexed(app: Any) -> dict[str, Any] | None:
    """The one count of indexed items (live genes, exact per generation) that /stats, /sources and the tray show,
    whether the genome's disk is full (reads only), and the background re-embed while it runs."""
    helix = getattr(app.state, "helix", None)
    if helix is None:
        return None
    try:
        job = helix.reembed.progress() if helix.reembed is not None else None
        return {"genes": helix.genome.live_gene_count(), "disk_full": helix.genome.disk_full,
                "reembed": job if job is not None and job["state"] == "running" else None}
    except Exception as exc:  # an unreadable genome must not take the page down
        log.warning("genome unreadable for the dashboard: %s", exc)
        return {"error": str(exc)}


def _activity(app: Any) -> dict[str, Any] | None:
    """The genome's activity record: work by every process, the CLI's included."""
    helix = getattr(app.state, "helix", None)
    if helix is None:
        return None
    try:
        return helix.activity()
    except Exception as exc:  # an unreadable record must not take the page down
        log.warning("activity record unreadable: %s", exc)
        return {"error": str(exc)}
