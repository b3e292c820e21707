"""Answers while the genome re-embeds after `[embedding] model` changes (retrieve/dense_fill.py).

The genome searches only the vectors of the model in use and re-embeds the others in the background. Until that
is done, a gene the job had not reached had no dense evidence at all while the genes it had reached did, so for
a question in words the answer fell behind whatever the job happened to re-embed first. Now the best lexical
candidates that wait are embedded at query time. Real ingest of the standard library's `logging` package, a real
SQLite genome and both shipped models; the re-embed is done by hand so that the answer's gene is the one left
waiting, and the question is also asked the way the code before did (no gene counted as waiting), where the
answer is not among the first ten, so the test fails if the fill stops working.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helix_context.config import Settings
from helix_context.genome.store import Genome
from helix_context.ingest.embed import Embedder
from helix_context.ingest.embed_text import embedding_text, embedding_tokens
from helix_context.manager import Part
from helix_context.models import Gene
from helix_context.retrieve.retriever import Retriever
from tests.stdlib_logging import build_genome, copy_logging

QUESTION = "rotate log files when they reach a certain size"


def _rank(genome: Genome, settings: Settings, embedder: Embedder, rowid: int) -> int | None:
    """Where the gene `rowid` stands among the genes /context would deliver (None: not in the first ten)."""
    part = Part("embeddings", lambda: (embedder, "active", ""))
    found = Retriever(genome, settings, embedder_part=part).retrieve(QUESTION, max_genes=10, gate=False)
    return next((i for i, item in enumerate(found.items, 1) if item.gene.rowid == rowid), None)


def _embed(genome: Genome, embedder: Embedder, genes: list[Gene], settings: Settings) -> None:
    vectors = embedder.embed([embedding_text(g) for g in genes], [embedding_tokens(g, settings.embedding) for g in genes])
    genome.set_embeddings([(g.rowid, v) for g, v in zip(genes, vectors, strict=True)])


@pytest.fixture(scope="module")
def code_model() -> Embedder:
    return Embedder.load(model="code-minilm", max_tokens=128)


def test_a_gene_the_reembed_has_not_reached_still_answers(tmp_path: Path, settings: Settings,
                                                         code_model: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    root = copy_logging(tmp_path / "src")
    build_genome(root.parent, "minilm")
    tree = ast.parse((root / "handlers.py").read_text())
    line = next(n.lineno for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RotatingFileHandler")

    genome = Genome(settings.genome_path)
    try:
        assert genome.use_vector_model(code_model.model_name) is True  # what a restart with the new model does
        waiting = genome.genes_with_stale_vectors(10_000)
        answer = next(g for g in waiting if (g.source_path or "").endswith("handlers.py")
                      and g.start_line <= line <= g.end_line)
        _embed(genome, code_model, [g for g in waiting if g.rowid != answer.rowid], settings)
        assert genome.stale_vectors_among([g.rowid for g in waiting]) == [answer.rowid]
        assert genome.has_stale_vectors()

        during = _rank(genome, settings, code_model, answer.rowid)
        with monkeypatch.context() as before:  # the code before: no gene counted as waiting for a re-embed
            before.setattr(genome, "has_stale_vectors", lambda: False)
            assert _rank(genome, settings, code_model, answer.rowid) is None

        _embed(genome, code_model, [answer], settings)
        genome.forget_unused_vector_models()  # what the job does at its end
        assert not genome.has_stale_vectors()
        after = _rank(genome, settings, code_model, answer.rowid)
        assert after is not None and after <= 3
        assert during == after  # while the re-embed runs, the answer stands where it will once it is done
    finally:
        genome.close()
