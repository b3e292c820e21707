"""Shared sources on a team genome: stored relative to a named root, found by each machine through its own map.

Two developers' backends over one real PostgreSQL, each with its own HELIX_HOME and its own checkout of
the same tree (`repo`, in different folders). Machine A adds its checkout; the sources table says
`@repo`, never A's folder; machine B indexes and watches the same source through B's folder. A
machine without the root mapped lists the source with the command that maps it; a folder outside
every mapped root is refused with the same advice (sources/names.py says why).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import psycopg
import pytest

from helix_context import cli
from helix_context.config import Settings
from helix_context.sources.roots import RootMap
from tests.conftest import free_port
from tests.sources.conftest import fast_settings, make_tree, wait_until, write


def _machine(settings: Settings, home: Path, url: str, user: str, checkout: Path | None) -> Settings:
    """One developer: their own HELIX_HOME (and map), the shared database."""
    home.mkdir(parents=True, exist_ok=True)
    if checkout is not None:
        RootMap({}).mapped("repo", checkout).save(home)
    return fast_settings(settings).replace(home=home, genome={"url": url},
                                           attribution={"user": user, "device": "laptop"})


def _stored_paths(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {str(r[0]) for table, col in (("sources", "path"), ("files", "path"), ("genes", "source_path"),
                                             ("gene_sources", "path"), ("symbols", "path"))
                for r in conn.execute(f"SELECT DISTINCT {col} FROM {table}")}


def test_one_shared_source_is_indexed_and_watched_by_each_machine_through_its_own_checkout(
        settings: Settings, server_factory, pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    a_repo, b_repo = make_tree(tmp_path / "ana" / "code" / "repo"), make_tree(tmp_path / "ben" / "work" / "repo")
    alice = server_factory(_machine(settings, tmp_path / "home-a", pg_url, "alice", a_repo))
    bob = server_factory(_machine(settings, tmp_path / "home-b", pg_url, "bob", b_repo))  # running already
    with alice.client() as client:
        added = client.post("/sources", json={"path": str(a_repo)})
        assert added.status_code == 202 and added.json()["path"] == "@repo", added.text
        assert alice.app.state.sources.wait_idle(60)
        (row,) = client.get("/sources").json()["sources"]
        assert row["files"] == 6 and row["folder"] == str(a_repo.resolve()), row

    service = bob.app.state.sources
    with bob.client() as client:
        client.get("/sources")  # B takes up the source A added when it next reads its list
        assert service.wait_idle(60) and service.wait_watching(10)
        (row,) = client.get("/sources").json()["sources"]
        assert (row["path"], row["folder"], row["state"], row["watching"]) == (
            "@repo", str(b_repo.resolve()), "watching", True), row
        # B's watcher sees an edit in B's checkout and stores it under the shared name
        write(b_repo / "src" / "ledger.py", "def close_the_books(year: int) -> str:\n    return 'closed'\n")
        wait_until(lambda: "@repo/src/ledger.py" in _stored_paths(pg_url), timeout=30,
                   what="B's watcher to index the new file of its checkout")
        # a folder outside every mapped root is refused with what to do
        elsewhere = make_tree(tmp_path / "ben" / "notes", n=1)
        refused = client.post("/sources", json={"path": str(elsewhere)})
        assert refused.status_code == 400 and "helix sources map NAME" in refused.text, refused.text

    stored = _stored_paths(pg_url)
    assert "@repo" in stored and not any(str(tmp_path) in p or p.startswith("/") for p in stored), stored

    # a third machine, no map, no backend: the list says the source is not indexed here and how to map it
    monkeypatch.setenv("HELIX_HOME", str(tmp_path / "home-c"))
    monkeypatch.setenv("HELIX_GENOME_URL", pg_url)
    monkeypatch.setenv("HELIX_SERVER_PORT", str(free_port()))
    assert cli.main(["sources", "list", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["sources"]
    assert row["state"] == "unmapped" and "helix sources map repo" in row["last_error"], row
    assert cli.main(["sources", "list"]) == 0
    assert "not mapped on this machine" in capsys.readouterr().out

    # removed by its folder on B's machine (or by its shared name): gone for the team
    with bob.client() as client:
        removed = client.request("DELETE", "/sources", json={"path": str(b_repo)})
        assert removed.status_code == 200 and removed.json()["path"] == "@repo", removed.text
        assert client.get("/sources").json()["sources"] == []
    with alice.client() as client:
        assert "@repo" in alice.app.state.sources._watchers  # A still watches what B removed ...
        assert client.get("/sources").json()["sources"] == []
        assert "@repo" not in alice.app.state.sources._watchers  # ... until A next reads its list

        assert client.post("/sources", json={"path": str(a_repo / "src")}).json()["path"] == "@repo/src"
        assert client.request("DELETE", "/sources", json={"path": "@repo/src"}).status_code == 200


def test_an_absolute_source_of_another_machine_is_never_retired_here(
        settings: Settings, server_factory, pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A source stored as an absolute folder before shared roots existed belongs to the machine that has
    that folder: a backend where it does not exist lists it as not on this machine, with the advice to
    map it, and never retires its files (they are the team's). `/admin/refresh` and `/admin/compact`
    read each file where it is here: shared files in this machine's checkout, the other machine's
    absolute files not at all (before: both read stored names as paths and retired or marked them all)."""
    from helix_context.manager import HelixContextManager

    theirs = make_tree(tmp_path / "ana" / "old", n=2)
    a_repo, b_repo = make_tree(tmp_path / "ana" / "repo", n=1), make_tree(tmp_path / "ben" / "repo", n=1)
    helix = HelixContextManager(_machine(settings, tmp_path / "home-a", pg_url, "alice", a_repo))
    try:
        helix.ingest_path(theirs)  # outside Ana's mapped root: absolute names, as before roots existed
        helix.ingest_path(a_repo)  # @repo/...
        helix.genome.add_source(str(theirs.resolve()), None, 1.0)
    finally:
        helix.close()
    live = "SELECT count(*) FROM genes WHERE retired_at IS NULL"
    with psycopg.connect(pg_url) as conn:
        before = conn.execute(live).fetchone()[0]  # type: ignore[index]
    assert before > 0
    shutil.rmtree(theirs)  # this machine has no such folder: it is Ana's

    ben = server_factory(_machine(settings, tmp_path / "home-b", pg_url, "ben", b_repo))
    with ben.client() as client:
        assert ben.app.state.sources.wait_idle(30)
        (row,) = client.get("/sources").json()["sources"]
        assert client.post("/admin/refresh").json()["genes_retired"] == 0
        assert client.post("/admin/compact").json()["genes_marked"] == 0
    with psycopg.connect(pg_url) as conn:
        assert conn.execute(live).fetchone()[0] == before, "Ana's files were retired"  # type: ignore[index]
    assert row["state"] == "unmapped" and row["folder"] is None, row
    assert "not on this machine" in row["last_error"] and "helix sources map NAME" in row["last_error"], row

    monkeypatch.setenv("HELIX_HOME", str(tmp_path / "home-b"))
    monkeypatch.setenv("HELIX_GENOME_URL", pg_url)
    assert cli.main(["sources", "list"]) == 0
    assert "not on this machine" in capsys.readouterr().out


def test_a_checkout_missing_on_one_machine_never_retires_the_teams_genes(
        settings: Settings, server_factory, pg_url: str, tmp_path: Path) -> None:
    """One developer moves (or deletes, to clone again) their checkout of a mapped root: the shared source
    and the team's genes stay; this machine lists the source as not indexed here, with why. Before: the
    backend took the missing checkout for a vanished source (and `/admin/refresh` each shared file for a
    deleted one) and retired the whole team's index."""
    from helix_context.manager import HelixContextManager

    a_repo = make_tree(tmp_path / "ana" / "repo", n=2)
    helix = HelixContextManager(_machine(settings, tmp_path / "home-a", pg_url, "alice", a_repo))
    try:
        helix.ingest_path(a_repo)
        helix.genome.add_source("@repo", None, 1.0)
    finally:
        helix.close()
    before = _live_genes(pg_url)
    assert before > 0
    a_repo.rename(tmp_path / "ana" / "repo-moved")  # the map still names the old folder

    ana = server_factory(_machine(settings, tmp_path / "home-a", pg_url, "alice", None))
    with ana.client() as client:
        assert ana.app.state.sources.wait_idle(30)
        (row,) = client.get("/sources").json()["sources"]
        assert client.post("/admin/refresh").json()["genes_retired"] == 0
    assert _live_genes(pg_url) == before, "the team's genes were retired"
    assert row["state"] == "unmapped" and "is not a folder" in row["last_error"], row


def _live_genes(url: str) -> int:
    with psycopg.connect(url) as conn:
        return int(conn.execute("SELECT count(*) FROM genes WHERE retired_at IS NULL").fetchone()[0])  # type: ignore[index]
