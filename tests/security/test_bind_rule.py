"""Issue 25, finding 1: one bind rule for every way of starting the backend.

`helix serve`, `helix supervise`, the tray (headless: the same supervisor) and `python -m uvicorn
helix_context.server:app` are started for real with a non-loopback host and no HELIX_API_KEY: each must
refuse with a message that says how to set a key, and nothing may answer on the port. With a key, a
non-loopback Host is accepted only for the names the user configured, and a backend without a key answers
no caller from another machine, whatever Host it sends.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from security.procs import env_for, free_port, kill_tree, start, stop

KEY = "k-" + "7" * 30

STARTS = {
    "helix serve": ["-m", "helix_context.cli", "serve"],
    "helix supervise": ["-m", "helix_context.cli", "supervise"],
    "helix-tray (headless)": ["-m", "launcher.tray", "--headless"],
    "python -m uvicorn": ["-m", "uvicorn", "helix_context.server:app", "--port", "{port}"],
    "python -m uvicorn --host": ["-m", "uvicorn", "helix_context.server:app", "--host", "0.0.0.0", "--port", "{port}"],
}


def _lan_address() -> str | None:
    """An address of this machine other than loopback (None where it has none)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))  # UDP: nothing is sent
            address = s.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def _answers(port: int) -> bool:
    for host in ("127.0.0.1", _lan_address()):
        if host is None:
            continue
        try:
            httpx.get(f"http://{host}:{port}/health", timeout=0.5, trust_env=False)
            return True
        except httpx.HTTPError:
            continue
    return False


@pytest.mark.parametrize("how", list(STARTS))
def test_every_way_of_starting_refuses_a_lan_bind_without_a_key(how: str, tmp_path: Path) -> None:
    port = free_port()
    args = [a.format(port=port) for a in STARTS[how]]
    env = env_for(port, HELIX_SERVER_HOST="0.0.0.0", HELIX_HOME=str(tmp_path / "home"))
    env.pop("HELIX_API_KEY", None)
    log = tmp_path / "out.log"
    proc = start(args, env, log)
    try:
        deadline = time.monotonic() + 90
        while proc.poll() is None:
            assert not _answers(port), f"{how} serves 0.0.0.0:{port} without a key:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"{how} neither refused nor served:\n{log.read_text()[-3000:]}"
            time.sleep(0.2)
        out = log.read_text()
        assert proc.returncode != 0, out[-3000:]
        assert "HELIX_API_KEY=" in out and "0.0.0.0" in out, out[-3000:]  # says what is wrong and how to fix it
        assert out.count("refusing to listen") <= 3, out[-3000:]  # said once, not a crash loop
        assert "Traceback" not in out, out[-3000:]  # the message alone, not wrapped in a crash report
        assert not _answers(port)
    finally:
        kill_tree(proc.pid)


def test_supervisor_shows_the_refusal_instead_of_a_crash_loop(tmp_path: Path) -> None:
    """The tray reads the supervisor's status: it must carry the reason, with no restarts."""
    import json

    port = free_port()
    home = tmp_path / "home"
    env = env_for(port, HELIX_SERVER_HOST="0.0.0.0", HELIX_HOME=str(home))
    env.pop("HELIX_API_KEY", None)
    proc = start(["-m", "helix_context.cli", "supervise"], env, tmp_path / "out.log")
    try:
        assert proc.wait(60) != 0
        status = json.loads((home / "shared" / "signals" / "supervisor_status.json").read_text())
        backend = status["backend"]
        assert backend["status"] == "fatal" and "HELIX_API_KEY" in backend["last_error"], backend
        assert backend["restarts"] == 0, backend
    finally:
        kill_tree(proc.pid)


@pytest.fixture
def lan() -> str:
    address = _lan_address()
    if address is None:
        pytest.skip("this machine has no address besides loopback")
    return address


def _serve_in_thread(app, host: str, port: int):
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1, trust_env=False).status_code == 200:
                return server, thread
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError("backend did not start")


def test_with_a_key_only_the_configured_names_are_answered(lean, lan: str) -> None:
    """Bound to every interface with a key: an IP literal of this machine is not a configured name (before:
    any IP literal passed); once listed in [server] allowed_hosts it is."""
    from helix_context.server import create_app

    for allowed, expected in (((), 400), ((lan,), 200)):
        port = free_port()
        settings = lean.replace(server={"host": "0.0.0.0", "port": port, "allowed_hosts": allowed})
        settings = settings.replace(api_key=KEY)
        app = create_app(settings)
        server, thread = _serve_in_thread(app, "0.0.0.0", port)
        try:
            r = httpx.post(f"http://{lan}:{port}/context", json={"query": "anything"}, timeout=30, trust_env=False,
                           headers={"Authorization": f"Bearer {KEY}"})
            assert r.status_code == expected, (allowed, r.status_code, r.text)
            if expected == 400:
                assert "allowed_hosts" in r.json()["error"]["message"]
        finally:
            server.should_exit = True
            thread.join(10)


def test_a_backend_without_a_key_answers_no_other_machine(lean, lan: str) -> None:
    """However it came to listen beyond loopback (an embedding app, a socket handed over), a backend with
    no key answers callers on this machine only: /context, /sources and /ingest included (before: only
    /admin checked the caller's address, and a Host of 127.0.0.1 got everything)."""
    from helix_context.server import create_app

    port = free_port()
    app = create_app(lean.replace(server={"port": port}))
    server, thread = _serve_in_thread(app, "0.0.0.0", port)
    try:
        for method, path, body in (("POST", "/context", {"query": "x"}), ("GET", "/sources", None),
                                   ("POST", "/ingest", {"content": "planted from the network"}),
                                   ("GET", "/stats", None)):
            r = httpx.request(method, f"http://{lan}:{port}{path}", json=body, timeout=30, trust_env=False,
                              headers={"Host": f"127.0.0.1:{port}"})
            assert r.status_code == 403, (path, r.status_code, r.text[:300])
            assert "HELIX_API_KEY" in r.json()["error"]["message"]
        local = httpx.post(f"http://127.0.0.1:{port}/context", json={"query": "x"}, timeout=30, trust_env=False)
        assert local.status_code == 200
    finally:
        server.should_exit = True
        thread.join(10)


def test_serve_logs_go_to_a_rotating_file_not_stdout(tmp_path: Path) -> None:
    """`helix serve` writes no access line per request to its terminal; they go to logs/serve.log, rotated."""
    port = free_port()
    home = tmp_path / "home"
    env = env_for(port, HELIX_HOME=str(home), HELIX_SUPERVISOR_LOG_MAX_BYTES="1500",
                  HELIX_SUPERVISOR_LOG_BACKUPS="2")
    out = tmp_path / "out.log"
    proc = start(["-m", "helix_context.cli", "serve"], env, out)
    try:
        from security.procs import wait_health

        wait_health(f"http://127.0.0.1:{port}")
        for _ in range(60):  # about 6 KB of access lines: rotated past both backups
            assert httpx.get(f"http://127.0.0.1:{port}/stats", timeout=30).status_code == 200
    finally:
        stop(proc)
    terminal = out.read_text()
    assert "GET /stats" not in terminal, terminal[-2000:]
    logs = home / "logs"
    files = sorted(p.name for p in logs.glob("serve.log*"))
    assert "serve.log" in files and "serve.log.1" in files, files
    assert len(files) <= 3, files  # two backups kept
    assert all((logs / name).stat().st_size <= 1500 + 500 for name in files)
    assert "GET /stats" in (logs / "serve.log").read_text() + (logs / "serve.log.1").read_text()
    assert str(logs / "serve.log") in terminal  # the terminal says where the logs are
