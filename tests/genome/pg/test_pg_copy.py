"""`helix genome copy`: SQLite → PostgreSQL → a new SQLite file; every hop answers with the same pointers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helix_context.cli import main
from helix_context.config import Settings
from helix_context.genome.store import Genome
from helix_context.manager import HelixContextManager

from .conftest import fresh_database
from .test_pg_parity import QUESTIONS, _pointers, tree  # noqa: F401  (tree: the fixture, used by name)


def _answers_alike(helix: HelixContextManager, want: dict[str, Any]) -> None:
    """The same answer first; below it, int8 vectors differ with their batch (session 30), so near-ties may swap:
    the same pointers, near the same places."""
    for q in QUESTIONS:
        got = _pointers(helix, q)
        assert got[0] == want[q][0] and set(want[q][:3]) <= set(got[:5]), (q, got[:5], want[q][:3])


def test_copy_to_postgres_and_back_keeps_the_answers(settings: Settings, pg_url: str, tree: Path,  # noqa: F811
                                                     tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HELIX_EMBEDDING_ENABLED", "true")
    monkeypatch.setenv("HELIX_NER_ENABLED", "false")
    chosen = settings.replace(ner={"enabled": False})
    lite = HelixContextManager(chosen)
    lite.ingest_path(tree)
    lite.genome.add_source(str(tree), "demo", 1.0)  # a folder kept indexed: it travels with its files
    want = {q: _pointers(lite, q) for q in QUESTIONS}
    lite.close()

    assert main(["genome", "copy", "--to", pg_url]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["files"] == 6 and summary["not_copied_genes"] == 0 and summary["sources"] == 1
    team = HelixContextManager(chosen.replace(genome={"url": pg_url}))
    try:
        assert [(r.path, r.project) for r in team.genome.list_sources()] == [(str(tree), "demo")]
        _answers_alike(team, want)
    finally:
        team.close()

    back = tmp_path / "back" / "genome.db"
    monkeypatch.setenv("HELIX_GENOME_URL", pg_url)
    assert main(["genome", "copy", "--to", str(back)]) == 0
    assert main(["genome", "copy", "--to", str(back)]) == 4, "a non-empty target is refused"
    assert "already holds files" in capsys.readouterr().err
    again = HelixContextManager(chosen, genome=Genome(back))
    try:
        assert [(r.path, r.project) for r in again.genome.list_sources()] == [(str(tree), "demo")]
        for q in QUESTIONS:
            assert _pointers(again, q)[:3] == want[q][:3], q
    finally:
        again.close()


def _indexed_with_history(helix: HelixContextManager, folder: Path, questions: list[str]) -> tuple[Any, ...]:
    """Index the tree, give its first gene a vector and this developer a session and a co-activation
    link; (pointers per question, genes, the vector, live genes). Closes `helix`."""
    import numpy as np

    try:
        helix.ingest_path(folder)
        want = {q: _pointers(helix, q) for q in questions}
        genes = list(helix.genome.iter_genes())
        vector = np.random.default_rng(7).standard_normal(384).astype(np.float32)
        vector /= np.linalg.norm(vector)
        helix.genome.set_embeddings([(genes[0].rowid or 0, vector)])
        helix.genome.record_delivery([g.rowid or 0 for g in genes[:2]])
        helix.genome.touch_session("mine", "agent", 2)
        return want, genes, vector, helix.genome.live_gene_count()
    finally:
        helix.close()


def test_export_of_a_team_genome_imports_into_sqlite_and_another_team_genome_with_the_same_answers(
        settings: Settings, pg_url: str, pg_server: str, tree: Path, tmp_path: Path, helix_home: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`helix export` on a team genome writes the same file format: a vector goes out as the SQLite
    genome's int8 codes, this developer's co-activation and sessions travel (nobody else's). Its shared
    names (`@tree/…`) travel as the root `@tree`: into a SQLite genome they land under this machine's
    checkout of `tree` (refused whole, nothing written, while `tree` is not mapped here), and into
    another team genome they stay `@tree/…`; both answer with the same pointers."""
    import numpy as np

    from helix_context.errors import InvalidRequest
    from helix_context.portable import import_genome
    from helix_context.sources.roots import RootMap

    RootMap({}).mapped("tree", tree).save(helix_home)  # the team genome names the files @tree/…
    chosen = settings.replace(embedding={"enabled": False}, ner={"enabled": False})
    want, genes, vector, live = _indexed_with_history(HelixContextManager(chosen.replace(genome={"url": pg_url})),
                                                      tree, QUESTIONS[:3])
    other = HelixContextManager(chosen.replace(genome={"url": pg_url}, attribution={"user": "bob", "device": "pc"}))
    try:
        other.genome.touch_session("bobs", "agent", 1)  # another developer's history stays out of the export
        other.genome.add_source("@tree", None, 1.0)
    finally:
        other.close()

    monkeypatch.setenv("HELIX_GENOME_URL", pg_url)
    out = tmp_path / "team.helix"
    assert main(["export", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["genes"], summary["files"], summary["with_embeddings"]) == (live, 6, 1)
    assert (summary["links"], summary["sessions"]) == (1, 1)
    assert summary["roots"] == [{"name": "@tree", "path": "@tree"}]
    monkeypatch.delenv("HELIX_GENOME_URL")

    lite = HelixContextManager(chosen, genome=Genome(tmp_path / "lite" / "genome.db"))
    try:
        with pytest.raises(InvalidRequest, match="helix sources map tree PATH-OF-YOUR-CHECKOUT"):
            import_genome(lite.genome, out, machine_roots=RootMap({}))  # a machine that does not map `tree`
        assert lite.genome.live_gene_count() == 0 and not lite.genome.file_records()
        done = import_genome(lite.genome, out, machine_roots=RootMap.load(helix_home))
        assert done["genes"]["new"] == live and done["refused"]["total"] == 0, done
        assert {p.rsplit("/", 1)[0].startswith(str(tree.resolve())) for p in lite.genome.file_records()} == {True}
        assert [r.path for r in lite.genome.list_sources()] == [str(tree.resolve())]
        for q in QUESTIONS[:3]:
            assert _pointers(lite, q)[:3] == want[q][:3], q
        landed = lite.genome.get_gene(genes[0].gene_id)
        moved = lite.genome.embedding_of(landed.rowid or 0) if landed is not None else None
        assert moved is not None and float(np.dot(moved, vector)) > 0.99, "the vector travelled as int8 codes"
        assert landed is not None and landed.user == genes[0].user, "the genes column, not the database role"
        assert [s["session_id"] for s in lite.genome.sessions()] == ["mine"]
    finally:
        lite.close()

    second = fresh_database(pg_server)
    monkeypatch.setenv("HELIX_GENOME_URL", second)
    assert main(["import", str(out), "--json"]) == 0
    into_team = json.loads(capsys.readouterr().out)
    assert into_team["genes"]["new"] == live and into_team["refused"]["total"] == 0, into_team
    assert into_team["sources_added"] == ["@tree"]
    team = HelixContextManager(chosen.replace(genome={"url": second}))
    try:
        assert team.genome.integrity_check() == []
        assert all(p.startswith("@tree/") for p in team.genome.file_records()), "the team's names, kept"
        assert [r.path for r in team.genome.list_sources()] == ["@tree"]
        for q in QUESTIONS[:3]:
            assert _pointers(team, q)[:3] == want[q][:3], q
    finally:
        team.close()


def _counts(url: str) -> dict[str, int]:
    import psycopg

    with psycopg.connect(url) as conn:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # type: ignore[index]
                for t in ("genes", "gene_sources", "files", "symbols", "sources", "lex_postings", "lex_docs",
                          "coactivation", "sessions", "activity")}


def test_import_of_a_sqlite_export_into_a_team_genome_keeps_the_answers_and_a_second_changes_nothing(
        settings: Settings, pg_url: str, tree: Path, tmp_path: Path, helix_home: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`helix import` into a team genome, through the genome's import writes (pg/portable_import.py):
    the same pointers as the exporting SQLite genome, files and the source named relative to the
    mapped root, the vector decoded into a halfvec, this developer's session and co-activation under
    their party; `helix check` passes; importing the same file again writes nothing."""
    import numpy as np

    from helix_context.portable import import_genome
    from helix_context.sources.names import SourceNames
    from helix_context.sources.roots import RootMap

    chosen = settings.replace(embedding={"enabled": False}, ner={"enabled": False})
    want, genes, vector, live = _indexed_with_history(HelixContextManager(chosen), tree, QUESTIONS)
    out = tmp_path / "lite.helix"
    assert main(["export", str(out), "--json"]) == 0
    capsys.readouterr()

    RootMap({}).mapped("tree", tree).save(helix_home)  # this machine's checkout of the shared root
    monkeypatch.setenv("HELIX_GENOME_URL", pg_url)
    monkeypatch.setenv("HELIX_EMBEDDING_ENABLED", "false")  # the CLI's manager: no model to load
    monkeypatch.setenv("HELIX_NER_ENABLED", "false")
    assert main(["import", str(out), "--json", "--remap", f"tree={tree}"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["changed"] and first["genes"]["new"] == live and first["files"]["new"] == 6, first
    assert first["sources_added"] == ["@tree"] and first["refused"]["total"] == 0, first

    team = HelixContextManager(chosen.replace(genome={"url": pg_url}))
    try:
        assert team.genome.integrity_check() == []  # `helix check`'s invariants: postings = live genes …
        for q in QUESTIONS:
            assert _pointers(team, q)[:3] == want[q][:3], q
        assert {r.path for r in team.genome.list_sources()} == {"@tree"}
        assert all(p.startswith("@tree/") for p in team.genome.file_records()), "named relative to the root"
        landed = team.genome.get_gene(genes[0].gene_id)
        moved = team.genome.embedding_of(landed.rowid or 0) if landed is not None else None
        assert moved is not None and float(np.dot(moved, vector)) > 0.99, "the int8 codes became a halfvec"
        assert [s["session_id"] for s in team.genome.sessions()] == ["mine"]

        def again(strategy: str) -> dict:
            return import_genome(team.genome, out, strategy, remap={"tree": str(tree)},
                                 names=SourceNames(RootMap.load(helix_home)))

        before = _counts(pg_url)
        second = again("skip_existing")
        assert not second["changed"] and second["genes"]["new"] == 0, second
        assert second["generation_after"] == second["generation_before"] and _counts(pg_url) == before
        # the file's copy wins everywhere: every gene re-written and re-indexed, nothing lost or doubled
        assert again("overwrite")["genes"]["overwritten"] == live
        assert _counts(pg_url) == before
        assert float(np.dot(team.genome.embedding_of(landed.rowid or 0), vector)) > 0.99  # type: ignore[union-attr, arg-type]
    finally:
        team.close()
    assert main(["check"]) == 0, capsys.readouterr()


def test_an_import_into_a_team_genome_writes_its_postings_in_batches(
        settings: Settings, pg_url: str, tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """The postings writer keeps each indexed gene's text until it flushes: an import that flushed only at
    its commit held the whole export's text in memory, growing with the export. Batches keep it bounded,
    and the index stays exact (`helix check`)."""
    from helix_context.genome.pg import door, portable_import
    from helix_context.portable import export_genome, import_genome
    from helix_context.sources.names import SourceNames
    from helix_context.sources.roots import RootMap

    chosen = settings.replace(embedding={"enabled": False}, ner={"enabled": False})
    lite = HelixContextManager(chosen)
    try:
        lite.ingest_path(tree)
        live = lite.genome.live_gene_count()
        export_genome(lite.genome, tmp_path / "lite.helix")
    finally:
        lite.close()
    assert live > 4
    monkeypatch.setattr(portable_import, "FLUSH_EVERY", 2)
    buffered: list[int] = []
    flush = door.PostingsWriter.flush

    def counted(self: door.PostingsWriter) -> None:
        buffered.append(len(self.docs))
        flush(self)

    monkeypatch.setattr(door.PostingsWriter, "flush", counted)
    team = HelixContextManager(chosen.replace(genome={"url": pg_url}))
    try:
        done = import_genome(team.genome, tmp_path / "lite.helix", remap={"tree": str(tree)},
                             names=SourceNames(RootMap({}).mapped("tree", tree)))
        assert done["genes"]["new"] == live, done
        assert buffered and max(buffered) <= 2, buffered
        assert team.genome.integrity_check() == [] and team.genome.live_gene_count() == live
    finally:
        team.close()


def test_an_import_into_a_team_genome_embeds_again_genes_that_came_with_another_models_vectors(
        settings: Settings, pg_url: str, tree: Path, tmp_path: Path, helix_home: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A team genome keeps one model's vectors: a developer's export made with the code-trained model arrives
    with vectors the team's MiniLM genome cannot store. They were left out and the genes stayed without any
    vector (no dense evidence) until someone ran the backfill; `helix import` now embeds them with the team's
    model, and the team genome answers as one that indexed the tree with MiniLM itself."""
    from helix_context.sources.roots import RootMap

    chosen = settings.replace(ner={"enabled": False})
    mine = HelixContextManager(chosen.replace(embedding={"model": "code-minilm"}))
    mine.ingest_path(tree)
    with_vectors = sum(1 for g in mine.genome.iter_genes() if mine.genome.embedding_of(g.rowid or 0) is not None)
    mine.close()
    out = tmp_path / "mine.helix"
    assert main(["export", str(out), "--json"]) == 0
    capsys.readouterr()
    reference = HelixContextManager(chosen, genome=Genome(tmp_path / "reference" / "genome.db"))  # MiniLM
    reference.ingest_path(tree)
    want = {q: _pointers(reference, q) for q in QUESTIONS}
    reference.close()

    RootMap({}).mapped("tree", tree).save(helix_home)
    monkeypatch.setenv("HELIX_GENOME_URL", pg_url)
    monkeypatch.setenv("HELIX_EMBEDDING_MODEL", "minilm")
    monkeypatch.setenv("HELIX_NER_ENABLED", "false")
    assert main(["import", str(out), "--remap", f"tree={tree}"]) == 0
    said = capsys.readouterr().out
    assert f"vectors   {with_vectors} chunks came with another embedding model's vectors" in said, said
    assert f"{with_vectors} embedded again with it" in said, said

    team = HelixContextManager(chosen.replace(genome={"url": pg_url}))
    try:
        assert team.genome.genes_missing_embeddings(10) == []
        assert team.genome.integrity_check() == []
        _answers_alike(team, want)
    finally:
        team.close()
