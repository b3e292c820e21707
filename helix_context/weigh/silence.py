"""Silence when nothing fits: is a message about anything in the scoped project at all?

Why: people chat through the proxy about everything ("write a haiku about autumn leaves",
"thanks, that's all"), and retrieval always has a best candidate: a common word matches
somewhere. Injecting it costs the model tokens and misleads it. The decision here is made
from what the query shares with the *scoped project's own statistics*, never from lists of
chit-chat words:

* how much of the query's idf mass (idf from the project's document counts) the project holds
  at all, and how much the best gene holds (a word the project never uses weighs
  ABSENT_FACTOR × the project's highest idf: it is usually what the message is about);
* how many query words are specific to the project: present in it, but in few of its genes;
* how many of the query's code identifiers (snake_case, CamelCase, dotted) the project holds;
* the best dense cosine among the project's genes;

* how far the best gene's similarity stands above the project's typical similarity for this
  message (the median of its closest genes): in a small project a question about it finds one
  gene far above the rest even when the project's words are few.

`specific` (present but rare words) is reported with every decision but not used: on the
development set it did not separate other languages' programming questions from questions
about the project.

The thresholds (`SilenceRule`) were chosen on the development parts of
benchmarks/data/scoping_*.jsonl with benchmarks/bench_scoping.py --tune; the held-out parts
are reported separately. Plain data in, plain data out: the retriever gathers the numbers.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

ABSENT_FACTOR = 2.0  # a word the project never uses weighs this × its highest idf
SPECIFIC_FRACTION = 0.05  # a present word in at most this share of the project's genes is specific to it
DENSE_NEIGHBOURS = 30  # the project's closest genes whose cosines make the "typical" similarity


@dataclass(frozen=True)
class SilenceFeatures:
    words: int  # query words weighed
    held_share: float  # share of the query's project-idf mass the project holds anywhere
    best_share: float  # share the best gene holds
    specific: int  # query words present in the project in at most SPECIFIC_FRACTION of its genes
    identifiers: int  # query identifiers the project's genes hold
    dense_best: float | None  # best cosine among the project's genes (None: no dense signal)
    dense_gap: float | None  # dense_best minus the median cosine of the project's closest genes

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class SilenceRule:
    """Speak when one of these holds; otherwise stay silent.

    With a dense signal: a cosine of `dense_alone` is on topic by itself; from `dense_floor` up,
    the project must also hold most of what the message asks (held_share) and one gene most of
    it (best_share). Names the project holds do not speak alone there: "async/await" or
    "JavaScript" are names in many projects' docs. Without a dense signal, the words decide:
    a held identifier, or the shares."""

    # chosen by `bench_scoping.py --tune` on the development parts (dev: 0.9 % off-topic spoke, 97.7 % on-topic)
    dense_alone: float = 0.52
    dense_floor: float = 0.35
    best_share: float = 0.5
    held_share: float = 0.8
    gap: float = 0.3  # … or from dense_floor up, the best gene stands this far above the project's typical similarity
    # without a dense signal (embeddings off or unavailable): a held identifier, or these shares. Chosen on the
    # same development parts with the dense features blanked (dev: 11.6 % off-topic spoke, 86 % on-topic):
    # words alone separate far less well, which is why embeddings are on by default
    identifiers: int = 1
    lexical_best_share: float = 0.5
    lexical_held_share: float = 0.5
    # one gene holding every word of a message of this many words speaks whatever the similarity: code
    # digests can sit far from a plain question in meaning (cosine ~0.2 in a small code-only project)
    # while sharing all its words; on the development parts only one-word greetings reach full coverage
    all_words: int = 3


@dataclass(frozen=True)
class Silence:
    silent: bool
    reason: str
    features: SilenceFeatures


def project_idf(words: Sequence[str], doc_counts: Mapping[str, int], genes: int) -> dict[str, float]:
    """BM25's idf per word in the project; a word the project never uses weighs ABSENT_FACTOR × the highest."""
    n = max(genes, 1)
    present = {w: math.log(1.0 + (n - doc_counts[w] + 0.5) / (doc_counts[w] + 0.5))
               for w in words if doc_counts.get(w, 0) > 0}
    top = max(present.values(), default=math.log(1.0 + (n + 0.5) / 0.5))
    return {w: present.get(w, top * ABSENT_FACTOR) for w in words}


def features(words: Sequence[str], doc_counts: Mapping[str, int], genes: int, best_words: Sequence[set[str]],
             identifiers: int, cosines: Sequence[float] | None) -> SilenceFeatures:
    """The numbers the decision is made from. `words`: the query's stems; `doc_counts`: the project's
    genes holding each; `best_words`: the best genes' stems (the most any holds counts); `cosines`: the
    project's closest genes' similarities to the query, best first (None without a dense signal)."""
    idf = project_idf(words, doc_counts, genes)
    total = sum(idf.values()) or 1.0
    held = sum(v for w, v in idf.items() if doc_counts.get(w, 0) > 0) / total
    best = max((sum(v for w, v in idf.items() if w in held_words) for held_words in best_words), default=0.0) / total
    specific = sum(1 for w in words if 0 < doc_counts.get(w, 0) <= max(1.0, SPECIFIC_FRACTION * genes))
    dense_best = dense_gap = None
    if cosines:
        near = list(cosines[:DENSE_NEIGHBOURS])
        dense_best = float(near[0])
        dense_gap = dense_best - float(statistics.median(near))
    return SilenceFeatures(len(words), held if words else 0.0, best if words else 0.0, specific, identifiers,
                           dense_best, dense_gap)


def judge(f: SilenceFeatures, rule: SilenceRule, project: str | None = None) -> Silence:
    """Speak or stay silent, with the reason people read in /context's health and the packet's notes."""
    where = f"project {project!r}" if project else "the indexed projects"
    lexical = f.best_share >= rule.best_share and f.held_share >= rule.held_share
    if f.words >= rule.all_words and f.best_share >= 0.999:
        return Silence(False, f"one gene of {where} holds every word of the message", f)
    if f.dense_best is not None:
        if f.dense_best >= rule.dense_alone:
            return Silence(False, f"close in meaning to {where} (similarity {f.dense_best:.2f})", f)
        if f.dense_best >= rule.dense_floor and lexical:
            return Silence(False, f"{where} holds {f.best_share:.0%} of what the message asks about", f)
        if f.dense_best >= rule.dense_floor and f.dense_gap is not None and f.dense_gap >= rule.gap:
            return Silence(False, f"one gene of {where} stands out in meaning (similarity {f.dense_best:.2f}, "
                                  f"{f.dense_gap:.2f} above the project's typical)", f)
    elif f.identifiers >= rule.identifiers:
        return Silence(False, f"{where} holds {f.identifiers} of the names the message uses", f)
    elif f.best_share >= rule.lexical_best_share and f.held_share >= rule.lexical_held_share:
        return Silence(False, f"{where} holds {f.best_share:.0%} of what the message asks about", f)
    dense = f"; best similarity {f.dense_best:.2f}" if f.dense_best is not None else ""
    return Silence(True, f"the message is not about anything in {where}: it holds {f.held_share:.0%} of the "
                         f"message's words, its best match {f.best_share:.0%}{dense}", f)
