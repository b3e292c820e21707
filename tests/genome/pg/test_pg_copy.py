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
