"""Each term's document counts kept beside the postings (schema V_TERM_COUNTS): they equal a count over the
postings after every kind of write, a team genome of the version before is filled on upgrade, and a word
no live gene holds any more leaves no row behind."""

from __future__ import annotations

from pathlib import Path

import psycopg

from helix_context.config import Settings
from helix_context.genome.pg import lexical
from helix_context.manager import HelixContextManager

from .conftest import older_team_genome

_COUNTED = ("SELECT term, count(*), count(*) FILTER (WHERE tf_body > 0), count(*) FILTER (WHERE tf_tags > 0), "
            "count(*) FILTER (WHERE tf_path > 0) FROM lex_postings GROUP BY term")


def _kept_and_counted(url: str) -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]]:
    with psycopg.connect(url, autocommit=True) as conn:
        kept = {t: tuple(n) for t, *n in conn.execute("SELECT term, n_all, n_body, n_tags, n_path FROM lex_terms")}
        counted = {t: tuple(n) for t, *n in conn.execute(_COUNTED)}
    return kept, counted


def test_term_counts_follow_every_write_and_an_older_genome_is_filled(settings: Settings, pg_url: str,
                                                                      tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(4):
        (tree / f"ledger{i}.py").write_text(f"def settle_invoice_{i}(total):\n    return round(total, {i})\n")
    (tree / "unique.py").write_text("def quixotic_zebra():\n    return 'zebra'\n")
    chosen = older_team_genome(settings, pg_url, tree, 4)
    helix = HelixContextManager(chosen)
    try:
        kept, counted = _kept_and_counted(pg_url)
        assert kept == counted and kept["settl"][0] == 4, "filled from the postings on upgrade"
        assert helix.genome.integrity_check() == []

        (tree / "ledger0.py").write_text("def reconcile_ledger(entries):\n    return sum(entries)\n")
        (tree / "ledger1.py").unlink()
        (tree / "extra.py").write_text("def settle_refund(total):\n    return -total\n")
        helix.ingest_path(tree)  # ledger0's gene replaced, a new file added
        helix.genome.retire_source(str(tree / "ledger1.py"))
        kept, counted = _kept_and_counted(pg_url)
        assert kept == counted
        assert kept["settl"][0] == 3, "ledger2, ledger3 and extra hold 'settle'"
        with psycopg.connect(pg_url, autocommit=True) as conn:
            assert lexical.doc_freqs(conn, ["settl", "reconcil", "nowher"]) == {
                "settl": kept["settl"], "reconcil": kept["reconcil"]}
            conn.execute("DELETE FROM genes WHERE symbol = %s", ("quixotic_zebra",))  # by hand: any path
        kept, counted = _kept_and_counted(pg_url)
        assert kept == counted
        assert "zebra" not in kept and "quixotic_zebra" not in kept, "a word no live gene holds keeps no row"
        assert helix.genome.integrity_check() == []
        assert helix.fingerprint("reconcile_ledger", max_results=1)[0]["symbol"] == "reconcile_ledger"
    finally:
        helix.close()


def test_a_drifted_count_is_reported_by_the_check(settings: Settings, pg_url: str, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "mod.py").write_text("def settle_invoice(total):\n    return total\n")
    helix = HelixContextManager(settings.replace(embedding={"enabled": False}, ner={"enabled": False},
                                                 genome={"url": pg_url}))
    try:
        helix.ingest_path(tree)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("UPDATE lex_terms SET n_all = n_all + 1 WHERE term = 'settl'")
        assert any("document counts" in problem for problem in helix.genome.integrity_check())
    finally:
        helix.close()
