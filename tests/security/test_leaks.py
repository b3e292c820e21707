"""No secrets in logs, and /health tells a caller without the key only whether the server is up.

The backend runs as users run it (`python -m uvicorn helix_context.server:app`, access log on),
with an API key; the test hands the dashboard its key in the URL, as a browser must, and reads the
log the supervisor would keep.
"""

from __future__ import annotations

import httpx

from security.procs import env_for, free_port, start, wait_health

KEY = "s3cret-key-that-must-never-be-logged"


def test_api_key_in_the_url_is_not_written_to_the_access_log(tmp_path, helix_home) -> None:
    port = free_port()
    log = tmp_path / "backend.log"
    proc = start(["-m", "uvicorn", "helix_context.server:app", "--host", "127.0.0.1", "--port", str(port)],
                 env_for(port, HELIX_API_KEY=KEY), log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_health(url)
        r = httpx.get(f"{url}/dashboard?api_key={KEY}&theme=dark", timeout=30)
        assert r.status_code == 200  # the key worked ...
        assert httpx.get(f"{url}/dashboard/data?api_key={KEY}", cookies=r.cookies, timeout=30).status_code == 200
        assert httpx.get(f"{url}/stats?api_key={KEY}", timeout=30).status_code == 401  # (only the dashboard takes it)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    text = log.read_text(encoding="utf-8", errors="replace")
    assert "GET /dashboard?api_key=***&theme=*** HTTP/1.1" in text, text[-3000:]  # ... and the line is there
    assert KEY not in text


def test_health_without_the_key_says_only_whether_it_is_up(lean, server_factory) -> None:
    server = server_factory(lean.replace(api_key=KEY, proxy={"upstream_url": "http://user:pw@127.0.0.1:9/"}))
    anonymous = httpx.get(server.url + "/health")
    assert anonymous.status_code == 200
    assert anonymous.json() in ({"status": "ok"}, {"status": "degraded"})
    for wrong in ({"Authorization": "Bearer nope"}, {"X-API-Key": "nope"}):
        assert set(httpx.get(server.url + "/health", headers=wrong).json()) == {"status"}
    full = httpx.get(server.url + "/health", headers={"Authorization": f"Bearer {KEY}"}).json()
    assert isinstance(full["pid"], int) and full["genome"]["path"]
    assert "pw" not in full["upstream"]["url"]  # credentials in the upstream URL are not echoed either


def test_supervisor_with_a_key_still_sees_its_backends_pid(tmp_path, helix_home) -> None:
    """The supervisor sends the key it was configured with, so it keeps adopting and matching pids."""
    from supervisor.client import BackendClient

    port = free_port()
    proc = start(["-m", "uvicorn", "helix_context.server:app", "--host", "127.0.0.1", "--port", str(port)],
                 env_for(port, HELIX_API_KEY=KEY), tmp_path / "b.log")
    try:
        wait_health(f"http://127.0.0.1:{port}")
        with_key = BackendClient(f"http://127.0.0.1:{port}", api_key=KEY).health()
        without = BackendClient(f"http://127.0.0.1:{port}").health()
        assert with_key.ok and with_key.pid == proc.pid
        assert without.ok and without.pid is None
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_password_in_a_url_is_hidden_whatever_it_holds() -> None:
    """A password holding an unencoded ? # / or @ was split at that character first and shown in part."""
    from helix_context.redact import redact_url

    for url, shown in (("postgresql://eve:a/b@h/db", "postgresql://***@h/db"),
                       ("postgresql://alice:S3cr3t:p@ss/w#rd?x@127.0.0.1:5432/team", "postgresql://***@127.0.0.1:5432/team"),
                       ("http://u:p@h:1/x?api_key=3", "http://***@h:1/x?api_key=***"),
                       ("/dashboard?api_key=s&theme=dark", "/dashboard?api_key=***&theme=***"),
                       ("http://127.0.0.1:11434", "http://127.0.0.1:11434")):
        assert redact_url(url) == shown, url
