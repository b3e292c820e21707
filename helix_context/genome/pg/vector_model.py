"""Which embedding model the PostgreSQL genome's vectors come from: one model per team genome.

Why one: vectors of two models live in different spaces, and a team shares one genome. The SQLite
genome re-embeds in the background after a model change (genome/vector_models.py); the team genome
records the model its vectors were made with (helix_meta 'vector_model') and refuses a backend
configured for another model with a message that says what to do, instead of mixing spaces.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from helix_context.errors import GenomeError
from helix_context.genome.vector_models import DEFAULT_VECTOR_MODEL


class PgVectorModelMixin:
    """Needs `_raw()` (a psycopg connection) and `readonly` from PgGenome."""

    readonly: bool

    def _raw(self) -> Any: ...

    @property
    def vector_model(self) -> str:
        row = self._raw().execute("SELECT value FROM helix_meta WHERE key = 'vector_model'").fetchone()
        return str(row[0]) if row else DEFAULT_VECTOR_MODEL

    def use_vector_model(self, name: str) -> bool:
        """Record `name` as the genome's model; True when that changed it. A genome holding vectors of
        another model is refused (GenomeError): this backend's `[embedding] model` must match the team's."""
        current = self.vector_model
        if name == current:
            return False
        raw = self._raw()
        held = raw.execute("SELECT EXISTS (SELECT 1 FROM genes WHERE embedding IS NOT NULL)").fetchone()[0]
        if held:
            raise GenomeError(f"this team genome holds vectors of the embedding model {current}; set [embedding] "
                              f"model to match it on this machine (re-embedding a PostgreSQL genome is not "
                              f"supported yet)")
        if self.readonly:
            return False
        with raw.transaction():
            raw.execute("INSERT INTO helix_meta(key, value) VALUES ('vector_model', %s) "
                        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (name,))
        return True

    def stale_vector_count(self) -> int:
        return 0  # one model per genome: no vector is ever another model's

    def genes_with_stale_vectors(self, limit: int) -> list[Any]:
        return []

    def has_stale_vectors(self) -> bool:
        return False

    def stale_vectors_among(self, rowids: Sequence[int]) -> list[int]:
        return []

    def forget_unused_vector_models(self) -> int:
        return 0
