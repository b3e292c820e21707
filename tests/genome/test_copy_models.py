"""`helix genome copy` keeps which embedding model made the vectors (genome/copy.py).

A copy used to record no model, so a new file (or database) took the default, MiniLM: a genome embedded with the
code-trained model came out with its vectors labelled MiniLM, and a backend on MiniLM then compared its questions
with another model's vectors. And a genome copied while its re-embed was under way lost the vectors of the genes
still waiting. Real parts: both shipped models, the `helix` command in another process, SQLite files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from helix_context.config import load_config
from helix_context.genome.store import Genome
from helix_context.ingest.embed import Embedder
from helix_context.ingest.reembed import embed_genes
from tests.conftest import REPO
from tests.stdlib_logging import build_genome, copy_logging


def _copy(to: Path, model: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HELIX_EMBEDDING_MODEL": model, "HELIX_NER_ENABLED": "false"}
    return subprocess.run([sys.executable, "-m", "helix_context.cli", "genome", "copy", "--to", str(to)],
                          capture_output=True, text=True, timeout=300, env=env, check=False)


def test_a_copy_keeps_the_model_of_its_vectors_and_embeds_those_a_reembed_had_not_reached(tmp_path: Path) -> None:
    genes = build_genome(copy_logging(tmp_path / "tree").parent, "minilm")
    source = Genome(load_config().genome_path)
    code = Embedder.load(model="code-minilm", max_tokens=128)
    try:  # what a backend switched to the code-trained model does, stopped half-way through its re-embed
        assert source.use_vector_model(code.model_name)
        waiting = source.genes_with_stale_vectors(10_000)
        assert len(waiting) == genes
        embed_genes(source, code, load_config().embedding, waiting[: genes // 2])
        assert source.stale_vector_count() == genes - genes // 2
    finally:
        source.close()

    done = _copy(tmp_path / "copy.db", "code-minilm")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["vector_model"] == code.model_name
    assert summary["left_to_embed"] == genes - genes // 2 and summary["embedded"] == summary["left_to_embed"]

    copied = Genome(tmp_path / "copy.db")
    try:
        assert copied.vector_model == code.model_name  # not the default MiniLM
        assert copied.stale_vector_count() == 0 and copied.genes_missing_embeddings(10) == []
        # the copy's vectors are the code-trained model's: a gene's vector is what that model makes of its text
        from helix_context.ingest.embed_text import embedding_text, embedding_tokens

        gene = next(copied.iter_genes())
        again = code.embed([embedding_text(gene)], [embedding_tokens(gene, load_config().embedding)])[0]
        assert float(np.dot(copied.embedding_of(gene.rowid or 0), again)) > 0.97  # type: ignore[arg-type]
    finally:
        copied.close()
        code.close()


def test_a_copy_made_by_a_machine_on_another_model_says_what_it_left_without_a_vector(tmp_path: Path) -> None:
    genes = build_genome(copy_logging(tmp_path / "tree").parent, "minilm")
    source = Genome(load_config().genome_path)
    try:
        assert source.use_vector_model(Embedder.load(model="code-minilm", max_tokens=128).model_name)
    finally:
        source.close()
    done = _copy(tmp_path / "copy.db", "minilm")  # this machine's model is not the genome's
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["left_to_embed"] == genes and summary["embedded"] == 0
    assert f"{genes} chunks held vectors of another model" in done.stderr
    assert "POST /admin/kv-backfill" in done.stderr
