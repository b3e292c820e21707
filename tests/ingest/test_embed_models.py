"""[embedding] model: plain MiniLM or the code-trained model, the fallback, and re-embedding after a change.

Real parts throughout: the shipped int8 models (helix_context/ingest/minilm/ and
code_minilm/), real genome files and the real app over HTTP.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from helix_context.config import Settings
from helix_context.genome.store import Genome
from helix_context.ingest import embed_models
from helix_context.ingest.embed import Embedder
from helix_context.ingest.reembed import Reembedder, start_reembed
TEXTS = ["Return the number of days between two dates.", "def parse_header(line): return line.split(':', 1)"]


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    return Embedder.load(model="minilm", max_tokens=128)


@pytest.fixture(scope="module")
def code() -> Embedder:
    return Embedder.load(model="code-minilm", max_tokens=128)


@pytest.fixture
def code_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of the shipped code model that the product uses instead (to damage it)."""
    folder = tmp_path / "code_minilm"
    shutil.copytree(embed_models.CODE_MODEL_DIR, folder)
    monkeypatch.setattr(embed_models, "CODE_MODEL_DIR", folder)
    return folder


def test_each_model_has_its_own_cache_file_and_vectors(minilm: Embedder, code: Embedder) -> None:
    assert (minilm.model_key, code.model_key) == ("minilm", "code-minilm")
    assert code.fallback is None and minilm.fallback is None
    assert minilm.model_name == "all-MiniLM-L6-v2-int8"
    assert code.model_name.startswith("code-MiniLM-L6-") and code.model_name != minilm.model_name
    for emb, folder in ((minilm, embed_models.MINILM_DIR), (code, embed_models.CODE_MODEL_DIR)):
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["model_name"] == emb.model_name
        assert emb.model_path == folder / embed_models.SHIPPED_ONNX
    a, b = minilm.embed(TEXTS), code.embed(TEXTS)
    assert a.shape == b.shape == (2, 384)
    assert np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-3)
    assert float(np.min(np.sum(a * b, axis=1))) < 0.98  # a different model, not the same weights again


def test_code_model_ranks_the_documented_function_first(code: Embedder) -> None:
    functions = [
        "def days_between(a, b):\n    return abs((b - a).days)",
        "def parse_header(line):\n    name, _, value = line.partition(':')\n    return name.strip(), value.strip()",
        "def mean(values):\n    return sum(values) / len(values)",
    ]
    q = code.embed(["Split an HTTP header line into its name and value."])[0]
    sims = code.embed(functions) @ q
    assert int(np.argmax(sims)) == 1, sims


def _one_fallback_line(caplog: pytest.LogCaptureFixture) -> str:
    lines = [r.getMessage() for r in caplog.records if "falling back" in r.getMessage()]
    assert len(lines) == 1, lines
    return lines[0]


def test_missing_artifact_falls_back_to_minilm(code_copy: Path, caplog: pytest.LogCaptureFixture) -> None:
    (code_copy / embed_models.SHIPPED_ONNX).unlink()
    with caplog.at_level(logging.WARNING):
        emb = Embedder.load(model="code-minilm")
    assert emb.model_key == "minilm" and emb.model_name == "all-MiniLM-L6-v2-int8"
    assert emb.fallback is not None and "lacks" in emb.fallback
    assert "lacks" in _one_fallback_line(caplog)
    assert emb.embed(TEXTS).shape == (2, 384)


def test_damaged_artifact_falls_back_to_minilm(code_copy: Path, caplog: pytest.LogCaptureFixture) -> None:
    weights = code_copy / embed_models.SHIPPED_ONNX
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the middle of a tensor
    weights.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING):
        emb = Embedder.load(model="code-minilm")
    assert emb.model_key == "minilm" and "damaged" in (emb.fallback or "")
    assert "damaged" in _one_fallback_line(caplog)


@pytest.mark.parametrize("config", ["{not json", "{}", "[1, 2]"])
def test_a_damaged_config_json_falls_back_to_minilm(code_copy: Path, config: str,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    """The model's config.json is not hashed by the manifest: a damaged one turned dense search off (a bare
    JSONDecodeError / KeyError in /health) instead of falling back to MiniLM."""
    (code_copy / "config.json").write_text(config)
    with caplog.at_level(logging.WARNING):
        emb = Embedder.load(model="code-minilm")
    assert emb.model_key == "minilm" and "config.json" in (emb.fallback or "")
    assert "reinstall helix-context" in _one_fallback_line(caplog)
    assert emb.embed(TEXTS).shape == (2, 384)


def test_unreadable_tensors_with_a_matching_manifest_fall_back(code_copy: Path, tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    """Garbage whose hash the manifest was edited to match: onnxruntime's load fails, not the server."""
    import hashlib

    weights = code_copy / embed_models.SHIPPED_ONNX
    weights.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}")
    manifest = json.loads((code_copy / "manifest.json").read_text())
    manifest["onnx_sha256"] = hashlib.sha256(weights.read_bytes()).hexdigest()
    (code_copy / "manifest.json").write_text(json.dumps(manifest))
    with caplog.at_level(logging.WARNING):
        emb = Embedder.load(model="code-minilm")
    assert emb.model_key == "minilm" and emb.fallback
    _one_fallback_line(caplog)


def test_unknown_model_name_is_refused_by_the_config(tmp_path: Path) -> None:
    from helix_context.config import ConfigError, load_config

    cfg = tmp_path / "helix.toml"
    cfg.write_text('[embedding]\nmodel = "bert-huge"\n')
    with pytest.raises(ConfigError, match="minilm"):
        load_config(cfg)


# -- the genome: vectors of one model per search, re-embedding after a change ------------------


def _genome_with_minilm_vectors(path: Path, minilm: Embedder, n: int = 12) -> tuple[Genome, list[int]]:
    from helix_context.genome.store import SourceWrite
    from helix_context.models import Gene, Provenance

    genome = Genome(path)
    assert genome.vector_model == "all-MiniLM-L6-v2-int8"
    texts = [f"def helper_{i}(x):\n    return x * {i} + {i * i}  # scale number {i}" for i in range(n)]
    genes = [Gene(gene_id=f"g{i}", content=t, content_type="code", language="python", source_path="/src/m.py",
                  project="p", start_line=i * 3 + 1, end_line=i * 3 + 2, symbol=f"helper_{i}",
                  provenance=Provenance(source_kind="file", observed_at=1.0, last_verified_at=1.0))
             for i, t in enumerate(texts)]
    vectors = minilm.embed(texts)
    genome.replace_sources([SourceWrite(record=None, path="/src/m.py", genes=list(zip(genes, vectors, strict=True)))])
    rowids = sorted(genome.genes_by_rowid(range(1, 10 * n)))
    return genome, rowids


def test_a_model_change_never_mixes_vectors_and_reembeds(tmp_path: Path, minilm: Embedder, code: Embedder) -> None:
    genome, rowids = _genome_with_minilm_vectors(tmp_path / "genome.db", minilm)
    try:
        index = genome.vector_index()
        assert len(index) == len(rowids)
        assert genome.stale_vector_count() == 0

        assert genome.use_vector_model(code.model_name) is True
        # nothing the old model made is searched, or counted as embedded
        assert genome.stale_vector_count() == len(rowids)
        assert len(genome.vector_index().search(code.embed_query("scale number 3"), 5).rowids) == 0
        assert genome.stats()["with_embeddings"] == 0 and genome.stats()["stale_embeddings"] == len(rowids)
        assert genome.embedding_of(rowids[0]) is None

        job = Reembedder(genome, code, load_settings().embedding, batch=4)
        first = genome.genes_with_stale_vectors(4)
        genome.set_embeddings([(g.rowid, v) for g, v in zip(first, code.embed([g.content for g in first]),
                                                             strict=True)])
        hits = genome.vector_index().search(code.embed_query("scale number 3"), 10)
        assert set(hits.rowids.tolist()) == {g.rowid for g in first}  # only the 4 re-embedded genes

        assert job.start() is True
        job.join(60)
        progress = job.progress()
        assert progress["state"] == "done" and progress["done"] == len(rowids) - 4, progress
        assert genome.stale_vector_count() == 0
        assert len(genome.vector_index().search(code.embed_query("scale number 3"), 50).rowids) == len(rowids)
        names = [r[0] for r in genome.conn.execute("SELECT name FROM vector_models")]
        assert names == [code.model_name]  # retention: the unused model's id is gone
    finally:
        genome.close()


def test_the_active_model_survives_reopening(tmp_path: Path, minilm: Embedder, code: Embedder) -> None:
    genome, _ = _genome_with_minilm_vectors(tmp_path / "genome.db", minilm, n=3)
    genome.use_vector_model(code.model_name)
    genome.close()
    again = Genome(tmp_path / "genome.db")
    try:
        assert again.vector_model == code.model_name and again.stale_vector_count() == 3
        job = start_reembed(again, minilm, load_settings().embedding)  # back to MiniLM: nothing stale then
        assert job is not None
        job.join(30)
        assert again.vector_model == minilm.model_name and again.stale_vector_count() == 0
    finally:
        again.close()


def load_settings() -> Settings:
    """The real config, as the fixtures load it."""
    from helix_context.config import load_config

    return load_config()


def test_server_reports_fallback_and_reembed_progress(tmp_path: Path, settings, server_factory, minilm: Embedder,
                                                      code_copy: Path) -> None:
    genome, rowids = _genome_with_minilm_vectors(settings.genome_path, minilm, n=6)
    genome.close()
    (code_copy / embed_models.SHIPPED_ONNX).unlink()  # the configured model is broken
    server = server_factory(settings.replace(embedding={"model": "code-minilm"}, ner={"enabled": False}))
    with server.client() as client:
        deadline = time.monotonic() + 60  # the server loads its parts in the background after start
        while True:
            health = client.get("/health").json()
            part = health["parts"]["embeddings"]
            if part["status"] != "available" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert part["status"] == "fallback" and "code-minilm unavailable" in part["detail"], part
        assert "embeddings" in health["degraded"]
        client.post("/context", json={"query": "scale number 2"})  # the embedder is loaded by now
        health = client.get("/health").json()
        assert health["reembed"]["state"] == "idle"  # the vectors are MiniLM's already: nothing to redo


def test_server_reembeds_after_a_model_change(settings, server_factory, minilm: Embedder, code: Embedder) -> None:
    genome, rowids = _genome_with_minilm_vectors(settings.genome_path, minilm, n=20)
    genome.close()
    server = server_factory(settings.replace(embedding={"model": "code-minilm"}, ner={"enabled": False}))
    with server.client() as client:
        deadline = time.monotonic() + 60
        while True:
            health = client.get("/health").json()
            if (health["reembed"] or {}).get("state") == "done" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert health["parts"]["embeddings"]["status"] == "active"
        assert health["parts"]["embeddings"]["detail"] == code.model_name
        assert health["reembed"]["total"] == len(rowids) and health["reembed"]["done"] == len(rowids), health
        stats = client.get("/stats").json()
        assert stats["stale_embeddings"] == 0 and stats["with_embeddings"] == len(rowids)
        assert stats["vector_model"] == code.model_name
