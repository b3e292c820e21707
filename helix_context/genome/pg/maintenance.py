"""Upkeep of the team genome: stats, the schema's own checks, VACUUM; what SQLite's maintenance.py does.

Why its own checks: `helix check` on SQLite runs PRAGMA integrity_check; PostgreSQL keeps its
own pages sound, so what can go wrong is Helix's invariants across tables: the lexical index
must hold exactly the live genes, every source row must name a live gene, and the schema must be
the version this Helix wrote. `integrity_check` lists each broken one in words (empty: sound).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

from helix_context.genome.maintenance import GeneUpkeepMixin, common_stats
from helix_context.genome.pg.schema import SCHEMA_VERSION
from helix_context.genome.retention import PartyScope
from helix_context.genome.vector_models import DEFAULT_VECTOR_MODEL

# (what is wrong, a query counting the rows it is wrong for)
_INVARIANTS: tuple[tuple[str, str], ...] = (
    ("live genes missing from the lexical index",
     "SELECT count(*) FROM genes g WHERE g.retired_at IS NULL AND NOT EXISTS (SELECT 1 FROM lex_docs d WHERE d.gene = g.id)"),
    ("retired genes still in the lexical index",
     "SELECT count(*) FROM lex_docs d JOIN genes g ON g.id = d.gene WHERE g.retired_at IS NOT NULL"),
    ("postings without their document row",
     "SELECT count(*) FROM (SELECT DISTINCT gene FROM lex_postings) p WHERE NOT EXISTS "
     "(SELECT 1 FROM lex_docs d WHERE d.gene = p.gene)"),
    # a gene's postings are deleted by the terms its document row lists (pg/door.py): any other would stay
    ("document rows listing other terms than their postings",
     "SELECT count(*) FROM lex_docs d LEFT JOIN (SELECT gene, count(*) AS n FROM lex_postings GROUP BY gene) p "
     "ON p.gene = d.gene WHERE COALESCE(p.n, 0) <> COALESCE(cardinality(string_to_array(d.terms, ' ')), 0)"),
    # document counts are kept by the postings' triggers (schema.py: V_TERM_COUNTS); a drift would skew every idf
    ("terms whose document counts differ from their postings",
     "SELECT count(*) FROM (SELECT term, count(*) AS n, count(*) FILTER (WHERE tf_body > 0) AS b, "
     "count(*) FILTER (WHERE tf_tags > 0) AS t, count(*) FILTER (WHERE tf_path > 0) AS p FROM lex_postings "
     "GROUP BY term) c FULL JOIN lex_terms k ON k.term = c.term WHERE (c.n, c.b, c.t, c.p) IS DISTINCT FROM "
     "(k.n_all, k.n_body, k.n_tags, k.n_path)"),
    ("source rows naming a retired gene",
     "SELECT count(*) FROM gene_sources s JOIN genes g ON g.id = s.gene WHERE g.retired_at IS NOT NULL"),
    ("live genes held by no source row and no file",
     "SELECT count(*) FROM genes g WHERE g.retired_at IS NULL AND g.source_kind = 'file' AND NOT EXISTS "
     "(SELECT 1 FROM gene_sources s WHERE s.gene = g.id)"),
    ("gene ids stored twice", "SELECT count(*) - count(DISTINCT gene_id) FROM genes"),
)


class PgMaintenanceMixin(GeneUpkeepMixin):
    """Needs `conn`, `_raw()`, `url`, `path`, `party_scope` and `generation` from PgGenome."""

    url: str
    path: str
    party_scope: PartyScope
    generation: Callable[[], int]
    meta_value: Callable[[str], str | None]
    disk_full = False  # the server's disk is the DBA's: a full one surfaces as a failed write, not a mode

    def _raw(self) -> Any: ...


    def checkpoint(self) -> dict[str, int]:
        """PostgreSQL checkpoints by itself; the same answer shape as SQLite's WAL checkpoint."""
        return {"busy": 0, "log_frames": 0, "checkpointed": 0}

    def vacuum(self) -> dict[str, int]:
        before = self.db_bytes()
        with psycopg.connect(self.url, autocommit=True) as conn:  # VACUUM cannot run inside a transaction
            conn.execute("VACUUM ANALYZE")
        return {"bytes_before": before, "bytes_after": self.db_bytes()}

    def integrity_check(self) -> list[str]:
        raw = self._raw()
        row = raw.execute("SELECT value FROM helix_meta WHERE key = 'schema_version'").fetchone()
        problems = [] if row and int(row[0]) == SCHEMA_VERSION else [
            f"schema version {row[0] if row else 'missing'}, this Helix writes {SCHEMA_VERSION}"]
        for what, sql in _INVARIANTS:
            n = int(raw.execute(sql).fetchone()[0])
            if n:
                problems.append(f"{n} {what}")
        return problems

    def full_text_damaged(self) -> bool:
        return False  # postings are plain rows in transactions: nothing to rebuild at the next start

    def merge_full_text(self) -> int:
        return 0  # postings are rows under B-tree indexes: no segments to merge

    def db_bytes(self) -> int:
        row = self._raw().execute("SELECT pg_database_size(current_database())").fetchone()
        return int(row[0]) if row else 0

    def wal_bytes(self) -> int:
        return 0

    def stats(self) -> dict[str, Any]:
        self.flush_deliveries()  # usage counts and links include every answer given so far
        raw = self._raw()
        scope = self.party_scope
        embedded = raw.execute("SELECT count(*) FROM genes WHERE retired_at IS NULL AND embedding IS NOT NULL").fetchone()
        links = raw.execute(f"SELECT count(*) FROM coactivation{scope.only.replace('?', '%s')}", scope.values).fetchone()
        return {**common_stats(self.conn), "backend": "postgresql", "url": self.path, "db_bytes": self.db_bytes(),
                "wal_bytes": 0, "with_embeddings": int(embedded[0]), "stale_embeddings": 0,
                "vector_model": self.meta_value("vector_model") or DEFAULT_VECTOR_MODEL, "coactivation_links": int(links[0]),
                "schema_version": SCHEMA_VERSION, "generation": self.generation()}
