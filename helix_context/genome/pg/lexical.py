"""Lexical search on PostgreSQL: a postings table scored with FTS5's own BM25, over the same text.

Why postings and not PostgreSQL's full-text search: the SQLite genome ranks with FTS5's
bm25() over identifier-split text (fts_text.py), and the parity target is "the same
answers". `ts_rank` is not BM25 (no document-frequency idf, no length saturation), so
tsvector search would change the ranking; a table of (term, gene, count per column) lets
the exact formula be computed: weighted term frequency (body 1.0, tags 0.6, path 0.8),
one document length over all columns, idf = ln((N - n + 0.5) / (n + 0.5)) floored at
1e-6. Candidate rows are aggregated in SQL (one GROUP BY over the query's postings);
the score is summed here, where the match expression's OR/AND/phrase structure is easy
to evaluate. Retrieval already limits the words it searches to rare ones (terms.py), so
the rows read stay bounded as the genome grows.

Tokens: FTS5's unicode61 tokenizer ('_' kept inside tokens, diacritics removed), then the
Porter stemmer (tokens of 3 to 64 characters), on the document and the query alike.
A quoted phrase is matched as all of its words in the gene (not adjacency): a gap, noted
in docs/team.md.
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import Stemmer

from helix_context.genome import fts_text

_TOKEN = re.compile(r"\w+")
_QUOTED = re.compile(r'"((?:[^"]|"")*)"')
_WEIGHTS = {"body": 1.0, "tags": 0.6, "path": 0.8}
_K1 = 1.2
_B = 0.75
_LOCAL = threading.local()


def _stem(words: list[str]) -> list[str]:
    stemmer = getattr(_LOCAL, "stemmer", None)
    if stemmer is None:
        stemmer = _LOCAL.stemmer = Stemmer.Stemmer("porter")
    out: list[str] = stemmer.stemWords(words)
    return out


class _Stems(dict[str, str]):
    """Word → its term (Porter stem for 3 to 64 characters, else the word), filled on first sight.

    Why: a gene repeats its words, and a code base repeats them across genes; counting a text's words
    first and looking each distinct one up here (a C-level dict hit once seen) tokenizes an ingest's
    postings at a fraction of stemming every occurrence. Emptied past `limit` words (bounded memory)."""

    limit = 200_000

    def __missing__(self, word: str) -> str:
        if len(self) >= self.limit:
            self.clear()
        term = _stem([word])[0] if 3 <= len(word) <= 64 else word
        self[word] = term
        return term


_STEMS = _Stems()


def _words(text: str) -> list[str]:
    """unicode61's tokens before stemming: lower case, diacritics removed ('_' kept inside words)."""
    folded = text.lower()
    if not folded.isascii():  # NFKD leaves ASCII as it is: only other text pays for it
        folded = "".join(c for c in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(c))
    return _TOKEN.findall(folded)


def tokens(text: str) -> list[str]:
    """The terms FTS5 (porter unicode61 remove_diacritics 2 tokenchars '_') would index for `text`."""
    if not text:
        return []
    return list(map(_STEMS.__getitem__, _words(text)))


def term_counts(text: str) -> tuple[Counter[str], int]:
    """Each term of `text` with its count (first-seen order), and the number of tokens.
    Each word is looked up in _STEMS and counted at C speed (map, Counter): no Python loop per word."""
    if not text:
        return Counter(), 0
    words = _words(text)
    return Counter(map(_STEMS.__getitem__, words)), len(words)


def gene_rows(body: str, tags: str, path: str | None) -> tuple[str, int, str]:
    """A gene's rows of lex_postings as COPY text without the gene id (not known until the gene is
    inserted; PostingsWriter appends it), its document length, and its distinct terms space-separated
    (lex_docs.terms: how its postings are found again to delete them). `tags` "\\n"-joined, `path` as
    stored: the columns' text is derived here as fts_text derives it for FTS5.

    Why text built here: ~60 rows a gene, and psycopg's write_row per row cost as much as tokenizing
    them. A term is a run of word characters, so it never holds a tab, newline, backslash or space
    (the only characters COPY's text format escapes, and the terms' separator). Columns: term,
    tf_body, tf_tags, tf_path, doc_tokens."""
    (b, nb), (t, nt), (p, np_) = (term_counts(body), term_counts(fts_text.tags_text(tags.split("\n") if tags else [])),
                                  term_counts(fts_text.path_text(path)))
    length = nb + nt + np_
    end = f"\t{length}\n"
    # most terms are the body's alone: their rows need no look-up in the tags' and path's few terms
    side = dict.fromkeys([*t, *p])
    rows = [f"{term}\t{n}\t0\t0{end}" for term, n in b.items() if term not in side]
    rows += [f"{term}\t{b.get(term, 0)}\t{t.get(term, 0)}\t{p.get(term, 0)}{end}" for term in side]
    return "".join(rows), length, " ".join([*(b.keys() - side.keys()), *side])


@dataclass(frozen=True)
class Query:
    """An FTS5 match expression as retrieval writes it: OR of ANDs of quoted strings.

    groups: each quoted string's distinct terms; disjuncts: indexes into groups that must all match.
    """

    groups: tuple[tuple[str, ...], ...]
    disjuncts: tuple[tuple[int, ...], ...]


def parse(expr: str) -> Query:
    """`"a" OR "b c"`, `"a" AND "b" OR "p q"` (AND binds tighter, as in FTS5); unquoted words too."""
    groups: list[tuple[str, ...]] = []
    disjuncts: list[tuple[int, ...]] = []
    for part in re.split(r"\s+OR\s+", expr.strip()):
        members: list[int] = []
        for piece in re.split(r"\s+AND\s+", part.strip()):
            quoted = _QUOTED.fullmatch(piece.strip())
            text = quoted.group(1).replace('""', '"') if quoted else piece.strip("() ")
            terms = tuple(dict.fromkeys(tokens(text)))
            if terms:
                members.append(len(groups))
                groups.append(terms)
        if members:
            disjuncts.append(tuple(members))
    return Query(tuple(groups), tuple(disjuncts))


_COLUMN_FILTER = {None: "", "body": "AND p.tf_body > 0", "tags": "AND p.tf_tags > 0", "path": "AND p.tf_path > 0"}


def _group_rows(conn: Any, query: Query, column: str | None) -> list[tuple[int, int, int, int, int, int]]:
    """(gene, group, tf_body, tf_tags, tf_path, doc tokens) for every gene holding all of a group's terms."""
    terms = [t for g in query.groups for t in g]
    index = [i + 1 for i, g in enumerate(query.groups) for _ in g]
    sizes = [len(g) for g in query.groups]
    sql = ("SELECT p.gene, q.grp, min(p.tf_body), min(p.tf_tags), min(p.tf_path), max(p.doc_tokens) "
           "FROM unnest(%s::text[], %s::int[]) AS q(term, grp) JOIN lex_postings p ON p.term = q.term "
           f"WHERE true {_COLUMN_FILTER[column]} "
           "GROUP BY p.gene, q.grp HAVING count(*) = (%s::int[])[q.grp]")
    rows: list[tuple[int, int, int, int, int, int]] = conn.execute(sql, (terms, index, sizes)).fetchall()
    return rows


def corpus_stats(conn: Any) -> tuple[int, int]:
    """(live genes indexed, their tokens): BM25's N and, divided, its average document length.
    A scan of lex_docs: callers keep it per generation (read_stats.py)."""
    row = conn.execute("SELECT count(*), COALESCE(sum(tokens), 0) FROM lex_docs").fetchone()
    return int(row[0]), int(row[1])


COLUMNS = (None, "body", "tags", "path")  # the order of doc_freqs' counts


def doc_freqs(conn: Any, terms: Sequence[str]) -> dict[str, tuple[int, int, int, int]]:
    """Term → genes holding it (any column, body, tags, path): a key lookup per term in the counts the
    postings' triggers keep (schema.py: V_TERM_COUNTS). A term no gene holds is left out."""
    wanted = list(dict.fromkeys(terms))
    if not wanted:
        return {}
    rows = conn.execute("SELECT term, n_all, n_body, n_tags, n_path FROM lex_terms "
                        "WHERE term = ANY(%s) AND n_all > 0", (wanted,)).fetchall()
    return {str(t): (int(a), int(b), int(c), int(d)) for t, a, b, c, d in rows}


DocFreqs = Callable[[Sequence[str]], Mapping[str, tuple[int, int, int, int]]]
HoldingAll = Callable[[Sequence[str], "str | None"], Iterable[Any]]  # posting_sets.PostingSets.holding_all: gene ids


def idf(n_docs: int, held: int) -> float:
    return max(math.log((n_docs - held + 0.5) / (held + 0.5)), 1e-6)


def _all_of(terms: Sequence[str], freqs: Mapping[str, tuple[int, int, int, int]] | None,
            column: str | None = None) -> tuple[str, list[Any]]:
    """SQL (a subquery of `gene`) for the genes holding every one of `terms`, and its arguments.

    The rarest word's postings are walked (counts from `freqs` when known) and each other word is
    probed by the postings' key (term, gene): the cost follows the rarest word, not the commonest,
    as FTS5's AND does. A GROUP BY over every word's postings read all of them (at 100k genes, two
    words of a config key in a quarter of the files each: ~50k rows per count)."""
    at = COLUMNS.index(column)
    ordered = sorted(dict.fromkeys(terms), key=lambda t: (freqs or {}).get(t, (0, 0, 0, 0))[at])
    sql = "SELECT p0.gene FROM lex_postings p0"
    for i in range(1, len(ordered)):
        sql += f" JOIN lex_postings p{i} ON p{i}.term = %s AND p{i}.gene = p0.gene"
    sql += " WHERE p0.term = %s"
    if column is not None:
        sql += "".join(f" AND p{i}.tf_{column} > 0" for i in range(len(ordered)))
    return sql, [*ordered[1:], ordered[0]]


Hits = list[tuple[int, float]]


def _no_hits() -> Hits:
    return []


def _scored_in_sql(conn: Any, query: Query, weights: list[float], column: str | None, n_docs: int, avgdl: float,
                   limit: int, freqs: DocFreqs, holding_all: HoldingAll | None = None) -> Callable[[], Hits] | None:
    """Words only (no phrase), all ORed or all ANDed: BM25 summed by the server, only the best `limit`
    rows come back, read when the returned function is called (the statement is sent now: in a read
    snapshot's pipeline, a question's searches travel together). None: the expression has another
    shape (start_search() scores it here).

    Each word's idf comes in with the words (document counts kept per generation, read_stats.py), so
    the statement reads only the words' postings, from the covering index (no table pages), and sums
    in float8: one index-only pass, one aggregate, one top-N sort."""
    if any(len(g) != 1 for g in query.groups):
        return None
    every = len(query.disjuncts) == 1 and len(query.disjuncts[0]) > 1
    if not every and any(len(d) != 1 for d in query.disjuncts):
        return None
    terms = list(dict.fromkeys(g[0] for g in query.groups))
    counts = freqs(terms)
    at = COLUMNS.index(column)
    held = [t for t in terms if counts.get(t, (0, 0, 0, 0))[at] > 0]
    if not held or (every and len(held) < len(terms)):
        return _no_hits
    idfs = [idf(n_docs, counts[t][at]) * (_K1 + 1) for t in held]
    f = "(%s * p.tf_body + %s * p.tf_tags + %s * p.tf_path)"
    score = f"sum(q.w * {f} / ({f} + %s + %s * p.doc_tokens))"
    args: list[Any] = [*weights, *weights, _K1 * (1 - _B), _K1 * _B / avgdl]
    if every and holding_all is not None:  # the genes holding every word, from the per-generation id sets
        genes = [int(g) for g in holding_all(held, column)]
        if not genes:
            return _no_hits
        sql = (f"SELECT gene, s FROM (SELECT p.gene, {score} AS s FROM unnest(%s::bigint[]) AS g(gene) "
               "CROSS JOIN unnest(%s::text[], %s::float8[]) AS q(term, w) "
               "JOIN lex_postings p ON p.term = q.term AND p.gene = g.gene GROUP BY p.gene) AS t "
               "ORDER BY round(s * 1e9) DESC, gene LIMIT %s")
        args = [*args, genes, held, idfs, limit]
    elif every:  # the genes holding every word first (rarest word walked), then only their postings scored
        both, both_args = _all_of(held, counts, column)
        sql = (f"SELECT gene, s FROM (SELECT p.gene, {score} AS s FROM ({both}) AS g "
               "CROSS JOIN unnest(%s::text[], %s::float8[]) AS q(term, w) "
               "JOIN lex_postings p ON p.term = q.term AND p.gene = g.gene GROUP BY p.gene) AS t "
               "ORDER BY round(s * 1e9) DESC, gene LIMIT %s")
        args = [*args, *both_args, held, idfs, limit]
    else:
        sql = (f"SELECT gene, s FROM (SELECT p.gene, {score} AS s "
               "FROM unnest(%s::text[], %s::float8[]) AS q(term, w) JOIN lex_postings p ON p.term = q.term "
               f"WHERE true {_COLUMN_FILTER[column]} GROUP BY p.gene) AS t "
               "ORDER BY round(s * 1e9) DESC, gene LIMIT %s")
        args = [*args, held, idfs, limit]
    sent = conn.execute(sql, args)
    return lambda: [(int(g), float(sc)) for g, sc in sent.fetchall()]


def search(conn: Any, expr: str, limit: int, column: str | None = None, stats: tuple[int, int] | None = None,
           freqs: DocFreqs | None = None, holding_all: HoldingAll | None = None) -> Hits:
    """(gene id, score) best first; score = -bm25 as FTS5 computes it (higher is better).

    `stats` (N, total tokens) and `freqs` (document counts per term) may come from a cache kept per
    generation; without them they are read here."""
    return start_search(conn, expr, limit, column, stats, freqs, holding_all)()


def start_search(conn: Any, expr: str, limit: int, column: str | None = None, stats: tuple[int, int] | None = None,
                 freqs: DocFreqs | None = None, holding_all: HoldingAll | None = None) -> Callable[[], Hits]:
    """search()'s hits, read when the returned function is called; the scoring statement is sent now."""
    query = parse(expr)
    if not query.groups or limit <= 0:
        return _no_hits
    n_docs, total = stats if stats is not None else corpus_stats(conn)
    if n_docs == 0:
        return _no_hits
    avgdl = total / n_docs
    # a column filter counts only that column's occurrences, as FTS5's `{col} : (...)` does
    weights = [w if column in (None, name) else 0.0 for name, w in _WEIGHTS.items()]
    in_sql = _scored_in_sql(conn, query, weights, column, n_docs, avgdl, limit,
                            freqs if freqs is not None else (lambda terms: doc_freqs(conn, terms)), holding_all)
    if in_sql is not None:
        return in_sql
    scored = _scored_here(conn, query, weights, column, n_docs, avgdl, limit)
    return lambda: scored


def _scored_here(conn: Any, query: Query, weights: list[float], column: str | None, n_docs: int, avgdl: float,
                 limit: int) -> Hits:
    """Phrases and mixed AND/OR: each gene's postings of the query's words read, BM25 summed here."""
    per_gene: dict[int, dict[int, float]] = {}
    length: dict[int, int] = {}
    held = Counter[int]()
    for gene, grp, tb, tt, tp, dl in _group_rows(conn, query, column):
        per_gene.setdefault(gene, {})[grp - 1] = weights[0] * tb + weights[1] * tt + weights[2] * tp
        length[gene] = dl
        held[grp - 1] += 1
    idfs = [idf(n_docs, held[g]) for g in range(len(query.groups))]
    scored: list[tuple[int, float]] = []
    for gene, freqs_of in per_gene.items():
        if not any(all(g in freqs_of for g in members) for members in query.disjuncts):
            continue
        norm = _K1 * (1 - _B + _B * length[gene] / avgdl)
        scored.append((gene, sum(idfs[g] * f * (_K1 + 1) / (f + norm) for g, f in freqs_of.items())))
    # ties broken by gene id at 9 decimals, as the server does (sums in another order differ in the last bits)
    scored.sort(key=lambda kv: (-round(kv[1], 9), kv[0]))
    return scored[:limit]


def doc_count_upto(conn: Any, expr: str, cap: int, stats: tuple[int, int] | None = None,
                   freqs: DocFreqs | None = None) -> int:
    """Genes matching `expr`, counted up to cap + 1 (lexicon.doc_count_upto's contract)."""
    query = parse(expr)
    if not query.groups:
        return 0
    if len(query.groups) == 1 and len(query.groups[0]) == 1:
        row = conn.execute("SELECT count(*) FROM (SELECT 1 FROM lex_postings WHERE term = %s LIMIT %s) AS s",
                           (query.groups[0][0], cap + 1)).fetchone()
        return int(row[0])
    if len(query.disjuncts) == 1 and all(len(g) == 1 for g in query.groups):  # words ANDed: no scoring needed
        terms = [g[0] for g in query.groups]
        both, args = _all_of(terms, freqs(terms) if freqs is not None else None)
        row = conn.execute(f"SELECT count(*) FROM ({both} LIMIT %s) AS s", [*args, cap + 1]).fetchone()
        return int(row[0])
    return min(len(search(conn, expr, cap + 1, stats=stats, freqs=freqs)), cap + 1)


def term_rowids(conn: Any, expr: str, limit: int) -> list[int]:
    """Gene ids whose postings hold the term expression `expr`, at most `limit` (the genome's term_rowids contract):
    the lowest ids first, as SQLite's full-text index gives them, so a word held by more genes than `limit`
    stands for the same subset on both backends."""
    query = parse(expr)
    if not query.groups or limit <= 0:
        return []
    if len(query.groups) == 1 and len(query.groups[0]) == 1:
        # one array value, not a row per gene: the silence gate reads up to 20k ids of a word per question
        row = conn.execute("SELECT array_agg(gene) FROM (SELECT gene FROM lex_postings WHERE term = %s "
                           "ORDER BY gene LIMIT %s) AS s", (query.groups[0][0], limit)).fetchone()
        return [int(g) for g in row[0]] if row and row[0] else []
    return [gene for gene, _ in search(conn, expr, limit)]


def gene_ids(packed: bytes | None) -> np.ndarray:
    """Gene ids sent as one bytea of big-endian int8s (`string_agg(int8send(gene), '')`), as an int64 array.
    Why a bytea: numpy reads it as it comes, where an int8[] became a Python int per id first."""
    return np.frombuffer(packed, dtype=">i8").astype(np.int64) if packed else np.zeros(0, np.int64)


def term_rowid_lists(conn: Any, exprs: Mapping[str, str], limit: int,
                     held: Callable[[Sequence[str]], Mapping[str, np.ndarray]] | None = None) -> dict[str, np.ndarray]:
    """term_rowids for many words in one round trip: word → the sorted ids of the genes whose postings hold
    its expression (`exprs`: word → term expression), at most `limit` each. A word that is not one term
    (rare: FTS5 would split it) is read on its own. Each word's ids come as one bytea (`gene_ids`).
    `held`: terms → their whole sorted ids where already in memory (posting_sets.PostingSets.held)."""
    out: dict[str, np.ndarray] = {}
    single: dict[str, str] = {}  # word → the one posting term it is
    for word, expr in exprs.items():
        query = parse(expr)
        if not query.groups or limit <= 0:
            out[word] = np.zeros(0, np.int64)
        elif len(query.groups) == 1 and len(query.groups[0]) == 1:
            single[word] = query.groups[0][0]
        else:
            out[word] = np.asarray(term_rowids(conn, expr, limit), dtype=np.int64)
    if single and held is not None:
        known = held(list(dict.fromkeys(single.values())))
        for word, term in list(single.items()):
            if term in known:
                out[word] = known[term][:limit].astype(np.int64)
                del single[word]
    if single:
        with conn.cursor(binary=True) as cur:
            rows = cur.execute("SELECT t.term, (SELECT string_agg(int8send(s.gene), ''::bytea ORDER BY s.gene) "
                               "FROM (SELECT gene FROM lex_postings AS p WHERE p.term = t.term ORDER BY gene LIMIT %s) "
                               "AS s) FROM unnest(%s::text[]) AS t(term)",
                               (limit, list(dict.fromkeys(single.values())))).fetchall()
        found = {str(term): gene_ids(ids) for term, ids in rows}
        out.update((word, found.get(term, np.zeros(0, np.int64))) for word, term in single.items())
    return out
