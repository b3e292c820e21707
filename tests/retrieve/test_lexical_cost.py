"""The lexical stage's cost does not grow with the genome: common words are counted up to a cap, never walked.

The caps are lowered here (monkeypatch) so a genome of a few hundred genes shows
what a genome of a million does with the shipped values.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from helix_context.genome import lexicon
from helix_context.genome.store import FileRecord, Genome, SourceWrite
from helix_context.models import Gene, Provenance
from helix_context.retrieve import query, terms
from helix_context.retrieve.scorers import fts_scorer

COMMON = 200


def gene(i: int, text: str) -> Gene:
    content = f"def step_{i}():\n    # {text}\n    return {i}\n"
    return Gene(gene_id=hashlib.sha256(content.encode()).hexdigest()[:32], content=content, content_type="code",
                language="python", source_path=f"mod{i}.py", project="demo", start_line=1, end_line=3,
                provenance=Provenance(observed_at=1.0, last_verified_at=1.0))


@pytest.fixture()
def genome(tmp_path: Path) -> Genome:
    """200 genes say 'widget', 200 say 'gadget', 12 say both, 3 say 'sprocket'."""
    texts = [f"widget number {i}" for i in range(COMMON)] + [f"gadget number {i}" for i in range(COMMON)]
    texts += [f"widget gadget pair {i}" for i in range(12)] + [f"sprocket {i}" for i in range(3)]
    g = Genome(tmp_path / "g.db")
    g.replace_sources([SourceWrite(FileRecord(f"mod{i}.py", "demo", 10, 1, "h"), f"mod{i}.py", [(gene(i, t), None)])
                       for i, t in enumerate(texts)])
    return g


@pytest.fixture()
def small_caps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(terms, "MAX_WORD_DOCS", 50)
    monkeypatch.setattr(terms, "POSTING_BUDGET", 60)


def weigh(genome: Genome, text: str) -> terms.WeighedTerms:
    return terms.weigh_terms(genome, query.extract(text))


def test_counts_stop_at_the_cap(genome: Genome) -> None:
    counts = genome.word_doc_counts_upto(["widget", "sprocket", "absent"], 50)
    assert counts == {"widget": 51, "sprocket": 3}  # 51: "more than 50"; absent words are left out


def test_a_common_word_is_left_out_when_a_rare_one_is_asked_too(genome: Genome, small_caps: None) -> None:
    chosen = weigh(genome, "which widget holds the sprocket")
    assert chosen.written == ("sprocket",) and not chosen.conjunctive
    found = fts_scorer(genome, query.extract("which widget holds the sprocket"), 50, chosen)
    assert len(found) == 3  # only the sprocket genes: the widget list was never ranked


def test_under_the_caps_the_same_query_searches_both_words(genome: Genome, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(terms, "COMMON_FRACTION", 0.9)  # 212 of 415 genes: common only by share, not by cost
    chosen = weigh(genome, "which widget holds the sprocket")
    assert set(chosen.written) == {"widget", "sprocket"}


def test_only_common_words_search_the_genes_holding_all_of_them(genome: Genome, small_caps: None) -> None:
    qs = query.extract("widget gadget")
    chosen = terms.weigh_terms(genome, qs)
    assert chosen.conjunctive and set(chosen.written) == {"widget", "gadget"}
    found = fts_scorer(genome, qs, 100, chosen)
    assert len(found) == 12  # the pairs, not the 412 genes holding either word


def test_too_many_genes_holding_all_common_words_gives_no_full_text_candidates(genome: Genome,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(terms, "MAX_WORD_DOCS", 50)
    monkeypatch.setattr(terms, "POSTING_BUDGET", 10)  # 12 genes hold both: over the budget
    qs = query.extract("widget gadget")
    chosen = terms.weigh_terms(genome, qs)
    assert chosen.conjunctive and chosen.written == ()
    assert fts_scorer(genome, qs, 100, chosen) == {}


def test_the_budget_keeps_the_heaviest_words_that_fit(genome: Genome, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(terms, "COMMON_FRACTION", 0.9)
    monkeypatch.setattr(terms, "POSTING_BUDGET", 250)
    chosen = weigh(genome, "sprocket widget gadget")
    assert "sprocket" in chosen.written and len(chosen.written) == 2  # 3 + 212 fit; another 212 do not


def test_common_words_that_fit_the_budget_together_are_searched_as_usual(genome: Genome,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(terms, "MAX_WORD_DOCS", 50)
    monkeypatch.setattr(terms, "POSTING_BUDGET", 500)  # 212 + 212 genes fit: a small genome's common words
    qs = query.extract("widget gadget")
    chosen = terms.weigh_terms(genome, qs)
    assert not chosen.conjunctive and set(chosen.written) == {"widget", "gadget"}
    assert len(fts_scorer(genome, qs, 1000, chosen)) == 412


def test_exact_counts_are_remembered_until_the_genome_changes(genome: Genome, monkeypatch: pytest.MonkeyPatch) -> None:
    """The packets' idf weights read each word's exact count once per generation, never a stale one."""
    counts = lexicon.ExactDocCounts(genome, genome.generation)
    asked: list[list[str]] = []
    real = genome.term_doc_counts

    def spy(terms):  # records which words reached fts5vocab
        asked.append(list(terms))
        return real(terms)

    monkeypatch.setattr(genome, "term_doc_counts", spy)
    assert counts.get(["widget", "sprocket", "absent"]) == {"widget": 212, "sprocket": 3}
    assert counts.get(["widget", "gadget"]) == {"widget": 212, "gadget": 212}
    assert asked == [["widget", "sprocket", "absent"], ["gadget"]]  # widget was remembered
    genome.replace_sources([SourceWrite(FileRecord("more.py", "demo", 10, 1, "h"), "more.py",
                                        [(gene(999, "one more widget"), None)])])
    assert counts.get(["widget"]) == {"widget": 213}  # an ingest: counted again


def test_capped_counts_are_remembered_per_generation_with_the_same_numbers(genome: Genome, small_caps: None,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Questions share common words: their capped counts are read once, and every cap gets what the index says."""
    reads: list[tuple[str, int]] = []
    real = genome.doc_count_upto

    def spy(expr, cap):  # records which counts reached the index
        reads.append((expr, cap))
        return real(expr, cap)

    cache = lexicon.CappedCounts(genome.generation)
    monkeypatch.setattr(genome, "doc_count_upto", spy)
    for cap in (50, 10, 300, 500, 5):
        want = {w: n for w, n in ((w, real(w, cap)) for w in ("widget", "sprocket", "absent")) if n}
        assert cache.get(genome, ["widget", "sprocket", "absent"], cap) == want
    # widget (212 genes) under cap 50 is "over": cap 10 needs no read, cap 300 does; then it is exact
    assert [c for e, c in reads if "widget" in e] == [50, 300]
    assert [c for e, c in reads if "sprocket" in e] == [50]  # 3: exact from the first read
    q = query.extract("which widget holds the sprocket")
    assert terms.weigh_terms(genome, q, cache=cache) == terms.weigh_terms(genome, q)
    before = len(reads)
    genome.replace_sources([SourceWrite(FileRecord("more.py", "demo", 10, 1, "h"), "more.py",
                                        [(gene(999, "one more sprocket"), None)])])
    assert cache.get(genome, ["sprocket"], 50) == {"sprocket": 4}  # an ingest: read again
    assert len(reads) == before + 1


def test_a_quoted_phrase_with_a_word_no_gene_holds_is_not_searched(genome: Genome,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A traceback's quoted path (`"src/sprocket/absent_3.py"`) matches nothing when one of its words is in no
    gene: it is left out of the search (its postings are never walked), and the scores are the same."""
    qs = query.extract('sprocket "sprocket absent_3" "widget number"')
    chosen = terms.weigh_terms(genome, qs)
    words = " OR ".join(f'"{w}"' for w in chosen.written)
    whole = dict(genome.fts_search(f'{words} OR "sprocket absent_3" OR "widget number"', 50))  # as written
    searched: list[str] = []
    real = genome.fts_search
    monkeypatch.setattr(genome, "fts_search", lambda expr, limit, column=None: searched.append(expr) or
                        real(expr, limit, column))
    assert fts_scorer(genome, qs, 50, chosen) == whole and len(whole) > 3
    assert searched == [f'{words} OR "widget number"']


def test_searches_are_remembered_until_the_genome_changes(genome: Genome, monkeypatch: pytest.MonkeyPatch) -> None:
    searches = lexicon.Searches(genome.generation)
    calls: list[str] = []
    real = genome.fts_search
    monkeypatch.setattr(genome, "fts_search", lambda expr, limit, column=None: calls.append(expr) or
                        real(expr, limit, column))
    first = searches.start(genome, '"sprocket"', 10)()
    assert searches.start(genome, '"sprocket"', 10)() == first == real('"sprocket"', 10) and len(first) == 3
    assert len(calls) == 1
    genome.replace_sources([SourceWrite(FileRecord("more.py", "demo", 10, 1, "h"), "more.py",
                                        [(gene(999, "one more sprocket"), None)])])
    assert len(searches.start(genome, '"sprocket"', 10)()) == 4 and len(calls) == 2  # an ingest: searched again


def test_merging_the_full_text_index_keeps_every_hit_and_score(tmp_path: Path) -> None:
    """One segment per write transaction, merged after the writes: the same genes with the same scores."""
    g = Genome(tmp_path / "m.db")
    for i in range(12):  # twelve transactions: twelve segments, more than FTS5 merges by itself
        g.replace_sources([SourceWrite(FileRecord(f"m{i}.py", "demo", 10, 1, "h"), f"m{i}.py",
                                       [(gene(i, f"widget sprocket number {i} gadget{i % 3}"), None)])])
    exprs = ['"widget"', '"sprocket" OR "gadget1"', '"number 3"']
    before = [g.fts_search(e, 20) for e in exprs]
    assert g.merge_full_text() > 1  # it wrote
    assert [g.fts_search(e, 20) for e in exprs] == before
    assert g.merge_full_text() == 1  # nothing left to merge
