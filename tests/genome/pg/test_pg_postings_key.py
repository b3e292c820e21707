"""The postings kept by their key alone (schema V_KEY_ONLY_POSTINGS): a team genome of the version before
is upgraded in place, and a re-indexed, a retired and a deleted gene leave no postings behind, whichever
statement deletes the gene (its document row's trigger deletes them)."""

from __future__ import annotations

from pathlib import Path

import psycopg

from helix_context.config import Settings
from helix_context.manager import HelixContextManager

from .conftest import older_team_genome

_STRAY = ("SELECT count(*) FROM lex_postings p WHERE NOT EXISTS "
          "(SELECT 1 FROM genes g WHERE g.id = p.gene AND g.retired_at IS NULL)")


def test_an_older_team_genome_is_upgraded_and_deletes_its_postings_by_key(settings: Settings, pg_url: str,
                                                                          tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(3):
        (tree / f"mod{i}.py").write_text(f"def settle_invoice_{i}(total):\n    return round(total, {i})\n")
    chosen = older_team_genome(settings, pg_url, tree, 3)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        postings = conn.execute("SELECT count(*) FROM lex_postings").fetchone()[0]
    helix = HelixContextManager(chosen)
    try:
        assert helix.genome.integrity_check() == [], "migrated: each document row lists its postings' terms"
        with psycopg.connect(pg_url, autocommit=True) as conn:
            assert conn.execute("SELECT to_regclass('lex_postings_gene')").fetchone() == (None,)
            assert conn.execute("SELECT count(*) FROM lex_postings").fetchone()[0] == postings > 0
        (tree / "mod0.py").write_text("def reconcile_ledger(entries):\n    return sum(entries)\n")
        (tree / "mod1.py").unlink()
        helix.ingest_path(tree)  # mod0's gene replaced (deleted), then mod1's retired below
        helix.genome.retire_source(str(tree / "mod1.py"))
        assert helix.genome.integrity_check() == []
        with psycopg.connect(pg_url, autocommit=True) as conn:
            assert conn.execute(_STRAY).fetchone()[0] == 0, "postings of genes no longer live"
            live = conn.execute("SELECT count(*) FROM genes WHERE retired_at IS NULL").fetchone()[0]
            assert conn.execute("SELECT count(DISTINCT gene) FROM lex_postings").fetchone()[0] == live == 2
        found = {hit["symbol"] for hit in helix.fingerprint("settle_invoice_0 settle_invoice_1", max_results=5)}
        assert found == {"settle_invoice_2"}
        with psycopg.connect(pg_url, autocommit=True) as conn:  # a gene deleted by any path takes its postings along
            conn.execute("DELETE FROM genes WHERE symbol = 'settle_invoice_2'")
            assert conn.execute(_STRAY).fetchone()[0] == 0
        assert helix.fingerprint("reconcile_ledger", max_results=1)[0]["symbol"] == "reconcile_ledger"
    finally:
        helix.close()
