"""The training bundle's cut texts train exactly as the whole texts would.

Why it matters: bundle.py cuts each question and passage to the word pieces
train.py reads, so the pairs fit one upload to the GPU machine. If a cut ever
changed a piece (a word split differently at the cut, an unknown word), the
model would be trained on other text than the pairs its card names.
"""

from __future__ import annotations

import importlib.util
import json
import lzma
from pathlib import Path

from tokenizers import Tokenizer

from helix_context.ingest.embed_models import locate_model_dir

REPO = Path(__file__).resolve().parents[2]


def _bundle_module():
    spec = importlib.util.spec_from_file_location("bundle", REPO / "tools" / "train_embedder" / "bundle.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _train_ids(tok: Tokenizer, texts: list[str], cap: int) -> list[list[int]]:
    """What train.py's tokenize() reads of each text."""
    tok.enable_truncation(max_length=cap)
    tok.no_padding()
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=True)]


def _texts() -> list[str]:
    """Real code and prose of every length: the project's own modules, cut at many places."""
    texts = []
    for path in sorted((REPO / "helix_context").rglob("*.py"))[:40]:
        source = path.read_text(encoding="utf-8")
        texts += [source[i : i + n] for i in range(0, min(len(source), 6000), 700) for n in (40, 300, 1600)]
    texts += ["", "x", "naïve café 東京 tokenization " * 30, "a" * 500 + " tail", "unaffable " * 80,
              "def f():\n    return 1\n" * 50]
    return texts


def test_cut_texts_give_the_same_word_pieces_and_are_shorter(tmp_path: Path) -> None:
    bundle = _bundle_module()
    tok = Tokenizer.from_file(str(locate_model_dir() / "tokenizer.json"))
    texts = _texts()
    for cap in (32, 64, 256):
        cut = bundle.shortest_prefixes(tok, texts, cap)
        assert _train_ids(tok, cut, cap) == _train_ids(tok, texts, cap)
        assert all(text.startswith(c) for text, c in zip(texts, cut, strict=True))
        saved = sum(len(t) - len(c) for t, c in zip(texts, cut, strict=True))
        assert saved > sum(map(len, texts)) // 4, cap  # long texts are cut, not kept whole

    rows = [{"q": t[:200], "c": t, "src": "x.py:1"} for t in texts]
    src = tmp_path / "train.jsonl.xz"
    src.write_bytes(lzma.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    bundle.trim_pairs(src, tmp_path / "cut.jsonl.xz", tok, 32)
    cut_rows = [json.loads(line) for line in lzma.decompress((tmp_path / "cut.jsonl.xz").read_bytes()).splitlines()]
    assert len(cut_rows) == len(rows)
    assert _train_ids(tok, [r["c"] for r in cut_rows], 32) == _train_ids(tok, [r["c"] for r in rows], 32)
    assert _train_ids(tok, [r["q"] for r in cut_rows], 64) == _train_ids(tok, [r["q"] for r in rows], 64)
