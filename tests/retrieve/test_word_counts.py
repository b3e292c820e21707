"""A question's words are counted as the index holds them: each stemmed once, by the index's own tokenizer.

The silence gate and each packet item's relevance weigh a question's words by how many of the
project's genes hold them. Stemmed in Python and then handed to the index (which stems again), a
name like `region_invoice` counted 0 in a project where two files define and call it, and the
question looked off-topic; words whose Python stem differs from the index's ("topology") or names
looked up unstemmed (`timeout_ms`) counted 0 in a genome without projects.
"""

from __future__ import annotations

import math
from pathlib import Path

from helix_context.config import Settings
from helix_context.genome.fts_terms import fts5_terms
from helix_context.genome.schema import FTS_TOKENIZER, V1
from helix_context.manager import HelixContextManager
from helix_context.models import QuerySignals
from helix_context.retrieve.query import extract
from helix_context.retrieve.silence_gate import project_word_counts, scoped_term_weights

FILES = {
    "shop/invoices.py": "def region_invoice(order):\n    timeout_ms = 5\n    return order.total  # network topology\n",
    "shop/billing.py": "from invoices import region_invoice\n\n# assembly of the bill\nprint(region_invoice(1))\n",
    "shop/notes.md": "# Notes\n\nThe topology of the assembly line.\n",
    "garden/plants.py": "def water(plant):\n    return plant.soil\n",
}
# genes of the shop project holding each word, as a reader of the three files counts them
TRUTH = {"region_invoice": 2, "topology": 2, "timeout_ms": 1, "assembly": 2, "absent_word": 0}
QUESTION = "where is region_invoice computed with timeout_ms, and what topology or assembly applies?"


def write_tree(root: Path) -> tuple[Path, Path]:
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root / "shop", root / "garden"


def assert_counted_as_held(helix: HelixContextManager, projects: tuple[str, ...]) -> None:
    counts, genes = project_word_counts(helix.retriever, list(TRUTH), projects)
    assert {w: counts.get(w, 0) for w in TRUTH} == TRUTH, projects
    assert genes == (3 if projects else 4)
    qs: QuerySignals = extract(QUESTION)
    weights = scoped_term_weights(helix.retriever, qs, projects)
    # each word the project holds weighs its idf over the genes holding it (a word counted 0 would weigh
    # twice the highest idf, as a name the project lacks)
    for word, stem in (("region_invoice", "region_invoic"), ("timeout_ms", "timeout_m"),
                       ("topology", "topologi"), ("assembly", "assembli")):
        df = TRUTH[word]
        assert weights[stem] == math.log(1.0 + (genes - df + 0.5) / (df + 0.5)), (stem, weights)


def test_question_words_are_counted_as_the_index_holds_them(settings: Settings, tmp_path: Path) -> None:
    shop, garden = write_tree(tmp_path / "tree")
    helix = HelixContextManager(settings.replace(embedding={"enabled": False}, ner={"enabled": False}))
    try:
        helix.ingest_path(shop, project="shop")
        helix.ingest_path(garden, project="garden")
        assert_counted_as_held(helix, ("shop",))  # the project's own genes
        assert_counted_as_held(helix, ())  # the whole genome's (garden holds none of the words)
    finally:
        helix.close()


def test_query_words_are_tokenized_as_the_index_was_built() -> None:
    """The private tokenizer is the index's own (one constant, spelled out in the schema's first version)."""
    assert f'tokenize="{FTS_TOKENIZER}"' in V1
    assert fts5_terms(["Naïve", "region_invoice", "topology", "a.b", "..."]) == {
        "Naïve": ("naiv",), "region_invoice": ("region_invoic",), "topology": ("topolog",), "a.b": ("a", "b"), "...": ()}


def test_texts_sent_without_a_project_are_counted_the_same(settings: Settings) -> None:
    """Texts sent to /ingest (a corpus of documents, no files): the genome's vocabulary counts them."""
    helix = HelixContextManager(settings.replace(embedding={"enabled": False}, ner={"enabled": False}))
    try:
        for rel, text in FILES.items():
            helix.ingest(text, content_type="text", metadata={"title": rel})
        counts, genes = project_word_counts(helix.retriever, list(TRUTH), ())
        assert {w: counts.get(w, 0) for w in TRUTH} == TRUTH and genes == 4
    finally:
        helix.close()
