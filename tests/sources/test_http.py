"""/sources over real HTTP (the app on uvicorn) and `helix sources …` against it, or without it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helix_context import cli
from helix_context.config import Settings
from tests.sources.conftest import fast_settings, make_tree, wait_until, write


def _helix(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _context(client, query: str) -> str:
    response = client.post("/context", json={"query": query})
    assert response.status_code == 200, response.text
    return response.json()["expressed_context"]


def test_a_source_added_while_the_backend_is_down_is_indexed_at_start_and_kept_fresh(
        settings: Settings, server_factory, tmp_path: Path, capsys: pytest.CaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conftest import free_port

    port = free_port()
    monkeypatch.setenv("HELIX_SERVER_PORT", str(port))  # the CLI looks for the backend here: nothing answers yet
    root = make_tree(tmp_path / "proj")
    write(root / "docs" / "billing.md", "# Billing\n\nInvoices are settled by the nightly zebracorn_settlement job.\n")

    code, out, err = _helix(capsys, "sources", "add", str(root), "--project", "demo")
    assert code == 0, err
    assert "no backend is running" in out
    code, out, _ = _helix(capsys, "sources", "list", "--json")
    listed = json.loads(out)
    assert listed["backend"] == "not running"
    assert [(s["path"], s["project"], s["state"]) for s in listed["sources"]] == [(str(root.resolve()), "demo", "new")]

    server = server_factory(fast_settings(settings))
    monkeypatch.setenv("HELIX_SERVER_PORT", str(server.port))
    service = server.app.state.sources
    assert service.wait_idle(60) and service.wait_watching(10)
    with server.client() as client:
        status = client.get("/sources").json()
        (row,) = status["sources"]
        assert row["state"] == "watching" and row["files"] == 7 and row["genes"] >= 7 and row["last_indexed"]
        assert status["summary"] == "Index up to date, 1 folder (project demo)"
        assert "zebracorn_settlement" in _context(client, "how are invoices settled? zebracorn")

        write(root / "docs" / "billing.md", "# Billing\n\nInvoices are settled by the hourly quokkawave_payout job.\n")
        wait_until(lambda: "quokkawave_payout" in _context(client, "how are invoices settled? quokkawave"),
                   what="/context to serve the edited text")
        assert "zebracorn_settlement" not in _context(client, "how are invoices settled? zebracorn quokkawave")
        # the live check serves an edit before the watcher's pass has stored it: the list is read after that pass
        wait_until(lambda: client.get("/sources").json()["summary"].startswith("Index up to date"),
                   what="the watcher's pass over the edit to end")

    listed_out: list[str] = []

    def listed_up_to_date() -> bool:
        """`helix sources list` says so; a late second event of the edit may start one more short pass first."""
        code, out, _ = _helix(capsys, "sources", "list")
        listed_out[:] = [out]
        return code == 0 and "Index up to date, 1 folder" in out

    wait_until(listed_up_to_date, what="`helix sources list` to say the index is up to date")
    assert str(root.resolve()) in listed_out[0] and "[demo]" in listed_out[0]
    code, out, err = _helix(capsys, "sources", "remove", str(root), "--forget")
    assert code == 0 and "genes are being retired" in out, (out, err)
    assert service.wait_idle(30)
    with server.client() as client:
        assert client.get("/sources").json()["sources"] == []
        assert "quokkawave_payout" not in _context(client, "how are invoices settled? quokkawave")


def test_sources_routes_refuse_bad_input_with_advice(server_factory, settings: Settings, tmp_path: Path) -> None:
    server = server_factory(fast_settings(settings))
    afile = write(tmp_path / "one.py", "X = 1\n")
    with server.client() as client:
        for body, status, words in (({"path": str(tmp_path / "nope")}, 400, "does not exist"),
                                    ({"path": str(afile)}, 400, "not a folder"),
                                    ({"path": str(settings.home)}, 400, "Helix's own folder"),
                                    ({"path": "/"}, 400, "root of a drive"),
                                    ({"path": "."}, 400, "relative path"),
                                    ({"path": "~"}, 400, "whole home folder"),
                                    ({"path": ""}, 422, "path"),
                                    ({}, 422, "path")):
            response = client.post("/sources", json=body)
            assert response.status_code == status, (body, response.text)
            assert words in response.json()["error"]["message"], response.text
        gone = client.request("DELETE", "/sources", json={"path": str(tmp_path / "never-added")})
        assert gone.status_code == 404 and "not a source" in gone.json()["error"]["message"]
        assert client.request("DELETE", "/sources", content=b"{oops").status_code == 422
        assert client.get("/sources").json()["sources"] == []


def test_pause_and_resume_over_http_and_from_the_cli(server_factory, settings: Settings, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    server = server_factory(fast_settings(settings))
    monkeypatch.setenv("HELIX_SERVER_PORT", str(server.port))
    root = make_tree(tmp_path / "proj")
    with server.client() as client:
        added = client.post("/sources", json={"path": str(root)})
        assert added.status_code == 202 and added.json()["path"] == str(root.resolve())
        service = server.app.state.sources
        assert service.wait_idle(30)
        code, out, _ = _helix(capsys, "sources", "pause")
        assert code == 0 and out.strip() == "Indexing paused, 1 folder"
        assert client.get("/sources").json()["paused"] is True
        later = make_tree(tmp_path / "later")  # added while paused: it said "the backend is indexing it now"
        code, out, _ = _helix(capsys, "sources", "add", str(later))
        assert code == 0 and "indexing is paused: `helix sources resume` indexes it" in out, out
        write(root / "src" / "mod_0.py", "def edited_during_pause():\n    return 0\n")
        resumed = client.post("/sources/resume").json()
        assert resumed["paused"] is False
        wait_until(lambda: "edited_during_pause" in "".join(
            g.content for g in service.genome.genes_for_source(str(root.resolve() / "src" / "mod_0.py"))),
            what="resume to catch up")
        removed = client.delete("/sources", params={"path": str(root)})
        assert removed.status_code == 200 and removed.json()["removed"] is True
