"""Reads of the symbols table and of the full-text vocabulary: what retrieval asks per query.

Kept apart from store.py (which owns writes) so each query is one small,
bound-parameter statement that can be read and measured on its own.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from helix_context.genome.backend import CodeRows, LexicalCounts

_CHUNK = 500  # SQLite's bound-parameter limit is far above this; keeps statements cacheable


@dataclass(frozen=True)
class SymbolRow:
    id: int
    path: str
    gene: int  # rowid of the gene holding the first line
    name: str
    kind: str
    start_line: int
    end_line: int


_COLUMNS = "id, path, gene, name, kind, start_line, end_line"


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def symbols_in_genes(conn: sqlite3.Connection, genes: Iterable[int]) -> dict[int, list[SymbolRow]]:
    """Gene rowid → the symbols whose first line it holds, in line order."""
    ids = list(dict.fromkeys(int(g) for g in genes))
    out: dict[int, list[SymbolRow]] = {}
    for part in _chunks(ids):
        marks = ",".join("?" * len(part))
        for row in conn.execute(f"SELECT {_COLUMNS} FROM symbols WHERE gene IN ({marks}) ORDER BY start_line",
                                list(part)):
            sym = SymbolRow(*row)
            out.setdefault(sym.gene, []).append(sym)
    return out


def symbols_named(conn: sqlite3.Connection, leaves: Iterable[str], per_name: int) -> dict[str, list[SymbolRow]]:
    """Lowercased name → symbols defining it (at most `per_name + 1` each, so the caller sees 'too common')."""
    out: dict[str, list[SymbolRow]] = {}
    for leaf in dict.fromkeys(leaves):
        rows = conn.execute(f"SELECT {_COLUMNS} FROM symbols WHERE leaf = ? LIMIT ?", (leaf, per_name + 1)).fetchall()
        if rows:
            out[leaf] = [SymbolRow(*r) for r in rows]
    return out


def frame_symbols(conn: sqlite3.Connection, frames: Iterable[tuple[str, str]]) -> dict[str, list[SymbolRow]]:
    """Lowercased function name → its definitions in files of the frame's file name.

    A traceback frame names the file, so a name defined in hundreds of places (`__new__`)
    still points at one or two of them.
    """
    out: dict[str, list[SymbolRow]] = {}
    for tail, leaf in dict.fromkeys((t.lower(), f.lower()) for t, f in frames):
        rows = conn.execute(f"SELECT {_COLUMNS} FROM symbols WHERE leaf = ?", (leaf,)).fetchall()
        hits = [SymbolRow(*r) for r in rows if r[1].replace("\\", "/").rsplit("/", 1)[-1].lower() == tail]
        if hits:
            out.setdefault(leaf, []).extend(hits)
    return out


def symbols_of_path(conn: sqlite3.Connection, path: str) -> list[SymbolRow]:
    return [SymbolRow(*r) for r in conn.execute(
        f"SELECT {_COLUMNS} FROM symbols WHERE path = ? ORDER BY start_line", (path,))]


def term_doc_counts(conn: sqlite3.Connection, terms: Sequence[str]) -> dict[str, int]:
    """Indexed term → number of genes holding it (terms as FTS5 stores them: lowercased, stemmed)."""
    # the PostgreSQL genome's connection (genome/backend.py); the type test first keeps SQLite's path at one check
    if type(conn) is not sqlite3.Connection and isinstance(conn, LexicalCounts):
        return conn.term_doc_counts(terms)
    out: dict[str, int] = {}
    for term in dict.fromkeys(terms):
        # one equality lookup each: fts5vocab answers `term = ?` from the index, but scans for IN (...)
        row = conn.execute("SELECT doc FROM genes_fts_vocab WHERE term = ?", (term,)).fetchone()
        if row is not None:
            out[term] = int(row[0])
    return out


def code_rowids(conn: sqlite3.Connection, rowids: Iterable[int]) -> set[int]:
    """The genes among `rowids` that hold code (their signals are weighed with the code weights)."""
    ids = list(dict.fromkeys(int(r) for r in rowids))
    if type(conn) is not sqlite3.Connection and isinstance(conn, CodeRows):  # PostgreSQL: kept, not re-read
        return conn.code_rowids(ids)
    out: set[int] = set()
    for part in _chunks(ids):
        marks = ",".join("?" * len(part))
        out.update(r for (r,) in conn.execute(
            f"SELECT id FROM genes WHERE content_type = 'code' AND id IN ({marks})", list(part)))
    return out


def gene_paths(conn: sqlite3.Connection, rowids: Sequence[int]) -> dict[int, str]:
    """Gene rowid → its source path, without reading (or decompressing) the genes' text."""
    out: dict[int, str] = {}
    for part in _chunks(list(rowids)):
        marks = ",".join("?" * len(part))
        out.update(conn.execute(f"SELECT id, source_path FROM genes WHERE id IN ({marks}) AND source_path IS NOT NULL",
                                list(part)).fetchall())
    return out


def live_gene_count(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM genes WHERE retired_at IS NULL").fetchone()[0])
