"""The trained model's digest pairs (tools/train_embedder/shapes.py) are what the product embeds.

Why it matters: the shipped code-minilm was trained on these passages; if they stopped matching
`embed_text.embedding_text` of a real gene, or kept the question's own sentence (so the model
learns to copy), the model would be trained for text it never sees.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from helix_context.config import Settings
from helix_context.ingest.embed_text import embedding_text
from helix_context.ingest.genes import make_genes
from helix_context.models import Provenance

TOOLS = Path(__file__).resolve().parents[2] / "tools" / "train_embedder"

MODULE = '''"""Mail helpers."""


def make_msgid(domain=None):
    """Generate a unique Message-ID header value.

    The domain defaults to the local host name.
    """
    stamp = time.time()
    return f"<{stamp}@{domain}>"


def unquote(text):
    """Remove quotes from a string.

    Only a matching pair at both ends is removed.
    """
    if len(text) > 1 and text[0] == text[-1] == '"':
        return text[1:-1]
    return text
'''


@pytest.fixture(scope="module")
def shapes():
    sys.path.insert(0, str(TOOLS))
    try:
        import mine
        import shapes as module
    finally:
        sys.path.remove(str(TOOLS))
    return module, mine


def _rows(site: Path, mine) -> list[dict]:
    return [{"q": q, "c": c, "src": f"mail/utils.py:{line}"} for q, c, line in mine.mine_file(site / "mail" / "utils.py")]


def test_span_and_gene_passages_are_the_product_digest_without_the_question(tmp_path, shapes):
    module, mine = shapes
    (tmp_path / "mail").mkdir()
    (tmp_path / "mail" / "utils.py").write_text(MODULE)
    settings = Settings(home=tmp_path, config_path=None)
    rows = _rows(tmp_path, mine)
    assert [r["q"] for r in rows] == ["Generate a unique Message-ID header value.", "Remove quotes from a string."]

    pairs = module.digest_pairs(tmp_path, rows, settings=settings, sentence_end=mine._SENTENCE_END, with_genes=True)
    spans = {p["q"]: p["c"] for p in pairs if p["shape"] == "span"}
    genes = {p["q"]: p["c"] for p in pairs if p["shape"] == "gene"}
    assert set(spans) == {r["q"] for r in rows}

    msgid = spans["Generate a unique Message-ID header value."]
    assert msgid.startswith("mail utils | make msgid\n")  # where it lives and its name, as words
    assert "Generate a unique" not in msgid  # the question's own sentence is not there to copy
    assert "The domain defaults to the local host name." in msgid  # the rest of the docstring is
    assert "stamp = time.time()" in msgid and "unquote" not in msgid  # its own lines only

    # the product's own digest of the same gene, with the sentence removed, is the gene passage
    genes_made = make_genes(MODULE, settings=settings, tagger=None, path="mail/utils.py", content_type="code",
                            language="python", project=None, provenance=Provenance())
    blended = [g for g in genes_made if len(g.symbols) >= 2]
    assert len(blended) == 1  # a small file is one gene holding both functions
    assert set(genes) == set(spans)
    product = embedding_text(blended[0])
    passage = genes["Remove quotes from a string."]
    assert "Remove quotes from a string." in product and "Remove quotes from a string." not in passage
    assert passage.split("\n", 1)[0] == product.split("\n", 1)[0]  # same head: path and names as words
    assert "Generate a unique Message-ID header value." in passage  # the other function's sentence stays

    held = module.digest_pairs(tmp_path, rows, settings=settings, sentence_end=mine._SENTENCE_END, with_genes=False)
    assert {p["shape"] for p in held} == {"span"} and len(held) == len(rows)  # one passage per held-out question


def test_a_question_not_at_the_start_of_its_docstring_gives_no_pair(shapes):
    module, mine = shapes
    assert module.docstring_without("Alpha beta gamma. More text.", "Alpha beta gamma.", mine._SENTENCE_END) \
        == "More text."
    assert module.docstring_without("Other words here. More.", "Alpha beta gamma.", mine._SENTENCE_END) is None
