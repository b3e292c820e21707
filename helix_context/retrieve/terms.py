"""Which of a query's words to search for, weighed by how rare they are in this genome.

Why: a pasted issue has hundreds of distinct words. Searching all of them walks
the posting lists of common words (slow on a big genome) and lets them outvote
the few rare names that locate the answer. Each word's document count comes
from the full-text index's own vocabulary (one indexed lookup per query), its
weight is its inverse document frequency times how often the query repeats it,
and only the heaviest few go into the full-text query. Words missing from the
genome carry nothing and are dropped; nothing here knows about any project.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

from helix_context.genome import symbols_sql
from helix_context.genome.fts_text import fts_tokens
from helix_context.genome.store import Genome
from helix_context.models import QuerySignals

MAX_SEARCH_TERMS = 24
MAX_LOOKUPS = 96  # distinct words of one query whose document count is looked up
COMMON_FRACTION = 0.08  # a word in more genes than this is too common to search for (when rarer ones exist)
IDENTIFIER_BOOST = 1.5  # a compound identifier (snake_case, camelCase) names one thing


@dataclass(frozen=True)
class WeighedTerms:
    """The chosen words: as written (what FTS5 is given) and as indexed (stem), with their weight."""

    written: tuple[str, ...] = ()
    stems: tuple[str, ...] = ()
    weights: dict[str, float] = field(default_factory=dict)  # stem → weight
    genes: int = 0  # live genes when weighed


_LOCAL = threading.local()  # a PyStemmer object is not thread-safe: one per thread


def stem_words(words: list[str]) -> list[str]:
    """Porter stems as FTS5's `porter` tokenizer makes them (PyStemmer's porter is the same algorithm)."""
    stem = getattr(_LOCAL, "stem", None)
    if stem is None:
        import Stemmer

        stem = _LOCAL.stem = Stemmer.Stemmer("porter").stemWords
    return stem(words)


def weigh_terms(genome: Genome, qs: QuerySignals, limit: int = MAX_SEARCH_TERMS) -> WeighedTerms:
    counts: dict[str, int] = {}
    identifiers: set[str] = set()
    for word, n in qs.term_counts or tuple((t, 1) for t in qs.terms):
        for tok in fts_tokens(word):
            counts[tok] = counts.get(tok, 0) + n
    for item in (*qs.identifiers, *qs.identifier_parts, *qs.expansions):
        for tok in fts_tokens(item):
            counts.setdefault(tok, 1)
            if "_" in tok or item in qs.identifiers:
                identifiers.add(tok)
    if not counts:
        return WeighedTerms()
    # an indexed lookup per word (an IN list makes fts5vocab scan its whole table): look up
    # the words most likely to matter — names first, then the most repeated, then the longest
    written = sorted(counts, key=lambda w: (w not in identifiers, -counts[w], -len(w)))[:MAX_LOOKUPS]
    stems = stem_words(written)
    conn = genome.conn
    docs = symbols_sql.term_doc_counts(conn, stems)
    n = max(genome.live_gene_count(), 1)
    scored: dict[str, tuple[float, str, int]] = {}
    for word, stem in zip(written, stems):
        df = docs.get(stem, 0)
        if df == 0:
            continue
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        weight = idf * (1.0 + math.log(counts[word])) * (IDENTIFIER_BOOST if word in identifiers else 1.0)
        if stem not in scored or scored[stem][0] < weight:
            scored[stem] = (weight, word, df)
    rare = {s: v for s, v in scored.items() if v[2] <= COMMON_FRACTION * n}
    pool = rare if rare else scored
    best = sorted(pool.items(), key=lambda kv: -kv[1][0])[:limit]
    return WeighedTerms(tuple(v[1] for _, v in best), tuple(s for s, _ in best),
                        {s: v[0] for s, v in best}, n)
