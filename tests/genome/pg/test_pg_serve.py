"""`helix serve` on the team genome: the real app over HTTP on the embedded PostgreSQL.

What a user notices: a folder added over /sources is indexed into PostgreSQL and its edits are
served; /stats, /health and `helix check` answer; the retention caps hold on the shared tables;
and two developers' backends on one database never see each other's chats.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import psycopg
import pytest
from openai import OpenAI

from helix_context.config import Settings
from helix_context.sources.roots import RootMap
from tests.sources.conftest import fast_settings, make_tree, wait_until, write

_spec = importlib.util.spec_from_file_location(
    "helix_upstream_stub", Path(__file__).parents[2] / "server" / "upstream_stub.py")
assert _spec is not None and _spec.loader is not None
stub_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stub_module)


@pytest.fixture
def stub():
    with stub_module.UpstreamStub() as s:
        yield s


def _context(client, query: str) -> str:
    response = client.post("/context", json={"query": query})
    assert response.status_code == 200, response.text
    return response.json()["expressed_context"]


def _team(settings: Settings, url: str, user: str, **sections) -> Settings:
    return fast_settings(settings).replace(genome={"url": url}, attribution={"user": user, "device": "laptop"},
                                           **sections)


def test_serve_on_postgresql_indexes_a_folder_and_serves_its_edits(
        settings: Settings, server_factory, pg_url: str, tmp_path: Path) -> None:
    root = make_tree(tmp_path / "proj")
    RootMap({}).mapped("proj", root).save(settings.home)  # a team genome's source: a folder in a mapped root
    write(root / "docs" / "billing.md", "# Billing\n\nInvoices are settled by the nightly zebracorn_settlement job.\n")
    server = server_factory(_team(settings, pg_url, "alice"))
    service = server.app.state.sources
    with server.client() as client:
        assert client.post("/sources", json={"path": str(root), "project": "demo"}).status_code == 202
        assert service.wait_idle(60) and service.wait_watching(10)
        status = client.get("/sources").json()
        (row,) = status["sources"]
        assert row["state"] == "watching" and row["files"] == 7 and row["genes"] >= 7, row
        assert row["project"] == "demo"
        assert "zebracorn_settlement" in _context(client, "how are invoices settled? zebracorn")

        write(root / "docs" / "billing.md", "# Billing\n\nInvoices are settled by the hourly quokkawave_payout job.\n")
        wait_until(lambda: "quokkawave_payout" in _context(client, "how are invoices settled? quokkawave"),
                   what="/context to serve the edited text")
        assert "zebracorn_settlement" not in _context(client, "how are invoices settled? zebracorn quokkawave")
        (root / "src" / "mod_0.py").unlink()
        wait_until(lambda: client.get("/sources").json()["sources"][0]["files"] == 6, what="the deletion to count")

        # /stats recounts at most a small share of the time (genome/polled_stats.py): wait for a fresh count
        stats = wait_until(lambda: (s := client.get("/stats").json())["files"] == 6 and s, timeout=60,
                           what="/stats to count the files")
        assert stats["genes_by_project"].get("demo", 0) >= 6 and stats["backend"] == "postgresql", stats
        health = client.get("/health").json()
        assert health["genome"]["status"] == "ok" and health["genome"]["genes"] >= 6, health
        packet = client.post("/context/packet", json={"query": "where does the demo project keep its settings?"})
        assert packet.status_code == 200 and "settings.toml" in packet.text
    assert server.app.state.helix.genome.integrity_check() == []  # the schema's invariants hold after it all


def test_retention_caps_hold_and_a_chat_buffer_stays_with_its_owner(
        settings: Settings, server_factory, pg_url: str, tmp_path: Path, stub) -> None:
    caps = {"max_sessions": 3, "max_buffer_rows": 4, "coactivation_per_gene": 2, "prune_every": 1}
    proxy = {"upstream_url": stub.url, "upstream_kind": "auto", "timeout_s": 5.0, "connect_timeout_s": 1.0}
    alice = server_factory(_team(settings, pg_url, "alice", retention=caps, proxy=proxy))
    bob = server_factory(_team(settings, pg_url, "bob", retention=caps, proxy=proxy))
    root = make_tree(tmp_path / "proj", n=8)
    RootMap({}).mapped("proj", root).save(settings.home)
    with alice.client() as client:
        assert client.post("/sources", json={"path": str(root)}).status_code == 202
        assert alice.app.state.sources.wait_idle(60)
        for i in range(8):  # each delivers several genes together: co-activation pairs
            _context(client, f"function_{i} module of the tree function_{(i + 1) % 8} settings")

    stub.reply = "Bob's secret: the launch code is plover-4471."
    bob_chat = OpenAI(base_url=f"{bob.url}/v1", api_key="x", max_retries=0, timeout=30)
    for i in range(5):
        bob_chat.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": f"hi {i}"}],
                                         extra_headers={"X-Helix-Session": f"bob-{i}"})
    stub.reply = "ok"
    alice_chat = OpenAI(base_url=f"{alice.url}/v1", api_key="x", max_retries=0, timeout=30)
    alice_chat.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": "hello"}],
                                       extra_headers={"X-Helix-Session": "alice-1"})

    with bob.client() as http:
        bob_sessions = {s["session_id"] for s in http.get("/sessions").json()["sessions"]}
    with alice.client() as http:
        alice_sessions = {s["session_id"] for s in http.get("/sessions").json()["sessions"]}
        report = http.post("/consolidate").json()  # distils the buffer it can read: alice's alone
    assert bob_sessions == {"bob-2", "bob-3", "bob-4"}  # capped at 3, the newest kept
    assert alice_sessions == {"alice-1"}
    assert report["sessions"] == 1 and "bob" not in str(report.get("method", {}))
    genome = alice.app.state.helix.genome
    assert not [g for g in genome.iter_genes() if "plover-4471" in g.content]  # bob's chat never became alice's
    assert "plover" not in _context(alice.client(), "what is the launch code plover")
    assert all(session.startswith("alice") for _, session, _, _ in genome.pending_exchanges())

    rows = bob.app.state.helix.genome.retention_rows()
    assert rows["sessions"] <= 3 and rows["session_buffer"] <= 4, rows
    rows = genome.retention_rows()
    assert 0 < rows["coactivation"] and rows["coactivation_per_gene_max"] <= 2, rows


def test_the_cli_checks_exports_and_imports_a_team_genome(
        settings: Settings, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    from helix_context import cli

    monkeypatch.setenv("HELIX_GENOME_URL", pg_url)
    monkeypatch.setenv("HELIX_EMBEDDING_ENABLED", "0")
    root = make_tree(tmp_path / "proj")
    assert cli.main(["ingest", str(root)]) == 0
    capsys.readouterr()
    assert cli.main(["check"]) == 0
    assert '"ok": true' in capsys.readouterr().out.replace("\n", " ")
    with psycopg.connect(pg_url, autocommit=True) as conn:  # damage it the way a bug would: an unindexed gene
        conn.execute("DELETE FROM lex_docs WHERE gene = (SELECT min(id) FROM genes)")
    assert cli.main(["check"]) == 1
    assert "1 live genes missing from the lexical index" in capsys.readouterr().out
    assert cli.main(["export", str(tmp_path / "out.helix")]) == 0 and (tmp_path / "out.helix").exists()
    capsys.readouterr()
    # import works on a team genome too (pg/portable_import.py): its own export changes nothing, and its root
    # (no source here) is unconfirmed, so every chunk is refused: exit 2 says so
    assert cli.main(["import", str(tmp_path / "out.helix"), "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["changed"] is False
