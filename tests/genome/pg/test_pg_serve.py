"""`helix serve` on the team genome: the real app over HTTP on the embedded PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from helix_context.config import Settings
from tests.sources.conftest import fast_settings, make_tree, wait_until, write


def _context(client, query: str) -> str:
    response = client.post("/context", json={"query": query})
    assert response.status_code == 200, response.text
    return response.json()["expressed_context"]


def test_serve_on_postgresql_indexes_a_folder_and_serves_its_edits(
        settings: Settings, server_factory, pg_url: str, tmp_path: Path) -> None:
    root = make_tree(tmp_path / "proj")
    write(root / "docs" / "billing.md", "# Billing\n\nInvoices are settled by the nightly zebracorn_settlement job.\n")
    server = server_factory(fast_settings(settings).replace(genome={"url": pg_url}))
    service = server.app.state.sources
    with server.client() as client:
        assert client.post("/sources", json={"path": str(root), "project": "demo"}).status_code == 202
        assert service.wait_idle(60) and service.wait_watching(10)
        status = client.get("/sources").json()
        (row,) = status["sources"]
        assert row["state"] == "watching" and row["files"] == 7, row
        assert "zebracorn_settlement" in _context(client, "how are invoices settled? zebracorn")
        write(root / "docs" / "billing.md", "# Billing\n\nInvoices are settled by the hourly quokkawave_payout job.\n")
        wait_until(lambda: "quokkawave_payout" in _context(client, "how are invoices settled? quokkawave"),
                   what="/context to serve the edited text")
        assert client.get("/stats").status_code == 200
        assert client.get("/health").status_code == 200
