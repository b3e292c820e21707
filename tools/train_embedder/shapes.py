"""Digest pairs: each mined question against what Helix's embedder actually reads.

Why: the code pairs' passage is a function's source without its docstring, up
to 256 word pieces, but the product never embeds that. It embeds a gene (a
chunk of a file that may hold several functions) and, for the best genes, each
symbol's span, both as ``embed_text.embedding_text`` digests (where the code
lives and the names it defines as words, then its comments and docstrings,
then the code) cut at ``[embedding] code_max_tokens`` (32) word pieces.
Measured (docs/performance.md, "Why the trained model does not reach 1.6x
bm25s"), the model trained on the code pairs reads that digest worse than the
code it was trained on; these pairs train on the digest itself.

For each mined (question, function) pair, with the question's own sentence
taken out of the function's docstring (the rest of the docstring stays, as
it does in the product, so the model learns from names, paths and the other
sentences rather than by copying):

* the span pair: the function's own lines as locate cuts them, under its
  qualified name (``span_dense.span_gene``'s shape);
* the gene pair, only where the function's gene holds two symbols or more:
  the whole chunk under the chunk's symbol, the blend the gene vector is.

Genes come from the product's own ``make_genes`` (same chunker, same symbol
finder, same digest), so the passages follow the product if it changes.
Held-out questions (whole files, mine.py's split) give span pairs only: one
passage per question, so MRR@10 has one right answer.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

from helix_context.config import Settings
from helix_context.ingest.embed_text import embedding_text
from helix_context.ingest.genes import make_genes
from helix_context.models import Gene, Provenance

MAX_PASSAGE_CHARS = 1500  # far past 32 pieces; bounds the files, the trainer cuts by pieces

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def docstring_without(doc: str, sentence: str, sentence_end: re.Pattern[str]) -> str | None:
    """The docstring with its first sentence (the question) taken out; None if it does not start so."""
    para, _, others = doc.strip().partition("\n\n")
    text = " ".join(para.split())
    parts = sentence_end.split(text, maxsplit=1)
    if parts[0].strip() != sentence:
        return None
    rest = parts[1].strip() if len(parts) > 1 else ""
    return "\n\n".join(p for p in (rest, others.strip()) if p)


def _replace_docstring(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef,
                       rest: str) -> tuple[list[str], int, int]:
    """File lines with the node's docstring rewritten to `rest`; (lines, first line, line shift)."""
    doc_node = node.body[0]
    d0, d1 = doc_node.lineno, doc_node.end_lineno or doc_node.lineno
    indent = lines[d0 - 1][: len(lines[d0 - 1]) - len(lines[d0 - 1].lstrip())]
    if rest:
        body = rest.split("\n")
        new = [f'{indent}"""{body[0]}'] + [f"{indent}{ln}" if ln else "" for ln in body[1:]] + [f'{indent}"""']
    else:
        new = []
    return lines[: d0 - 1] + new + lines[d1:], d0, len(new) - (d1 - d0 + 1)


def _shifted(lines: list[str], first: int, last: int, at: int, shift: int) -> str:
    """Lines first..last (1-based, of the original file) read from the rewritten file."""
    end = last + shift if last >= at else last
    return "\n".join(lines[first - 1 : end])


def digest_pairs(site: Path, rows: list[dict], *, settings: Settings, sentence_end: re.Pattern[str],
                 with_genes: bool) -> list[dict]:
    """Span (and, `with_genes`, blended-gene) digest pairs for mined rows ({q, src: "rel:line"})."""
    by_file: dict[str, dict[int, str]] = {}
    for row in rows:
        rel, line = row["src"].rsplit(":", 1)
        by_file.setdefault(rel, {})[int(line)] = row["q"]
    out: list[dict] = []
    for rel in sorted(by_file):
        try:
            text = (site / rel).read_text(encoding="utf-8")
            tree = ast.parse(text)
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError, RecursionError):
            continue
        lines = text.split("\n")
        genes = make_genes(text, settings=settings, tagger=None, path=rel, content_type="code",
                           language="python", project=None, provenance=Provenance())
        wanted = by_file[rel]
        for node in ast.walk(tree):
            if not isinstance(node, _FUNCS) or node.lineno not in wanted:
                continue
            question = wanted[node.lineno]
            out.extend(_pairs_for(node, question, lines, genes, sentence_end, with_genes, rel))
    return out


def _pairs_for(node: ast.FunctionDef | ast.AsyncFunctionDef, question: str, lines: list[str],
               genes: list[Gene], sentence_end: re.Pattern[str], with_genes: bool, rel: str) -> list[dict]:
    doc = ast.get_docstring(node, clean=True)
    rest = docstring_without(doc or "", question, sentence_end)
    if rest is None:
        return []
    gene = next((g for g in genes if g.start_line <= node.lineno <= g.end_line), None)
    if gene is None:
        return []
    sym = min((s for s in gene.symbols if s.start_line <= node.lineno <= s.end_line
               and s.name.rsplit(".", 1)[-1] == node.name),
              key=lambda s: s.end_line - s.start_line, default=None)
    if sym is None:
        return []
    new_lines, at, shift = _replace_docstring(lines, node, rest)
    src = f"{rel}:{node.lineno}"
    span = dataclasses.replace(gene, content=_shifted(new_lines, sym.start_line, sym.end_line, at, shift),
                               symbol=sym.name, start_line=sym.start_line, end_line=sym.end_line, symbols=())
    pairs = [{"q": question, "c": embedding_text(span)[:MAX_PASSAGE_CHARS], "src": src, "shape": "span"}]
    if with_genes and len(gene.symbols) >= 2:
        whole = dataclasses.replace(gene, content=_shifted(new_lines, gene.start_line, gene.end_line, at, shift))
        pairs.append({"q": question, "c": embedding_text(whole)[:MAX_PASSAGE_CHARS], "src": src, "shape": "gene"})
    return pairs
