"""How much of what the query asks about an item actually holds: the relevance half of a verdict.

Retrieval always returns its best candidates, even for a question about
something the genome has never seen ("kubernetes schedule pods" asked of a
genome of web frameworks): a word or two matches somewhere. Freshness says the
file is unchanged, not that it answers the question. So each item also gets

    relevance = Σ idf(w) over the query's words w the item holds
                ─────────────────────────────────────────────────
                Σ idf(w) over all the query's words

with words stemmed the way the full-text index stems them, and idf from this
genome's own document counts. A word no gene holds weighs double the highest
idf: it is usually the very name the question is about, and its absence is the
strongest evidence that the answer is not indexed. Common words weigh little, so one
shared "file" or "error" cannot make an item relevant. Nothing here knows
about any project; the thresholds are calibrated by benchmarks/bench_verdicts.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from helix_context.genome.fts_text import body_text, fts_tokens, path_text
from helix_context.models import Gene, QuerySignals
from helix_context.retrieve.terms import stem_words

MAX_QUERY_WORDS = 64  # a pasted issue: its first words carry the question
# a word no gene holds is usually the very name the question is about ("kubernetes" asked of a
# genome of web frameworks): it weighs twice the rarest indexed word. Calibrated with
# benchmarks/bench_verdicts.py: at 1.0, questions about absent tools kept half their idf mass in
# generic words ("configure", "production") and passed as relevant
ABSENT_WORD_FACTOR = 2.0


def query_word_forms(qs: QuerySignals) -> dict[str, str]:
    """The query's words, each once: stem (lowercased, porter-stemmed, as gene_words makes them) → the
    word as first written. Counts are read by the written word: the genome's tokenizer stems it once."""
    words: list[str] = []
    for item in (*qs.terms, *qs.identifiers, *qs.identifier_parts):
        words.extend(t for t in fts_tokens(item) if len(t) > 1 and not t.isdigit())
    written = list(dict.fromkeys(words))
    forms: dict[str, str] = {}
    for word, stem in zip(written, stem_words(written), strict=True):
        if stem not in forms:
            if len(forms) == MAX_QUERY_WORDS:
                break
            forms[stem] = word
    return forms


def query_words(qs: QuerySignals) -> list[str]:
    """The query's words as stems (query_word_forms), each once."""
    return list(query_word_forms(qs))


def idf_weights(words: list[str], doc_counts: Mapping[str, int], genes: int) -> dict[str, float]:
    """BM25's idf per word; a word missing from the genome weighs ABSENT_WORD_FACTOR × the highest idf."""
    n = max(genes, 1)
    out = {}
    for w in words:
        df = doc_counts.get(w, 0)
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        out[w] = idf * ABSENT_WORD_FACTOR if df == 0 else idf
    return out


def gene_words(gene: Gene) -> set[str]:
    """Stems of everything the index holds for a gene: its text (with identifier parts), path and symbol."""
    text = " ".join((body_text(gene.content), path_text(gene.source_path), gene.symbol or ""))
    return set(stem_words(list(set(fts_tokens(text)))))


def relevance(weights: Mapping[str, float], words: set[str]) -> float:
    """Share of the query's idf mass that ``words`` (an item's stems) holds; 1.0 for a query without words."""
    total = sum(weights.values())
    if total <= 0:
        return 1.0
    return sum(w for term, w in weights.items() if term in words) / total
