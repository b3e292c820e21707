"""Which embedding model the genome's searches use, and the vectors another model made.

A mixin of `Genome` (store.py). Why: `[embedding] model` can change between
runs (plain MiniLM or the code-trained model), and two models' vectors live in
different spaces: a search must compare the query only with vectors of the
model that embedded it. The genome remembers the active model (meta
'vector_model'); every vector read filters on its id (genome/vectors.py); the
dense index holds that model's vectors alone and is rebuilt when it changes;
the vectors of other models are "stale" until re-embedded
(ingest/reembed.py) and take no part in searches meanwhile.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from helix_context.genome import vectors as vector_sql

log = logging.getLogger(__name__)

# the model of vectors stored before models were recorded (schema V6 labels them so)
DEFAULT_VECTOR_MODEL = "all-MiniLM-L6-v2-int8"


class VectorModelMixin:
    """Needs `conn`, `transaction`, `readonly`, `genes_by_rowid`, `_vectors`, `_vectors_lock` from Genome."""

    conn: Any
    transaction: Any
    readonly: bool
    genes_by_rowid: Any
    _vectors: Any
    _vectors_lock: threading.Lock
    _vector_model: tuple[str, int]
    _stale_vectors: bool | None  # whether any live gene waits for a re-embed (None: not counted since a change)
    _import_mark: str | None  # the genome's import count when the stale vectors were last counted

    def _load_vector_model(self) -> None:
        self._stale_vectors = None
        self._import_mark = vector_sql.import_mark(self.conn)
        name = vector_sql.recorded_model(self.conn) or DEFAULT_VECTOR_MODEL
        known = vector_sql.known_model_id(self.conn, name)
        # -1 matches no vector: a model this (read-only) genome has never stored
        self._vector_model = (name, known if known is not None else -1)

    @property
    def vector_model(self) -> str:
        """Name of the embedding model whose vectors searches use."""
        return self._vector_model[0]

    @property
    def vector_model_id(self) -> int:
        return self._vector_model[1]

    def use_vector_model(self, name: str) -> bool:
        """Make `name` the active model (recorded for the next open); True when that changed it.

        On a change the dense index is dropped: the next search builds one from the new
        model's vectors (none at first), which grows as genes are re-embedded.
        """
        if name == self._vector_model[0] and self._vector_model[1] > 0:
            return False
        if self.readonly:
            known = vector_sql.known_model_id(self.conn, name)
            self._vector_model = (name, known if known is not None else -1)
            self._stale_vectors = None
            return True
        with self.transaction(changes_genes=False) as tx:
            model = vector_sql.model_id(tx.conn, name)
            vector_sql.record_model(tx.conn, name)
        changed = (name, model) != self._vector_model
        with self._vectors_lock:
            old, self._vectors = self._vectors, None
            self._vector_model = (name, model)
            self._stale_vectors = None
        if old is not None:
            old.close()
        if changed:
            log.info("genome: searches now use vectors of the embedding model %s", name)
        return changed

    def stale_vector_count(self) -> int:
        """Live genes whose vector another model made (excluded from searches until re-embedded)."""
        mark = vector_sql.import_mark(self.conn)
        count = vector_sql.stale_vector_count(self.conn, self.vector_model_id)
        self._stale_vectors, self._import_mark = count > 0, mark
        return count

    def has_stale_vectors(self) -> bool:
        """Whether any live gene waits for a re-embed: counted once after a model change, then remembered until
        the re-embed ends (forget_unused_vector_models), so a search asks at no cost (retrieve/dense_fill.py).

        Counted again after an import (`helix import`, perhaps by another process while a server has the genome
        open): it may have stored another model's vectors, and the server re-embeds them (manager.resume_reembed)."""
        known = self._stale_vectors
        if known is False and vector_sql.import_mark(self.conn) != self._import_mark:
            known = None
        return self.stale_vector_count() > 0 if known is None else known

    def stale_vectors_among(self, rowids: Sequence[int]) -> list[int]:
        """Those of `rowids` whose vector another model made, in the order given."""
        return vector_sql.stale_among(self.conn, self.vector_model_id, rowids)

    def genes_with_stale_vectors(self, limit: int) -> list[Any]:
        rowids = vector_sql.stale_vector_rowids(self.conn, self.vector_model_id, limit)
        found = self.genes_by_rowid(rowids)
        return [found[r] for r in rowids if r in found]

    def forget_unused_vector_models(self) -> int:
        """Retention for vector_models: drop ids no vector uses (after a re-embed finishes: none is stale now)."""
        self._stale_vectors = False
        with self.transaction(changes_genes=False) as tx:
            return int(vector_sql.drop_unused_models(tx.conn, self.vector_model_id))
