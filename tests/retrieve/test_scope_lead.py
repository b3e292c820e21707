"""Which project leads a question asked without a scope, and what each item's relevance is weighed against.

The leader is chosen from plain data (retrieve/scope.py's `lead`), so the rules are checked on
rankings written out here; the relevance of packet items is checked on real genomes, one holding
two projects and one holding the scoped project alone.
"""

from __future__ import annotations

from pathlib import Path

from helix_context.config import Settings
from helix_context.manager import HelixContextManager
from helix_context.retrieve.scope import LEAD_MARGIN, lead
from helix_context.weigh.relevance import gene_words, idf_weights, query_word_forms, relevance

# (rowid, fused score), best first
DOCS_PAGE = {10: "docs/flashing.rst", 11: "docs/flashing.rst", 12: "docs/flashing.rst", 13: "docs/flashing.rst",
             14: "docs/quickstart.rst"}


def test_a_long_file_cut_into_many_genes_counts_once() -> None:
    """One docs page's paragraphs ranked 2nd to 5th must not outvote the code file that answers (1st)."""
    ranked = [(1, 2.2), (10, 1.9), (11, 1.8), (12, 1.7), (13, 1.6), (14, 1.2), (2, 0.7), (3, 0.6)]
    projects = {1: "web", 2: "web", 3: "web", **dict.fromkeys(DOCS_PAGE, "docs")}
    files = {1: "web/helpers.py", 2: "web/app.py", 3: "web/ctx.py", **DOCS_PAGE}
    assert lead(ranked, projects, files).project == "web"
    # the same ranking with each chunk taken for its own file: the page's paragraphs would win
    assert lead(ranked, projects, {}).project == "docs"


def test_many_middling_matches_do_not_outvote_one_strong_answer() -> None:
    """A project whose common words are the question's words fills the ranking below the answer."""
    ranked = [(1, 2.6), *((100 + i, 1.3 - 0.01 * i) for i in range(12)), (2, 0.9)]
    projects = {1: "cli", 2: "cli", **{100 + i: "docs" for i in range(12)}}
    files = {1: "cli/utils.py", 2: "cli/core.py", **{100 + i: f"docs/page{i}.md" for i in range(12)}}
    found = lead(ranked, projects, files)
    assert found.project == "cli"
    assert dict(found.evidence)["cli"] > dict(found.evidence)["docs"]


def test_a_second_project_leads_when_its_files_are_stronger_near_the_top() -> None:
    """The top gene alone does not decide: three strong files of one project beat one of another."""
    ranked = [(1, 2.0), (20, 1.95), (21, 1.9), (22, 1.85), (2, 0.5)]
    projects = {1: "a", 2: "a", 20: "b", 21: "b", 22: "b"}
    files = {1: "a/x.py", 2: "a/y.py", 20: "b/p.py", 21: "b/q.py", 22: "b/r.py"}
    assert lead(ranked, projects, files).project == "b"


def test_another_projects_gene_stays_only_when_clearly_stronger_and_genes_of_no_project_always_stay() -> None:
    """`a` leads on three strong files; `b`'s one gene stays only while it outscores a's best by LEAD_MARGIN."""
    projects = {1: "b", 2: "a", 3: "a", 4: "a", 5: None, 6: "b"}
    files = {1: "b/one.py", 2: "a/one.py", 3: "a/two.py", 4: "a/three.py", 6: "b/two.py"}
    a_files = [(2, 2.0), (3, 1.98), (4, 1.96)]
    above = [(1, LEAD_MARGIN * 2.0 * 1.04), *a_files, (6, 1.0), (5, 0.3)]
    found = lead(above, projects, files)
    assert found.project == "a"
    assert found.kept == (1, 2, 3, 4, 5) and found.others == 1
    below = [(1, LEAD_MARGIN * 2.0 * 0.98), *a_files, (6, 1.0), (5, 0.3)]
    found = lead(below, projects, files)
    assert found.project == "a"
    assert found.kept == (2, 3, 4, 5) and found.others == 0


def test_nothing_to_choose_between_without_projects() -> None:
    ranked = [(1, 1.0), (2, 0.5)]
    found = lead(ranked, {}, {})
    assert found.project is None and found.kept == (1, 2)


SHOP_FILE = '''def issue_invoice_{i}(order):
    """Issue the invoice for shop order number {i} and email the invoice to the customer."""
    return order.total
'''

GARDEN = {
    "orders.py": '''def order_tomato_seedlings(supplier, count):
    """Order tomato seedlings from the nursery and file the supplier's invoice."""
    return supplier.quote(count)
''',
    "watering.py": '''def water_tomato_beds(beds):
    """Water the tomato beds every morning before the sun is high."""
    return [bed.soak() for bed in beds]
''',
    "planting.py": '''def plant_out_seedlings(seedlings, bed):
    """Plant seedlings out in the bed once the frost is over."""
    return bed.place(seedlings)
''',
    "compost.py": '''def turn_compost(heap):
    """Turn the compost heap every fortnight."""
    return heap.turn()
''',
}
QUERY = "tomato seedlings invoice"


def _garden(root: Path) -> Path:
    garden = root / "garden"
    garden.mkdir(parents=True)
    for name, text in GARDEN.items():
        (garden / name).write_text(text, encoding="utf-8")
    return garden


def _relevances(helix: HelixContextManager, project: str) -> dict[str, float]:
    packet = helix.packet(QUERY, "explain", project=project)
    assert packet.items, packet.notes
    return {Path(item.source_id).name: item.relevance for item in packet.items}


def test_item_relevance_is_weighed_against_the_scoped_projects_own_statistics(
        settings: Settings, tmp_path: Path) -> None:
    """Scoped to `garden`, each item's relevance is what it would be with the garden indexed alone,
    though `shop` (in the same genome) uses "invoice" in every file."""
    shop = tmp_path / "both" / "shop"
    shop.mkdir(parents=True)
    for i in range(12):
        (shop / f"billing_{i}.py").write_text(SHOP_FILE.format(i=i), encoding="utf-8")
    garden = _garden(tmp_path / "both")
    both = HelixContextManager(settings.replace(genome={"path": str(tmp_path / "both.db")}))
    alone = HelixContextManager(settings.replace(genome={"path": str(tmp_path / "alone.db")}))
    try:
        both.ingest_path(shop, project="shop")
        both.ingest_path(garden, project="garden")
        alone.ingest_path(_garden(tmp_path / "alone"), project="garden")
        scoped = _relevances(both, "garden")
        assert set(scoped) <= set(GARDEN) and len(scoped) >= 2
        genes = {Path(it.gene.source_path or "").name: it.gene
                 for it in both.retriever.retrieve(QUERY, project="garden", gate=False, max_genes=10).items}
        forms = query_word_forms(both.retriever.retrieve(QUERY, gate=False).query)

        def weights(helix: HelixContextManager) -> dict[str, float]:
            counts = helix.retriever.doc_counts.get(list(forms.values()))
            return idf_weights(list(forms), {s: counts.get(w, 0) for s, w in forms.items()},
                               helix.genome.live_gene_count())

        solo, whole = weights(alone), weights(both)
        for name, rel in scoped.items():
            assert abs(rel - relevance(solo, gene_words(genes[name]))) < 1e-6, (name, scoped)
        # the test can tell: the whole genome's counts ("invoice" in every shop file) weigh some item otherwise
        assert any(abs(relevance(whole, gene_words(genes[name])) - rel) > 0.05 for name, rel in scoped.items())
        # and the garden alone, asked the same, agrees on what both list
        for name, rel in _relevances(alone, "garden").items():
            assert name not in scoped or abs(scoped[name] - rel) < 1e-6
    finally:
        both.close()
        alone.close()
