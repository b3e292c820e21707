"""Gathers what weigh/silence.py decides from: the query against the scoped project's own statistics.

The same statistics weigh each packet item's relevance (`scoped_term_weights`, weigh/relevance.py).

Why here: the numbers need the genome (a project's document count of each query word, its
size, its genes' similarities), and weigh/ stays free of storage. Without a project (genes
ingested without one, e.g. a corpus of API texts) the whole genome's statistics stand in.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from helix_context.genome.fts_text import fts_tokens
from helix_context.models import QuerySignals, ScoredGene
from helix_context.retrieve.scope import count_in
from helix_context.weigh.relevance import gene_words, idf_weights, query_word_forms
from helix_context.weigh.silence import Silence, SilenceRule, features, judge

if TYPE_CHECKING:
    from helix_context.retrieve.retriever import Retriever

MAX_POSTINGS = 20_000  # a word's genes read to count how many are the project's; past this it is common
BEST_ITEMS = 3  # the best share is the most any of the first few genes holds
RULE = SilenceRule()
NO_GENES = np.empty(0, dtype=np.int64)


def _project_counts(retriever: Retriever, words: Sequence[str], allowed: np.ndarray | None,
                    names: Sequence[str] = ()) -> tuple[dict[str, int], int]:
    """(word → the project's genes holding it, the project's live genes); `words` as written, never
    stemmed (the genome's tokenizer stems each once: genome/fts_terms.py says why). Counts are
    remembered per generation (questions share their words, and a common word's postings are the
    costly part). The words not remembered yet are read together (`term_rowid_lists`: one statement,
    not one per word)."""
    genome = retriever.genome
    if allowed is None:
        return retriever.doc_counts.get(list(words)), genome.live_gene_count()
    catalog = retriever.catalog
    known = catalog.word_counts(names, words)
    counts: dict[str, int] = {}
    missing: list[str] = []
    for word in words:
        if word in known:
            counts[word] = known[word]
        else:
            missing.append(word)
    lists = genome.term_rowid_lists(missing, MAX_POSTINGS) if missing else {}
    held = {word: count_in(allowed, lists.get(word, NO_GENES)) for word in missing}
    # read only a part: scale up to the whole genome's count
    partial = [word for word in missing if held[word] and len(lists[word]) >= MAX_POSTINGS]
    whole = retriever.doc_counts.get(partial) if partial else {}
    found: dict[str, int] = {}
    for word in missing:
        n = held[word]
        if word in partial:
            n = int(n * whole.get(word, len(lists[word])) / len(lists[word]))
        counts[word] = found[word] = n
    catalog.remember_word_counts(names, found)
    return counts, len(allowed)


def _allowed(retriever: Retriever, names: Sequence[str]) -> np.ndarray | None:
    """The projects' live gene ids; None (the genome's statistics) without names or for genes of no project."""
    allowed = retriever.catalog.rowids(names) if names else None
    return None if allowed is not None and len(allowed) == 0 else allowed


def project_word_counts(retriever: Retriever, words: Sequence[str], names: Sequence[str]
                        ) -> tuple[dict[str, int], int]:
    """(word as written → the projects' genes holding it, the projects' live genes): the statistics a
    question scoped to `names` is judged against (no names: the whole genome's)."""
    return _project_counts(retriever, words, _allowed(retriever, names), names)


def _by_stem(forms: Mapping[str, str], counts: Mapping[str, int]) -> dict[str, int]:
    """Counts read by written word → by the stem each stands for (what relevance and silence weigh)."""
    return {stem: counts[word] for stem, word in forms.items() if counts.get(word)}


def scoped_term_weights(retriever: Retriever, qs: QuerySignals, names: Sequence[str]) -> dict[str, float]:
    """The query's words → idf in the projects `names` (no names: the genome), for each item's relevance.

    Why the project's own counts: a word another project uses everywhere is common in the genome but
    may be what singles out the answer in this one, and a word only another project holds is absent
    here (it weighs ABSENT_WORD_FACTOR × the highest): the item is judged as if its project were indexed alone."""
    forms = query_word_forms(qs)
    if not forms:
        return {}
    counts, genes = project_word_counts(retriever, list(forms.values()), names)
    return idf_weights(list(forms), _by_stem(forms, counts), genes)


def judge_query(retriever: Retriever, qs: QuerySignals, names: Sequence[str], items: Sequence[ScoredGene],
                per_signal: dict[str, dict[int, float]], dense_on: bool, rule: SilenceRule = RULE, *,
                span_cosines: Callable[[], Mapping[int, float]] | None = None) -> Silence:
    """Speak or stay silent for this query, judged against the projects `names` (empty: the genome).

    `span_cosines`: the best genes' rowid → the best cosine of a symbol span they pack (span_dense.py), asked
    for only where the genes' own vectors leave the message silent. A gene packing several functions has one
    vector, cut from the first words of all of them: "retry with backoff" sits far from a gene that starts with
    a hashing helper (cosine 0.04) and close to the retry helper it also holds; "parse the Range header of a
    request into byte ranges" is closer to `req.range` than to the gene of six request methods around it. The
    second look speaks on a span's closeness alone or with the words, not on how far one span stands above its
    neighbours: the best of many spans stands out by chance (two off-topic chats spoke by it in
    bench_scoping.py, none without it)."""
    allowed = _allowed(retriever, names)
    forms = query_word_forms(qs)
    idents = {t for ident in qs.identifiers for t in fts_tokens(ident) if "_" in t or len(t) > 3}
    # the words and the names counted in one read (a pasted issue's new ones: one statement, not two)
    written = list(forms.values())
    counts, genes = _project_counts(retriever, [*written, *sorted(idents.difference(written))], allowed, names)
    held_idents = sum(1 for t in idents if counts.get(t, 0) > 0)
    best_words = [gene_words(it.gene) for it in items[:BEST_ITEMS]]
    cosines = sorted(per_signal.get("dense", {}).values(), reverse=True) if dense_on else None
    f = features(list(forms), _by_stem(forms, counts), genes, best_words, held_idents,
                 (cosines or None) if dense_on else None)
    project = ",".join(names) if names else None
    verdict = judge(f, rule, project)
    if verdict.silent and span_cosines is not None and dense_on:
        per_gene = dict(per_signal.get("dense", {}))
        for rowid, cosine in span_cosines().items():
            per_gene[rowid] = max(per_gene.get(rowid, -1.0), cosine)
        closer = sorted(per_gene.values(), reverse=True)
        f = features(list(forms), _by_stem(forms, counts), genes, best_words, held_idents, closer or None)
        verdict = judge(f, dataclasses.replace(rule, gap=math.inf), project)
    return verdict
