"""Which of a query's words to search for, weighed by how rare they are in this genome.

Why: a pasted issue has hundreds of distinct words. Searching all of them walks
the posting lists of common words (slow on a big genome) and lets them outvote
the few rare names that locate the answer. Each word's document count is read
from the full-text index up to a cap (genome/lexicon.py: a common word costs the
same on 10k or 1M genes), its weight is its inverse document frequency times how
often the query repeats it, and only the heaviest few, within a budget of genes
walked, go into the full-text query. Words missing from the genome carry nothing
and are dropped; nothing here knows about any project.
"""

from __future__ import annotations

import heapq
import math
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from helix_context.genome import lexicon
from helix_context.genome.fts_text import add_token_counts, quote_term, word_tokens
from helix_context.genome.storage import GenomeStore
from helix_context.models import QuerySignals

MAX_SEARCH_TERMS = 24
MIN_SEARCH_TERMS = 8  # a short question keeps its common words too: they are most of what it says
MAX_LOOKUPS = 96  # distinct words of one query whose document count is looked up
COMMON_FRACTION = 0.08  # a word in more genes than this is too common to search for (when rarer ones exist)
IDENTIFIER_BOOST = 1.5  # a compound identifier (snake_case, camelCase) names one thing
# Cost at scale (benchmarks/bench_scale.py): ranking a word by BM25 costs ~2-7 us per gene that holds
# it, so what one query may walk is capped in genes, not in a share of the genome: at 1M genes
# 8 % would be 80k genes per word. On the 9k-gene code genome of bench_scale.py the words a
# question keeps hold 814 genes together at the median and 2.9k at most: the budget binds only past that.
MAX_WORD_DOCS = 3_000  # a word in more genes than this is common, whatever the genome's size
POSTING_BUDGET = 3_000  # summed genes of the words searched together (the heaviest words first)
MAX_COMMON = 6  # all words common: the heaviest few are counted again (at most 24k genes each)


@dataclass(frozen=True)
class WeighedTerms:
    """The chosen words: as written (what FTS5 is given) and as indexed (stem), with their weight."""

    written: tuple[str, ...] = ()
    stems: tuple[str, ...] = ()
    weights: dict[str, float] = field(default_factory=dict)  # stem → weight
    genes: int = 0  # live genes when weighed
    conjunctive: bool = False  # every word was common: search genes holding all of `written`, or none


_LOCAL = threading.local()  # a PyStemmer object is not thread-safe: one per thread


def stem_words(words: list[str]) -> list[str]:
    """Porter stems, nearly as FTS5's `porter` tokenizer makes them: the two part on a few words ("topology",
    "possibly", words under three letters, diacritics), so a stem here is compared with stems made here
    (gene_words, the weights' keys) and never handed to the index, which would stem it again: counts are
    read by the written word (genome/fts_terms.py)."""
    stem = getattr(_LOCAL, "stem", None)
    if stem is None:
        import Stemmer

        stem = _LOCAL.stem = Stemmer.Stemmer("porter").stemWords
    stems: list[str] = stem(words)
    return stems


def weigh_terms(genome: GenomeStore, qs: QuerySignals, limit: int = MAX_SEARCH_TERMS,
                cache: lexicon.CappedCounts | None = None) -> WeighedTerms:
    """The query's words to search for. `cache`: a per-generation memory of the capped counts (same numbers)."""
    count = cache.get if cache is not None else _uncached
    counts: dict[str, int] = {}
    identifiers: set[str] = set()
    add_token_counts(counts, qs.term_counts or tuple((t, 1) for t in qs.terms))
    for item in (*qs.identifiers, *qs.identifier_parts, *qs.expansions):
        for tok in word_tokens(item):
            counts.setdefault(tok, 1)
            if "_" in tok or item in qs.identifiers:
                identifiers.add(tok)
    if not counts:
        return WeighedTerms()
    # an indexed lookup per word (an IN list makes fts5vocab scan its whole table): look up
    # the words most likely to matter — names first, then the most repeated, then the longest
    # (heapq.nsmallest is sorted(...)[:n], ties in the same order, without sorting every word)
    written = heapq.nsmallest(MAX_LOOKUPS, counts, key=lambda w: (w not in identifiers, -counts[w], -len(w)))
    stems = stem_words(written)
    n = max(genome.live_gene_count(), 1)
    cutoff = max(1, min(int(COMMON_FRACTION * n), MAX_WORD_DOCS))
    first_of_stem = dict(zip(reversed(stems), reversed(written), strict=True))  # one count per stem
    counted = count(genome, first_of_stem.values(), cutoff)
    docs = {stem: counted[word] for stem, word in first_of_stem.items() if word in counted}
    scored: dict[str, tuple[float, str, int]] = {}
    for word, stem in zip(written, stems, strict=True):
        df = docs.get(stem, 0)
        if df == 0:
            continue
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        weight = idf * (1.0 + math.log(counts[word])) * (IDENTIFIER_BOOST if word in identifiers else 1.0)
        if stem not in scored or scored[stem][0] < weight:
            scored[stem] = (weight, word, df)
    rare = {s: v for s, v in scored.items() if v[2] <= cutoff}
    if not rare:
        return _all_common(genome, scored, n, count)
    best: list[tuple[str, tuple[float, str, int]]] = []
    spent = 0
    for stem, v in sorted(rare.items(), key=lambda kv: -kv[1][0]):
        if len(best) >= limit:
            break
        if best and spent + v[2] > POSTING_BUDGET:
            continue  # a lighter word further down may still fit
        best.append((stem, v))
        spent += v[2]
    if len(best) < MIN_SEARCH_TERMS:  # a short question: its common words too, as far as the budget goes
        common = sorted(((s, v) for s, v in scored.items() if s not in rare), key=lambda kv: -kv[1][0])
        common = common[:MIN_SEARCH_TERMS - len(best)]
        recount = count(genome, [v[1] for _, v in common], POSTING_BUDGET)
        for stem, v in common:
            df = recount.get(v[1], POSTING_BUDGET + 1)
            if spent + df <= POSTING_BUDGET:
                best.append((stem, v))
                spent += df
    return WeighedTerms(tuple(v[1] for _, v in best), tuple(s for s, _ in best),
                        {s: v[0] for s, v in best}, n)


def _uncached(genome: GenomeStore, words: Iterable[str], cap: int) -> dict[str, int]:
    return genome.word_doc_counts_upto(words, cap)


def _all_common(genome: GenomeStore, scored: dict[str, tuple[float, str, int]], n: int,
                count: Callable[..., dict[str, int]] = _uncached) -> WeighedTerms:
    """Every word is common: the heaviest few that fit the budget together, else the genes holding all of them.

    The heaviest few words' counts are read again up to a higher cap. Those that fit the
    budget together are searched as usual (any of them): on a small genome that is what
    was always done. When not even one fits, the rarest two are ANDed, and one more word
    at a time joins while too many genes hold them all. Nothing under the budget: no
    full-text candidates (the other signals decide).
    """
    if not scored:
        return WeighedTerms(genes=n)
    heaviest = sorted(scored.items(), key=lambda kv: -kv[1][0])[:MAX_COMMON]
    recount = count(genome, [v[1] for _, v in heaviest], POSTING_BUDGET * 8)
    fitting: list[tuple[str, tuple[float, str, int]]] = []
    spent = 0
    for stem, v in heaviest:
        df = recount.get(v[1], 0)
        if spent + df <= POSTING_BUDGET:
            fitting.append((stem, v))
            spent += df
    if fitting:
        return WeighedTerms(tuple(v[1] for _, v in fitting), tuple(s for s, _ in fitting),
                            {s: v[0] for s, v in fitting}, n)
    ranked = sorted(heaviest, key=lambda kv: (recount.get(kv[1][1], 0), -kv[1][0]))
    for size in range(2, len(ranked) + 1):
        chosen = ranked[:size]
        expr = " AND ".join(quote_term(v[1]) for _, v in chosen)
        if genome.doc_count_upto(expr, POSTING_BUDGET) <= POSTING_BUDGET:
            return WeighedTerms(tuple(v[1] for _, v in chosen), tuple(s for s, _ in chosen),
                                {s: v[0] for s, v in chosen}, n, conjunctive=True)
    return WeighedTerms(genes=n, conjunctive=True)
