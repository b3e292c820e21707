"""A team genome follows one branch: a developer whose checkout is elsewhere changes nothing of it.

Two developers' backends over one real PostgreSQL, each with its own checkout (made by `git`) of the same
repository mapped as the root `repo`. Ana is on main and indexes it. Ben's checkout is on `feature`,
where b.py was deleted and a.py edited: before, Ben's backend indexed his branch, so its full pass
retired b.py for the whole team and replaced a.py with feature's text. Now his backend writes nothing
of the source while he is on another branch, says so with what to do, and takes the source up again
by itself (one full pass) once he is back on main.
"""

from __future__ import annotations

from pathlib import Path

from collections.abc import Iterator

import pytest

from helix_context import cli
from helix_context.config import Settings
from helix_context.genome.storage import GenomeStore
from helix_context.manager import HelixContextManager, open_genome
from helix_context.sources.roots import RootMap
from helix_context.sources.service import SourcesService
from tests.sources.conftest import fast_settings, git, git_repo, wait_until, write

MAIN = {"a.py": "def settle_invoice(invoice_id: int) -> str:\n    \"\"\"Mark an invoice as settled.\"\"\"\n"
                "    return f'settled {invoice_id}'\n",
        "b.py": "def archive_ledger(year: int) -> str:\n    \"\"\"Move a closed year of the ledger to the archive.\"\"\"\n"
                "    return f'archived {year}'\n"}
FEATURE_WORD = "quarantine_marker_feature"  # only feature's a.py holds it


def _machine(settings: Settings, home: Path, url: str, user: str, checkout: Path, **sources: object) -> Settings:
    """One developer: their own HELIX_HOME and map of `repo`, the shared database."""
    home.mkdir(parents=True, exist_ok=True)
    RootMap({}).mapped("repo", checkout).save(home)
    return fast_settings(settings).replace(home=home, genome={"url": url}, sources=sources,
                                           attribution={"user": user, "device": "laptop"})


def _on_feature(checkout: Path) -> Path:
    """Ben's branch: b.py deleted, a.py edited, committed."""
    git(checkout, "checkout", "-q", "-b", "feature")
    git(checkout, "rm", "-q", "b.py")
    write(checkout / "a.py", MAIN["a.py"].replace("Mark an invoice as settled.", f"Settle it ({FEATURE_WORD})."))
    git(checkout, "commit", "-q", "-am", "feature")
    return checkout


@pytest.fixture
def team(settings: Settings, pg_url: str) -> Iterator[GenomeStore]:
    """A reader of the team genome, apart from every developer's backend."""
    genome = open_genome(settings.replace(genome={"url": pg_url}))
    yield genome
    genome.close()


def _live(genome: GenomeStore) -> dict[str, str]:
    """The team genome's live text per file (what every teammate is answered from)."""
    found: dict[str, str] = {}
    for gene in genome.iter_genes():
        found[str(gene.source_path)] = found.get(str(gene.source_path), "") + gene.content
    return found


def _ana_indexes_main(settings: Settings, server_factory, url: str, tmp_path: Path, team: GenomeStore):
    """Ana's backend, her checkout on main indexed as the source `@repo`."""
    repo = git_repo(tmp_path / "ana" / "repo", MAIN)
    ana = server_factory(_machine(settings, tmp_path / "home-a", url, "ana", repo))
    with ana.client() as client:
        assert client.post("/sources", json={"path": str(repo)}).json()["path"] == "@repo"
    assert ana.app.state.sources.wait_idle(60)
    assert set(_live(team)) == {"@repo/a.py", "@repo/b.py"}
    return ana, repo


def test_a_checkout_on_another_branch_changes_nothing_of_the_team_genome_until_it_is_back(
        settings: Settings, server_factory, pg_url: str, tmp_path: Path, team: GenomeStore) -> None:
    ana, ana_repo = _ana_indexes_main(settings, server_factory, pg_url, tmp_path, team)
    git(tmp_path, "clone", "-q", str(ana_repo), str(tmp_path / "ben" / "repo"))  # origin/HEAD → main
    ben_repo = _on_feature(tmp_path / "ben" / "repo")
    ben = server_factory(_machine(settings, tmp_path / "home-b", pg_url, "ben", ben_repo))
    service = ben.app.state.sources
    assert service.wait_idle(60) and service.wait_watching(10)  # Ben's backend took up @repo at its start

    live = _live(team)
    assert "@repo/b.py" in live, "Ben's feature branch retired b.py for the team"
    assert "Mark an invoice as settled." in live["@repo/a.py"] and FEATURE_WORD not in live["@repo/a.py"]
    with ana.client() as client:  # Ana (on main) still finds what Ben's branch deleted
        packet = client.post("/context/packet", json={"query": "archive_ledger move a closed year of the ledger"})
        assert packet.status_code == 200 and "@repo/b.py" in packet.text and "archive_ledger" in packet.text
    with ben.client() as client:
        status = client.get("/sources").json()
        (row,) = status["sources"]
        assert row["state"] == "other_branch" and row["branch"]["name"] == "feature", row
        assert row["last_error"] == ("this checkout is on feature; the team genome follows main: switch back to "
                                     "main to index it again (your own edits are still served to you from disk)")
        assert "another branch" in status["summary"], status["summary"]
        # Ben's answers still serve his own files from disk
        mine = client.post("/context/packet", json={"query": "settle_invoice mark an invoice as settled"})
        assert FEATURE_WORD in mine.text and '"text_from":"local"' in mine.text.replace(" ", ""), mine.text
        # a file he writes on his branch is not indexed either (the watcher's batch is held back too)
        batches = service.batches
        write(ben_repo / "c.py", "def reconcile_accounts():\n    return 'reconciled'\n")
        wait_until(lambda: service.batches > batches, timeout=30, what="Ben's watcher to see c.py")
        assert service.wait_idle(30) and "@repo/c.py" not in _live(team)

        git(ben_repo, "checkout", "-q", "main")  # back: taken up again by itself, with one full pass
        wait_until(lambda: "@repo/c.py" in _live(team), timeout=30, what="Ben's backend to index main again")
        assert service.wait_idle(30)
        (row,) = client.get("/sources").json()["sources"]
        assert (row["state"], row["last_error"], row["branch"]["name"]) == ("watching", None, "main"), row
        assert "another branch" not in client.get("/sources").json()["summary"]
    live = _live(team)
    assert {"@repo/a.py", "@repo/b.py", "@repo/c.py"} <= set(live) and FEATURE_WORD not in live["@repo/a.py"]


@pytest.mark.parametrize("follow", ["", "main"])
def test_without_a_followed_branch_another_branch_is_indexed_as_before(
        settings: Settings, server_factory, pg_url: str, tmp_path: Path, team: GenomeStore, follow: str,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Ben's checkout is a worktree of Ana's repository, which records no remote default branch: with
    follow_branch unset nothing is checked (his branch is indexed, as before this change, and his status
    and `helix sources list` say the branch is not checked); `follow_branch = "main"` holds it back."""
    _ana, ana_repo = _ana_indexes_main(settings, server_factory, pg_url, tmp_path, team)
    ben_repo = tmp_path / "ben" / "repo"
    git(ana_repo, "worktree", "add", "-q", str(ben_repo))
    _on_feature(ben_repo)
    ben = server_factory(_machine(settings, tmp_path / "home-b", pg_url, "ben", ben_repo, follow_branch=follow))
    assert ben.app.state.sources.wait_idle(60)
    with ben.client() as client:
        (row,) = client.get("/sources").json()["sources"]
    monkeypatch.setenv("HELIX_HOME", str(tmp_path / "home-b"))
    monkeypatch.setenv("HELIX_GENOME_URL", pg_url)
    monkeypatch.setenv("HELIX_SERVER_PORT", str(ben.port))
    assert cli.main(["sources", "list"]) == 0
    listed = capsys.readouterr().out
    assert ("switch back to main" if follow else "branch not checked") in listed, listed
    if follow:
        assert row["state"] == "other_branch" and "@repo/b.py" in _live(team), row
        assert row["branch"] == {"name": "feature", "follows": "main", "note": row["last_error"]}, row
    else:
        assert row["state"] == "watching" and "@repo/b.py" not in _live(team), row
        assert row["branch"]["follows"] is None and row["branch"]["note"].startswith("branch not checked"), row


def test_a_held_back_source_is_taken_up_again_without_any_file_event(
        settings: Settings, pg_url: str, tmp_path: Path, team: GenomeStore) -> None:
    """No watcher (`watch = false`) and two branches with the same files: only the timer of the sources
    worker can notice that the checkout is back; it does, and indexes it with one full pass."""
    repo = git_repo(tmp_path / "ben" / "repo", MAIN, origin=True)
    git(repo, "checkout", "-q", "-b", "feature")
    chosen = _machine(settings, tmp_path / "home-b", pg_url, "ben", repo, watch=False)
    genome = open_genome(chosen)
    service = SourcesService(genome, chosen)
    helix = HelixContextManager(chosen, genome=genome, sources=service)
    try:
        service.start(helix)
        assert service.add(str(repo))["path"] == "@repo"
        wait_until(lambda: service.status()["sources"][0]["state"] == "other_branch", timeout=30,
                   what="the source to be held back")
        assert service.wait_idle(30) and _live(team) == {}
        git(repo, "checkout", "-q", "main")
        wait_until(lambda: set(_live(team)) == {"@repo/a.py", "@repo/b.py"}, timeout=30,
                   what="the timer to take the source up again")
        assert service.wait_idle(30)
        (row,) = service.status()["sources"]
        assert (row["state"], row["branch"]["name"]) == ("indexed", "main"), row
    finally:
        service.stop()
        helix.close()


def test_an_ingest_or_refresh_asked_for_on_another_branch_changes_nothing_of_the_team_genome(
        settings: Settings, server_factory, pg_url: str, tmp_path: Path, team: GenomeStore,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The explicit writes a person asks for go past the sources worker: `/admin/refresh` re-reads every
    known file (on Ben's feature branch b.py is gone: it would be retired for the team), POST /ingest and
    `helix ingest` read what they are given. On another branch than the one followed, each leaves the
    team's text alone and says why."""
    _ana, ana_repo = _ana_indexes_main(settings, server_factory, pg_url, tmp_path, team)
    git(tmp_path, "clone", "-q", str(ana_repo), str(tmp_path / "ben" / "repo"))
    ben_repo = _on_feature(tmp_path / "ben" / "repo")
    chosen = _machine(settings, tmp_path / "home-b", pg_url, "ben", ben_repo)
    ben = server_factory(chosen.replace(server={"allowed_ingest_roots": (str(ben_repo),)}))
    assert ben.app.state.sources.wait_idle(60)
    before = _live(team)
    with ben.client() as client:
        report = client.post("/admin/refresh").json()
        assert report["genes_retired"] == 0 and report["files_ingested"] == 0, report
        skipped = {Path(s["path"]).name: s["reason"] for s in report["files_skipped"]}
        assert set(skipped) == {"a.py", "b.py"} and "switch back to main" in skipped["b.py"], report
        refused = client.post("/ingest", json={"path": str(ben_repo / "a.py")})
        assert refused.status_code == 409, refused.text
        assert "this checkout is on feature; the team genome follows main" in refused.json()["error"]["message"]
    monkeypatch.setenv("HELIX_HOME", str(tmp_path / "home-b"))
    monkeypatch.setenv("HELIX_GENOME_URL", pg_url)
    assert cli.main(["ingest", str(ben_repo)]) == 2
    assert "the team genome follows main" in capsys.readouterr().err
    assert _live(team) == before and "@repo/b.py" in before and FEATURE_WORD not in before["@repo/a.py"]
