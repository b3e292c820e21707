"""Helpers for the supervisor and tray tests: fast settings, an Ollama stand-in server,
and a factory that never leaves a backend process behind."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from collections.abc import Callable

import httpx
import psutil
import pytest

from helix_context.config import Settings, load_config

from supervisor import Supervisor

IS_WINDOWS = sys.platform == "win32"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fast_settings(port: int | None = None, **sections: dict) -> Settings:
    """Settings with short intervals so a test sees a crash, a hang or a flap in about a second."""
    base = {
        "server": {"port": port or free_port()},
        "supervisor": {"health_interval_s": 0.2, "health_timeout_s": 0.5, "hung_after_failures": 3,
                       "start_timeout_s": 30.0, "stop_timeout_s": 3.0, "backoff_initial_s": 0.05,
                       "backoff_max_s": 0.4, "flap_window_s": 60.0, "flap_max_restarts": 3},
        # a closed port: "Ollama not running" unless a test points this at its stub
        "watchers": {"gpu_interval_s": 0.5, "ollama_interval_s": 0.2, "ollama_url": f"http://127.0.0.1:{free_port()}"},
    }
    for name, values in sections.items():
        base[name] = {**base.get(name, {}), **values}
    return load_config().replace(**base)


def health(url: str, timeout: float = 1.0) -> dict | None:
    try:
        r = httpx.get(f"{url}/health", timeout=timeout, trust_env=False)
    except httpx.HTTPError:
        return None
    return r.json() if r.status_code == 200 else None


def wait_until(predicate: Callable[[], Any], timeout: float = 20.0, every: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not met within {timeout}s: {predicate}")
        time.sleep(every)


def serving(sup: Supervisor, timeout: float = 30.0, not_pid: int | None = None) -> dict:
    """Wait for status running (with a pid other than `not_pid`) and a live /health; the snapshot."""
    def ready() -> dict | None:
        snap = sup.snapshot()
        b = snap["backend"]
        if b["status"] != "running" or (not_pid is not None and b["pid"] == not_pid):
            return None
        h = health(sup.settings.base_url)
        return snap if h and h.get("pid") == b["pid"] else None

    return wait_until(ready, timeout)


def ps_model(name: str, size_vram: int, size: int | None = None) -> dict:
    """One entry of Ollama's GET /api/ps, in the real wire format."""
    family = name.split(":")[0]
    return {
        "name": name,
        "model": name,
        "size": size if size is not None else size_vram,
        "digest": "a" * 64,
        "details": {"parent_model": "", "format": "gguf", "family": family, "families": [family],
                    "parameter_size": "8.0B", "quantization_level": "Q4_K_M"},
        "expires_at": "2026-11-22T06:00:00.000000000+00:00",
        "size_vram": size_vram,
        "context_length": 4096,
    }


class OllamaStub:
    """A real HTTP server on 127.0.0.1 answering /api/ps and recording /api/generate unloads."""

    def __init__(self) -> None:
        self.models: list[dict] = []
        self.generate_requests: list[dict] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/api/ps":
                    self._send(200, {"models": list(stub.models)})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path == "/api/generate":
                    stub.generate_requests.append(body)
                    if body.get("keep_alive") == 0:
                        stub.models = [m for m in stub.models if m["name"] != body.get("model")]
                    self._send(200, {"model": body.get("model"), "created_at": "2026-11-22T05:00:00Z",
                                     "response": "", "done": True, "done_reason": "unload"})
                else:
                    self._send(404, {"error": "not found"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> OllamaStub:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def unloads(self) -> list[str]:
        return [r.get("model") for r in self.generate_requests if r.get("keep_alive") == 0]


class FakeMemory:
    def __init__(self, used: int, total: int) -> None:
        self.used = used
        self.total = total
        self.free = total - used


def fake_nvml(monkeypatch: Any, devices: list[tuple[int, int]]) -> dict:
    """Stand in for the pynvml functions the GPU watcher calls; returns call counters."""
    import pynvml

    calls = {"init": 0, "shutdown": 0}

    def init() -> None:
        calls["init"] += 1

    def shutdown() -> None:
        calls["shutdown"] += 1

    monkeypatch.setattr(pynvml, "nvmlInit", init)
    monkeypatch.setattr(pynvml, "nvmlShutdown", shutdown)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetCount", lambda: len(devices))
    monkeypatch.setattr(pynvml, "nvmlDeviceGetHandleByIndex", lambda i: ("handle", i))
    monkeypatch.setattr(pynvml, "nvmlDeviceGetMemoryInfo", lambda h: FakeMemory(*devices[h[1]]))
    monkeypatch.setattr(pynvml, "nvmlDeviceGetName", lambda h: f"Fake GPU {h[1]}")
    return calls


class SupervisorFactory:
    """make(settings, **kw) → a started Supervisor; teardown stops them all and kills leftovers."""

    def __init__(self) -> None:
        self.made: list[Supervisor] = []
        self.pids: set[int] = set()

    def make(self, settings: Settings, start: bool = True, **kwargs: Any) -> Supervisor:
        sup = Supervisor(settings, **kwargs)
        sup.add_listener(self._record)
        self.made.append(sup)
        if start:
            sup.start()
        return sup

    def _record(self, snap: dict) -> None:
        pid = snap["backend"].get("pid")
        if pid and snap["backend"].get("owned"):
            self.pids.add(pid)

    def close(self) -> None:
        for sup in reversed(self.made):
            try:
                sup.shutdown(stop_backend=True, timeout=15)
            except Exception:
                pass
        for pid in self.pids:
            try:
                p = psutil.Process(pid)
                for c in p.children(recursive=True):
                    c.kill()
                p.kill()
            except psutil.Error:
                pass


def read_log(settings: Settings) -> str:
    path = Path(settings.logs_dir) / "backend.log"
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


# ── fixtures shared by tests/supervisor and tests/launcher (imported by their conftests) ──


@pytest.fixture
def supervisors():
    factory = SupervisorFactory()
    yield factory
    factory.close()


@pytest.fixture
def ollama_stub():
    stub = OllamaStub().start()
    yield stub
    stub.stop()
