"""Re-embed, in the background, the genes whose vectors another embedding model made.

Why: after ``[embedding] model`` changes, the stored vectors are in the old
model's space. The genome already leaves them out of every search
(genome/vector_models.py); this job replaces them batch by batch with the
active model's vectors, in one low-key thread (one model call at a time), so
the dense signal comes back gene by gene without blocking start-up. Progress
goes to the log (every few seconds) and to /health and /stats (``progress()``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from helix_context.config import EmbeddingSettings
from helix_context.ingest.embed_text import embedding_text, embedding_tokens

log = logging.getLogger(__name__)

BATCH = 64
LOG_EVERY_S = 5.0
RETRY_AFTER_S = 600.0  # a job that failed (a full disk, a model error) is tried again after this, not at once


class StaleVectorGenome(Protocol):
    readonly: bool

    @property
    def vector_model(self) -> str: ...

    def use_vector_model(self, name: str) -> bool: ...

    def stale_vector_count(self) -> int: ...

    def genes_with_stale_vectors(self, limit: int) -> list[Any]: ...

    def set_embeddings(self, items: Sequence[tuple[int, np.ndarray]]) -> None: ...

    def forget_unused_vector_models(self) -> int: ...

    def vector_index(self) -> Any: ...


class TextEmbedder(Protocol):
    model_name: str

    def embed(self, texts: Sequence[str], max_tokens: int | Sequence[int] | None = None, *,
              spread: bool = True) -> np.ndarray: ...


class Reembedder:
    """One background pass over the stale vectors; ``progress()`` is safe to call from any thread."""

    def __init__(self, genome: StaleVectorGenome, embedder: TextEmbedder, settings: EmbeddingSettings, *,
                 batch: int = BATCH) -> None:
        self._genome = genome
        self._embedder = embedder
        self._settings = settings
        self._batch = max(1, batch)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._state: dict[str, Any] = {"state": "idle", "model": embedder.model_name, "done": 0, "total": 0}

    def start(self) -> bool:
        """Start the pass if any live gene has another model's vector; True when it started."""
        if self._genome.vector_model != self._embedder.model_name:
            raise ValueError(f"the genome searches {self._genome.vector_model} vectors, "
                             f"the embedder makes {self._embedder.model_name}")
        total = self._genome.stale_vector_count()
        with self._lock:
            if self._thread is not None or total == 0:
                return False
            self._state.update(state="running", total=total, started_at=time.time())
            self._thread = threading.Thread(target=self._run, name="helix-reembed", daemon=True)
        log.info("embedding model is now %s: re-embedding %d genes in the background "
                 "(until done, searches use only the vectors this model made)", self._embedder.model_name, total)
        self._thread.start()
        return True

    def may_follow(self) -> bool:
        """Whether a new job may take over from this one: it ended, or it failed at least RETRY_AFTER_S ago
        (what failed it, such as a full disk, is likely still there a moment later: one warning, not one a minute)."""
        with self._lock:
            state, finished = self._state["state"], self._state.get("finished_at", 0.0)
        return state in ("done", "idle", "stopped") or (state == "failed" and time.time() - finished >= RETRY_AFTER_S)

    def progress(self) -> dict[str, Any]:
        with self._lock:
            out = dict(self._state)
        if out["total"]:
            out["percent"] = round(100.0 * out["done"] / out["total"], 1)
        return out

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        done, last_log = 0, time.monotonic()
        try:
            while not self._stop.is_set():
                genes = self._genome.genes_with_stale_vectors(self._batch)
                if not genes:
                    break
                stored = embed_genes(self._genome, self._embedder, self._settings, genes, spread=False)
                if not stored:
                    raise RuntimeError("stale genes without a row id")
                # the dense index takes the new vectors here, not in the next question (which would add every
                # vector re-embedded since the question before it to the graph: p50 89 ms at 100k genes)
                try:
                    self._genome.vector_index().sync()
                except Exception as exc:  # the index is not the job's to keep: the next search replays what it missed
                    log.debug("re-embedding: dense index not synced (%s)", exc)
                done += stored
                with self._lock:
                    self._state["done"] = done
                    self._state["total"] = max(self._state["total"], done)
                if time.monotonic() - last_log >= LOG_EVERY_S:
                    last_log = time.monotonic()
                    log.info("re-embedding for %s: %d/%d genes", self._embedder.model_name, done,
                             self._state["total"])
        except Exception as exc:  # the server goes on; the genes left stay out of dense search
            log.warning("re-embedding for %s stopped after %d genes: %s", self._embedder.model_name, done, exc)
            with self._lock:
                self._state.update(state="failed", error=f"{type(exc).__name__}: {exc}", finished_at=time.time())
            return
        stopped = self._stop.is_set()
        if not stopped:
            self._genome.forget_unused_vector_models()
        with self._lock:
            self._state.update(state="stopped" if stopped else "done", finished_at=time.time())
        log.info("re-embedding for %s %s: %d genes", self._embedder.model_name,
                 "stopped" if stopped else "done", done)


def embed_genes(genome: Any, embedder: TextEmbedder, settings: EmbeddingSettings, genes: Sequence[Any], *,
                spread: bool = True) -> int:
    """Store the embedder's vector of each gene, read from the text the ingest embeds; how many were stored.

    `spread`: let the model use every core (a background job passes False: one core, questions go on)."""
    if not genes:
        return 0
    vectors = embedder.embed([embedding_text(g) for g in genes], [embedding_tokens(g, settings) for g in genes],
                             spread=spread)
    items = [(g.rowid, vec) for g, vec in zip(genes, vectors, strict=True) if g.rowid is not None]
    if items:
        genome.set_embeddings(items)
    return len(items)


def embed_rowids(genome: Any, embedder: TextEmbedder | None, settings: EmbeddingSettings,
                 rowids: Sequence[int]) -> int:
    """`embed_genes` for genes named by row id (an import's genes whose vectors another model made, on a team
    genome that keeps one model's), in batches; 0 without an embedder (embeddings off)."""
    if embedder is None:
        return 0
    done = 0
    for start in range(0, len(rowids), 256):
        found = genome.genes_by_rowid(rowids[start:start + 256])
        done += embed_genes(genome, embedder, settings, [found[r] for r in rowids[start:start + 256] if r in found])
    return done


def start_reembed(genome: StaleVectorGenome, embedder: TextEmbedder,
                  settings: EmbeddingSettings) -> Reembedder | None:
    """Make the embedder's model the one the genome searches; re-embed other models' vectors in the background.

    Returns the running (or idle) job, or None for a read-only genome, which only searches.
    """
    genome.use_vector_model(embedder.model_name)
    if genome.readonly:
        return None
    job = Reembedder(genome, embedder, settings)
    job.start()
    return job
