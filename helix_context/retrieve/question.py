"""How the query is written: a question in words, or text full of this genome's names, paths and tracebacks.

Why: the two kinds want opposite evidence. A question in plain words ("rotate log
files when they reach a certain size") shares few words with the code that answers
it; there the embedding model finds the function and full-text matches on common
words drag it down (bench_code_retrieval.py: MiniLM alone beat the fused ranking).
A pasted issue names functions, files and frames; there those names locate the
answer and the embedding of a page of tracebacks says little (bench_localization.py).
Fixed weights cannot serve both, so each query gets a *lexicality* between 0 and 1
and the fusion weights move smoothly between a question profile and an
identifier profile (fusion.blend_weights).

Lexicality is read from the query *and* the genome, never from a word list:

* the share of the searched words' weight (idf in this genome, repetition) that
  belongs to identifiers (snake_case, camelCase, dotted names) this genome holds —
  an identifier the genome does not hold was never weighed and counts for nothing;
* the share of the text that is program text or output (code blocks, prompts,
  traceback and error lines);
* traceback frames and names the query uses as code that this genome defines;
* file paths the query writes.

Each feature is a probability-like share; they are combined as independent
evidence (1 - the product of their complements), so any one strong sign makes
the query lexical and several weak ones add up.
"""

from __future__ import annotations

from dataclasses import dataclass

from helix_context.genome.fts_text import fts_tokens
from helix_context.models import QuerySignals
from helix_context.retrieve.query import program_share
from helix_context.retrieve.terms import WeighedTerms, stem_words

DEFINED_NAME_EVIDENCE = 0.5  # the query calls / quotes / raises names this genome defines
PATH_EVIDENCE = 0.5  # the query writes a file path or file name
FRAME_EVIDENCE = 1.0  # a traceback frame: the text says where it broke


@dataclass(frozen=True)
class QueryKind:
    """What lexicality was made of (kept for the evidence records and for tests)."""

    identifier_share: float = 0.0  # of the searched words' weight, on identifiers the genome holds
    program_share: float = 0.0  # of the text's characters, in code blocks, prompts, tracebacks, output
    defined_names: bool = False  # names used as code that this genome defines
    paths: bool = False
    frames: bool = False

    @property
    def lexicality(self) -> float:
        """0: a question in plain words; 1: text made of this genome's names, paths and tracebacks."""
        doubt = (1.0 - self.identifier_share) * (1.0 - self.program_share)
        doubt *= 1.0 - (DEFINED_NAME_EVIDENCE if self.defined_names else 0.0)
        doubt *= 1.0 - (PATH_EVIDENCE if self.paths else 0.0)
        doubt *= 1.0 - (FRAME_EVIDENCE if self.frames else 0.0)
        return round(min(1.0, max(0.0, 1.0 - doubt)), 6)


def identifier_stems(qs: QuerySignals) -> set[str]:
    """The indexed (stemmed) forms of the query's identifiers: what the full-text index holds for them."""
    tokens = [t for ident in qs.identifiers for t in fts_tokens(ident)]
    return set(stem_words(tokens)) if tokens else set()


def query_kind(qs: QuerySignals, terms: WeighedTerms, defined: bool = False) -> QueryKind:
    """Lexicality features of one query against this genome (`defined`: it names symbols the genome defines)."""
    total = sum(terms.weights.values())
    named = identifier_stems(qs)
    share = sum(w for s, w in terms.weights.items() if s in named) / total if total > 0 else 0.0
    return QueryKind(identifier_share=round(share, 6), program_share=round(program_share(qs.text), 6),
                     defined_names=defined, paths=bool(qs.path_tokens), frames=bool(qs.frames))
