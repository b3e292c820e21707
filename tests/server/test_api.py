"""The real app over HTTP: the JSON API, bad input, and the security rules."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from helix_context.server.security import check_bind

CONFIG = '[server]\nport = 11437\nhost = "127.0.0.1"\n'
CODE = 'def open_genome(path):\n    """Open the SQLite genome in WAL mode."""\n    return connect(path, wal=True)\n'


@pytest.fixture
def server(live_server):
    with live_server.client() as c:
        r = c.post("/ingest", json={"content": CONFIG, "content_type": "config", "metadata": {"path": "app/helix.toml"}})
        assert r.status_code == 200, r.text
        r = c.post("/ingest", json={"content": CODE, "content_type": "code", "metadata": {"path": "app/genome.py"}})
        assert r.status_code == 200, r.text
    return live_server


def test_health_reports_parts_upstream_and_pid(server) -> None:
    data = httpx.get(server.url + "/health").json()
    assert data["status"] in ("ok", "degraded")
    assert data["pid"] == os.getpid()
    assert set(data["parts"]) == {"embeddings", "ner", "headroom"}
    assert data["upstream"]["url"]
    history = httpx.get(server.url + "/health/history").json()["history"]
    assert history and history[-1]["status"] == data["status"]


def test_parts_switched_off_in_helix_toml_leave_health_ok(settings, server_factory) -> None:
    """NER and headroom turned off by the user read "off", as embeddings did: they counted as degraded, so
    /health (and the tray's icon) said "degraded" for good over a choice the user made."""
    server = server_factory(settings.replace(ner={"enabled": False}, assembly={"headroom": False},
                                             embedding={"enabled": False}))
    server.app.state.helix.load_parts()
    data = httpx.get(server.url + "/health").json()
    assert {name: part["status"] for name, part in data["parts"].items()} == {
        "embeddings": "off", "ner": "off", "headroom": "off"}, data["parts"]
    assert data["status"] == "ok" and data["degraded"] == [], data
    assert "helix.toml" in data["parts"]["ner"]["detail"]


def test_context_packet_fingerprint_stats(server) -> None:
    with server.client() as c:
        ctx = c.post("/context", json={"query": "which port does the server use"}).json()
        assert "<expressed_context>" in ctx["expressed_context"] and "port=11437" in ctx["expressed_context"]
        assert ctx["context_health"]["genes_expressed"] >= 1 and ctx["tier"] in ("tight", "focused", "broad")
        packet = c.post("/context/packet", json={"query": "open the genome in WAL mode", "task_type": "explain"}).json()
        assert {"verified", "stale_risk", "refresh_targets", "notes", "coordinate_confidence"} <= set(packet)
        items = packet["verified"] + packet["stale_risk"]
        assert items and items[0]["source_id"] == "app/genome.py"
        plan = c.post("/context/refresh-plan", json={"query": "open genome", "task_type": "edit"}).json()
        assert "refresh_targets" in plan
        fp = c.post("/fingerprint", json={"query": "open_genome", "max_results": 3}).json()
        assert fp["results"][0]["source_id"] == "app/genome.py" and fp["results"][0]["signals"]
        stats = c.get("/stats").json()
        assert stats["total_genes"] == 2


def test_ingest_path_needs_an_allowed_root(settings, server_factory, tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "notes.md").write_text("# Notes\n\nThe deploy key rotates every 30 days.\n")
    (tmp_path / "private.txt").write_text("secret\n")
    server = server_factory(settings.replace(server={"allowed_ingest_roots": (str(allowed),)}))
    with server.client() as c:
        ok = c.post("/ingest", json={"path": str(allowed)})
        assert ok.status_code == 200 and ok.json()["files_ingested"] == 1
        denied = c.post("/ingest", json={"path": str(tmp_path / "private.txt")})
        assert denied.status_code == 403 and "allowed_ingest_roots" in denied.json()["error"]["message"]
        missing = c.post("/ingest", json={"path": str(allowed / "nope")})
        assert missing.status_code == 404


@pytest.mark.parametrize("body,status,needle", [
    ({}, 422, "query"),
    ({"query": 5}, 422, "query"),
    ({"query": "x", "budget_tokens": 0}, 422, "budget_tokens"),
    ({"query": "x", "budget_tokens": -3}, 422, "budget_tokens"),
    ({"query": "x", "surprise": 1}, 422, "surprise"),
])
def test_bad_context_requests_are_4xx_with_the_field_named(server, body, status, needle) -> None:
    r = httpx.post(server.url + "/context", json=body)
    assert r.status_code == status
    assert needle in r.json()["error"]["message"]


def test_malformed_json_unknown_task_empty_and_huge_queries(server) -> None:
    r = httpx.post(server.url + "/context", content=b'{"query": ', headers={"content-type": "application/json"})
    assert r.status_code == 422 and "error" in r.json()
    r = httpx.post(server.url + "/context/packet", json={"query": "port", "task_type": "dance"})
    assert r.status_code == 400 and "plan" in r.json()["error"]["message"]
    r = httpx.post(server.url + "/context", json={"query": ""})  # one clear 400, not an empty answer
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("query is empty")
    r = httpx.post(server.url + "/context", json={"query": "port \x00\x07 " + "y" * 900_000}, timeout=60)
    assert r.status_code == 200
    r = httpx.post(server.url + "/ingest", json={"content": "a\x00b"})
    assert r.status_code == 422 and "NUL" in r.json()["error"]["message"]
    r = httpx.post(server.url + "/ingest", json={"content": "x", "path": "/tmp"})
    assert r.status_code == 422
    # a lone surrogate cannot be stored as UTF-8: refused, where it was a 200 that stored nothing
    r = httpx.post(server.url + "/ingest", content=b'{"content": "def f():\\n    return 1 \\ud800"}',
                   headers={"content-type": "application/json"})
    assert r.status_code == 422 and "lone surrogate" in r.json()["error"]["message"], r.text


def test_a_budget_too_small_for_any_excerpt_says_so(server) -> None:
    """Relevant chunks were found but none fit: that read "nothing relevant found" (denatured, no reason), which
    sends the user to ingest files that are already indexed."""
    for budget in (10, 50):
        r = httpx.post(server.url + "/context", json={"query": "which port does the server use", "budget_tokens": budget})
        health = r.json()["context_health"]
        assert r.status_code == 200 and health["status"] == "over_budget", health
        assert "budget_tokens" in health["reason"] and health["genes_available"] >= 1, health
    health = httpx.post(server.url + "/context", json={"query": "which port does the server use",
                                                       "budget_tokens": 2000}).json()["context_health"]
    assert health["status"] not in ("over_budget", "denatured") and not health["reason"], health


def test_bodies_that_cannot_be_read_say_what_to_fix(server) -> None:
    """FastAPI answers every unreadable body with "There was an error parsing the body" (and a JSON error
    with "1: JSON decode error"); the message says what is wrong with it instead."""
    cases = [(b'{"query": "port",', 422, "not valid JSON"),
             ('{"query": "caf\xe9"}'.encode("latin-1"), 400, "not UTF-8"),
             (b"[" * 100_000 + b"]" * 100_000, 400, "nested too deeply")]
    for body, status, needle in cases:
        for route in ("/context", "/ingest"):
            r = httpx.post(server.url + route, content=body, headers={"content-type": "application/json"})
            assert r.status_code == status and needle in r.json()["error"]["message"], (route, r.status_code, r.text)


def test_huge_body_is_refused_and_the_server_keeps_serving(settings, server_factory) -> None:
    server = server_factory(settings.replace(server={"max_body_bytes": 10_000}))
    r = httpx.post(server.url + "/ingest", json={"content": "z" * 50_000})
    assert r.status_code == 413 and "max_body_bytes" in r.json()["error"]["message"]

    def chunks():  # no Content-Length: the limit is found while reading (it was a 400 "error parsing the body")
        yield b'{"query": "'
        for _ in range(10):
            yield b"z" * 5_000
        yield b'"}'

    for route in ("/context", "/ingest", "/v1/chat/completions"):
        r = httpx.post(server.url + route, content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413 and "max_body_bytes" in r.json()["error"]["message"], (route, r.text)
    assert httpx.get(server.url + "/health").status_code == 200


def test_admin_routes_answer_loopback_only(server) -> None:
    assert httpx.post(server.url + "/admin/checkpoint").status_code == 200

    async def remote() -> httpx.Response:
        transport = httpx.ASGITransport(app=server.app, client=("203.0.113.7", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return await c.post("/admin/vacuum")

    r = asyncio.run(remote())
    assert r.status_code == 403 and "HELIX_API_KEY" in r.json()["error"]["message"]


def test_admin_maintenance_routes(server, tmp_path: Path) -> None:
    with server.client() as c:
        assert c.post("/admin/vacuum").json()["bytes_after"] > 0
        assert c.post("/admin/compact").status_code == 200
        assert c.post("/admin/kv-backfill").json()["genes_with_new_facts"] >= 0
        assert c.post("/admin/refresh").status_code == 200
        assert c.post("/admin/ribosome/pause").json()["paused"] is True
        assert c.get("/admin/ribosome").json()["paused"] is True
        assert c.post("/admin/ribosome/resume").json()["paused"] is False
        signal = c.post("/admin/announce_restart", json={"reason": "test", "expected_downtime_s": 2}).json()
        assert signal["state"] == "restarting" and signal["pid"] == os.getpid()


def test_api_key_is_checked_on_every_route_but_health(settings, server_factory) -> None:
    server = server_factory(settings.replace(api_key="s3cret"))
    assert httpx.get(server.url + "/health").status_code == 200
    assert httpx.get(server.url + "/stats").status_code == 401
    assert httpx.get(server.url + "/stats", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert httpx.get(server.url + "/stats", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert httpx.get(server.url + "/stats", headers={"X-API-Key": "s3cret"}).status_code == 200
    # a browser opens the dashboard with ?api_key= once; the cookie carries it afterwards
    with httpx.Client(base_url=server.url) as browser:
        assert browser.get("/dashboard").status_code == 401
        assert browser.get("/dashboard", params={"api_key": "s3cret"}).status_code == 200
        assert browser.get("/dashboard/data").status_code == 200


def test_non_loopback_bind_needs_a_key(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="HELIX_API_KEY"):
        check_bind("0.0.0.0", "")
    check_bind("0.0.0.0", "key")
    check_bind("127.0.0.1", "")
    check_bind("::1", "")
    proc = subprocess.run([sys.executable, "-m", "helix_context.cli", "serve", "--host", "0.0.0.0", "--port", "1"],
                          capture_output=True, text=True, timeout=60, env=os.environ.copy())
    assert proc.returncode != 0 and "HELIX_API_KEY" in proc.stderr


def test_admin_shutdown_stops_the_backend_cleanly(tmp_path: Path) -> None:
    """The graceful stop the supervisor uses on Windows: the process exits 0 and stamps its stop."""
    import socket

    from helix_context import signals

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "HELIX_SERVER_PORT": str(port)}
    proc = subprocess.Popen([sys.executable, "-m", "helix_context.cli", "serve"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                import time

                time.sleep(0.05)
        r = httpx.post(url + "/admin/shutdown")
        assert r.status_code == 200 and r.json()["pid"] == proc.pid
        assert proc.wait(timeout=30) == 0
        state, _, _ = signals.read_server_state()
        assert state is not None and state.state == "stopped" and state.pid == proc.pid
    finally:
        if proc.poll() is None:
            proc.kill()


def test_health_reports_the_dense_index(settings, server_factory) -> None:
    """/health says whether dense search scans or walks the graph, how many vectors, and the file's size."""
    from helix_context.genome.store import Genome
    from tests.genome.test_ann import clustered, fill

    g = Genome(settings.genome_path)
    fill(g, clustered(300))
    g.close()
    server = server_factory(settings.replace(retrieval={"ann_threshold": 100}))
    deadline = time.monotonic() + 30
    while True:  # the index loads in the background at start; /health answers meanwhile
        dense = httpx.get(server.url + "/health").json()["genome"]["dense_index"]
        if dense["status"] == "ok" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert dense["status"] == "ok" and dense["kind"] == "hnsw" and dense["vectors"] == 300
    assert dense["threshold"] == 100 and dense["file_bytes"] > 300 * 384
    assert httpx.get(server.url + "/health").json()["genome"]["genes"] == 300
