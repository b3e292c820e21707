"""Scorers: each maps QuerySignals to {rowid: raw score}. Plain functions, swappable, benchmarkable.

Raw scores are on each scorer's own scale; fusion.py normalises them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

import numpy as np

from helix_context.genome import lexicon
from helix_context.genome.fts_text import fts_tokens, quote_term
from helix_context.genome.storage import GenomeStore
from helix_context.models import QuerySignals
from helix_context.retrieve.terms import WeighedTerms

Scores = dict[int, float]
Found = Mapping[int, float]  # a scorer's scores: a dict, or PendingScores still to be read
MAX_PATH_TOKENS = 12  # file names and folders a query writes; a pasted diff names many
MAX_PATH_WORD_DOCS = 20_000  # a path word held by more genes is skipped (walking it costs ~5 ms per 20k)
PATH_POSTING_BUDGET = 6_000  # summed genes of the path words searched together, rarest first


def _or(terms: list[str], joiner: str = " OR ") -> str:
    return joiner.join(quote_term(t) for t in dict.fromkeys(terms) if t)


class PendingScores(Mapping[int, float]):
    """A search already sent, its hits read when first looked at.

    Why: on a team genome each search is a round trip to the server, and a question's lexical scorers
    search one after another (full text, tags, paths). Sent first and read after (retriever.evidence
    starts every scorer before it reads any), they travel together in the read snapshot's pipeline:
    one round trip for all of them. On SQLite the search has already run."""

    def __init__(self, read: Callable[[], list[tuple[int, float]]]) -> None:
        self._read: Callable[[], list[tuple[int, float]]] | None = read
        self._scores: Scores = {}

    def _got(self) -> Scores:
        if self._read is not None:
            self._scores, self._read = dict(self._read()), None
        return self._scores

    def __getitem__(self, rowid: int) -> float:
        return self._got()[rowid]

    def __iter__(self) -> Iterator[int]:
        return iter(self._got())

    def __len__(self) -> int:
        return len(self._got())


def _search(genome: GenomeStore, searches: lexicon.Searches | None, match: str, limit: int,
            column: str | None = None) -> Found:
    """genome.fts_search as scores (sent now, read when looked at), through the per-generation memory of
    searches when there is one."""
    if searches is None:
        return PendingScores(genome.start_fts_search(match, limit, column=column))
    return PendingScores(searches.start(genome, match, limit, column))


def fts_scorer(genome: GenomeStore, qs: QuerySignals, limit: int, terms: WeighedTerms,
               counts: lexicon.CappedCounts | None = None, searches: lexicon.Searches | None = None) -> Found:
    """BM25 over the gene text (with identifier parts), tags and path columns, for the query's rarest words."""
    expr = _or(list(terms.written), " AND " if terms.conjunctive else " OR ")
    for tokens in _held_phrases(genome, qs.phrases, counts):
        expr = f"{expr} OR {quote_term(' '.join(tokens))}" if expr else quote_term(" ".join(tokens))
    return _search(genome, searches, expr, limit)


def _held_phrases(genome: GenomeStore, phrases: tuple[str, ...],
                  counts: lexicon.CappedCounts | None) -> list[list[str]]:
    """The query's quoted phrases as tokens, without those holding a word no gene holds.

    Why: such a phrase matches no gene and adds exactly 0 to every BM25 score, so leaving it out
    changes no result; yet FTS5 still walks the posting lists of its other words. A pasted issue's
    quoted strings are mostly traceback paths (`"src/app/billing_3.py"`: `src` and `py` are in
    thousands of genes, `billing_3` in none), and they were half the cost of its full-text search.
    Whether a word is held is read as a count up to 0 (one posting), remembered per generation."""
    split = [tokens for tokens in map(fts_tokens, phrases) if tokens]
    words = list(dict.fromkeys(t for tokens in split for t in tokens))
    if not words:
        return []
    held = counts.get(genome, words, 0) if counts is not None else genome.word_doc_counts_upto(words, 0)
    return [tokens for tokens in split if all(t in held for t in tokens)]


def _identifier_like(term: str) -> bool:
    return any(c.isdigit() for c in term) or "_" in term


def tag_scorer(genome: GenomeStore, qs: QuerySignals, limit: int, terms: WeighedTerms,
               counts: lexicon.CappedCounts | None = None, searches: lexicon.Searches | None = None) -> Found:
    """Exact identifier / tag matches: `get_user_name` as written, not its parts.

    Only identifier-like query tokens take part: on plain prose the tags are
    named entities, and matching every query word against them added noise
    (SciFact train split: nDCG@10 fell as this signal's weight rose).
    """
    wanted = [t for ident in qs.identifiers for t in fts_tokens(ident)]
    wanted += [t for t in qs.terms if _identifier_like(t)]
    if terms.written or terms.conjunctive:  # only names rare in this genome (common ones walk long lists)
        chosen = set(terms.written)
        wanted = [t for t in wanted if t in chosen]
    return _search(genome, searches, _or(wanted), limit, "tags") if wanted else {}


def path_scorer(genome: GenomeStore, qs: QuerySignals, limit: int, terms: WeighedTerms,
                counts: lexicon.CappedCounts | None = None, searches: lexicon.Searches | None = None) -> Found:
    """File names and folders the query writes as paths (`server.py`, `deploy/k8s`).

    `counts` and `searches`: the per-generation memories of capped counts and of searches (the
    same answers, read once; a tree's top folder is the path word most questions search)."""
    wanted = list(dict.fromkeys(t for tok in qs.path_tokens for t in fts_tokens(tok) if len(t) > 2))[:MAX_PATH_TOKENS]
    if not wanted:
        return {}
    # a column filter still walks each word's whole posting list: the rarest path words first, within a
    # budget of genes walked (`src` names every file of a repository and would cost the most, saying nothing)
    def count(words: list[str], cap: int) -> dict[str, int]:
        return counts.get(genome, words, cap) if counts is not None else genome.word_doc_counts_upto(words, cap)

    # Counted up to the budget first (a common word costs its first 6k postings, not 20k): a word over
    # the budget can only be searched when it is the rarest, i.e. when no word is under the budget
    # (the rarest is always taken, and any later word over the budget breaks the loop below). Only
    # then are the counts read again up to MAX_PATH_WORD_DOCS: the words chosen are the same.
    held = count(wanted, PATH_POSTING_BUDGET)
    if not any(n <= PATH_POSTING_BUDGET for n in held.values()):
        held = count(wanted, MAX_PATH_WORD_DOCS)
    chosen: list[str] = []
    spent = 0
    for word in sorted((t for t in wanted if 0 < held.get(t, 0) <= MAX_PATH_WORD_DOCS), key=lambda t: held[t]):
        if chosen and spent + held[word] > PATH_POSTING_BUDGET:
            break
        chosen.append(word)
        spent += held[word]
    if not chosen:
        return {}
    return _search(genome, searches, _or(chosen), limit, "path")


def path_terms_scorer(genome: GenomeStore, qs: QuerySignals, limit: int, terms: WeighedTerms,
                      counts: lexicon.CappedCounts | None = None, searches: lexicon.Searches | None = None) -> Found:
    """Plain query words that name a folder or file ("the settlement service" → services/settlement/…).
    Weaker evidence than a written path: words like "supervisor" also name every test folder."""
    wanted = [t for t in terms.written if len(t) > 2]
    if not wanted or terms.conjunctive:  # common words name too many folders to tell anything
        return {}
    return _search(genome, searches, _or(wanted), limit, "path")


def dense_scorer(genome: GenomeStore, query_vector: np.ndarray | None, limit: int, *, exact_below: int = 20_000) -> Scores:
    """Cosine nearest neighbours: an exact scan on small genomes, the HNSW graph past `exact_below` genes."""
    if query_vector is None:
        return {}
    hits = genome.vector_index().search(query_vector, limit, exact_below=exact_below)
    return {int(r): float(s) for r, s in zip(hits.rowids, hits.similarities, strict=True)}


def coactivation_scorer(genome: GenomeStore, seeds: list[int], limit: int) -> Scores:
    """Genes delivered together with the current best candidates before."""
    return genome.coactivated(seeds, limit=limit)


class LexicalScorer(Protocol):
    """(genome, query, candidates wanted, the weighed words, the per-generation memories of capped counts
    and of searches) → scores."""

    def __call__(self, genome: GenomeStore, qs: QuerySignals, limit: int, terms: WeighedTerms,
                 counts: lexicon.CappedCounts | None = None, searches: lexicon.Searches | None = None
                 ) -> Found: ...



LEXICAL_SCORERS: dict[str, LexicalScorer] = {"fts": fts_scorer, "tags": tag_scorer, "path": path_scorer,
                                             "path_terms": path_terms_scorer}
