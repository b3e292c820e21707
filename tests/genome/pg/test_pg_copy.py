"""`helix genome copy`: SQLite → PostgreSQL → a new SQLite file; every hop answers with the same pointers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helix_context.cli import main
from helix_context.config import Settings
from helix_context.genome.store import Genome
from helix_context.manager import HelixContextManager

from .test_pg_parity import QUESTIONS, _pointers, tree  # noqa: F401  (tree: the fixture, used by name)


def test_copy_to_postgres_and_back_keeps_the_answers(settings: Settings, pg_url: str, tree: Path,  # noqa: F811
                                                     tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HELIX_EMBEDDING_ENABLED", "true")
    monkeypatch.setenv("HELIX_NER_ENABLED", "false")
    chosen = settings.replace(ner={"enabled": False})
    lite = HelixContextManager(chosen)
    lite.ingest_path(tree)
    want = {q: _pointers(lite, q) for q in QUESTIONS}
    lite.close()

    assert main(["genome", "copy", "--to", pg_url]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["files"] == 6 and summary["not_copied_genes"] == 0
    team = HelixContextManager(chosen.replace(genome={"url": pg_url}))
    try:
        for q in QUESTIONS:
            assert _pointers(team, q)[:3] == want[q][:3], q
    finally:
        team.close()

    back = tmp_path / "back" / "genome.db"
    monkeypatch.setenv("HELIX_GENOME_URL", pg_url)
    assert main(["genome", "copy", "--to", str(back)]) == 0
    assert main(["genome", "copy", "--to", str(back)]) == 3, "a non-empty target is refused"
    assert "already holds files" in capsys.readouterr().err
    again = HelixContextManager(chosen, genome=Genome(back))
    try:
        for q in QUESTIONS:
            assert _pointers(again, q)[:3] == want[q][:3], q
    finally:
        again.close()


def test_export_of_a_team_genome_imports_into_sqlite_with_the_same_answers(
        settings: Settings, pg_url: str, tree: Path, tmp_path: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`helix export` on a team genome writes the same file format: a vector goes out as the SQLite
    genome's int8 codes, this developer's co-activation and sessions travel (nobody else's), and the
    file imported into a new SQLite genome answers with the same pointers."""
    import numpy as np

    from helix_context.portable import import_genome

    chosen = settings.replace(embedding={"enabled": False}, ner={"enabled": False})
    team = HelixContextManager(chosen.replace(genome={"url": pg_url}))
    try:
        team.ingest_path(tree)
        want = {q: _pointers(team, q) for q in QUESTIONS[:3]}
        genes = list(team.genome.iter_genes())
        vector = np.random.default_rng(7).standard_normal(384).astype(np.float32)
        vector /= np.linalg.norm(vector)
        team.genome.set_embeddings([(genes[0].rowid or 0, vector)])
        team.genome.record_delivery([g.rowid or 0 for g in genes[:2]])
        team.genome.touch_session("mine", "agent", 2)
        live = team.genome.live_gene_count()
    finally:
        team.close()
    other = HelixContextManager(chosen.replace(genome={"url": pg_url}, attribution={"user": "bob", "device": "pc"}))
    try:
        other.genome.touch_session("bobs", "agent", 1)  # another developer's history stays out of the export
    finally:
        other.close()

    monkeypatch.setenv("HELIX_GENOME_URL", pg_url)
    out = tmp_path / "team.helix"
    assert main(["export", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["genes"], summary["files"], summary["with_embeddings"]) == (live, 6, 1)
    assert (summary["links"], summary["sessions"]) == (1, 1)
    assert main(["import", str(out)]) == 2, "import into a team genome still refuses, and says what to do"
    assert "genome copy" in capsys.readouterr().err
    monkeypatch.delenv("HELIX_GENOME_URL")

    lite = HelixContextManager(chosen, genome=Genome(tmp_path / "lite" / "genome.db"))
    try:
        done = import_genome(lite.genome, out, remap={"tree": str(tree)})  # the user confirms the root
        assert done["genes"]["new"] == live
        for q in QUESTIONS[:3]:
            assert _pointers(lite, q)[:3] == want[q][:3], q
        landed = lite.genome.get_gene(genes[0].gene_id)
        moved = lite.genome.embedding_of(landed.rowid or 0) if landed is not None else None
        assert moved is not None and float(np.dot(moved, vector)) > 0.99, "the vector travelled as int8 codes"
        assert [s["session_id"] for s in lite.genome.sessions()] == ["mine"]
    finally:
        lite.close()
