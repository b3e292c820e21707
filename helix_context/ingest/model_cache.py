"""The int8 model cache: one ONNX file per model in the models folder, with a JSON sidecar.

Why a sidecar: building and quantising takes seconds, so the file is kept, and
the sidecar says what it was built from (model key and name, the tensors'
hash, the builder version). A cache built from other tensors or by another
builder version is rebuilt; concurrent builders each write a private temp file
and ``os.replace`` it into place, so a reader never sees a half-written model.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from helix_context.ingest.embed_models import EmbedderUnavailable, ModelSource, locate_model_dir, minilm_source
from helix_context.ingest.onnx_graph import BUILDER_VERSION, build_int8_model

__all__ = ["ensure_int8_model"]

log = logging.getLogger("helix_context.ingest.embed")

_hash_memo: dict[tuple[str, int, int], str] = {}
_hash_lock = threading.Lock()


def _sha256_file(path: Path) -> str:
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    with _hash_lock:
        cached = _hash_memo.get(key)
    if cached is not None:
        return cached
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    value = digest.hexdigest()
    with _hash_lock:
        _hash_memo[key] = value
    return value


def _read_sidecar(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _is_fresh(sidecar: dict[str, Any] | None, source_sha: str) -> bool:
    return (
        sidecar is not None
        and sidecar.get("source_sha256") == source_sha
        and sidecar.get("builder_version") == BUILDER_VERSION
    )


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        _unlink_quietly(Path(tmp))
        raise


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def ensure_int8_model(models_dir: Path, model: Path | ModelSource | None = None) -> Path:
    """Path of an up-to-date int8 ONNX file of ``model`` in ``models_dir``, building it if needed.

    ``model``: a ModelSource, or a MiniLM folder (None: the installed package).

    The cache is stale when the file or its sidecar is missing, or the sidecar
    names another source hash or builder version. Concurrent builders each
    write a private temp file and ``os.replace`` it into place, so a reader
    never sees a half-written model.
    """
    source = model if isinstance(model, ModelSource) else minilm_source(
        Path(model) if model else locate_model_dir())
    models_dir = Path(models_dir)
    try:
        models_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EmbedderUnavailable(f"cannot create the models folder {models_dir}: {exc}") from exc
    onnx_path = models_dir / f"{source.model_name}.onnx"
    sidecar_path = models_dir / f"{source.model_name}.json"
    source_sha = _sha256_file(source.weights)

    sidecar = _read_sidecar(sidecar_path)
    if onnx_path.is_file() and _is_fresh(sidecar, source_sha):
        return onnx_path

    reason = ("missing" if not onnx_path.is_file() or sidecar is None
              else "stale (source or builder changed)")
    log.info("embedding model cache %s is %s; building it from %s", onnx_path, reason, source.weights)
    started = time.perf_counter()
    fd, tmp_name = tempfile.mkstemp(dir=models_dir, prefix=f".{onnx_path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        build_int8_model(source, tmp)
        os.chmod(tmp, 0o644)  # mkstemp makes it owner-only
        os.replace(tmp, onnx_path)
    except EmbedderUnavailable:
        raise
    except OSError as exc:
        # Windows refuses to replace a file another process holds open; if
        # that process built the same model meanwhile, its file is as good.
        if onnx_path.is_file() and _is_fresh(_read_sidecar(sidecar_path), source_sha):
            log.info("another process built %s meanwhile; using it", onnx_path)
            return onnx_path
        raise EmbedderUnavailable(f"cannot write the embedding model {onnx_path}: {exc}") from exc
    except Exception as exc:
        raise EmbedderUnavailable(f"building the int8 embedding model failed: {exc!r}") from exc
    finally:
        _unlink_quietly(tmp)
    seconds = time.perf_counter() - started
    try:
        import onnxruntime

        ort_version = onnxruntime.__version__
    except ImportError:  # pragma: no cover - build_int8_model needs it
        ort_version = None
    meta = {
        "model_key": source.key,
        "model_name": source.model_name,
        "source": source.description,
        "source_sha256": source_sha,
        "builder_version": BUILDER_VERSION,
        "onnx_sha256": _sha256_file(onnx_path),
        "onnxruntime_version": ort_version,
        "quantization": "dynamic int8: QInt8 per-channel weights of MatMul and Gather",
        "build_seconds": round(seconds, 3),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    try:
        _atomic_write_bytes(sidecar_path, (json.dumps(meta, indent=2) + "\n").encode("utf-8"))
    except OSError as exc:  # the model still works; it is rebuilt next time
        log.warning("cannot write %s (%s); the model will be rebuilt on next load",
                    sidecar_path, exc)
    log.info("built %s (%.1f MB) in %.2f s", onnx_path, onnx_path.stat().st_size / 1e6, seconds)
    return onnx_path
