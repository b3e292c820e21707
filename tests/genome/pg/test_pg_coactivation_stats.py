"""A new team genome's co-activation table gets statistics from the first delivery a backend writes
(pg/learning.py `_after_deliveries`), not a minute later from autovacuum: until then the planner reads
each question's co-activation by the wrong index."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from helix_context.config import Settings
from helix_context.genome.pg import learning
from helix_context.manager import HelixContextManager


def _columns_with_statistics(pg_url: str) -> set[str]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        return {r[0] for r in conn.execute("SELECT attname FROM pg_stats WHERE tablename = 'coactivation'")}


def _team(settings: Settings, pg_url: str, tree: Path) -> HelixContextManager:
    helix = HelixContextManager(settings.replace(embedding={"enabled": False}, ner={"enabled": False},
                                                 genome={"url": pg_url}))
    helix.ingest_path(tree)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")  # what a DBA's maintenance (or the bench) does to a new genome
    return helix


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    root.mkdir()
    for i in range(6):
        (root / f"ledger_{i}.py").write_text(f"def settle_ledger_{i}(total):\n    return round(total, {i})\n\n\n"
                                             f"def audit_ledger_{i}(rows):\n    return sorted(rows)[:{i + 1}]\n")
    return root


def test_the_first_delivery_batch_gives_the_table_statistics(settings: Settings, pg_url: str, tree: Path) -> None:
    helix = _team(settings, pg_url, tree)
    try:
        assert _columns_with_statistics(pg_url) == set(), "analyzed empty: nothing known about its columns"
        for question in ("settle ledger total", "audit ledger rows", "ledger rounding"):
            assert helix.build_context(question).genes
        helix.genome.flush_deliveries()
        assert {"a", "b"} <= _columns_with_statistics(pg_url)
        assert helix.genome.coactivation_links(), "the deliveries themselves were written"
    finally:
        helix.close()


def test_a_backend_not_allowed_to_analyze_still_records_its_deliveries(
        settings: Settings, pg_url: str, tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    helix = _team(settings, pg_url, tree)

    def refused(raw: object, table: str) -> None:
        raise psycopg.errors.InsufficientPrivilege(f"permission denied to analyze {table}")

    monkeypatch.setattr(learning, "_analyze_if_unknown", refused)
    try:
        assert helix.build_context("settle ledger total").genes
        helix.genome.flush_deliveries()
        assert helix.genome.coactivation_links()
        assert _columns_with_statistics(pg_url) == set()  # left to autovacuum
    finally:
        helix.close()
