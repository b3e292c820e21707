"""Telemetry: metrics reach a real OTLP receiver with the right names, units and
attributes; nothing is sent when telemetry is off; query text never leaks.

The receiver is oteltap (an in-process OTLP/HTTP protobuf receiver) on a free port.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable

import httpx
import pytest
from fastapi import APIRouter, FastAPI
from fastapi.responses import StreamingResponse
from google.protobuf.json_format import MessageToDict

from helix_context.config import Settings, load_config
from helix_context.telemetry import (
    HttpMetricsMiddleware,
    Telemetry,
    hash_query,
    instrument_app,
    normalize_supervisor_status,
    quantile_from_buckets,
)

REPO = Path(__file__).resolve().parent.parent
oteltap = pytest.importorskip("oteltap", reason="oteltap (the test OTLP receiver) is in the [test] extra")

SECRET_ID = "gene-7f3a9c-SECRET"
SUPERVISOR_SNAPSHOT = {
    "version": 1,
    "backend": {"status": "running", "pid": 4242, "restarts": 3, "health": {"ok": True}},
    "gpu": {"available": True, "used_bytes": 3_000_000_000, "total_bytes": 8_589_934_592, "source": "nvml",
            "devices": [{"index": 0, "name": "Test GPU", "used_bytes": 3_000_000_000, "total_bytes": 8_589_934_592}]},
    "resident_models": [{"name": "qwen2.5:3b", "model": "qwen2.5:3b", "size": 2_600_000_000, "size_vram": 2_400_000_000}],
    "pressure": {"active": False, "reasons": []},
    "ribosome_paused": True,
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _settings(port: int | None, enabled: bool, **telemetry: Any) -> Settings:
    endpoint = f"http://127.0.0.1:{port}" if port else "http://127.0.0.1:4318"
    return load_config().replace(telemetry={"enabled": enabled, "endpoint": endpoint, "export_interval_s": 0.2,
                                            **telemetry})


# ── reading what the receiver got ─────────────────────────────────────────────


def _attrs(kvs: Any) -> dict[str, Any]:
    out = {}
    for kv in kvs:
        which = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, which) if which else None
    return out


def _describe(metric: Any) -> dict[str, Any]:
    kind = metric.WhichOneof("data")
    body = getattr(metric, kind)
    points = []
    for p in body.data_points:
        item: dict[str, Any] = {"attrs": _attrs(p.attributes)}
        if kind == "histogram":
            item.update(count=p.count, sum=p.sum, bounds=list(p.explicit_bounds))
        else:
            item["value"] = p.as_int if p.WhichOneof("value") == "as_int" else p.as_double
        points.append(item)
    info = {"name": metric.name, "unit": metric.unit, "kind": kind, "points": points}
    if kind == "sum":
        info["monotonic"] = body.is_monotonic
    return info


def receive_metrics(produce: Callable[[int], Any], expect: set[str], *, timeout: float = 30.0,
                    settle: float = 0.0) -> dict[str, dict[str, Any]]:
    """Start oteltap on a free port, run produce(port) in a thread, and collect metrics until
    every name in `expect` arrived (then `settle` more seconds). Latest message per name wins."""
    port = _free_port()
    got: dict[str, dict[str, Any]] = {}
    raw: list[str] = []

    async def main() -> None:
        settings = oteltap.OtelTapHttpProtobufReceiverSettings(http_port=port)
        async with oteltap.OtelTapHttpProtobufReceiver(settings) as receiver:
            async def collect() -> None:
                async for metric in receiver.stream_metrics():
                    got[metric.name] = _describe(metric)
                    raw.append(json.dumps(MessageToDict(metric)))

            collector = asyncio.create_task(collect())
            await asyncio.sleep(0.05)
            producer = asyncio.create_task(asyncio.to_thread(produce, port))
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and not expect <= set(got):
                await asyncio.sleep(0.1)
            if settle:
                await asyncio.sleep(settle)
            await producer
            collector.cancel()

    asyncio.run(main())
    got["__raw__"] = {"text": "\n".join(raw)}  # type: ignore[assignment]  # the test stores a raw-text entry beside the parsed ones
    return got


# ── the app the HTTP metrics come from ────────────────────────────────────────


def _demo_app(telemetry: Telemetry) -> FastAPI:
    app = FastAPI()
    items = APIRouter(prefix="/items")

    @app.post("/context")
    def context() -> dict:
        return {"ok": True}

    @app.get("/genes/{gene_id}")
    def gene(gene_id: str) -> dict:
        return {"gene_id": gene_id}

    @items.get("/{item_id}")
    def item(item_id: int) -> dict:
        return {"item_id": item_id}

    @app.get("/boom")
    def boom() -> dict:
        raise RuntimeError("boom")

    app.include_router(items, prefix="/v1")
    instrument_app(app, telemetry)
    instrument_app(app, telemetry)  # twice is a no-op
    return app


async def _drive(app: FastAPI) -> None:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        for _ in range(3):
            assert (await client.post("/context", json={"query": "secret query text"})).status_code == 200
        assert (await client.get(f"/genes/{SECRET_ID}")).status_code == 200
        assert (await client.get("/genes/another-id-123")).status_code == 200
        assert (await client.get("/v1/items/42")).status_code == 200
        assert (await client.get("/v1/items/not-a-number")).status_code == 422
        assert (await client.get(f"/nothing/here/{SECRET_ID}")).status_code == 404
        assert (await client.get("/boom")).status_code == 500


def _record_domain(telemetry: Telemetry) -> None:
    telemetry.record_chat("qwen2.5:3b", 1200, 80, 0.9, "ollama")
    telemetry.record_chat("qwen2.5:3b", 300, 20, 0.3, "http://127.0.0.1:11434")
    telemetry.record_retrieval({"fts": 0.002, "dense": 0.004, "total": 0.011}, 7, "focused", 8)
    telemetry.record_retrieval({"fts": 0.001, "total": 0.004}, 3, "tight", None)
    telemetry.record_verdicts({"verified": 4, "stale_risk": 2, "needs_refresh": 1})
    telemetry.record_ingest(123_456, 12, 88, 1.5)
    telemetry.record_compression(1000, 420, 50, 49)
    telemetry.observe_genome(lambda: {"genes_by_tier": {"open": 80, "aging": 6, "archived": 2},
                                      "db_bytes": 1_048_576, "wal_bytes": 32_768})


BACKEND_METRICS = {
    "http.server.request.duration", "gen_ai.client.token.usage", "gen_ai.client.operation.duration",
    "helix.retrieval.duration", "helix.genes.delivered", "helix.budget.tier", "helix.budget_zone.cap",
    "helix.verdicts", "helix.ingest.bytes", "helix.ingest.files", "helix.ingest.genes", "helix.ingest.duration",
    "helix.compression.ratio", "helix.compression.critical_keep_rate", "helix.compression.tokens",
    "helix.genome.genes", "helix.genome.db.size",
}
SUPERVISOR_METRICS = {
    "helix.backend.up", "helix.backend.restarts", "hw.gpu.memory.usage", "hw.gpu.memory.limit",
    "helix.models.resident", "helix.model.size", "helix.model.vram.usage", "helix.gpu.pressure",
    "helix.ribosome.paused",
}


# ── tests ─────────────────────────────────────────────────────────────────────


def test_backend_metrics_reach_a_real_receiver_with_names_units_and_attributes() -> None:
    def produce(port: int) -> None:
        telemetry = Telemetry(_settings(port, True), "helix-backend")
        assert telemetry.enabled_export
        asyncio.run(_drive(_demo_app(telemetry)))
        _record_domain(telemetry)
        assert telemetry.force_flush()
        time.sleep(0.5)
        telemetry.shutdown()

    got = receive_metrics(produce, BACKEND_METRICS)
    missing = BACKEND_METRICS - set(got)
    assert not missing, f"never received: {sorted(missing)}"

    units = {name: got[name]["unit"] for name in BACKEND_METRICS}
    assert units == {
        "http.server.request.duration": "s", "gen_ai.client.token.usage": "{token}",
        "gen_ai.client.operation.duration": "s", "helix.retrieval.duration": "s", "helix.genes.delivered": "{gene}",
        "helix.budget.tier": "{request}", "helix.budget_zone.cap": "{gene}", "helix.verdicts": "{item}",
        "helix.ingest.bytes": "By", "helix.ingest.files": "{file}", "helix.ingest.genes": "{gene}",
        "helix.ingest.duration": "s", "helix.compression.ratio": "1", "helix.compression.critical_keep_rate": "1",
        "helix.compression.tokens": "{token}", "helix.genome.genes": "{gene}", "helix.genome.db.size": "By",
    }

    http = got["http.server.request.duration"]
    assert http["kind"] == "histogram"
    routes = {p["attrs"].get("http.route") for p in http["points"]}
    assert routes == {"/context", "/genes/{gene_id}", "/v1/items/{item_id}", "/boom", None}, routes
    by_route = {(p["attrs"].get("http.route"), p["attrs"]["http.response.status_code"]): p for p in http["points"]}
    assert by_route[("/context", 200)]["count"] == 3
    assert by_route[("/context", 200)]["attrs"]["http.request.method"] == "POST"
    assert by_route[("/genes/{gene_id}", 200)]["count"] == 2
    assert by_route[("/v1/items/{item_id}", 422)]["count"] == 1
    assert by_route[(None, 404)]["count"] == 1  # unmatched: no http.route at all, never the raw path
    assert by_route[("/boom", 500)]["attrs"]["error.type"] == "500"
    raw = got["__raw__"]["text"]
    assert SECRET_ID not in raw and "another-id-123" not in raw and "secret query text" not in raw

    tokens = got["gen_ai.client.token.usage"]
    assert tokens["kind"] == "histogram"
    sums = {}
    for p in tokens["points"]:
        assert p["attrs"]["gen_ai.request.model"] == "qwen2.5:3b"
        assert p["attrs"]["gen_ai.operation.name"] == "chat"
        sums[p["attrs"]["gen_ai.token.type"]] = sums.get(p["attrs"]["gen_ai.token.type"], 0) + p["sum"]
    assert sums == {"input": 1500, "output": 100}
    upstreams = {(p["attrs"].get("gen_ai.provider.name"), p["attrs"].get("server.address"), p["attrs"].get("server.port"))
                 for p in got["gen_ai.client.operation.duration"]["points"]}
    assert upstreams == {("ollama", None, None), (None, "127.0.0.1", 11434)}

    stages = {p["attrs"]["stage"]: p["count"] for p in got["helix.retrieval.duration"]["points"]}
    assert stages == {"fts": 2, "dense": 1, "total": 2}
    tiers = {p["attrs"]["tier"]: p["value"] for p in got["helix.budget.tier"]["points"]}
    assert tiers == {"focused": 1, "tight": 1} and got["helix.budget.tier"]["monotonic"]
    zone = got["helix.budget_zone.cap"]["points"]
    assert [(p["count"], p["sum"]) for p in zone] == [(1, 8)]
    verdicts = {p["attrs"]["verdict"]: p["value"] for p in got["helix.verdicts"]["points"]}
    assert verdicts == {"verified": 4, "stale_risk": 2, "needs_refresh": 1}
    assert got["helix.ingest.bytes"]["points"][0]["value"] == 123_456
    assert got["helix.ingest.genes"]["points"][0]["value"] == 88
    ratio = got["helix.compression.ratio"]["points"][0]
    assert ratio["count"] == 1 and ratio["sum"] == pytest.approx(0.42)
    assert got["helix.compression.critical_keep_rate"]["points"][0]["sum"] == pytest.approx(0.98)
    genes = {p["attrs"]["tier"]: p["value"] for p in got["helix.genome.genes"]["points"]}
    assert genes == {"open": 80, "aging": 6, "archived": 2} and got["helix.genome.genes"]["kind"] == "gauge"
    db = {p["attrs"]["file"]: p["value"] for p in got["helix.genome.db.size"]["points"]}
    assert db == {"main": 1_048_576, "wal": 32_768}


def test_supervisor_metrics_reach_a_real_receiver() -> None:
    def produce(port: int) -> None:
        telemetry = Telemetry(_settings(port, True), "helix-supervisor")
        telemetry.observe_supervisor(lambda: SUPERVISOR_SNAPSHOT)
        assert telemetry.force_flush()
        time.sleep(0.5)
        telemetry.shutdown()

    got = receive_metrics(produce, SUPERVISOR_METRICS)
    assert not SUPERVISOR_METRICS - set(got), sorted(SUPERVISOR_METRICS - set(got))
    usage, limit = got["hw.gpu.memory.usage"], got["hw.gpu.memory.limit"]
    assert usage["unit"] == limit["unit"] == "By"
    assert usage["kind"] == "sum" and usage["monotonic"] is False  # an UpDownCounter, as the semconv says
    assert usage["points"] == [{"attrs": {"hw.id": "gpu0", "hw.type": "gpu", "hw.name": "Test GPU"}, "value": 3_000_000_000}]
    assert limit["points"][0]["value"] == 8_589_934_592
    assert got["helix.backend.up"]["points"][0]["value"] == 1
    assert got["helix.backend.restarts"]["points"][0]["value"] == 3
    assert got["helix.backend.restarts"]["monotonic"] is True
    assert got["helix.models.resident"]["points"][0]["value"] == 1
    vram = got["helix.model.vram.usage"]
    assert vram["unit"] == "By" and vram["points"] == [{"attrs": {"model": "qwen2.5:3b"}, "value": 2_400_000_000}]
    assert got["helix.gpu.pressure"]["points"][0]["value"] == 0
    assert got["helix.ribosome.paused"]["points"][0]["value"] == 1


def test_telemetry_off_sends_nothing_but_the_dashboard_still_counts() -> None:
    state: dict[str, Any] = {}

    def produce(port: int) -> None:
        telemetry = Telemetry(_settings(port, False), "helix-backend")
        assert not telemetry.enabled_export
        asyncio.run(_drive(_demo_app(telemetry)))
        _record_domain(telemetry)
        telemetry.observe_supervisor(lambda: SUPERVISOR_SNAPSHOT)
        telemetry.force_flush()
        time.sleep(1.5)  # ~7 export intervals, had export been on
        state["snapshot"] = telemetry.snapshot()
        telemetry.shutdown()

    got = receive_metrics(produce, {"never"}, timeout=0.5, settle=1.0)
    got.pop("__raw__")
    assert got == {}, f"telemetry off, yet the receiver got {sorted(got)}"
    snap = state["snapshot"]
    assert snap["export"]["enabled"] is False
    http = snap["histograms"]["http.server.request.duration"]["series"]
    assert sum(p["count"] for p in http) == 9
    assert snap["counters"]["helix.verdicts"]["series"]

    # the same receiver setup does receive from an enabled instance (the check above is not vacuous)
    def produce_on(port: int) -> None:
        telemetry = Telemetry(_settings(port, True), "helix-backend")
        telemetry.record_verdicts({"verified": 1})
        telemetry.force_flush()
        time.sleep(0.3)
        telemetry.shutdown()

    assert "helix.verdicts" in receive_metrics(produce_on, {"helix.verdicts"})


def test_default_settings_export_nothing() -> None:
    telemetry = Telemetry(load_config(), "helix-backend")
    try:
        assert telemetry.enabled_export is False
        assert telemetry._export_reader is None
    finally:
        telemetry.shutdown()


def test_hash_query_never_leaks_the_text() -> None:
    text = "where is the production database password for payments-api"
    settings = load_config()
    hashed = hash_query(text, settings)
    assert re.fullmatch(r"sha256:[0-9a-f]{16}", hashed)
    for word in re.findall(r"\w{4,}", text):
        assert word not in hashed
    assert hash_query(text, settings) == hashed  # stable, so the same query can be correlated
    assert hash_query(text + "?", settings) != hashed
    assert hash_query(text, settings.telemetry) == hashed
    assert hash_query(text, None) == hashed
    assert hash_query("", settings).startswith("sha256:")
    opted_in = settings.replace(telemetry={"include_query_text": True})
    assert hash_query(text, opted_in) == text


def test_instances_are_independent_and_the_global_provider_is_untouched() -> None:
    from opentelemetry import metrics

    before = metrics.get_meter_provider()
    a = Telemetry(load_config(), "helix-backend")
    b = Telemetry(load_config(), "helix-supervisor")
    try:
        a.record_verdicts({"verified": 5})
        b.record_verdicts({"needs_refresh": 2})
        va = {p["attrs"]["verdict"]: p["value"] for p in a.snapshot()["counters"]["helix.verdicts"]["series"]}
        vb = {p["attrs"]["verdict"]: p["value"] for p in b.snapshot()["counters"]["helix.verdicts"]["series"]}
        assert va == {"verified": 5} and vb == {"needs_refresh": 2}
        assert metrics.get_meter_provider() is before
    finally:
        a.shutdown()
        b.shutdown()
    a.shutdown()  # twice is fine
    a.record_http("GET", "/x", 200, 0.1)  # after shutdown: ignored, no error
    assert a.snapshot()["histograms"] == {}


def test_snapshot_percentiles_and_bad_callbacks() -> None:
    telemetry = Telemetry(load_config(), "helix-backend")
    try:
        for ms in range(1, 101):
            telemetry.record_http("GET", "/context", 200, ms / 1000)
        telemetry.observe_genome(lambda: 1 / 0)  # a broken probe must not break the snapshot
        snap = telemetry.snapshot()
        (point,) = snap["histograms"]["http.server.request.duration"]["series"]
        assert point["count"] == 100 and point["min"] == pytest.approx(0.001) and point["max"] == pytest.approx(0.1)
        assert 0.03 <= point["p50"] <= 0.075
        assert 0.075 <= point["p95"] <= 0.1
        assert point["p99"] <= 0.1
        assert "helix.genome.genes" not in snap["gauges"]
    finally:
        telemetry.shutdown()
    assert quantile_from_buckets(0.5, [1, 2], [0, 0, 0]) is None
    assert quantile_from_buckets(0.5, [1.0, 2.0], [0, 4, 0], lo=1.2, hi=1.8) == pytest.approx(1.5)


def test_model_names_are_bounded() -> None:
    telemetry = Telemetry(load_config(), "helix-backend")
    try:
        for i in range(100):
            telemetry.record_chat(f"model-{i}", 1, 1, 0.01, "ollama")
        models = {p["attrs"]["gen_ai.request.model"]
                  for p in telemetry.snapshot()["histograms"]["gen_ai.client.operation.duration"]["series"]}
        assert len(models) <= 65 and "_OTHER" in models
    finally:
        telemetry.shutdown()


def test_grpc_protocol_builds_a_grpc_exporter() -> None:
    pytest.importorskip("grpc")
    settings = load_config().replace(telemetry={"enabled": True, "protocol": "grpc", "export_interval_s": 3600.0})
    telemetry = Telemetry(settings, "helix-backend")
    try:
        assert telemetry.enabled_export
        exporter = telemetry._export_reader._exporter  # type: ignore[union-attr]  # the reader exists once telemetry is enabled, as here
        assert type(exporter).__module__.startswith("opentelemetry.exporter.otlp.proto.grpc")
    finally:
        telemetry.shutdown()


def test_supervisor_snapshot_shapes() -> None:
    view = normalize_supervisor_status(SUPERVISOR_SNAPSHOT)
    assert view["backend_up"] and view["restarts"] == 3 and view["gpu"]["name"] == "Test GPU"
    assert view["models"] == [{"name": "qwen2.5:3b", "size": 2.6e9, "size_vram": 2.4e9}]
    assert view["ribosome_paused"] is True and view["pressure"] is False
    down = normalize_supervisor_status({"backend": {"status": "running", "health": {"ok": False}}})
    assert down["backend_up"] is False and down["gpu"]["available"] is False
    flat = normalize_supervisor_status({"status": "fatal", "restarts": 7, "pressure": "high",
                                        "gpu": {"used_bytes": 1, "total_bytes": 2}, "models": ["a"]})
    assert flat["backend_up"] is False and flat["restarts"] == 7 and flat["pressure"] is True
    assert flat["gpu"]["available"] and flat["models"][0]["name"] == "a"
    assert normalize_supervisor_status(None) is None and normalize_supervisor_status([]) is None  # type: ignore[arg-type]  # the wrong type is the input under test


# ── the ASGI middleware ───────────────────────────────────────────────────────


def test_middleware_streams_without_buffering_and_times_to_the_last_chunk() -> None:
    telemetry = Telemetry(load_config(), "helix-backend")

    async def main() -> list[dict]:
        seen = asyncio.Event()
        sent: list[dict] = []

        async def app(scope: dict, receive: Any, send: Any) -> None:
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"first", "more_body": True})
            # a buffering middleware would hold "first" back and this would never finish
            await asyncio.wait_for(seen.wait(), timeout=5)
            await asyncio.sleep(0.05)
            await send({"type": "http.response.body", "body": b"last", "more_body": False})

        async def send(message: dict) -> None:
            sent.append(message)
            if message.get("body") == b"first":
                seen.set()

        async def receive() -> dict:
            return {"type": "http.request", "body": b"", "more_body": False}

        middleware = HttpMetricsMiddleware(app, telemetry)
        await middleware({"type": "http", "method": "GET", "path": "/stream", "headers": []}, receive, send)
        return sent

    try:
        sent = asyncio.run(main())
        assert [m.get("body") for m in sent] == [None, b"first", b"last"]
        (point,) = telemetry.snapshot()["histograms"]["http.server.request.duration"]["series"]
        assert point["count"] == 1 and point["sum"] >= 0.05
        assert point["attrs"] == {"http.request.method": "GET", "http.response.status_code": 200}
    finally:
        telemetry.shutdown()


def test_middleware_over_a_real_streaming_route() -> None:
    telemetry = Telemetry(load_config(), "helix-backend")
    app = FastAPI()

    @app.get("/stream/{name}")
    async def stream(name: str) -> StreamingResponse:
        async def chunks():
            for i in range(3):
                yield f"{name}-{i}\n".encode()
                await asyncio.sleep(0.01)
        return StreamingResponse(chunks(), media_type="text/plain")

    instrument_app(app, telemetry)

    async def main() -> str:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return (await client.get("/stream/abc")).text

    try:
        assert asyncio.run(main()) == "abc-0\nabc-1\nabc-2\n"
        (point,) = telemetry.snapshot()["histograms"]["http.server.request.duration"]["series"]
        assert point["attrs"]["http.route"] == "/stream/{name}" and point["sum"] >= 0.02
    finally:
        telemetry.shutdown()


# ── Grafana dashboard + collector config stay in step with the metric names ───


def _prometheus_names(snapshot: dict[str, Any]) -> set[str]:
    """The OTel → Prometheus name translation of the collector's prometheus exporter."""
    units = {"s": "seconds", "By": "bytes", "ms": "milliseconds"}
    names = set()
    for kind in ("counters", "gauges", "histograms"):
        for name, body in snapshot[kind].items():
            tokens = re.sub(r"[^a-zA-Z0-9]+", "_", name).strip("_").split("_")
            unit = body["unit"]
            if unit in units and units[unit] not in tokens:
                tokens.append(units[unit])
            if unit == "1" and kind == "gauges":
                tokens.append("ratio")
            base = "_".join(tokens)
            if kind == "counters":
                names.add(base + "_total")
            elif kind == "histograms":
                names.update({base + "_bucket", base + "_sum", base + "_count"})
            else:
                names.add(base)
    return names


def test_grafana_dashboard_uses_the_exported_metric_names() -> None:
    backend = Telemetry(load_config(), "helix-backend")
    supervisor = Telemetry(load_config(), "helix-supervisor")
    try:
        backend.record_http("GET", "/context", 200, 0.01)
        _record_domain(backend)
        supervisor.observe_supervisor(lambda: SUPERVISOR_SNAPSHOT)
        known = _prometheus_names(backend.snapshot()) | _prometheus_names(supervisor.snapshot())
    finally:
        backend.shutdown()
        supervisor.shutdown()

    dashboard = json.loads((REPO / "assets" / "grafana" / "helix-dashboard.json").read_text())
    exprs = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("expr"), str):
                exprs.append(node["expr"])
            if isinstance(node.get("definition"), str):
                exprs.append(node["definition"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(dashboard)
    assert len(exprs) >= 30
    used = set()
    for expr in exprs:
        used.update(re.findall(r"\b((?:helix|http|gen_ai|hw)_[a-z0-9_]+)\b", expr))
    labels = {"http_route", "http_request_method", "http_response_status_code", "gen_ai_token_type",
              "gen_ai_request_model", "hw_id", "hw_name"}
    unknown = sorted(used - known - labels)
    assert not unknown, f"the dashboard queries metrics Helix does not export: {unknown}"
    # every Helix metric family shows up somewhere on the dashboard
    families = {re.sub(r"_(bucket|sum|count|total)$", "", n) for n in known}
    shown = {re.sub(r"_(bucket|sum|count|total)$", "", n) for n in used}
    assert families - shown <= {"helix_ingest_duration_seconds", "helix_model_size_bytes",
                                "helix_compression_tokens"}, sorted(families - shown)
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_collector_config_wires_otlp_to_prometheus() -> None:
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((REPO / "assets" / "otel-collector.yaml").read_text())
    assert config["receivers"]["otlp"]["protocols"]["http"]["endpoint"].endswith(":4318")
    assert config["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"].endswith(":4317")
    assert "prometheus" in config["exporters"]
    pipeline = config["service"]["pipelines"]["metrics"]
    assert pipeline["receivers"] == ["otlp"] and pipeline["exporters"] == ["prometheus"]
    for name in pipeline["processors"]:
        assert name in config["processors"]


def test_shutdown_is_bounded_when_the_collector_hangs() -> None:
    with socket.socket() as silent:  # accepts connections (kernel backlog) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        telemetry = Telemetry(_settings(port, True, export_interval_s=60.0), "helix-backend")
        telemetry.record_verdicts({"verified": 1})
        started = time.monotonic()
        telemetry.shutdown()
        assert time.monotonic() - started < 6.0
