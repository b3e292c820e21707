"""Lexical search on PostgreSQL ranks as SQLite's FTS5 bm25 does, and its two scoring paths agree."""

from __future__ import annotations

from pathlib import Path

import pytest

from helix_context.config import Settings
from helix_context.genome.pg import lexical
from helix_context.manager import HelixContextManager

from tests.retrieve.test_word_counts import assert_counted_as_held, write_tree
from ..test_term_rowid_lists import awkward_words
from .test_pg_parity import tree  # noqa: F401  (the fixture, used by name)

EXPRESSIONS = ['"redact_url"', '"credentials" OR "password" OR "url"', '"genome" AND "error"',
               '"split" OR "identifier" OR "camel"', '"replace" OR "atomic" OR "json"', '"helix"']


@pytest.fixture
def both(settings: Settings, pg_url: str, tree: Path):  # noqa: F811
    chosen = settings.replace(embedding={"enabled": False}, ner={"enabled": False})
    lite, team = HelixContextManager(chosen), HelixContextManager(chosen.replace(genome={"url": pg_url}))
    lite.ingest_path(tree)
    team.ingest_path(tree)
    yield lite, team
    lite.close()
    team.close()


def _ranked(helix: HelixContextManager, expr: str, column: str | None) -> list[tuple[str, float]]:
    hits = helix.genome.fts_search(expr, 10, column)
    genes = helix.genome.genes_by_rowid(r for r, _ in hits)
    return [(genes[r].gene_id, s) for r, s in hits]


@pytest.mark.parametrize("column", [None, "path", "tags"])
def test_postgres_ranks_like_fts5(both, column: str | None) -> None:
    lite, team = both
    compared = 0
    for expr in EXPRESSIONS:
        want, got = _ranked(lite, expr, column), _ranked(team, expr, column)
        assert {g for g, _ in got} == {g for g, _ in want}, expr
        scores = dict(want)
        for gene_id, score in got:
            assert score == pytest.approx(scores[gene_id], rel=1e-6), (expr, gene_id)
        compared += len(want)
    assert compared > 0 or column == "tags"


def test_the_server_side_and_the_python_scoring_agree(both, monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain OR / AND lists are summed by the server; the other shapes here. Same answers either way.
    Also: many words' genes read in one round trip equal each word's alone (`term_rowid_lists`)."""
    _, team = both
    raw = team.genome._raw()
    for expr in EXPRESSIONS:
        in_sql = lexical.search(raw, expr, 20)
        with monkeypatch.context() as m:
            m.setattr(lexical, "_scored_in_sql", lambda *args: None)
            in_python = lexical.search(raw, expr, 20)
        assert [g for g, _ in in_sql] == [g for g, _ in in_python], expr
        assert [s for _, s in in_sql] == pytest.approx([s for _, s in in_python], rel=1e-9)
    # on the same genomes (each pair costs seconds to build): many words' genes in one round trip
    _many_words_at_once_equal_each_word_alone_and_sqlite(*both)


def _many_words_at_once_equal_each_word_alone_and_sqlite(lite: HelixContextManager, team: HelixContextManager) -> None:
    """term_rowid_lists (the silence gate's one round trip) = term_rowids word by word, and SQLite's genes."""
    words = awkward_words()
    for limit in (3, 20_000):
        got = team.genome.term_rowid_lists(words, limit)
        assert set(got) == set(words)
        for word in words:
            assert sorted(got[word].tolist()) == sorted(team.genome.term_rowids(word, limit)), (word, limit)
        full = lite.genome.term_rowid_lists(words, limit)
        # one-token words: the same genes by content on both backends (each numbers its genes its own way;
        # a phrase is matched without adjacency here, docs/team.md)
        for word in (w for w in words if w.isidentifier()):
            if limit > 3:
                assert _gene_ids(team, got[word]) == _gene_ids(lite, full[word]), word
        assert len(got["def"]) > 0


def _gene_ids(helix: HelixContextManager, rowids) -> set[str]:
    genes = helix.genome.genes_by_rowid(int(r) for r in rowids)
    return {g.gene_id for g in genes.values()}


def test_postings_tokenized_by_parse_workers_are_the_ones_the_writer_would_make(
        settings: Settings, pg_url: str, tmp_path: Path) -> None:
    """A team genome's parse workers tokenize the postings (stored_form.LexicalRows): what the COPY
    stored for each gene equals what the writing process derives from the gene itself."""
    from helix_context.genome import fts_text
    from tests.ingest.test_parallel import make_repo

    repo = make_repo(tmp_path / "repo", n=16)
    chosen = settings.replace(embedding={"enabled": False}, ner={"enabled": False}, genome={"url": pg_url},
                              ingest={"workers": 2})
    team = HelixContextManager(chosen)
    try:
        team.ingest_path(repo, embed=False)
        assert team.parse_pool is not None and team.parse_pool.started, "the workers never ran"
        stored: dict[int, set[tuple[str, int, int, int, int]]] = {}
        for term, gene, tb, tt, tp, dl in team.genome._raw().execute(
                "SELECT term, gene, tf_body, tf_tags, tf_path, doc_tokens FROM lex_postings"):
            stored.setdefault(gene, set()).add((term, tb, tt, tp, dl))
        genes = team.genome.genes_by_rowid(stored)
        assert len(genes) == len(stored) > 16
        for rowid, gene in genes.items():
            rows, length, _ = lexical.gene_rows(fts_text.body_text(gene.content), "\n".join(gene.tags), gene.source_path)
            want = {(t, int(b), int(g), int(p), length) for t, b, g, p, _ in (line.split("\t") for line in rows.splitlines())}
            assert stored[rowid] == want, gene.source_path
    finally:
        team.close()


def test_each_projects_live_gene_ids_on_both_backends(both, tree: Path) -> None:  # noqa: F811
    """The scope's gene ids (read from an index as one value, not a row per gene) are the live genes of
    the projects asked, sorted, on both backends, and a retired gene leaves them."""
    for helix in both:
        projects = helix.genome.live_projects()
        assert sum(projects.values()) > 0
        name = max(projects, key=projects.__getitem__)
        truth = [r[0] for r in helix.genome.conn.execute(
            "SELECT id FROM genes WHERE project = ? AND retired_at IS NULL ORDER BY id", (name,)).fetchall()]
        assert helix.genome.project_rowids([name]).tolist() == truth and len(truth) == projects[name]
        assert helix.genome.project_rowids(["no such project"]).size == 0
        retired = next(p for p in sorted(tree.rglob("*.py")))
        helix.genome.retire_source(str(retired))
        left = helix.genome.project_rowids([name]).tolist()
        assert len(left) < len(truth) and set(left) < set(truth) and left == sorted(left)
        assert helix.genome.live_projects()[name] == len(left)


def test_question_words_are_counted_as_the_postings_hold_them(settings: Settings, pg_url: str,
                                                              tmp_path: Path) -> None:
    """The silence gate's and the items' word counts on a team genome: each word stemmed once, by the
    postings' own tokenizer (tests/retrieve/test_word_counts.py on SQLite)."""
    shop, garden = write_tree(tmp_path / "words")
    team = HelixContextManager(settings.replace(embedding={"enabled": False}, ner={"enabled": False},
                                                genome={"url": pg_url}))
    try:
        team.ingest_path(shop, project="shop")
        team.ingest_path(garden, project="garden")
        assert_counted_as_held(team, ("shop",))
        assert_counted_as_held(team, ())
    finally:
        team.close()


def test_searches_sent_together_in_a_snapshot_read_what_each_reads_alone(both) -> None:
    """A question's searches are all sent before any is read (scorers.PendingScores): inside the read
    snapshot's pipeline every one still gets its own hits, on both backends, in any order of reading."""
    for helix in both:
        alone = [helix.genome.fts_search(expr, 10, column) for expr in EXPRESSIONS for column in (None, "tags")]
        with helix.genome.read_snapshot():
            started = [helix.genome.start_fts_search(expr, 10, column)
                       for expr in EXPRESSIONS for column in (None, "tags")]
            together = [read() for read in reversed(started)][::-1]
        assert together == alone and any(alone)
