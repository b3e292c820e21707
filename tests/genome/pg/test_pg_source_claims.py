"""One indexer per source, in the sources service of two real backends on one team genome.

What a user notices: while another backend indexes a folder, this one leaves it alone and takes it
up once the other is done; two backends told to index the same folder together store every gene
once, and lose none.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from helix_context.config import Settings
from helix_context.genome.pg.store import PgGenome
from helix_context.sources import service as sources_service
from helix_context.sources.roots import RootMap
from tests.genome.pg.reference import assert_each_gene_once, sqlite_live_genes
from tests.sources.conftest import fast_settings, make_tree, wait_until


def _team(settings: Settings, url: str, user: str) -> Settings:
    return fast_settings(settings).replace(genome={"url": url}, attribution={"user": user, "device": "laptop"})


def test_a_folder_another_backend_is_indexing_waits_for_it(settings: Settings, server_factory, pg_url: str,
                                                             tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources_service, "CLAIM_RETRY_S", 0.5)
    root = make_tree(tmp_path / "proj")
    RootMap({}).mapped("proj", root).save(settings.home)  # a team genome's source: a folder in a mapped root
    key = "@proj"
    other = PgGenome(pg_url, listen=False)  # another backend, in the middle of indexing this folder
    claim = other.claim_source(key)
    assert claim.acquire()
    try:
        alice = server_factory(_team(settings, pg_url, "alice"))
        with alice.client() as client:
            assert client.post("/sources", json={"path": str(root)}).status_code == 202
            time.sleep(3)  # several passes were tried meanwhile
            (row,) = client.get("/sources").json()["sources"]
            assert row["files"] == 0 and alice.app.state.helix.genome.live_gene_count() == 0, row
            claim.release()
            wait_until(lambda: client.get("/sources").json()["sources"][0]["files"] == 6, timeout=30,
                       what="the folder to be indexed once the other backend let go")
    finally:
        claim.release()
        other.close()


def test_two_backends_told_to_index_one_folder_store_each_gene_once(settings: Settings, server_factory,
                                                                    pg_url: str, tmp_path: Path) -> None:
    root = make_tree(tmp_path / "proj", n=60)
    RootMap({}).mapped("proj", root).save(settings.home)
    alice = server_factory(_team(settings, pg_url, "alice"))
    bob = server_factory(_team(settings, pg_url, "bob"))
    for server in (alice, bob):  # both at once: one indexes, the other waits for the claim and re-checks
        with server.client() as client:
            assert client.post("/sources", json={"path": str(root)}).status_code == 202
    for server in (alice, bob):
        wait_until(lambda s=server: (rows := s.client().get("/sources").json()["sources"]) and rows[0]["files"] == 61,
                   timeout=90, what="each backend to see the folder indexed")
    assert_each_gene_once(pg_url, sqlite_live_genes(settings, root))
    assert alice.app.state.helix.genome.integrity_check() == []


def _indexed_shared_source(settings: Settings, server_factory: Any, pg_url: str, tmp_path: Path,
                           monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Any]:
    """A backend that indexed the shared source `@proj` (claims retried quickly)."""
    monkeypatch.setattr(sources_service, "CLAIM_RETRY_S", 0.2)
    root = make_tree(tmp_path / "proj", n=2)
    RootMap({}).mapped("proj", root).save(settings.home)
    alice = server_factory(_team(settings, pg_url, "alice"))
    with alice.client() as client:
        assert client.post("/sources", json={"path": str(root)}).status_code == 202
    assert alice.app.state.sources.wait_idle(30) and alice.app.state.helix.genome.live_gene_count() > 0
    return root, alice


def test_a_folder_forgotten_while_another_backend_indexes_it_leaves_no_gene_behind(
        settings: Settings, server_factory, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`remove --forget` of a shared source that another backend is indexing waits for that pass to end:
    before, it retired the genes stored so far and deleted the source at once, and every file the other
    pass stored afterwards stayed live, answered by the team with no source left to retire it."""
    root, alice = _indexed_shared_source(settings, server_factory, pg_url, tmp_path, monkeypatch)
    helix, service = alice.app.state.helix, alice.app.state.sources
    with alice.client() as client:
        other = PgGenome(pg_url, listen=False)  # another backend, in the middle of a pass over this folder
        claim = other.claim_source("@proj")
        assert claim.acquire()
        try:
            forgot = client.request("DELETE", "/sources", json={"path": "@proj", "forget": True})
            assert forgot.status_code == 200, forgot.text
            assert service.wait_idle(10)
            (root / "late.py").write_text("def stored_by_the_other_pass() -> int:\n    return 7\n")
            helix.ingest_path(root / "late.py")  # the other backend's pass goes on: one more file stored
        finally:
            claim.release()
            other.close()
        wait_until(lambda: helix.genome.live_gene_count() == 0 and client.get("/sources").json()["sources"] == [],
                   timeout=10, what="the forgotten source's genes, the late file's included, to retire")


def test_a_shared_source_added_again_while_its_forget_waits_is_kept(
        settings: Settings, server_factory, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A forget waiting for another backend's pass must not retire a source that was added again meanwhile."""
    root, alice = _indexed_shared_source(settings, server_factory, pg_url, tmp_path, monkeypatch)
    helix, service = alice.app.state.helix, alice.app.state.sources
    with alice.client() as client:
        live = helix.genome.live_gene_count()
        other = PgGenome(pg_url, listen=False)
        claim = other.claim_source("@proj")
        assert claim.acquire()
        try:
            assert client.request("DELETE", "/sources", json={"path": "@proj", "forget": True}).status_code == 200
            assert service.wait_idle(10)
            assert client.post("/sources", json={"path": str(root)}).status_code == 202
        finally:
            claim.release()
            other.close()
        time.sleep(1.0)  # the waiting forget and the add's pass both retried meanwhile
        assert service.wait_idle(10)
        (row,) = client.get("/sources").json()["sources"]
        assert row["path"] == "@proj" and helix.genome.live_gene_count() == live, row
