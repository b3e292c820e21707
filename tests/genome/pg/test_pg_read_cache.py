"""The read path's per-generation memory (genome/pg/read_stats.py) never outlives another backend's write by 2 s.

One backend asks about a word nobody holds yet (its document count, the live gene count and BM25's
corpus numbers are now remembered); another backend indexes a file with that word. Within 2 s the
first backend finds it, counts it, and scores it exactly as a backend with no memory at all does.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from helix_context.config import Settings
from helix_context.genome.pg.store import PgGenome
from helix_context.manager import HelixContextManager, open_genome

WORD = "reconcile_ledger_quarterly"


def test_another_backends_write_reaches_the_remembered_counts_within_two_seconds(
        settings: Settings, pg_url: str, tmp_path: Path) -> None:
    chosen = settings.replace(embedding={"enabled": False}, ner={"enabled": False}, genome={"url": pg_url})
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(6):
        (tree / f"mod{i}.py").write_text(f"def settle_invoice_{i}(total):\n    return round(total * {i}, 2)\n")
    writer = HelixContextManager(chosen, genome=open_genome(chosen))
    reader = HelixContextManager(chosen, genome=open_genome(chosen))
    try:
        writer.ingest_path(tree)
        time.sleep(1.5)
        expr = f'"{WORD}" OR "settle_invoice_3"'
        before = reader.genome.fts_search(expr, 10)  # remembers both words' counts and N
        live = reader.genome.live_gene_count()
        assert before and live == 6
        assert reader.genome.doc_count_upto(f'"{WORD}"', 100) == 0
        both = f'"{WORD}" AND "entries"'  # an AND: answered from the remembered posting sets
        assert reader.genome.doc_count_upto(both, 100) == 0

        (tree / "ledger.py").write_text(f"def {WORD}(entries):\n    \"\"\"Sum the quarter.\"\"\"\n"
                                        "    return sum(entries)\n")
        writer.ingest_path(tree)
        deadline = time.monotonic() + 2.0
        while reader.genome.live_gene_count() == live and time.monotonic() < deadline:
            time.sleep(0.05)
        assert reader.genome.live_gene_count() == 7, "the live count moved on within 2 s"
        assert reader.genome.doc_count_upto(f'"{WORD}"', 100) == 1
        assert reader.genome.doc_count_upto(both, 100) == 1
        assert len(reader.genome.fts_search(both, 10)) == 1
        hits = reader.fingerprint(WORD, max_results=1)
        assert hits and hits[0]["symbol"] == WORD

        fresh = PgGenome(pg_url, listen=False)  # no memory: every number read now
        try:
            want = fresh.fts_search(expr, 10)
        finally:
            fresh.close()
        got = reader.genome.fts_search(expr, 10)
        assert [g for g, _ in got] == [g for g, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9)
    finally:
        writer.close()
        reader.close()
