"""Reads of the symbols table and of the full-text vocabulary: what retrieval asks per query, as genome methods.

Kept apart from store.py (which owns writes) so each query is one small,
bound-parameter statement that can be read and measured on its own. A mixin of both
genomes: the SQL takes `?` marks on either (the team genome's `conn` rewrites them,
pg/qmark.py), and the two answers PostgreSQL keeps in memory instead of asking
(a word's document count, a gene's code-ness) are overridden there (pg/counts.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from helix_context.genome.fts_terms import fts5_terms
from helix_context.genome.fts_text import quote_term

_CHUNK = 500  # SQLite's bound-parameter limit is far above this; keeps statements cacheable
_ALL = 1 << 40  # a count "up to" this is exact


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


class SymbolReadsMixin:
    """Needs `conn` from the genome, and `doc_count_upto` (lexicon.LexiconMixin)."""

    conn: Any
    doc_count_upto: Callable[[str, int], int]

    def symbols_in_genes(self, genes: Iterable[int]) -> dict[int, list[SymbolRow]]:
        """Gene rowid → the symbols whose first line it holds, in line order."""
        ids = list(dict.fromkeys(int(g) for g in genes))
        out: dict[int, list[SymbolRow]] = {}
        for part in _chunks(ids):
            marks = ",".join("?" * len(part))
            for row in self.conn.execute(f"SELECT {_COLUMNS} FROM symbols WHERE gene IN ({marks}) ORDER BY start_line",
                                         list(part)):
                sym = SymbolRow(*row)
                out.setdefault(sym.gene, []).append(sym)
        return out

    def start_named_and_framed(self, leaves: Iterable[str], per_name: int, frames: Iterable[tuple[str, str]]
                               ) -> Callable[[], tuple[dict[str, list[SymbolRow]], dict[str, list[SymbolRow]]]]:
        """(lowercased name → symbols defining it, at most `per_name + 1` each so the caller sees 'too
        common'; lowercased frame function → its definitions in files of the frame's file name), read
        when the returned function is called; the statement for the names is sent now.

        A traceback frame names the file, so a name defined in hundreds of places (`__new__`) still
        points at one or two of them. Why together: a pasted traceback's functions are also names it
        uses as code, and each was read twice, one statement per name each time (96 for a 20 KB
        issue). The frames' functions are read in full, in one statement, in the order of the leaf
        index (by id); the other names up to `per_name + 1` rows each. A name among the frames takes
        the first `per_name + 1` of its rows, which are the rows a read up to `per_name + 1` gives.

        Why sent now and read later: on the team genome a question's reads share one pipeline
        (`read_snapshot`), so statements sent before the question's word counts and searches travel
        with them instead of taking round trips of their own: the one a "def name" question spent on
        its names, and the one a pasted traceback spent on its frames (which names are frames is known
        from the query, so the names' statement need not wait for the frames' rows)."""
        pairs = list(dict.fromkeys((t.lower(), f.lower()) for t, f in frames))
        framed_leaves = list(dict.fromkeys(leaf for _, leaf in pairs))
        reading_whole = self._start_rows_by_leaf(framed_leaves)
        names = list(dict.fromkeys(leaves))
        in_frames = set(framed_leaves)
        reading = self._start_rows_by_leaf([leaf for leaf in names if leaf not in in_frames], per_name + 1)

        def read() -> tuple[dict[str, list[SymbolRow]], dict[str, list[SymbolRow]]]:
            whole = reading_whole()
            few = reading()
            named: dict[str, list[SymbolRow]] = {}
            for leaf in names:
                rows = whole[leaf][:per_name + 1] if leaf in whole else few[leaf]
                if rows:
                    named[leaf] = [SymbolRow(*r) for r in rows]
            framed: dict[str, list[SymbolRow]] = {}
            for tail, leaf in pairs:  # rows become SymbolRows only where the file matches (`__init__`: thousands)
                hits = [SymbolRow(*r) for r in whole[leaf] if r[1].replace("\\", "/").rsplit("/", 1)[-1].lower() == tail]
                if hits:
                    framed.setdefault(leaf, []).extend(hits)
            return named, framed

        return read

    def _start_rows_by_leaf(self, leaves: Sequence[str], limit: int | None = None
                            ) -> Callable[[], dict[str, list[tuple[Any, ...]]]]:
        """Each name → the symbols rows defining it (_COLUMNS, by id; all, or the first `limit`; empty: none),
        one statement per _CHUNK names, sent now; the rows are read when the returned function is called."""
        names = list(dict.fromkeys(leaves))
        cursors = []
        for part in _chunks(names):
            marks = ",".join("?" * len(part))
            if limit is None:
                sql, args = (f"SELECT leaf, {_COLUMNS} FROM symbols WHERE leaf IN ({marks}) ORDER BY leaf, id",
                             list(part))
            else:  # each name's first rows by id, as `WHERE leaf = ? ORDER BY id LIMIT ?` per name gives
                sql = (f"SELECT leaf, {_COLUMNS} FROM (SELECT leaf, {_COLUMNS}, ROW_NUMBER() OVER "
                       f"(PARTITION BY leaf ORDER BY id) AS k FROM symbols WHERE leaf IN ({marks})) AS firsts "
                       "WHERE k <= ? ORDER BY leaf, id")
                args = [*part, limit]
            cursors.append(self.conn.execute(sql, args))

        def read() -> dict[str, list[tuple[Any, ...]]]:
            out: dict[str, list[tuple[Any, ...]]] = {leaf: [] for leaf in names}
            for cursor in cursors:
                for row in cursor.fetchall():
                    out[row[0]].append(row[1:])
            return out

        return read

    def symbols_of_path(self, path: str) -> list[SymbolRow]:
        return [SymbolRow(*r) for r in self.conn.execute(
            f"SELECT {_COLUMNS} FROM symbols WHERE path = ? ORDER BY start_line", (path,))]

    def term_doc_counts(self, terms: Sequence[str]) -> dict[str, int]:
        """Indexed term → number of genes holding it (terms as FTS5 stores them: lowercased, stemmed);
        terms no gene holds are left out."""
        out: dict[str, int] = {}
        for term in dict.fromkeys(terms):
            # one equality lookup each: fts5vocab answers `term = ?` from the index, but scans for IN (...)
            row = self.conn.execute("SELECT doc FROM genes_fts_vocab WHERE term = ?", (term,)).fetchone()
            if row is not None:
                out[term] = int(row[0])
        return out

    def index_terms(self, words: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """Each written word → the terms this genome's index holds for it (FTS5's own tokenizer)."""
        return fts5_terms(words)

    def word_doc_counts(self, words: Sequence[str]) -> dict[str, int]:
        """Written word → number of genes holding it, exact; words no gene holds are left out.

        The word is turned into terms by the index's own tokenizer (`index_terms`), never stemmed
        here first: a stem stemmed again is another word (fts_terms.py says why)."""
        terms = self.index_terms(words)
        single = {w: t[0] for w, t in terms.items() if len(t) == 1}
        counted = self.term_doc_counts(list(dict.fromkeys(single.values())))
        out = {w: counted[t] for w, t in single.items() if t in counted}
        for word, held in terms.items():
            if len(held) > 1:  # a word the tokenizer splits: the genes holding all of its parts as a phrase
                n = self.doc_count_upto(quote_term(word), _ALL)
                if n:
                    out[word] = n
        return out

    def code_rowids(self, rowids: Iterable[int]) -> set[int]:
        """The genes among `rowids` that hold code (their signals are weighed with the code weights)."""
        ids = list(dict.fromkeys(map(int, rowids)))  # (map: a question's ~500 candidates, twice)
        out: set[int] = set()
        for part in _chunks(ids):
            marks = ",".join("?" * len(part))
            out.update(r for (r,) in self.conn.execute(
                f"SELECT id FROM genes WHERE content_type = 'code' AND id IN ({marks})", list(part)))
        return out

    def gene_paths(self, rowids: Sequence[int]) -> dict[int, str]:
        """Gene rowid → its source path, without reading (or decompressing) the genes' text."""
        out: dict[int, str] = {}
        for part in _chunks(list(rowids)):
            marks = ",".join("?" * len(part))
            out.update(self.conn.execute(
                f"SELECT id, source_path FROM genes WHERE id IN ({marks}) AND source_path IS NOT NULL",
                list(part)).fetchall())
        return out
