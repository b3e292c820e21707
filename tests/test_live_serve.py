"""The live check /context applies before serving: stat-only for unchanged files, a span found again
after an edit, left out when it cannot be — on genes ingested from real files into a real genome."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from helix_context.models import ScoredGene
from helix_context.weigh.live_serve import live_serve, locate_span

def _function(name: str, doc: str, body: list[str]) -> str:
    """A function long enough to be stored as a gene of its own (small neighbours are packed together)."""
    lines = [f"def {name}(stock, sku, qty):", f'    """{doc}"""']
    lines += [f"    {line}" for line in body]
    lines += [f"    # step {i}: keep the ledger in sync with the shelf count for {name}" for i in range(20)]
    lines.append("    return qty")
    return "\n".join(lines) + "\n"


MODULE = ('"""Inventory."""\n\n\n'
          + _function("reserve", "Hold qty units of sku for an order.",
                      ["if stock[sku] < qty:", '    raise ValueError("not enough stock")', "stock[sku] -= qty"])
          + "\n\n"
          + _function("restock", "Add qty units of sku back to the shelf.",
                      ["stock[sku] = stock.get(sku, 0) + qty"]))


def _age(path: Path, seconds: float = 600) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


def _later(path: Path) -> None:
    later = time.time() + 30
    os.utime(path, (later, later))


@pytest.fixture
def genes(helix, tmp_path: Path):
    path = tmp_path / "inventory.py"
    path.write_text(MODULE, encoding="utf-8")
    _age(path)  # written long before ingest, as most files are
    helix.ingest_path(path, embed=False)
    found = [g for g in helix.genome.iter_genes() if g.source_path == str(path)]
    assert {g.symbol for g in found} >= {"reserve", "restock"}
    return path, [ScoredGene(g, 1.0) for g in sorted(found, key=lambda g: g.start_line)]


def _limits(helix) -> dict:
    return {"max_file_bytes": helix.settings.ingest.max_file_bytes,
            "max_chunk_chars": helix.settings.ingest.max_chunk_chars}


def test_unchanged_file_costs_one_stat_and_no_hash(helix, genes):
    _, items = genes
    live = live_serve(items, **_limits(helix))
    assert [i.gene for i in live.items] == [i.gene for i in items]
    assert not live.touched and live.stats == 1 and live.hashes == 0


def test_touched_but_identical_file_is_served_as_stored(helix, genes):
    path, items = genes
    _later(path)  # `touch`, or a save without edits: the mtime moves, the hash settles it
    live = live_serve(items, **_limits(helix))
    assert not live.touched and live.hashes == 1
    assert [i.gene.content for i in live.items] == [i.gene.content for i in items]


def test_function_moved_down_is_served_at_its_new_lines(helix, genes):
    path, items = genes
    path.write_text(MODULE.replace('"""Inventory."""\n', '"""Inventory."""\n\nimport logging\n\nLOG = 1\n'),
                    encoding="utf-8")
    _later(path)
    live = live_serve(items, **_limits(helix))
    restock = next(i.gene for i in live.items if i.gene.symbol == "restock")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[restock.start_line - 1].startswith("def restock")
    assert restock.content.strip() == "\n".join(lines[restock.start_line - 1:restock.end_line]).strip()
    assert len(live.refreshed) >= 1 and not live.dropped


def test_edited_function_body_is_served_current(helix, genes):
    path, items = genes
    path.write_text(MODULE.replace('raise ValueError("not enough stock")', 'raise StockError(sku, qty)'),
                    encoding="utf-8")
    _later(path)
    live = live_serve(items, **_limits(helix))
    text = "\n".join(i.gene.content for i in live.items)
    assert "StockError" in text and "not enough stock" not in text
    refreshed = next(i.gene for i in live.items if "StockError" in i.gene.content)
    assert refreshed.provenance.source_hash != items[0].gene.provenance.source_hash
    assert refreshed.gene_id != next(i.gene.gene_id for i in items if "not enough" in i.gene.content)


def test_span_rewritten_beyond_recognition_is_left_out(helix, genes):
    path, items = genes
    path.write_text('"""Inventory moved to the warehouse service."""\n\nSERVICE = "wms"\n', encoding="utf-8")
    _later(path)
    live = live_serve(items, **_limits(helix))
    assert all("stock[sku]" not in i.gene.content for i in live.items)
    assert len(live.dropped) >= 2 and all("no longer in the file" in d.reason for d in live.dropped)


def test_file_that_became_binary_is_left_out(helix, genes):
    path, items = genes
    path.write_bytes(b"\x00\x01\x02" * 100)
    _later(path)
    live = live_serve(items, **_limits(helix))
    assert live.items == () and all("binary" in d.reason for d in live.dropped)


def test_locate_span_prefers_the_same_text_then_the_same_symbol(helix, genes):
    from helix_context.ingest.chunk import chunk_text

    _, items = genes
    gene = next(i.gene for i in items if i.gene.symbol == "reserve")
    chunks = chunk_text(MODULE, "code", "python")
    chunk, how = locate_span(gene, chunks)
    assert chunk is not None and chunk.content == gene.content and how == "same text"
    renamed = chunk_text(MODULE.replace("Hold qty units", "Reserve qty units"), "code", "python")
    chunk, how = locate_span(gene, renamed)
    assert chunk is not None and chunk.symbol == "reserve" and how == "same symbol reserve"


def test_file_swapped_for_a_symlink_is_not_read_through(helix, genes, tmp_path: Path):
    path, items = genes
    secret = tmp_path / "elsewhere" / "secret.py"
    secret.parent.mkdir()
    secret.write_text(MODULE.replace("Inventory", "TOKEN = 'hunter2'  # Inventory"), encoding="utf-8")
    path.unlink()
    path.symlink_to(secret)
    live = live_serve(items, **_limits(helix))
    assert all("hunter2" not in i.gene.content for i in live.items)
    assert live.dropped and all("symbolic link" in d.reason for d in live.dropped)


def test_file_grown_past_the_size_limit_is_left_out_without_reading_it(helix, genes):
    path, items = genes
    path.write_text(MODULE + "#" * 5000, encoding="utf-8")
    _later(path)
    live = live_serve(items, max_file_bytes=len(MODULE) + 100, max_chunk_chars=2400)
    assert live.items == () and all("max_file_bytes" in d.reason for d in live.dropped)
