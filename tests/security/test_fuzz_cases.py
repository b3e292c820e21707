"""Issue 25, findings 5 and 6: the requests a fuzzer found answering 500, and the smaller holes in the
browser guard, sent for real over HTTP to the app on uvicorn.

Every case must get a 4xx with a message, or a clean pass-through, never a 500. Origin is compared as
scheme, host and port; a Host or Origin sent twice is refused; the dashboard works with an API key,
its Sources panel (GET /sources) included.
"""

from __future__ import annotations

import json
import socket

import httpx
import pytest

KEY = "k-" + "5" * 30


def _raw(port: int, request: bytes) -> tuple[int, str]:
    """Send bytes as they are (httpx will not send a header twice) and read the status line and body."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body.decode("utf-8", "replace")


@pytest.mark.parametrize("method,path,body", [
    ("DELETE", "/sources?path=%00", None),
    ("DELETE", "/sources?path=/tmp/a%00b", None),
    ("DELETE", "/sources", '{"path": "/tmp/\\u0000"}'),
    ("POST", "/sources", '{"path": "/tmp/x\\u0000y"}'),
    ("POST", "/ingest", '{"path": "/tmp/\\u0000"}'),
])
def test_nul_in_a_path_is_a_4xx(server, method: str, path: str, body: str | None) -> None:
    r = httpx.request(method, server.url + path, content=body, timeout=30,
                      headers={"Content-Type": "application/json"} if body else {})
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:500])
    assert r.json()["error"]["message"], r.text


@pytest.fixture
def proxy_server(lean, server_factory, upstream_stub):
    return server_factory(lean.replace(proxy={"upstream_url": upstream_stub.url, "upstream_kind": "openai",
                                              "timeout_s": 10.0, "connect_timeout_s": 2.0}))


@pytest.mark.parametrize("inject", ["on", "off"])
@pytest.mark.parametrize("stream", [False, True])
def test_a_lone_surrogate_in_a_chat_is_passed_through_not_a_500(proxy_server, upstream_stub, inject: str,
                                                                stream: bool) -> None:
    # JSON may spell a lone surrogate; Python decodes it, and UTF-8 cannot encode it
    raw = ('{"model": "smollm2:135m", "stream": %s, "messages": [{"role": "user", '
           '"content": "what is \\ud800 here"}]}' % ("true" if stream else "false"))
    r = httpx.post(proxy_server.url + "/v1/chat/completions", content=raw, timeout=30,
                   headers={"Content-Type": "application/json", "X-Helix-Inject": inject})
    assert r.status_code < 500, (r.status_code, r.text[:500])
    if r.status_code == 200:  # passed through: the upstream got the message, surrogate and all
        sent = upstream_stub.last_chat()["json"]["messages"][-1]["content"]
        assert sent == "what is \ud800 here", sent


def test_origin_with_another_scheme_is_cross_site(server) -> None:
    port = server.port
    for origin in (f"https://127.0.0.1:{port}", f"ws://127.0.0.1:{port}", f"https://localhost:{port}"):
        r = httpx.post(server.url + "/ingest", json={"content": "planted"}, timeout=30,
                       headers={"Origin": origin, "Host": f"{origin.split('://')[1]}"})
        assert r.status_code == 403, (origin, r.status_code, r.text)
    same = httpx.post(server.url + "/ingest", json={"content": "from the dashboard itself"}, timeout=30,
                      headers={"Origin": f"http://127.0.0.1:{port}"})
    assert same.status_code == 200, same.text


@pytest.mark.parametrize("headers", [
    "Host: 127.0.0.1:{port}\r\nHost: evil.example\r\n",
    "Host: evil.example\r\nHost: 127.0.0.1:{port}\r\n",
    "Host: 127.0.0.1:{port}\r\nOrigin: http://evil.example\r\nOrigin: http://127.0.0.1:{port}\r\n",
    "Host: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port}\r\nOrigin: http://evil.example\r\n",
])
def test_a_host_or_origin_sent_twice_is_refused(server, headers: str) -> None:
    body = b'{"content": "planted through a doubled header"}'
    request = (f"POST /ingest HTTP/1.1\r\n{headers.format(port=server.port)}Content-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
    status, text = _raw(server.port, request)
    assert status == 400, (status, text)
    assert "more than one" in json.loads(text)["error"]["message"]
    hit = httpx.post(server.url + "/context", json={"query": "planted through a doubled header"}, timeout=30)
    assert "planted through" not in hit.json()["expressed_context"]


def test_dashboard_with_an_api_key_reaches_its_sources_panel(lean, server_factory, tmp_path) -> None:
    """The browser gets the key once in the dashboard's URL; the cookie it keeps must reach /sources (the
    dashboard's Sources panel) and be scoped safely (HttpOnly, SameSite=Strict, Path=/)."""
    server = server_factory(lean.replace(api_key=KEY))
    with httpx.Client(base_url=server.url, timeout=30) as browser:
        page = browser.get(f"/dashboard?api_key={KEY}")
        assert page.status_code == 200
        cookie = page.headers["set-cookie"]
        for part in ("HttpOnly", "SameSite=Strict", "Path=/;"):
            assert part in cookie + ";", cookie
        panel = browser.get("/sources")  # the client sends back the cookie as a browser would
        assert panel.status_code == 200, panel.text
        assert "sources" in panel.json()
    assert httpx.get(server.url + "/sources", timeout=30).status_code == 401  # no cookie, no key: refused
    forged = httpx.get(server.url + "/sources", timeout=30, cookies={"helix_api_key": "wrong"})
    assert forged.status_code == 401
