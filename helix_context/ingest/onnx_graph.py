"""The BERT encoder as an ONNX graph, written with onnx.helper from safetensors tensors.

Why: no package ships a dynamic-shape ONNX file of all-MiniLM-L6-v2, and
exporting with torch is not acceptable on a user's machine. This module writes
the encoder graph itself from the tensors (read with numpy) and quantises it
with ``onnxruntime.quantization.quantize_dynamic``. The same builder serves
plain MiniLM and the code-trained model (embed_models.py): both have the gt
package's tensor names and layout.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from helix_context.ingest.embed_models import EmbedderUnavailable, ModelSource, locate_model_dir, minilm_source

__all__ = ["BUILDER_VERSION", "BertConfig", "DEFAULT_MAX_SEQ_LENGTH", "OPSET", "build_encoder_model",
           "build_int8_model"]

log = logging.getLogger("helix_context.ingest.embed")

# Bump whenever the graph, the quantisation settings or the sidecar change:
# a cache built by another builder version is rebuilt.
BUILDER_VERSION = "1"
OPSET = 17
# sentence-transformers truncates all-MiniLM-L6-v2 at 256 tokens (the model
# was trained at that length even though BERT has 512 positions).
DEFAULT_MAX_SEQ_LENGTH = 256


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
        """The model's shape from its config.json; a damaged file raises EmbedderUnavailable (the embedder then
        falls back to MiniLM, or runs without vectors) instead of a bare JSON or key error."""
        try:
            return cls._read(model_dir)
        except EmbedderUnavailable:
            raise
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise EmbedderUnavailable(f"the model's {model_dir / 'config.json'} is unreadable "
                                      f"({type(exc).__name__}: {exc}); reinstall helix-context") from exc

    @classmethod
    def _read(cls, model_dir: Path) -> BertConfig:
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


def _source(model: Path | ModelSource | None) -> ModelSource:
    if isinstance(model, ModelSource):
        return model
    return minilm_source(Path(model) if model else locate_model_dir())


def build_encoder_model(model: Path | ModelSource | None = None) -> Any:
    """The fp32 BERT encoder of a model as an ``onnx.ModelProto`` (opset 17).

    ``model``: a ModelSource, or a MiniLM folder (None: the installed package).

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

    source = _source(model)
    cfg = BertConfig.from_model_dir(source.folder)
    w = source.tensors()
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
        out: str = g.op("Add", [g.op("MatMul", [x, weight], name=f"{name}_matmul"), bias], name=f"{name}_add")
        return out

    def layer_norm(x: str, prefix: str, name: str) -> str:
        scale = g.const(f"{prefix}.weight", f32(w[f"{prefix}.weight"]))
        bias = g.const(f"{prefix}.bias", f32(w[f"{prefix}.bias"]))
        out: str = g.op("LayerNormalization", [x, scale, bias], name=name, axis=-1, epsilon=eps)
        return out

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


def build_int8_model(model: Path | ModelSource | None, output_path: Path) -> None:
    """Build the fp32 graph and write its dynamic int8 quantisation to ``output_path``."""
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise EmbedderUnavailable(
            "quantising the embedding model needs onnxruntime and onnx: "
            "pip install onnxruntime onnx"
        ) from exc
    fp32 = build_encoder_model(model)
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

