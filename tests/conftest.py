"""Shared fixtures: an isolated HELIX_HOME per test, real genomes, the real app over HTTP."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from helix_context.config import Settings, load_config

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(autouse=True)
def helix_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own HELIX_HOME; nothing touches the user's ~/.helix."""
    home = tmp_path_factory.mktemp("helix_home")
    monkeypatch.setenv("HELIX_HOME", str(home))
    monkeypatch.setenv("HELIX_CONFIG", str(REPO / "helix.toml"))
    for var in ("HELIX_API_KEY", "HELIX_BUDGET_ZONE", "HELIX_DISABLE_HEADROOM", "HELIX_OTEL_ENABLED"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture
def settings(helix_home: Path) -> Settings:
    return load_config()


def make_settings(**sections: dict) -> Settings:
    return load_config().replace(**sections)


@pytest.fixture
def helix(settings: Settings):
    from helix_context.manager import HelixContextManager

    manager = HelixContextManager(settings)
    yield manager
    manager.close()


class LiveServer:
    """The real app on uvicorn in a background thread, reachable over HTTP."""

    def __init__(self, app, port: int) -> None:
        import uvicorn

        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.app = app
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError("server did not start")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def client(self, **kwargs) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=kwargs.pop("timeout", 60), **kwargs)


@pytest.fixture
def live_server(settings: Settings) -> Iterator[LiveServer]:
    from helix_context.server import create_app

    port = free_port()
    app = create_app(settings.replace(server={"port": port}))
    server = LiveServer(app, port).start()
    yield server
    server.stop()


@pytest.fixture
def server_factory() -> Iterator:
    """Start the real app with custom settings: server_factory(settings) -> LiveServer."""
    from helix_context.server import create_app

    started: list[LiveServer] = []

    def start(settings: Settings) -> LiveServer:
        port = free_port()
        server = LiveServer(create_app(settings.replace(server={"port": port})), port).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
