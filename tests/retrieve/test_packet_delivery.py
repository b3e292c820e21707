"""Which genes a packet delivers: the pointer ranking leads, the gene ranking fills.

`fingerprint` ranks pointers (a span's own words and cosine beside its gene's score); the packet used to
deliver the best genes by their score alone and narrow each to its best pointer, so a function the pointer
ranking put first could be missing from the packet altogether (express's `res.attachment` for "mark the
response as a file to be saved with a file name": first in `fingerprint`, absent from the packet's six
items). benchmarks/bench_doc_comments.py and bench_code_retrieval.py --quick print the packet's own line.
"""

from __future__ import annotations

from helix_context.models import Gene, Pointer, ScoredGene
from helix_context.retrieve.retriever import _by_pointers


def _gene(rowid: int, first: int) -> ScoredGene:
    gene = Gene(f"{rowid:032x}", f"function f{rowid}() {{}}", "code", "javascript", "/app/reply.js", "app",
                first, first + 9, rowid=rowid)
    return ScoredGene(gene, score=1.0 / rowid)


def _pointer(sg: ScoredGene, name: str, score: float) -> Pointer:
    return Pointer(sg.gene, sg.gene.source_path, name, "method", sg.gene.start_line, sg.gene.start_line + 3, score)


def test_the_best_pointers_genes_come_first_then_the_gene_ranking() -> None:
    a, b, c, d = (_gene(n, 10 * n) for n in range(1, 5))
    items = [a, b, c, d]  # the gene ranking, best first
    kept = [a, b, c]  # past the gene floor: d is not
    located = [_pointer(d, "reply.keepAs", 6.0), _pointer(c, "reply.put", 5.0), _pointer(d, "reply.kind", 4.5),
               _pointer(a, "reply.code", 1.0)]  # under 0.3 x 6.0: leads nothing
    order = [sg.gene.rowid for sg in _by_pointers(items, kept, located, 0.3)]
    assert order == [4, 3, 1, 2]  # d and c by their pointers (d once), then a and b as the genes ranked


def test_without_pointers_the_gene_ranking_stands() -> None:
    a, b = _gene(1, 1), _gene(2, 20)
    assert _by_pointers([a, b], [a, b], [], 0.3) == [a, b]
