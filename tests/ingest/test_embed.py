"""Tests for helix_context.ingest.embed (MiniLM on onnxruntime, no torch).

The shipped int8 model (helix_context/ingest/minilm/) is what every test
embeds with; the builder's fp32 graph is built once per session from the
registry's weights and checked against reference vectors computed with torch
(benchmarks/make_minilm_reference.py). tests/ingest/test_shipped_models.py
covers the shipped files themselves.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from helix_context.ingest import embed, embed_models
from helix_context.ingest.embed import Embedder
from helix_context.ingest.embed_models import EmbedderUnavailable
from helix_context.ingest.onnx_graph import build_encoder_model
from helix_context.ingest.weights import read_safetensors

REFERENCE = Path(__file__).resolve().parents[1] / "fixtures" / "minilm_reference.json"


@pytest.fixture(scope="session")
def int8() -> Embedder:
    return Embedder.load()


@pytest.fixture(scope="session")
def fp32_model_bytes() -> bytes:
    """The builder's fp32 graph, from the registry's weights (the test extras install them and onnx)."""
    return build_encoder_model().SerializeToString()


@pytest.fixture(scope="session")
def fp32(fp32_model_bytes: bytes) -> Embedder:
    return Embedder.from_onnx(fp32_model_bytes, max_tokens=256, model_name="fp32")


@pytest.fixture(scope="session")
def reference() -> tuple[list[str], np.ndarray]:
    doc = json.loads(REFERENCE.read_text(encoding="utf-8"))
    texts = [item["text"] for item in doc["items"]]
    vectors = np.array([item["embedding"] for item in doc["items"]], dtype=np.float32)
    return texts, vectors


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


# -- what a caller sees -------------------------------------------------------


def test_embed_returns_unit_vectors_of_model_dimension(int8: Embedder) -> None:
    texts = ["def add(a, b):\n    return a + b\n", "Install with pip.", "x" * 3000]
    vecs = int8.embed(texts)
    assert int8.dim == 384
    assert int8.model_name == "all-MiniLM-L6-v2-int8"
    assert vecs.shape == (3, 384)
    assert vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    query = int8.embed_query("adding two numbers")
    assert query.shape == (384,) and query.dtype == np.float32
    assert np.isclose(np.linalg.norm(query), 1.0, atol=1e-5)


def test_empty_input_and_empty_strings(int8: Embedder) -> None:
    none = int8.embed([])
    assert none.shape == (0, 384) and none.dtype == np.float32
    blank = int8.embed(["", "   "])
    assert blank.shape == (2, 384)
    assert np.isfinite(blank).all()
    assert np.allclose(np.linalg.norm(blank, axis=1), 1.0, atol=1e-5)


def test_a_bare_string_is_refused(int8: Embedder) -> None:
    with pytest.raises(TypeError):
        int8.embed("one string, not a list")  # type: ignore[arg-type]  # the wrong type is the input under test


def test_paraphrase_scores_closer_than_unrelated_text(int8: Embedder) -> None:
    a, para, other = int8.embed([
        "A man is playing a guitar.",
        "Someone is strumming a guitar on stage.",
        "The stock market fell sharply on Tuesday.",
    ])
    assert a @ para > a @ other + 0.2
    code = int8.embed([
        "def load_settings(path):\n    with open(path) as fh:\n        return json.load(fh)\n",
        "def area(radius):\n    return math.pi * radius ** 2\n",
    ])
    query = int8.embed_query("read the JSON configuration file")
    assert query @ code[0] > query @ code[1]


def test_batching_and_length_sorting_keep_input_order(fp32_model_bytes: bytes) -> None:
    # fp32, so batched rows must equal one-at-a-time rows (int8 quantises each
    # batch's activations with its own scale, which moves vectors slightly).
    small_batches = Embedder.from_onnx(fp32_model_bytes, max_tokens=64, batch_size=3)
    texts = [("word " * n).strip() or "empty" for n in (1, 40, 5, 90, 2, 17, 60, 3)]
    texts += ["import os", "class Tree:\n    pass"]
    batched = small_batches.embed(texts)
    alone = np.stack([small_batches.embed_query(t) for t in texts])
    assert np.allclose(batched, alone, atol=1e-5)


def test_text_is_truncated_to_max_tokens(fp32_model_bytes: bytes) -> None:
    short = Embedder.from_onnx(fp32_model_bytes, max_tokens=16)
    head = "the quick brown fox jumps over the lazy dog " * 4
    a, b = short.embed([head + "alpha beta gamma", head + "completely different tail"])
    assert np.allclose(a, b, atol=1e-6)
    # never above the 256 positions the model was trained with
    assert Embedder.from_onnx(fp32_model_bytes, max_tokens=10_000).max_tokens == 256


def test_each_text_can_have_its_own_word_piece_limit(fp32_model_bytes: bytes) -> None:
    emb = Embedder.from_onnx(fp32_model_bytes, max_tokens=64)
    eight = Embedder.from_onnx(fp32_model_bytes, max_tokens=8)
    text = "the quick brown fox jumps over the lazy dog and runs far away into the woods " * 3
    short, full, capped = emb.embed([text, text, text], [8, 64, 10_000])
    assert np.allclose(short, eight.embed_query(text), atol=1e-5)
    assert np.allclose(full, emb.embed_query(text), atol=1e-5)
    assert np.allclose(capped, full, atol=1e-6)  # never more than the embedder's own max_tokens
    assert not np.allclose(short, full, atol=1e-3)
    with pytest.raises(ValueError, match="2 entries for 3 texts"):
        emb.embed([text, text, text], [8, 64])


def test_cutting_long_texts_before_tokenising_never_changes_what_the_model_reads(
        fp32_model_bytes: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    # Long texts are cut to a few characters per kept word piece before tokenising (the
    # tokenizer was a large share of ingest time); the vectors must be those of the whole text.
    texts = [
        "def handler(request):\n    return route(request.path.strip('/'))\n" * 40,
        "Plain prose about retrieval and ranking, with commas, quotes 'here' and dashes - " * 40,
        "token=" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo" * 60 + " tail words after a long run",
        "\t".join(["tab separated", "columns"] * 200),
        "数据检索与排序 " * 200,
        "short text",
    ]
    limits = [8, 32, 64, 16, 32, 64]
    emb = Embedder.from_onnx(fp32_model_bytes, max_tokens=64, batch_size=2)
    cut = emb.embed(texts, limits)
    monkeypatch.setattr(embed, "_CHARS_PER_PIECE", 10**9)  # tokenise every text whole
    whole = emb.embed(texts, limits)
    assert np.array_equal(cut, whole)


def test_parallel_batches_give_the_same_vectors_as_one_at_a_time(fp32_model_bytes: bytes) -> None:
    texts = [f"gene number {i} talks about {'cache ' * (i % 7)}eviction" for i in range(40)]
    serial = Embedder.from_onnx(fp32_model_bytes, max_tokens=64, batch_size=4, threads=1).embed(texts)
    parallel = Embedder.from_onnx(fp32_model_bytes, max_tokens=64, batch_size=4, threads=3)
    try:
        assert np.array_equal(parallel.embed(texts), serial)
        # ingest runs one call per core itself, each kept on its calling thread
        assert np.array_equal(parallel.embed(texts, spread=False), serial)
    finally:
        parallel.close()


# -- the graph is right --------------------------------------------------------


def test_fp32_graph_matches_torch_reference(fp32: Embedder, reference) -> None:
    texts, expected = reference
    got = fp32.embed(texts)
    cos = _cos(got, expected)
    assert cos.min() > 0.999, dict(zip(texts, cos.round(5)))


def test_int8_model_stays_close_to_reference(reference) -> None:
    texts, expected = reference
    int8_256 = Embedder.load(max_tokens=256)
    cos = _cos(int8_256.embed(texts), expected)
    assert cos.min() > 0.9, dict(zip(texts, cos.round(4)))


# -- when the model is not there -----------------------------------------------


def test_a_missing_shipped_model_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "minilm"
    empty.mkdir()
    monkeypatch.setattr(embed_models, "MINILM_DIR", empty)
    with pytest.raises(EmbedderUnavailable) as err:
        Embedder.load()
    assert "model.int8.onnx" in str(err.value) and "reinstall helix-context" in str(err.value)


# -- the safetensors reader ------------------------------------------------------


def test_read_safetensors_without_the_safetensors_package(tmp_path: Path) -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([7, -8], dtype=np.int64)
    header = {
        "__metadata__": {"format": "pt"},
        "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, a.nbytes]},
        "b": {"dtype": "I64", "shape": [2], "data_offsets": [a.nbytes, a.nbytes + b.nbytes]},
    }
    raw = json.dumps(header).encode()
    path = tmp_path / "tiny.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + a.tobytes() + b.tobytes())
    tensors = read_safetensors(path)
    assert set(tensors) == {"a", "b"}
    assert np.array_equal(tensors["a"], a) and tensors["a"].dtype == np.float32
    assert np.array_equal(tensors["b"], b) and tensors["b"].dtype == np.int64
