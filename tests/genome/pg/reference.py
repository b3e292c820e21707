"""What the team genome must hold after concurrent writers: the genes a plain SQLite ingest of the
same tree stores, each once (the reference every concurrency test compares against)."""

from __future__ import annotations

from pathlib import Path

import psycopg

from helix_context.config import Settings
from helix_context.manager import HelixContextManager


def sqlite_live_genes(settings: Settings, tree: Path) -> int:
    """Live genes of the tree ingested alone into a fresh SQLite genome (no models: the same genes)."""
    lite = HelixContextManager(settings.replace(embedding={"enabled": False}, ner={"enabled": False}))
    try:
        lite.ingest_path(tree)
        return lite.genome.live_gene_count()
    finally:
        lite.close()


def assert_each_gene_once(url: str, want: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        live, distinct = conn.execute("SELECT count(*), count(DISTINCT gene_id) FROM genes "
                                      "WHERE retired_at IS NULL").fetchone()
    assert live == distinct == want, f"every gene once, none lost: {live} live, {distinct} distinct, {want} wanted"


def zebracorn_team(settings: Settings, url: str, root: Path) -> HelixContextManager:
    """A backend on the team genome at `url` (no models) with one small Python file indexed under `root`:
    "how is a zebracorn invoice settled?" finds its `settle_zebracorn`."""
    root.mkdir(parents=True)
    (root / "ledger.py").write_text('def settle_zebracorn(invoice):\n    """Settle a zebracorn invoice."""\n'
                                    "    return invoice.total\n")
    helix = HelixContextManager(settings.replace(embedding={"enabled": False}, ner={"enabled": False},
                                                 genome={"url": url}))
    helix.ingest_path(root)
    return helix
