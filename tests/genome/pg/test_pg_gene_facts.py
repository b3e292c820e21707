"""A ranked gene's path and marks on the team genome (gene_facts.py): read once per generation, in one
statement for both, and never older than the generation asked at (a retired file's genes show archived)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from helix_context.config import Settings
from helix_context.genome.pg import gene_facts
from helix_context.manager import HelixContextManager


def _server_facts(pg_url: str, rowids: list[int]) -> tuple[dict[int, str], dict[int, tuple[str, ...]]]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute('SELECT id, source_path, tier, device, "user", org, agent FROM genes '
                            "WHERE id = ANY(%s)", (rowids,)).fetchall()
    return {r[0]: r[1] for r in rows if r[1] is not None}, {r[0]: tuple(r[2:]) for r in rows}


def test_paths_and_marks_are_read_once_per_generation_and_follow_writes(
        settings: Settings, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(4):
        (tree / f"billing_{i}.py").write_text(f"def settle_{i}(total):\n    return round(total, {i})\n")
    helix = HelixContextManager(settings.replace(embedding={"enabled": False}, ner={"enabled": False},
                                                 genome={"url": pg_url}))
    genome = helix.genome
    try:
        helix.ingest_path(tree)
        rowids = sorted(g.rowid for g in genome.iter_genes() if g.rowid is not None)
        assert len(rowids) == 4
        reads: list[int] = []
        plain = gene_facts.GeneFacts.of

        def counted(self: gene_facts.GeneFacts, conn: object, ids: object) -> dict:
            before = dict(self._counts)
            out = plain(self, conn, ids)
            reads.append(len(set(out) - set(before)))
            return out

        monkeypatch.setattr(gene_facts.GeneFacts, "of", counted)
        paths, marks = _server_facts(pg_url, rowids)
        assert genome.gene_paths(rowids) == paths and set(paths) == set(rowids)
        assert genome.gene_marks(rowids) == marks
        assert reads == [4, 0], "the marks came with the paths: nothing read the second time"

        genome.retire_source(str(tree / "billing_0.py"))  # a door write: the generation moves
        gone = next(r for r, p in paths.items() if p.endswith("billing_0.py"))
        helix_marks = genome.gene_marks(rowids)
        assert helix_marks[gone][0] == "archived" and helix_marks == _server_facts(pg_url, rowids)[1]

        monkeypatch.setattr(genome._facts, "_limit", 2)  # retention: past the cap, all are forgotten
        genome._facts._seen_at = -1
        genome.gene_paths(rowids[:2])
        genome.gene_paths(rowids[2:])
        assert len(genome._facts._counts) == 2
    finally:
        helix.close()
