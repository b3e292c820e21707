"""One count (issue 26): the tray, /stats, /health, the dashboard and `helix sources list` show the same
number of indexed items at the same moment, from one source of truth (the genome's live genes).

Before, seconds after a folder was indexed, the tray said 791, /stats 948 and the sources list 958:
the tray showed the supervisor's last poll, /stats a count that may be served stale while a scan is
expensive, and the sources list the sum of per-file gene counts (a gene shared by two files twice).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from helix_context import cli
from helix_context.config import Settings
from launcher.menu import supervisor_status
from launcher.sources_menu import SourcesMenu
from tests.sources.conftest import fast_settings, make_tree, write

SHARED = "def shared_helper():\n    \"\"\"The same text in many files: stored once.\"\"\"\n    return 'shared'\n"


def test_every_view_shows_the_same_count_right_after_an_index(settings: Settings, server_factory, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_tree(tmp_path / "proj", n=12)
    for i in range(6):  # genes shared by several files: per-file counts add up to more than the genome holds
        write(root / "copies" / f"copy_{i}.py", SHARED)
    server = server_factory(fast_settings(settings))
    monkeypatch.setenv("HELIX_SERVER_PORT", str(server.port))
    service = server.app.state.sources
    tray = SourcesMenu(settings.replace(server={"port": server.port}), open_url=lambda url: None)
    # the supervisor's snapshot lags behind (it polls /stats every few seconds): the tray must not show it
    app = SimpleNamespace(snapshot={"backend": {"status": "running"}, "genes": 791}, sources_menu=tray)
    try:
        with server.client() as client:
            assert client.post("/sources", json={"path": str(root)}).status_code == 202
            assert service.wait_idle(60)
            truth = service.genome.conn.execute("SELECT COUNT(*) FROM genes WHERE retired_at IS NULL").fetchone()[0]
            per_file = sum(row["genes"] for row in client.get("/sources").json()["sources"])
            assert per_file > truth  # the old "sources list" number, for contrast

            counts = {
                "/stats": client.get("/stats").json()["total_genes"],
                "/health": client.get("/health").json()["genome"]["genes"],
                "/sources": client.get("/sources").json()["indexed_genes"],
                "dashboard": client.get("/dashboard/data").json()["indexed"]["genes"],
            }
            assert cli.main(["sources", "list", "--json"]) == 0
            counts["helix sources list"] = json.loads(capsys.readouterr().out)["indexed_genes"]
            assert cli.main(["sources", "list"]) == 0
            assert f"{truth:,} indexed chunks in all" in capsys.readouterr().out
            tray.refresh()
            lines = [entry.text for entry in supervisor_status(app)]
            counts["tray"] = int(next(x for x in lines if x.startswith("Indexed chunks: ")).split()[2].replace(",", ""))
        assert counts == dict.fromkeys(counts, truth), counts
    finally:
        tray.close()
