"""Export → import into a fresh HELIX_HOME gives the same answers (issue 26).

A real tree (a copy of two of Helix's own packages) is indexed by a real backend as a source,
used a while (so co-activation, sessions and activity exist), exported with `helix export`,
imported with `helix import --remap` into a fresh HELIX_HOME, and served by a second backend.
For a set of questions, `/fingerprint` and `/context/packet` must give the same pointers (path,
symbol, lines) and the same verdicts. Before, pointers lost their symbol names and their spans
changed (the symbols table did not travel).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from helix_context import cli
from helix_context.config import load_config
from tests.sources.conftest import fast_settings

REPO = Path(__file__).resolve().parent.parent
QUESTIONS = [
    "how is the verdict of a packet item chosen",
    "live check compares the file hash with what was indexed",
    "freshness authority specificity scores",
    "coordinate confidence of the whole answer",
    "watched folder vanished and comes back",
    "debounce a burst of file events into one batch",
    "where is a source folder resolved and refused",
    "pause indexing and resume",
]


def _answers(client: Any) -> list[Any]:
    out: list[Any] = []
    for question in QUESTIONS:
        hits = client.post("/fingerprint", json={"query": question, "max_results": 8}).json()["results"]
        out.append([(h["source_id"], h["symbol"], h["start_line"], h["end_line"]) for h in hits])
        packet = client.post("/context/packet", json={"query": question, "task_type": "edit"}).json()
        items = [*packet["verified"], *packet["stale_risk"]]
        out.append([(i["source_id"], i["symbol"], i["start_line"], i["end_line"], i["verdict"]) for i in items])
    return out


def test_answers_survive_a_round_trip_into_a_fresh_home(server_factory, tmp_path: Path, helix_home: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture) -> None:
    tree = tmp_path / "tree"
    for package in ("weigh", "sources"):
        shutil.copytree(REPO / "helix_context" / package, tree / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    first = server_factory(fast_settings(load_config()))
    with first.client() as client:
        assert client.post("/sources", json={"path": str(tree)}).status_code == 202
        assert first.app.state.sources.wait_idle(120)
        for question in QUESTIONS:  # use: co-activation links, a session, activity rows
            assert client.post("/context", json={"query": question}).status_code == 200
    first.app.state.helix.genome.flush_deliveries()  # written by the server within half a second anyway
    exported = tmp_path / "genome.hxg"
    assert cli.main(["export", str(exported), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["symbols"] > 50 and summary["links"] > 0 and summary["sources"] == 1, summary
    assert summary["roots"] == [{"name": "tree", "path": str(tree.resolve())}]
    with first.client() as client:
        before = _answers(client)
    first.stop()

    fresh = tmp_path / "fresh-home"
    fresh.mkdir()
    monkeypatch.setenv("HELIX_HOME", str(fresh))
    assert cli.main(["import", str(exported), "--dry-run"]) == 2  # a fresh home has no sources: all refused
    plan = capsys.readouterr().out
    assert "chunks    new 0," in plan and "confirm the root with --remap tree=FOLDER" in plan
    assert cli.main(["import", str(exported), "--dry-run", "--remap", f"tree={tree}"]) == 0
    plan = capsys.readouterr().out
    assert "dry run, nothing written: the import would change the genome" in plan
    assert f"root tree (was {tree.resolve()}) -> {tree.resolve()}" in plan
    assert f"chunks    new {summary['genes']}," in plan
    assert cli.main(["import", str(exported), "--remap", f"tree={tree}", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["refused"]["total"] == 0 and result["genes"]["new"] == summary["genes"]
    assert result["symbols"]["new"] == summary["symbols"] and result["links"]["new"] == summary["links"]
    assert result["sessions"]["new"] == summary["sessions"] and result["activity"]["new"] == summary["activity"]

    second = server_factory(fast_settings(load_config()))
    assert second.app.state.sources.wait_idle(120)  # the imported source: every file unchanged, nothing re-read
    with second.client() as client:
        after = _answers(client)
    assert sum(len(a) for a in before) > 40
    assert any(symbol for answer in before[::2] for _, symbol, *_ in answer)
    assert after == before


APP_V1 = 'MAX_RETRIES = 5\n\n\ndef open_genome(path):\n    """Open the genome database at path."""\n    return path\n'
APP_V2 = ('MAX_RETRIES = 9\nTIMEOUT_SECONDS = 30\n\n\ndef open_genome(path):\n    """Open the genome database at path."""\n'
          '    return path\n')


def test_an_older_export_never_brings_back_what_a_file_no_longer_says(tmp_path: Path, helix_home: Path,
                                                                      capsys: pytest.CaptureFixture) -> None:
    """Imported into the genome it came from after a file changed: the file's record was kept (ours is newer)
    but its old chunk and symbols were stored, and answered first (`MAX_RETRIES = 5`, symbols twice at old
    lines); the file being unchanged on disk, no ingest removed them."""
    from helix_context.manager import HelixContextManager

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "app.py").write_text(APP_V1)
    settings = load_config().replace(embedding={"enabled": False}, ner={"enabled": False})
    helix = HelixContextManager(settings)
    try:
        helix.ingest_path(tree)
        assert cli.main(["export", str(tmp_path / "old.helix")]) == 0
        (tree / "app.py").write_text(APP_V2)
        helix.ingest_path(tree)
        before = helix.genome.stats()["total_genes"]
    finally:
        helix.close()
    capsys.readouterr()
    assert cli.main(["import", str(tmp_path / "old.helix"), "--remap", f"{tree}={tree}", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["genes"]["outdated"] >= 1 and summary["genes"]["new"] == 0, summary["genes"]
    helix = HelixContextManager(settings)
    try:
        assert helix.genome.stats()["total_genes"] == before
        hits = helix.fingerprint("where is MAX_RETRIES set", 5)
        assert hits[0]["symbol"] == "MAX_RETRIES", hits[0]
        assert "MAX_RETRIES = 9" in helix.genome.get_gene(hits[0]["gene_id"]).content
        assert not [g for g in helix.genome.iter_genes() if "MAX_RETRIES = 5" in g.content]
        spans = helix.genome.conn.execute("SELECT name, start_line FROM symbols WHERE name = 'open_genome'").fetchall()
        assert spans == [("open_genome", 5)], spans
    finally:
        helix.close()
