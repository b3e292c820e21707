"""The built-in dashboard over real HTTP: /dashboard/data carries the numbers of real
traffic, and headless Chromium draws the charts from them (screenshot saved to
test-artifacts/dashboard.png, plus a dark-theme one)."""

from __future__ import annotations

import html.parser
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from collections.abc import Iterator

import httpx
import pytest

from helix_context import signals
from helix_context.config import Settings
from helix_context.server import routes_dashboard
from helix_context.telemetry import Telemetry, instrument_app

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
GRAFANA_URL = "http://127.0.0.1:3000/d/helix-context/helix-context"

SUPERVISOR_STATUS = {
    "version": 1,
    "supervisor": {"pid": 1, "headless": True},
    "backend": {"status": "running", "pid": 4242, "restarts": 2, "crashes": 1, "planned_restarts": 1,
                "health": {"ok": True, "status": "ok"}},
    "gpu": {"available": True, "used_bytes": 3_221_225_472, "total_bytes": 8_589_934_592, "source": "nvml",
            "devices": [{"index": 0, "name": "Test GPU 8 GB", "used_bytes": 3_221_225_472, "total_bytes": 8_589_934_592}]},
    "resident_models": [
        {"name": "qwen2.5:3b", "model": "qwen2.5:3b", "size": 2_600_000_000, "size_vram": 2_400_000_000},
        {"name": "nomic-embed-text:latest", "model": "nomic-embed-text:latest", "size": 310_000_000, "size_vram": 310_000_000},
    ],
    "pressure": {"active": False, "reasons": []},
    "ribosome_paused": False,
}
CHARTS_WITH_DATA = ("chart-latency", "chart-requests", "chart-tokens", "chart-retrieval", "chart-verdicts",
                    "chart-tiers", "chart-zone", "chart-gpu", "chart-models", "chart-restarts", "chart-ingest",
                    "chart-genome")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """The app on uvicorn in a thread (lifespan on), reachable over real HTTP."""

    def __init__(self, app: Any, port: int) -> None:
        import uvicorn

        self.app = app
        self.url = f"http://127.0.0.1:{port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                                    lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.thread.is_alive():
            if self.server.started:
                return self
            time.sleep(0.05)
        raise RuntimeError("the backend did not start (see the log above)")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)

    def client(self, timeout: float = 60) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=timeout)


class Dashboard:
    def __init__(self, server: LiveServer, telemetry: Telemetry, settings: Settings) -> None:
        self.server = server
        self.telemetry = telemetry
        self.settings = settings
        self.recorded = {"tokens_in": 0, "tokens_out": 0, "verified": 0, "stale_risk": 0, "needs_refresh": 0,
                         "ingest_files": 0, "ingest_genes": 0, "health": 0}


@pytest.fixture
def dashboard(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Dashboard]:
    """The real app (create_app) on uvicorn, with telemetry wired like the backend does."""
    from helix_context.server import create_app

    monkeypatch.setattr(routes_dashboard, "SAMPLE_INTERVAL_S", 0.5)
    port = free_port()
    settings = settings.replace(server={"port": port}, telemetry={"grafana_url": GRAFANA_URL},
                                embedding={"enabled": False}, ner={"enabled": False})
    app = create_app(settings)
    telemetry = getattr(app.state, "telemetry", None)
    own = telemetry is None
    if own:  # until create_app wires it
        telemetry = Telemetry(settings, "helix-backend")
        app.state.telemetry = telemetry
        instrument_app(app, telemetry)
    signals.write_supervisor_status(SUPERVISOR_STATUS, home=settings.home)
    server = LiveServer(app, port).start()
    helix = getattr(app.state, "helix", None)
    if helix is not None and getattr(helix, "telemetry", "absent") is None:
        helix.telemetry = telemetry
    telemetry = app.state.telemetry  # whatever the app ended up with
    try:
        yield Dashboard(server, telemetry, settings)
    finally:
        server.stop()
        if own:
            telemetry.shutdown()


def _traffic(dash: Dashboard, rounds: int = 6) -> None:
    """Real HTTP requests + the retrieval / chat / ingest numbers the backend's code paths record."""
    tel, rec = dash.telemetry, dash.recorded
    tel.observe_genome(lambda: {"genes_by_tier": {"open": 420, "aging": 37, "archived": 9},
                                "db_bytes": 12_582_912, "wal_bytes": 524_288})
    with dash.server.client(timeout=30) as client:
        for i in range(rounds):
            for _ in range(4 + i):
                assert client.get("/health").status_code == 200
                rec["health"] += 1
            assert client.get("/health/history").status_code == 200
            assert client.get("/admin/ribosome").status_code == 200
            assert client.get(f"/no/such/page/{i}").status_code == 404
            assert client.post("/admin/announce_restart", json={"expected_downtime_s": -1}).status_code == 422
            assert client.get("/dashboard/static/dashboard.css").status_code == 200
            tokens_in, tokens_out = 900 + 150 * i, 60 + 10 * i
            tel.record_chat("qwen2.5:3b", tokens_in, tokens_out, 0.4 + 0.1 * i, "ollama")
            rec["tokens_in"] += tokens_in
            rec["tokens_out"] += tokens_out
            tel.record_retrieval({"signals": 0.0005, "fts": 0.002 + 0.0005 * i, "dense": 0.004, "fusion": 0.0007,
                                  "assemble": 0.006, "total": 0.014 + 0.001 * i}, 4 + i % 5,
                                 ("tight", "focused", "broad")[i % 3], (6, 8, None)[i % 3])
            verdicts = {"verified": 3 + i % 3, "stale_risk": i % 2, "needs_refresh": 1 if i == 3 else 0}
            tel.record_verdicts(verdicts)
            for key, n in verdicts.items():
                rec[key] += n
            tel.record_ingest(40_000 + 1000 * i, 3, 20 + i, 0.25)
            rec["ingest_files"] += 3
            rec["ingest_genes"] += 20 + i
            tel.record_compression(1000, 400 + 20 * i, 30, 29)
            time.sleep(0.45)
    time.sleep(1.2)  # let the sampler close the last interval


def test_dashboard_data_has_the_numbers_of_real_traffic(dashboard: Dashboard) -> None:
    _traffic(dashboard)
    rec = dashboard.recorded
    with dashboard.server.client() as client:
        response = client.get("/dashboard/data")
        assert response.status_code == 200
        data = response.json()

        assert data["telemetry"] is True and data["grafana_url"] == GRAFANA_URL
        assert data["export"]["enabled"] is False
        summary = data["summary"]
        routes = {(r["method"], r["route"]): r for r in summary["http"]["routes"]}
        assert routes[("GET", "/health")]["count"] >= rec["health"]
        assert routes[("GET", "/admin/ribosome")]["count"] >= 6
        assert routes[("POST", "/admin/announce_restart")]["count"] >= 6
        assert routes[("GET", "(unmatched)")]["count"] >= 6
        assert routes[("GET", "/health")]["p95"] > 0
        assert not any(r["route"].startswith("/dashboard") for r in summary["http"]["routes"])
        assert not any("/no/such/page" in r["route"] for r in summary["http"]["routes"])
        # the templated asset route is measured with its template (in the raw snapshot)
        http_series = data["snapshot"]["histograms"]["http.server.request.duration"]["series"]
        templates = {p["attrs"].get("http.route") for p in http_series}
        assert "/dashboard/static/{filename}" in templates and "/dashboard/static/dashboard.css" not in templates
        assert "bounds" not in http_series[0]

        assert summary["chat"]["tokens_in"] == rec["tokens_in"]
        assert summary["chat"]["tokens_out"] == rec["tokens_out"]
        assert summary["chat"]["count"] == 6
        assert summary["verdicts"] == {k: float(rec[k]) for k in ("verified", "stale_risk", "needs_refresh") if rec[k]}
        assert summary["retrieval"]["tiers"] == {"tight": 2.0, "focused": 2.0, "broad": 2.0}
        assert summary["retrieval"]["zone_cap"]["count"] == 4 and summary["retrieval"]["zone_cap"]["avg"] == 7.0
        assert set(summary["retrieval"]["stages"]) == {"signals", "fts", "dense", "fusion", "assemble", "total"}
        assert summary["ingest"]["files"] == rec["ingest_files"] and summary["ingest"]["genes"] == rec["ingest_genes"]
        assert summary["genome"]["genes_by_tier"] == {"open": 420, "aging": 37, "archived": 9}
        assert summary["compression"]["critical_keep_avg"] == pytest.approx(29 / 30)

        view = data["supervisor_view"]
        assert data["supervisor"]["backend"]["pid"] == 4242
        assert view["backend_up"] and view["restarts"] == 2 and view["gpu"]["used_bytes"] == 3_221_225_472
        assert [m["name"] for m in view["models"]] == ["qwen2.5:3b", "nomic-embed-text:latest"]

        history = data["history"]
        assert len(history) >= 4, history
        assert sum(p.get("http", {}).get("requests", 0) for p in history) >= rec["health"]
        assert sum(p.get("chat", {}).get("tokens_in", 0) for p in history) == rec["tokens_in"]
        assert sum(sum(p.get("verdicts", {}).values()) for p in history) == sum(
            rec[k] for k in ("verified", "stale_risk", "needs_refresh"))
        assert any(p.get("http", {}).get("p95") for p in history)
        assert history[-1]["supervisor"]["gpu_total"] == 8_589_934_592
        assert history[-1]["totals"]["ingest_genes"] == rec["ingest_genes"]

        newer = client.get("/dashboard/data", params={"since": history[-2]["t"]}).json()["history"]
        assert newer and all(p["t"] > history[-2]["t"] for p in newer)

        page = client.get("/dashboard")
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert "/dashboard/static/dashboard.js" in page.text and "http" not in page.text.split("<body", 1)[1].replace(
            "http://www.w3.org", "")  # no CDN, nothing remote
        for name, kind in (("dashboard.js", "javascript"), ("dashboard.css", "css")):
            asset = client.get(f"/dashboard/static/{name}")
            assert asset.status_code == 200 and kind in asset.headers["content-type"]
        assert client.get("/dashboard/static/..%2Fconfig.py").status_code == 404
        assert client.get("/dashboard/static/nope.js").status_code == 404


def test_backend_code_paths_feed_the_dashboard(dashboard: Dashboard) -> None:
    """/ingest, /context and /context/packet record through app.state.helix.telemetry."""
    helix = getattr(dashboard.server.app.state, "helix", None)
    if getattr(helix, "telemetry", None) is not dashboard.telemetry:
        pytest.skip("the manager does not carry the app's Telemetry (helix.telemetry)")
    doc = ("# Payments service\n\nThe payments-api reads `PAYMENTS_DB_URL` from config/payments.toml.\n"
           "Retries: max_retries=5, backoff_s=0.25. The settle_batch() function runs every 10 minutes.\n")
    with dashboard.server.client() as client:
        ingest = client.post("/ingest", json={"content": doc, "content_type": "markdown",
                                              "metadata": {"path": "docs/payments.md", "project": "demo"}})
        if ingest.status_code == 404:
            pytest.skip("no /ingest route yet")
        assert ingest.status_code == 200, ingest.text
        for _ in range(3):
            answer = client.post("/context", json={"query": "where does payments-api read its database url?"})
            assert answer.status_code == 200, answer.text
        packet = client.post("/context/packet", json={"query": "payments retries backoff", "task_type": "edit"})
        assert packet.status_code == 200, packet.text
        data = client.get("/dashboard/data").json()
    summary = data["summary"]
    routes = {(r["method"], r["route"]): r["count"] for r in summary["http"]["routes"]}
    assert routes[("POST", "/context")] == 3 and routes[("POST", "/context/packet")] == 1
    assert routes[("POST", "/ingest")] == 1
    assert summary["retrieval"]["count"] >= 3 and summary["retrieval"]["stages"]
    assert sum(summary["retrieval"]["tiers"].values()) >= 3
    assert all(len(r["route"]) < 40 for r in summary["http"]["routes"])  # templates, not query text
    raw = json.dumps(data)
    assert "payments-api read its database" not in raw and "payments retries backoff" not in raw


def test_dashboard_degrades_without_telemetry(dashboard: Dashboard) -> None:
    app = dashboard.server.app
    saved = app.state.telemetry
    app.state.telemetry = None
    try:
        with dashboard.server.client() as client:
            data = client.get("/dashboard/data").json()
            assert data["telemetry"] is False and data["snapshot"] is None
            assert data["summary"]["http"]["count"] == 0
            assert data["supervisor_view"]["gpu"]["total_bytes"] == 8_589_934_592
            assert client.get("/dashboard").status_code == 200
    finally:
        app.state.telemetry = saved


# ── headless Chromium ─────────────────────────────────────────────────────────


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _run_chromium(binary: str, url: str, *extra: str, size: str = "1400,1000") -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="helix-chromium-") as profile:
        cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-dev-shm-usage", "--hide-scrollbars", f"--user-data-dir={profile}",
               f"--window-size={size}", "--virtual-time-budget=6000", *extra, url]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "HOME": profile})


class _Elements(html.parser.HTMLParser):
    """id → attributes, plus <body>'s attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.by_id: dict[str, dict[str, Any]] = {}
        self.body: dict[str, Any] = {}
        self.svg_paths = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        values = dict(attrs)
        if tag == "body":
            self.body = values
        if tag == "path" and values.get("data-series"):
            self.svg_paths += 1
        if "id" in values:
            self.by_id[values["id"]] = values


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", header[16:24])


def test_chromium_draws_the_charts_from_real_traffic(dashboard: Dashboard) -> None:
    binary = _chromium()
    if binary is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium; tests/run.sh installs it)")
    _traffic(dashboard)
    url = dashboard.server.url + "/dashboard"

    dom = _run_chromium(binary, url, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = _Elements()
    page.feed(dom.stdout)
    assert page.body.get("data-ready") == "1", f"the page never rendered data: {page.body}"
    assert int(page.body["data-history-points"]) >= 4
    assert int(page.body["data-requests"]) >= dashboard.recorded["health"]
    assert int(page.body["data-tokens-in"]) == dashboard.recorded["tokens_in"]
    assert int(page.body["data-tokens-out"]) == dashboard.recorded["tokens_out"]
    for chart_id in CHARTS_WITH_DATA:
        chart = page.by_id.get(chart_id)
        assert chart is not None, chart_id
        assert chart.get("data-drawn") == "1", f"{chart_id} was not drawn"
        assert int(chart.get("data-points", 0)) > 0, f"{chart_id} drew no points: {chart}"
    last = json.loads(page.by_id["chart-latency"]["data-last"])
    assert set(last) == {"p50", "p95", "p99"} and last["p95"] > 0
    assert set(json.loads(page.by_id["chart-verdicts"]["data-last"])) == {"verified", "stale_risk", "needs_refresh", "no_context"}
    assert json.loads(page.by_id["chart-tiers"]["data-last"]) == {"tight": 2, "focused": 2, "broad": 2}
    assert json.loads(page.by_id["chart-models"]["data-last"]) == {"qwen2.5:3b": 2_400_000_000,
                                                                    "nomic-embed-text:latest": 310_000_000}
    assert json.loads(page.by_id["chart-gpu"]["data-last"])["limit"] == 8_589_934_592
    assert json.loads(page.by_id["chart-restarts"]["data-last"]) == {"restarts": 2}
    assert json.loads(page.by_id["chart-ingest"]["data-last"])["chunks"] == dashboard.recorded["ingest_genes"]
    assert int(page.by_id["routes-table"]["data-rows"]) >= 4
    assert page.svg_paths >= 10
    assert page.by_id["grafana-link"].get("href") == GRAFANA_URL and "hidden" not in page.by_id["grafana-link"]

    ARTIFACTS.mkdir(exist_ok=True)
    for name, query in (("dashboard.png", ""), ("dashboard-dark.png", "?theme=dark")):
        target = ARTIFACTS / name
        target.unlink(missing_ok=True)
        shot = _run_chromium(binary, url + query, f"--screenshot={target}")
        assert shot.returncode == 0 and target.is_file(), shot.stderr[-2000:]
        assert _png_size(target) == (1400, 1000)
        assert target.stat().st_size > 50_000  # a drawn page, not a blank one


JARGON = ("genome", "retrieval", "ribosome", "budget zone", "crit. kept", "stale_risk", "needs_refresh", "known empty",
          "genes")


class _Text(html.parser.HTMLParser):
    """The page's visible text (no script, style or attribute values)."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self._skip += tag in ("script", "style")

    def handle_endtag(self, tag: str) -> None:
        self._skip -= tag in ("script", "style")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def test_at_1280_px_every_label_is_whole_and_in_plain_words(dashboard: Dashboard) -> None:
    """The page at 1280 px wide: no label cut, no axis repeating a label, no internal term, and the helper
    model (not configured here) says so instead of "active"."""
    binary = _chromium()
    if binary is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium; tests/run.sh installs it)")
    assert not (dashboard.settings.ribosome.enabled or dashboard.settings.ribosome.model)
    _traffic(dashboard, rounds=3)
    url = dashboard.server.url + "/dashboard"
    dom = _run_chromium(binary, url, "--dump-dom", size="1280,1000")
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = _Elements()
    page.feed(dom.stdout)
    assert page.body.get("data-ready") == "1"
    assert json.loads(page.body["data-clipped"]) == []
    text = _Text()
    text.feed(dom.stdout)
    # route paths (the Routes table: /admin/ribosome is an API name, not a word on the page) left out
    visible = " ".join(w for w in " ".join(text.parts).split() if not w.startswith("/")).lower()
    for word in JARGON:
        assert word not in visible, word
    assert "helper model" in visible and "not configured" in visible
    assert "indexed chunks" in visible and "answers" in visible

    ARTIFACTS.mkdir(exist_ok=True)
    target = ARTIFACTS / "dashboard-1280.png"
    target.unlink(missing_ok=True)
    shot = _run_chromium(binary, url, f"--screenshot={target}", size="1280,1000")
    assert shot.returncode == 0 and target.is_file(), shot.stderr[-2000:]
    assert _png_size(target) == (1280, 1000)
