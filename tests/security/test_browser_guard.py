"""DNS rebinding and cross-site requests, performed over real HTTP against the real app on uvicorn.

A page that rebinds its own name to 127.0.0.1 sends `Host: evil.example:<port>`; a page that simply
posts to 127.0.0.1 sends `Origin: http://evil.example` (and `Sec-Fetch-Site: cross-site`), with a
"simple" content type and no body, so no CORS preflight stops it. Both must get 4xx on every route,
and nothing may change; the CLI, the openai client and the dashboard (same origin) keep working.
"""

from __future__ import annotations

import re

import httpx
import pytest
from openai import OpenAI

from helix_context import signals

SECRET = "zorblaxian wombat ledger 4417"
STATE_CHANGING = {"POST", "PUT", "PATCH", "DELETE"}


def _write_routes(routes, prefix: str = "") -> list[tuple[str, str]]:
    """Every state-changing route the app has, present and future (path parameters filled in)."""
    found = []
    for route in routes:
        inner = getattr(route, "original_router", None)  # newer FastAPI keeps included routers whole
        if inner is not None:
            found += _write_routes(inner.routes, prefix + route.include_context.prefix)
            continue
        for method in sorted((getattr(route, "methods", None) or set()) & STATE_CHANGING):
            found.append((method, re.sub(r"\{[^}]+\}", "x0", prefix + route.path)))
    return found


def _seed(server) -> None:
    r = httpx.post(server.url + "/ingest", json={"content": f"The {SECRET} lives here.",
                                                  "metadata": {"path": "notes/secret.md"}, "embed": False})
    assert r.status_code == 200, r.text


def test_forged_host_gets_400_on_reads_writes_and_admin(server) -> None:
    _seed(server)
    port = server.port
    genes_before = httpx.get(server.url + "/stats").json()["total_genes"]
    evil = {"Host": f"evil.example:{port}"}
    with httpx.Client(base_url=server.url, headers=evil, timeout=30) as c:
        answers = {
            "context": c.post("/context", json={"query": SECRET}),
            "fingerprint": c.post("/fingerprint", json={"query": SECRET}),
            "packet": c.post("/context/packet", json={"query": SECRET}),
            "dashboard": c.get("/dashboard/data"),
            "stats": c.get("/stats"),
            "health": c.get("/health"),
            "ingest": c.post("/ingest", json={"content": "planted by a page", "embed": False}),
            "checkpoint": c.post("/admin/checkpoint"),
            "shutdown": c.post("/admin/shutdown"),
        }
    for name, r in answers.items():
        assert r.status_code == 400, (name, r.status_code, r.text)
        assert SECRET not in r.text
        assert "allowed_hosts" in r.json()["error"]["message"], name
    # nothing was written and the server still serves
    assert httpx.get(server.url + "/stats").json()["total_genes"] == genes_before
    assert httpx.get(server.url + "/health").status_code == 200


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]", "LOCALHOST.", "127.0.0.2", "helix.lan"])
def test_loopback_names_the_configured_host_and_allowed_hosts_are_served(lean, server_factory, host) -> None:
    server = server_factory(lean.replace(server={"allowed_hosts": ("helix.lan",)}))
    for value in (host, f"{host}:{server.port}"):
        r = httpx.post(server.url + "/context", json={"query": "anything"}, headers={"Host": value})
        assert r.status_code == 200, (value, r.text)


def test_hosts_not_listed_are_refused_even_with_allowed_hosts_set(lean, server_factory) -> None:
    server = server_factory(lean.replace(server={"allowed_hosts": ("helix.lan",)}))
    for value in ("helix.lan.evil.example", "evil.example", "192.168.1.20", "", "127.0.0.1:99999"):
        r = httpx.get(server.url + "/stats", headers={"Host": value})
        assert r.status_code == 400, (value, r.text)


@pytest.mark.parametrize("labels", [
    {"Origin": "http://evil.example"},
    {"Origin": "null"},  # sandboxed iframes and file:// pages
    {"Origin": "http://127.0.0.1:1"},  # another local port is another origin
    {"Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "same-site"},  # e.g. a page on localhost:8080
])
def test_cross_site_requests_change_nothing_on_any_route(server, labels) -> None:
    """The simple cross-origin POST of the issue, on every route that changes state, whatever the body."""
    _seed(server)
    signals.set_ribosome_paused(False, home=server.app.state.settings.home)
    stats_before = httpx.get(server.url + "/stats").json()
    genome = server.app.state.helix.genome  # its own generation: /stats' copy may lag a poll behind (polled_stats.py)
    generation_before = genome.generation()
    routes = _write_routes(server.app.routes)
    assert ("POST", "/admin/shutdown") in routes and ("POST", "/consolidate") in routes and len(routes) >= 12
    with httpx.Client(base_url=server.url, timeout=30) as c:
        for method, path in routes:
            for body, ctype in (("", "text/plain"), ("a=1", "application/x-www-form-urlencoded"),
                                ('{"content": "planted"}', "application/json")):
                r = c.request(method, path, content=body, headers={**labels, "Content-Type": ctype})
                assert r.status_code == 403, (method, path, ctype, r.status_code, r.text)
                assert r.json()["error"]["type"] == "cross_site_refused"
    # six shutdowns and a pause later: still serving, still unpaused, nothing written
    assert httpx.get(server.url + "/health").json()["status"] in ("ok", "degraded")
    assert signals.ribosome_paused(server.app.state.settings.home) is False
    stats_after = httpx.get(server.url + "/stats").json()
    assert stats_after["total_genes"] == stats_before["total_genes"]
    assert genome.generation() == generation_before


def test_reads_from_a_foreign_page_are_not_refused_but_not_readable_either(server) -> None:
    """GETs pass (a foreign page cannot read them without CORS headers, which are never sent)."""
    r = httpx.get(server.url + "/stats", headers={"Origin": "http://evil.example"})
    assert r.status_code == 200
    assert not any(k.lower().startswith("access-control-") for k in r.headers)


def test_the_dashboards_own_origin_and_clients_without_origin_still_write(server) -> None:
    own = {"Origin": server.url, "Sec-Fetch-Site": "same-origin"}
    assert httpx.post(server.url + "/admin/ribosome/pause", headers=own).status_code == 200
    assert httpx.post(server.url + "/admin/ribosome/resume", headers={"Origin": server.url}).status_code == 200
    # a page at http://localhost:<port> talking to itself
    local = f"http://localhost:{server.port}"
    r = httpx.post(server.url + "/context", json={"query": "x"}, headers={"Host": f"localhost:{server.port}",
                                                                        "Origin": local})
    assert r.status_code == 200
    # the CLI, the supervisor, curl: no browser labels at all; "none" is a typed URL / bookmark
    assert httpx.post(server.url + "/admin/checkpoint").status_code == 200
    assert httpx.post(server.url + "/admin/checkpoint", headers={"Sec-Fetch-Site": "none"}).status_code == 200


def test_the_openai_client_still_chats_through_the_guard(lean, server_factory, upstream_stub) -> None:
    server = server_factory(lean.replace(proxy={"upstream_url": upstream_stub.url, "upstream_kind": "openai"}))
    client = OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0, timeout=30)
    answer = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hello"}])
    assert "forty two" in answer.choices[0].message.content
    assert [m.id for m in client.models.list().data]
