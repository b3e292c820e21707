"""Sentence embeddings on onnxruntime, without torch: MiniLM or the code-trained model, int8.

Both models ship inside this package as finished int8 ONNX files: plain
MiniLM (``minilm/``, Apache-2.0) and the code-trained one (``code_minilm/``,
tools/train_embedder/), chosen by ``[embedding] model`` (embed_models.py).
onnx_graph.py is the builder that made them (tools/build_models.py). Run time
needs only ``onnxruntime``, ``tokenizers`` and ``numpy``.

Public API::

    emb = Embedder.load()                    # the shipped MiniLM
    emb = Embedder.load(model="code-minilm")  # MiniLM if that cannot load
    vecs = emb.embed(["def f(): ...", ...])  # float32 (n, 384), L2-normalised
    q = emb.embed_query("how is f used")     # float32 (384,)

Sentence-transformers semantics: mean of the last hidden state over the real
(attention-mask) tokens, then L2 normalisation; at most 256 tokens per text,
special tokens included.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from helix_context.ingest.embed_models import (
    CODE_MINILM,
    MINILM,
    MINILM_DIR,
    MINILM_NAME,
    MODEL_KEYS,
    EmbedderUnavailable,
    shipped_model,
)
from helix_context.ingest.onnx_graph import BertConfig

if TYPE_CHECKING:
    from helix_context.config import EmbeddingSettings

__all__ = [
    "Embedder",
    "EmbedderUnavailable",
    "MODEL_KEYS",
    "MODEL_NAME",
]

log = logging.getLogger(__name__)

MODEL_NAME = MINILM_NAME


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


_SURROGATES = re.compile("[\ud800-\udfff]")


def _readable(text: str) -> str:
    """``text`` with lone surrogates (JSON's ``\\ud800``, never valid UTF-8) as U+FFFD: the tokenizer refuses
    them, and one such character in a chat message cost the whole chat its context."""
    return text if text.isascii() else _SURROGATES.sub("\ufffd", text)


def _cut(text: str, chars: int) -> str:
    """The text's start up to its last whitespace before ``chars`` (the text itself when shorter), readable
    by the tokenizer."""
    text = _readable(text)
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
                 parallel: int = 1, model_name: str = MODEL_NAME, model_path: Path | None = None,
                 model_key: str = MINILM, fallback: str | None = None) -> None:
        self._session = session
        self.model_key = model_key  # which [embedding] model this is (after any fallback)
        self.fallback = fallback  # why the configured model was not used, or None
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
    def for_settings(cls, cfg: EmbeddingSettings) -> Embedder:
        """The model `[embedding]` names, reading as many word pieces as its prose or code budget needs."""
        return cls.load(model=cfg.model, max_tokens=max(cfg.max_tokens, cfg.code_max_tokens), batch_size=cfg.batch_size)

    @classmethod
    def load(cls, *, model: str = MINILM, max_tokens: int = 128, batch_size: int = 8,
             threads: int | None = None) -> Embedder:
        """Load the shipped int8 model ``model``.

        ``model``: one of MODEL_KEYS. A code-trained model that is missing or
        damaged is replaced by plain MiniLM with one warning; the embedder's
        ``fallback`` then says why (shown by /health).
        ``threads``: model calls run at once (default: one per core).
        Raises EmbedderUnavailable with a message that says what to install or fix.
        """
        if model not in MODEL_KEYS:
            raise EmbedderUnavailable(f"unknown embedding model {model!r}; choose one of {', '.join(MODEL_KEYS)}")
        opts: dict[str, Any] = {"max_tokens": max_tokens, "batch_size": batch_size, "threads": threads}
        fallback = None
        if model == CODE_MINILM:
            try:
                code = shipped_model(CODE_MINILM)
                return cls.from_onnx(code.onnx, code.folder, model_name=code.model_name, model_key=CODE_MINILM,
                                     **opts)
            except EmbedderUnavailable as exc:
                fallback = f"code-minilm unavailable ({exc}); using minilm"
                log.warning("embedding model: the code-trained model cannot be used (%s); "
                            "falling back to all-MiniLM-L6-v2", exc)
        plain = shipped_model(MINILM)
        return cls.from_onnx(plain.onnx, plain.folder, model_name=plain.model_name, fallback=fallback, **opts)

    @classmethod
    def from_onnx(cls, model: Path | bytes, model_dir: Path | None = None, *,
                  max_tokens: int = 128, batch_size: int = 8, threads: int | None = None,
                  model_name: str = MODEL_NAME, model_key: str = MINILM,
                  fallback: str | None = None) -> Embedder:
        """An Embedder over a given ONNX model (path or serialized bytes).

        Used for the fp32 graph in tests and benchmarks; ``load`` is the normal entry.
        """
        if max_tokens < 2:
            raise ValueError("max_tokens must be at least 2 ([CLS] and [SEP])")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if threads is not None and threads < 1:
            raise ValueError("threads must be at least 1 (or None for all cores)")
        model_dir = Path(model_dir) if model_dir else MINILM_DIR
        cfg = BertConfig.from_model_dir(model_dir)
        max_tokens = min(max_tokens, cfg.max_seq_length)
        tokenizer = _load_tokenizer(model_dir, max_tokens)
        session = _make_session(model, 1)
        return cls(session, tokenizer, max_tokens=max_tokens, batch_size=batch_size,
                   parallel=threads or _default_threads(), model_name=model_name,
                   model_path=None if isinstance(model, bytes) else Path(model),
                   model_key=model_key, fallback=fallback)

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
        for idx, vectors in zip(batches, results, strict=True):
            out[idx] = vectors
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """float32 vector (384,) for one text (a search query, usually)."""
        vec: np.ndarray = self.embed([text])[0]
        return vec

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
        cut = [_cut(text, limit * _CHARS_PER_PIECE) for text, limit in zip(texts, limits, strict=True)]
        encodings = self._encode_batch(cut, add_special_tokens=True)
        ids = [enc.ids for enc in encodings]
        short = [i for i, seq in enumerate(ids) if len(seq) < limits[i] and len(cut[i]) < len(texts[i])]
        if short:
            again = self._encode_batch([_readable(texts[i]) for i in short], add_special_tokens=True)
            for i, enc in zip(short, again, strict=True):
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
        unit: np.ndarray = (pooled / norms).astype(np.float32, copy=False)
        return unit
