"""`helix genome copy --to …`: move a genome between backends (SQLite file ⇄ PostgreSQL), file by file.

Why through the write door and not table by table: each backend lays its rows out its own way
(ids, full-text index, vector codes), so the copy reads what retrieval needs — each file's genes
with their spans in that file, their symbols and vectors — and writes it with `replace_sources`,
the way an ingest would. The copy therefore answers the same questions with the same pointers
(tests/genome/pg/test_pg_copy.py). The sources (folders kept indexed) are copied under the names their
files have. Not copied: retired genes, and genes no file holds (texts posted to /ingest without a path); the
summary counts them.

Vectors: the target records the source's embedding model, so its vectors are searched as that model's (a
target left at its default would have labelled a code-minilm genome's vectors MiniLM, and a MiniLM backend
would then have compared its questions with another model's vectors). A vector of another model (a re-embed
was under way in the source) is not copied: `left_to_embed` names those genes for the caller to embed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from helix_context.errors import GenomeError
from helix_context.genome.records import FileRecord, SourceWrite
from helix_context.genome.storage import GenomeStore
from helix_context.models import Gene, Symbol

FILES_PER_BATCH = 32


def _file_genes(src: GenomeStore, path: str, stale: list[str]) -> list[tuple[Gene, np.ndarray | None]]:
    """The file's genes with their spans *in this file* and the symbols that start in them; the ids of those whose
    vector another model made are added to `stale` (copied without one)."""
    symbols: dict[int, list[Symbol]] = {}
    for row in src.symbols_of_path(path):
        symbols.setdefault(row.gene, []).append(Symbol(row.name, row.kind, row.start_line, row.end_line))
    out: list[tuple[Gene, np.ndarray | None]] = []
    genes = src.genes_for_source(path)
    waiting = set(src.stale_vectors_among([g.rowid for g in genes if g.rowid is not None]))
    stale.extend(g.gene_id for g in genes if g.rowid in waiting)
    for gene in genes:
        rowid = gene.rowid
        if rowid is None:
            continue
        for place, start, end in src.sources_of(rowid):
            if place == path:
                out.append((dataclasses.replace(gene, start_line=start, end_line=end, rowid=None,
                                                symbols=tuple(symbols.get(rowid, ()))), src.embedding_of(rowid)))
    out.sort(key=lambda pair: pair[0].start_line)
    return out


def copy_genome(src: GenomeStore, dst: GenomeStore, *, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Copy every indexed file of `src` into the empty genome `dst`; returns counts for people."""
    if dst.file_records():
        raise GenomeError(f"the target genome {dst.path} already holds files: copy into an empty one "
                          "(a new SQLite path, or an empty PostgreSQL database)")
    dst.use_vector_model(src.vector_model)
    left_to_embed: list[str] = []
    records: list[FileRecord] = sorted(src.file_records().values(), key=lambda r: r.path)
    copied_files = copied_genes = 0
    for start in range(0, len(records), FILES_PER_BATCH):
        writes = [SourceWrite(r, r.path, _file_genes(src, r.path, left_to_embed))
                  for r in records[start:start + FILES_PER_BATCH]]
        for write, result in zip(writes, dst.replace_sources(writes)):
            if isinstance(result, GenomeError):
                raise GenomeError(f"copy stopped at {write.path}: {result}; the target holds the files before it")
            copied_files += 1
            copied_genes += result.added
        if progress is not None:
            progress(copied_files, len(records))
    # the folders kept indexed travel too, under the names their files have: a backend on the copy watches them
    sources = [row for row in src.list_sources() if row.pending is None and row.state != "removing"]
    for row in sources:
        dst.add_source(row.path, row.project, row.added_at)
    live = src.live_gene_count()
    return {"files": copied_files, "genes": copied_genes, "sources": len(sources), "source_live_genes": live,
            "not_copied_genes": max(0, live - dst.live_gene_count()), "target": str(dst.path),
            "vector_model": src.vector_model, "left_to_embed": list(dict.fromkeys(left_to_embed))}
