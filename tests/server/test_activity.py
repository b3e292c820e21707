"""The dashboard sees work done on the genome by other processes: the real `helix` CLI ingests
and asks for packets in a subprocess, the real app serves /dashboard/data and the page."""

from __future__ import annotations

import html.parser
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from helix_context.genome import activity_sql
from helix_context.genome.store import Genome
from tests.conftest import REPO

SOURCE = '''"""Rate limits for the public API."""


def token_bucket_refill(bucket, now):
    """Refill a token bucket by the time elapsed since its last refill."""
    elapsed = now - bucket.updated_at
    bucket.tokens = min(bucket.capacity, bucket.tokens + elapsed * bucket.rate)
    bucket.updated_at = now
'''


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HELIX_EMBEDDING_ENABLED": "false",
           "HELIX_NER_ENABLED": "false"}
    return subprocess.run([sys.executable, "-m", "helix_context.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=REPO)


@pytest.fixture
def cli_work(tmp_path: Path, settings) -> Path:
    """A folder ingested and queried by the CLI in other processes, before any server runs."""
    root = tmp_path / "api"
    root.mkdir()
    (root / "limits.py").write_text(SOURCE, encoding="utf-8")
    done = _cli("ingest", str(root), "--no-embed", "--quiet")
    assert done.returncode == 0, done.stderr[-2000:]
    packet = _cli("packet", "token_bucket_refill elapsed capacity rate")
    assert packet.returncode == 0, packet.stderr[-2000:]
    empty = _cli("packet", "kubernetes schedule pods on nodes")
    assert empty.returncode == 1, empty.stderr[-2000:]  # nothing relevant: exit 1 (helix --help)
    return root


def test_dashboard_data_shows_cli_ingests_and_verdicts(cli_work: Path, settings, server_factory):
    server = server_factory(settings.replace(embedding={"enabled": False}, ner={"enabled": False}))
    with server.client() as client:
        data = client.get("/dashboard/data").json()
    act = data["activity"]
    ingests = act["ingests"]
    assert ingests and ingests[0]["actor"].startswith("cli pid ")
    assert "1 ingested" in ingests[0]["summary"] and ingests[0]["counts"]["genes_added"] >= 1
    packets = [r for r in act["recent"] if r["kind"] == "packet"]
    assert len(packets) == 2 and all(r["actor"].startswith("cli pid ") for r in packets)
    assert act["verdicts"]["events"] == 2
    assert act["verdicts"]["known_empty"] == 1  # the kubernetes question: nothing relevant indexed
    assert act["verdicts"]["verified"] >= 1  # the token bucket question: fresh and relevant


def test_server_live_check_events_reach_the_record(cli_work: Path, settings, server_factory):
    server = server_factory(settings.replace(embedding={"enabled": False}, ner={"enabled": False}))
    (cli_work / "limits.py").unlink()
    with server.client() as client:
        health = client.post("/context", json={"query": "token_bucket_refill elapsed capacity"}).json()
        assert health["context_health"]["stale_dropped"] >= 1
        act = client.get("/dashboard/data").json()["activity"]
    assert act["live_check"]["stale_dropped"] >= 1
    assert act["recent"][0]["kind"] == "context" and act["recent"][0]["actor"].startswith("server pid ")


def test_activity_record_keeps_only_the_newest_rows(tmp_path: Path):
    genome = Genome(tmp_path / "genome.db")
    try:
        for i in range(30):
            with genome.transaction(changes_genes=False) as tx:
                activity_sql.record(tx, "ingest", "test", f"ingest {i}", {"files_ingested": 1}, keep=10)
        rows = activity_sql.recent(genome.conn, 100)
        assert [r["summary"] for r in rows] == [f"ingest {i}" for i in range(29, 19, -1)]
        assert activity_sql.totals(genome.conn, "ingest", ("files_ingested",))["files_ingested"] == 10
    finally:
        genome.close()


class _Rows(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.table: dict[str, str] = {}
        self.kinds: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        values = dict(attrs)
        if values.get("id") == "activity-table":
            self.table = values
        if tag == "tr" and values.get("data-kind"):
            self.kinds.append(values["data-kind"])

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_chromium_shows_the_cli_activity(cli_work: Path, settings, server_factory):
    binary = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)),
                  None)
    if binary is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium; tests/run.sh installs it)")
    server = server_factory(settings.replace(embedding={"enabled": False}, ner={"enabled": False}))
    with tempfile.TemporaryDirectory(prefix="helix-chromium-") as profile:
        dom = subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                              "--disable-background-networking", "--disable-component-update",
                              f"--user-data-dir={profile}", "--virtual-time-budget=4000", "--dump-dom",
                              server.url + "/dashboard"],
                             capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": profile})
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = _Rows()
    page.feed(dom.stdout)
    assert int(page.table.get("data-rows", 0)) == 3
    assert sorted(page.kinds) == ["ingest", "packet", "packet"]
    text = " ".join(page.text)
    assert "cli pid" in text and "1 ingested" in text and "known empty" in text
