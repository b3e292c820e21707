"""What `helix export` reads from a team genome (portable_sql.ExportReads), in one snapshot.

Why its own module: the export file is backend-neutral, and two of its columns are stored
differently here. A vector is a halfvec on PostgreSQL; the file carries the SQLite genome's
int8 codes with their scale (genome/vectors.encode_vector), so it is converted on the way out
and an export of either backend imports into either. The vector's model is the one the team
genome records (pg/vector_model.py), not a per-gene id; and there is no vector change log.
Per-person rows (sessions, co-activation, activity) are this backend's party's only: an export
never carries another developer's history. The tables both engines share are read with
portable_sql's own statements.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from helix_context.genome import portable_sql as shared
from helix_context.genome.stored_form import unpack_text
from helix_context.genome.vectors import encode_vector

if TYPE_CHECKING:
    from helix_context.genome.pg.store import PgGenome

_STORED = [c for c in shared.GENE_FIELDS if c not in ("embedding", "vector_model")]
# quoted: a bare `user` is PostgreSQL's CURRENT_USER (the database role), not the genes column
_QUOTED = ", ".join(f'"{c}"' for c in _STORED)
_SELECT_GENES = f"SELECT id, {_QUOTED}, embedding FROM genes WHERE id > %s ORDER BY id LIMIT %s"


class PgExportReads:
    def __init__(self, raw: Any, party: str, model: str) -> None:
        self.raw = raw
        self.party = party
        self.model = model

    def genes(self, batch: int = 500) -> Iterator[tuple[dict[str, Any], list[list[Any]]]]:
        last = 0
        while True:
            rows = self.raw.execute(_SELECT_GENES, (last, batch)).fetchall()
            if not rows:
                return
            ids = [int(r[0]) for r in rows]
            spans: dict[int, list[list[Any]]] = {}
            for gene, path, start, end in self.raw.execute(
                    "SELECT gene, path, start_line, end_line FROM gene_sources WHERE gene = ANY(%s) "
                    "ORDER BY gene, path, start_line", (ids,)):
                spans.setdefault(int(gene), []).append([path, start, end])
            for row in rows:
                data = dict(zip(_STORED, row[1:-1], strict=True))
                data["content"] = unpack_text(bytes(data["content"]))
                vector = row[-1]
                data["embedding"] = None if vector is None else encode_vector(np.asarray(vector.to_numpy(), np.float32))
                data["vector_model"] = None if vector is None else self.model
                yield data, spans.get(int(row[0]), [])
            last = ids[-1]

    def files(self) -> Iterator[dict[str, Any]]:
        return shared.iter_file_rows(self.raw)

    def symbols(self) -> Iterator[dict[str, Any]]:
        return shared.iter_symbol_rows(self.raw)

    def sources(self) -> Iterator[dict[str, Any]]:
        return shared.iter_source_rows(self.raw)

    def disk_paths(self) -> set[str]:
        return shared.disk_paths(self.raw)

    def links(self) -> Iterator[tuple[str, str, float, float]]:
        for a, b, count, last_at in self.raw.execute(
                "SELECT ga.gene_id, gb.gene_id, c.count, c.last_at FROM coactivation c JOIN genes ga ON ga.id = c.a "
                "JOIN genes gb ON gb.id = c.b WHERE c.party = %s ORDER BY c.a, c.b", (self.party,)):
            yield str(a), str(b), float(count), float(last_at)

    def sessions(self) -> Iterator[dict[str, Any]]:
        for row in self.raw.execute(f"SELECT {', '.join(shared.SESSION_FIELDS)} FROM sessions WHERE party = %s "
                                    "ORDER BY last_seen", (self.party,)):
            yield dict(zip(shared.SESSION_FIELDS, row, strict=True))

    def activity(self) -> Iterator[dict[str, Any]]:
        for row in self.raw.execute(f"SELECT {', '.join(shared.ACTIVITY_FIELDS)} FROM activity WHERE party = %s "
                                    "ORDER BY id", (self.party,)):
            data = dict(zip(shared.ACTIVITY_FIELDS, row, strict=True))
            data["counts"] = json.loads(data["counts"] or "{}")
            yield data

    def vector_changes(self) -> Iterator[str]:
        return iter(())  # the team genome keeps no change log (one model's vectors: pg/vector_model.py)


@contextmanager
def export_reads(genome: PgGenome, raw: Callable[[], Any]) -> Iterator[PgExportReads]:
    """Every read of the export in one REPEATABLE READ snapshot: a backend indexing meanwhile cannot tear it.
    `raw`: the genome's connection of this thread (the one the snapshot is open on)."""
    model = genome.vector_model
    with genome.read_snapshot():
        yield PgExportReads(raw(), genome.party, model)
