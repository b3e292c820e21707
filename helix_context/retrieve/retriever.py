"""Retriever: query → signals → scorers → fusion → floor → tier → (zone) → Retrieval."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from helix_context.config import Settings
from helix_context.genome import lexicon
from helix_context.genome.storage import GenomeStore
from helix_context.genome.symbols_sql import SymbolRow
from helix_context.ingest.embed_models import MINILM, locate_dense
from helix_context.models import Gene, Pointer, QuerySignals, Retrieval, ScoredGene
from helix_context.retrieve import query as query_mod
from helix_context.retrieve.budget import ZoneCap, pick_tier
from helix_context.retrieve.fusion import FUSERS, blend_weights, fuse_added
from helix_context.retrieve.locate import (MASS_WINDOW, LocateWeights, QuestionFactors, SpanScores,
                                          definition_gene_scores, file_mass, locate, span_scores, start_definitions,
                                          wants_tests, worded_spans)
from helix_context.retrieve.question import QueryKind, query_kind
from helix_context.retrieve.scope import LEAD_WINDOW, ProjectCatalog, Scope, contains, lead_ranking
from helix_context.retrieve.scorers import LEXICAL_SCORERS, coactivation_scorer, dense_scorer
from helix_context.retrieve.dense_fill import stale_cosines
from helix_context.retrieve.span_dense import DENSE_GENES, SpanVectors, chosen_spans, span_similarities
from helix_context.retrieve.terms import WeighedTerms, weigh_terms
from helix_context.retrieve import silence_gate

log = logging.getLogger(__name__)

COACTIVATION_SEEDS = 5
LOCATE_WINDOW = 60  # genes whose symbols are scored when pointers are asked for
ABSTAIN_DENSE = 0.25  # best cosine under this, with no query word in the best gene: nothing relevant
NOTHING_HELD = "nothing indexed holds the message's words or meaning"
MAX_SCOPED_WIDENING = 8  # a scope of 1/8 of the genome asks the scorers for 8x the candidates, at most
ProjectArg = str | Sequence[str] | Scope | None


def coverage(qs: QuerySignals, gene: Gene) -> float:
    """Share of the query's words and identifiers that literally appear in the gene."""
    return coverages(qs, [gene])[0]


def coverages(qs: QuerySignals, genes: Sequence[Gene]) -> list[float]:
    """`coverage` of each gene, with the query's words listed once (a pasted issue has ~100 of them)."""
    wanted = list(dict.fromkeys([*qs.terms, *(i.lower() for i in qs.identifiers)]))
    return [_covered(wanted, gene) for gene in genes]


def _covered(wanted: list[str], gene: Gene) -> float:
    if not wanted:
        return 0.0
    text = (gene.content + " " + (gene.source_path or "") + " " + " ".join(gene.tags)).lower()
    words = set(re.findall(r"[\w.]+", text))
    hits = sum(1 for w in wanted if w in words or (len(w) > 3 and w in text))
    return hits / len(wanted)


@dataclass(frozen=True)
class Evidence:
    """What the scorers found for one query, before any weighting."""

    qs: QuerySignals
    terms: WeighedTerms
    per_signal: dict[str, dict[int, float]]  # scorer → {gene rowid: raw score}
    defs: dict[int, tuple[SymbolRow, float]]  # symbol id → (symbol, weight) for names the query uses as code
    vector: np.ndarray | None
    kind: QueryKind = QueryKind()  # how lexical the query is here (retrieve/question.py)


class QueryEmbedder(Protocol):
    """The two calls retrieval makes on an embedder (ingest.embed.Embedder); `max_tokens` for symbol spans."""

    def embed_query(self, text: str) -> np.ndarray: ...

    def embed(self, texts: Sequence[str], max_tokens: int | Sequence[int] | None = None) -> np.ndarray: ...


class EmbedderSource(Protocol):
    """Where the query's embedder comes from: None while embeddings are off or unavailable.

    A source rather than an embedder, so the model loads on the first query that needs it."""

    def get(self) -> QueryEmbedder | None: ...


class Retriever:
    def __init__(self, genome: GenomeStore, settings: Settings, *, embedder_part: EmbedderSource | None = None) -> None:
        self.genome = genome
        self.settings = settings
        self.embedder_part = embedder_part
        self.doc_counts = lexicon.ExactDocCounts(genome, genome.generation)  # the packets' idf weights (context_packet)
        self.capped_counts = lexicon.CappedCounts(genome.generation)  # the words each query searches (terms.py)
        self.searches = lexicon.Searches(genome.generation)  # the lexical scorers' searches (scorers.py)
        self.code_rows = lexicon.CodeRows(genome.generation)  # which candidates hold code (fusion's weights)
        cfg = settings.retrieval
        self.weights = {"fts": cfg.weight_fts, "tags": cfg.weight_tags, "path": cfg.weight_path,
                        "path_terms": cfg.weight_path_terms, "dense": cfg.weight_dense,
                        "coactivation": cfg.weight_coactivation, "definition": cfg.weight_definition}
        self.code_weights = {"fts": cfg.code_weight_fts, "tags": cfg.code_weight_tags, "path": cfg.code_weight_path,
                             "path_terms": cfg.code_weight_path_terms, "dense": cfg.code_weight_dense,
                             "coactivation": cfg.code_weight_coactivation, "definition": cfg.code_weight_definition}
        self.locate_weights = LocateWeights(gene=cfg.locate_gene, symbol=cfg.locate_symbol,
                                            definition=cfg.locate_definition, name=cfg.locate_name,
                                            tests=cfg.locate_tests, mass=cfg.locate_file_mass,
                                            dense=cfg.locate_dense or 0.0)
        self.fuse = FUSERS[cfg.fusion]
        self.span_vectors = SpanVectors()  # spans embedded one by one, kept for the next questions
        self.stale_vectors = SpanVectors()  # genes that wait for a re-embed, embedded at query time (dense_fill.py)
        self.catalog = ProjectCatalog(genome)

    def _weighs(self, signal: str) -> bool:
        return self.weights.get(signal, 0.0) > 0 or self.code_weights.get(signal, 0.0) > 0

    def code_weights_for(self, kind: QueryKind) -> dict[str, float]:
        """The code weights for one query, by how lexical it is (a plain-words question leans on dense)."""
        cfg = self.settings.retrieval
        return blend_weights(self.code_weights, kind.lexicality, cfg.question_dense, cfg.question_lexical)

    def locate_weights_for(self, kind: QueryKind) -> LocateWeights:
        """The pointer weights for one query: its kind's blend, the span cosine's weight the model's own
        unless helix.toml sets one (the model in use: a code model that failed to load is MiniLM here)."""
        cfg = self.settings.retrieval
        weights = self.locate_weights
        if cfg.locate_dense is None:
            embedder = self.embedder_part.get() if self.embedder_part is not None else None
            weights = replace(weights, dense=locate_dense(getattr(embedder, "model_key", MINILM), None))
        return weights.blended(kind.lexicality, QuestionFactors(cfg.question_lexical, cfg.question_span_lexical,
                                                                cfg.question_span_dense, cfg.question_header))

    def _code_rows(self, code_weights: dict[str, float], rowids: set[int]) -> set[int]:
        """Which of `rowids` hold code: only asked when this question weighs code differently."""
        return self.code_rows.get(self.genome, rowids) if code_weights != self.weights else set()

    def _fuse(self, per_signal: dict[str, dict[int, float]],
              code_weights: dict[str, float]) -> dict[int, tuple[float, dict[str, float]]]:
        code_rows = self._code_rows(code_weights, {r for s in per_signal.values() for r in s})
        return self.fuse(per_signal, self.weights, code_rows, code_weights)

    def _fuse_added(self, fused: dict[int, tuple[float, dict[str, float]]], name: str, scores: dict[int, float],
                    code_weights: dict[str, float]) -> dict[int, tuple[float, dict[str, float]]]:
        """`fused` with `scores` (the last signal) fused in: as fusing every signal again, without redoing the rest."""
        code_rows = self._code_rows(code_weights, set(scores))
        return fuse_added(fused, name, scores, self.fuse, self.weights, code_rows, code_weights)

    def _span_cosines(self, vector: np.ndarray | None, items: list[ScoredGene], kind: QueryKind) -> _QuerySpans | None:
        """The spans of the best genes → their own cosines to the query (None without a vector or a model).

        For a question in words, also the spans past those genes whose own words score best (span_dense.chosen_spans,
        locate.worded_spans)."""
        embedder = self.embedder_part.get() if self.embedder_part is not None and vector is not None else None
        if embedder is None or vector is None:
            return None
        return _QuerySpans(self, embedder, vector, [it.gene for it in items],
                           worded_spans(kind.lexicality, self.locate_weights))

    def _stale_cosines(self, vector: np.ndarray, lexical: dict[str, dict[int, float]]) -> dict[int, float]:
        """The best lexical candidates that wait for a re-embed → their cosine now (empty if the model fails)."""
        embedder = self.embedder_part.get() if self.embedder_part is not None else None
        if embedder is None:
            return {}
        try:
            return stale_cosines(self.genome, embedder, vector, lexical, self.settings.embedding, self.stale_vectors)
        except Exception as exc:  # the model failing here costs those candidates their dense evidence, not the answer
            log.warning("embedding candidates that wait for a re-embed failed (%s)", exc)
            return {}

    def _query_vector(self, qs: QuerySignals) -> np.ndarray | None:
        """One unit vector for the query: the sum of its views' vectors (query.meaning says why)."""
        if self.embedder_part is None or not self._weighs("dense"):
            return None
        embedder = self.embedder_part.get()
        if embedder is None:
            return None
        views = qs.meaning or (qs.text,)
        if len(views) == 1:
            return np.asarray(embedder.embed_query(views[0]), dtype=np.float32)
        summed = np.asarray(embedder.embed(list(views)), dtype=np.float32).sum(axis=0)
        norm = float(np.linalg.norm(summed))
        return summed / norm if norm > 0 else None

    def evidence(self, query: str, stages: dict[str, float] | None = None, *,
                 allowed: np.ndarray | None = None) -> Evidence:
        """Every scorer's raw scores for `query`, before fusion (also what the tuning bench records).

        `allowed`: sorted gene ids of the scope; the scorers look further (up to MAX_SCOPED_WIDENING×)
        so that a small project still gets a full candidate pool, and keep only its genes."""
        stages = {} if stages is None else stages
        cfg = self.settings.retrieval
        pool = cfg.candidate_pool
        if allowed is not None:
            total = max(1, self.genome.live_gene_count())
            pool = int(pool * min(MAX_SCOPED_WIDENING, max(1.0, total / max(1, len(allowed)))))
        t0 = time.perf_counter()
        qs = query_mod.extract(query, self.settings.synonyms)
        stages["signals"] = time.perf_counter() - t0
        if not (qs.terms or qs.identifiers or qs.path_tokens or qs.phrases):
            return Evidence(qs, WeighedTerms(), {}, {}, None)
        t = time.perf_counter()
        reading_defs = start_definitions(self.genome, qs)  # rides with the reads below (team genome)
        terms = weigh_terms(self.genome, qs, cache=self.capped_counts)
        # every search is sent before any is read: on a team genome they travel together (PendingScores)
        started = {name: scorer(self.genome, qs, pool, terms, self.capped_counts, self.searches)
                   for name, scorer in LEXICAL_SCORERS.items() if self._weighs(name)}
        per_signal: dict[str, dict[int, float]] = {name: dict(scores) for name, scores in started.items()}
        defs = reading_defs()
        if defs and self._weighs("definition"):
            per_signal["definition"] = definition_gene_scores(defs)
        stages["lexical"] = time.perf_counter() - t
        t = time.perf_counter()
        vector = self._query_vector(qs)
        per_signal["dense"] = dense_scorer(self.genome, vector, pool, exact_below=cfg.ann_threshold)
        if allowed is not None:
            per_signal = {name: _only(scores, allowed) for name, scores in per_signal.items()}
            held = contains(allowed, [d[0].gene for d in defs.values()])
            defs = {sid: d for sid, d in defs.items() if d[0].gene in held}
        if vector is not None and self.genome.has_stale_vectors():  # a re-embed runs (retrieve/dense_fill.py)
            per_signal["dense"].update(self._stale_cosines(
                vector, {name: scores for name, scores in per_signal.items() if name != "dense"}))
        stages["dense"] = time.perf_counter() - t
        return Evidence(qs, terms, per_signal, defs, vector, query_kind(qs, terms, bool(defs)))

    def scope(self, project: ProjectArg) -> Scope:
        """The Scope for a project argument (names are checked: UnknownProject lists the known ones)."""
        return project if isinstance(project, Scope) else self.catalog.resolve(project)

    def retrieve(self, query: str, *, max_genes: int | None = None, project: ProjectArg = None,
                 party: str | None = None, zone: ZoneCap | None = None, floor: float | None = None,
                 gate: bool = True, pointers: bool = False) -> Retrieval:
        """Ranked genes for `query`; with `pointers`, also the symbol spans that matched, best first.

        `project` (one name, several, or a Scope) answers from those projects' genes only; without
        one the project the evidence leads to answers (retrieve/scope.py). With `gate`, a message
        about nothing in that project returns nothing, with the reason in `silence` (weigh/silence.py).
        All of its reads see one committed state of the genome (`read_snapshot`: on a team genome,
        another backend's re-index lands before or after a question, never between its reads)."""
        with self.genome.read_snapshot():
            return self._retrieve(query, max_genes=max_genes, project=project, party=party, zone=zone,
                                  floor=floor, gate=gate, pointers=pointers)

    def _retrieve(self, query: str, *, max_genes: int | None, project: ProjectArg, party: str | None,
                  zone: ZoneCap | None, floor: float | None, gate: bool, pointers: bool) -> Retrieval:
        cfg = self.settings.retrieval
        max_genes = cfg.max_genes if max_genes is None else max(0, max_genes)
        stages: dict[str, float] = {}
        scope = self.scope(project)
        cap0 = zone.max_genes if zone else None
        if scope.silent_reason:
            qs0 = query_mod.extract(query, self.settings.synonyms)
            return Retrieval(qs0, (), "abstain", 0, cap0, stages, project=",".join(scope.names),
                             silence=scope.silent_reason)
        allowed = self.catalog.rowids(scope.names) if scope.scoped else None
        ev = self.evidence(query, stages, allowed=allowed)
        qs, terms, per_signal, defs, vector = ev.qs, ev.terms, ev.per_signal, ev.defs, ev.vector
        if not per_signal:
            return Retrieval(qs, (), "abstain", 0, cap0, stages, project=",".join(scope.names) or None,
                             silence=NOTHING_HELD if gate else "")

        t = time.perf_counter()
        code_weights = self.code_weights_for(ev.kind)
        fused = self._fuse(per_signal, code_weights)
        if self._weighs("coactivation") and fused:
            leading = [r for r, _ in sorted(fused.items(), key=lambda kv: -kv[1][0])[:LEAD_WINDOW]]
            seeds = leading[:COACTIVATION_SEEDS]
            # the paths scope asks for next, sent with the co-activation read (a team genome's round trip)
            facts = self.genome.start_gene_facts(leading) if cfg.scope_by_evidence and not scope.scoped else dict
            co = coactivation_scorer(self.genome, seeds, cfg.candidate_pool)
            facts()
            if co and allowed is not None:  # genes delivered together with these may be another project's
                co = _only(co, allowed)
            if co:
                per_signal["coactivation"] = co
                fused = self._fuse_added(fused, "coactivation", co, code_weights)
        ranked = sorted(fused.items(), key=lambda kv: (-kv[1][0], kv[0]))
        stages["fusion"] = time.perf_counter() - t

        answered = ",".join(scope.names) or None
        if not scope.scoped and cfg.scope_by_evidence:
            t = time.perf_counter()
            ranked, answered = self._lead(ranked)
            stages["scope"] = time.perf_counter() - t

        t = time.perf_counter()
        # look only at what can be returned (gated: room for the floor/tier to choose from)
        wanted = max_genes if not gate else max(max_genes * 3, 24)
        if pointers:
            wanted = max(wanted, LOCATE_WINDOW)
        window = ranked[: wanted * (5 if party is not None else 1)]
        shown = self._returnable(window, party)
        # read whole only the genes that can be delivered or judged: the floor keeps a prefix of this
        # ranking (best first) and the tier at most max_genes of it; the rest only lend their scores
        whole = len(shown) if pointers else max(max_genes, silence_gate.BEST_ITEMS)
        genes = self.genome.genes_by_rowid(r for r, _, _ in shown[:whole])
        head = [entry for entry in shown[:whole] if entry[0] in genes]  # (less any retired meanwhile)
        items = [ScoredGene(genes[r], score, parts) for r, score, parts in head]
        scores = [score for _, score, _ in head + shown[whole:]]
        stages["fetch"] = time.perf_counter() - t

        candidates = len(fused)
        located: tuple[Pointer, ...] = ()
        spans_dense = self._span_cosines(vector, items, ev.kind)  # the pointers' and the silence gate's, embedded once
        mass: dict[str, float] = {}
        if pointers:
            t = time.perf_counter()
            tests_wanted = wants_tests(qs)
            lw = self.locate_weights_for(ev.kind)
            located = tuple(locate(self.genome, items, terms, defs, lw, tests_wanted=tests_wanted,
                                   gene_dense=per_signal.get("dense"), span_cosines=spans_dense,
                                   locations=qs.locations))
            if self.locate_weights.mass > 0:
                wide = ranked[:MASS_WINDOW]
                paths = self.genome.gene_paths([r for r, _ in wide])
                mass = file_mass([(paths[r], s) for r, (s, _) in wide if r in paths],
                                 tests_factor=self.locate_weights.tests, tests_wanted=tests_wanted)
            stages["locate"] = time.perf_counter() - t
        if not gate:
            return Retrieval(qs, tuple(items[:max_genes]), "ungated", candidates, None, stages, located, mass,
                             project=answered)
        if not items or max_genes == 0:
            return Retrieval(qs, (), "abstain", candidates, cap0, stages, project=answered,
                             silence=NOTHING_HELD if not items else "")
        best = items[0]
        best_dense = max(per_signal["dense"].values(), default=0.0)
        if (best.score < cfg.abstain_below
                or (coverage(qs, best.gene) == 0.0 and (vector is None or best_dense < ABSTAIN_DENSE)
                    and not best.signals.get("path") and not best.signals.get("path_terms"))):
            return Retrieval(qs, (), "abstain", candidates, cap0, stages, project=answered,
                             silence=NOTHING_HELD)
        features: dict[str, float] = {}
        if cfg.silence:
            t = time.perf_counter()
            verdict = silence_gate.judge_query(self, qs, scope.names or _names(answered), items, per_signal,
                                               vector is not None,
                                               span_cosines=None if spans_dense is None else
                                               lambda: spans_dense.best_per_gene(terms))
            stages["silence"] = time.perf_counter() - t
            if verdict.silent:
                return Retrieval(qs, (), "abstain", candidates, cap0, stages, project=answered,
                                 silence=verdict.reason, silence_features=verdict.features.to_dict())
            features = verdict.features.to_dict()
        floor_frac = cfg.score_floor if floor is None else floor
        kept = [it for it in items if it.score >= floor_frac * best.score]
        tier, count = pick_tier([score for score in scores if score >= floor_frac * best.score], max_genes)
        cap = None
        if zone is not None:
            cap = zone.max_genes
            count = min(count, cap)
        if located:
            kept = _by_pointers(items, kept, located, floor_frac)
            delivered = {it.gene.rowid for it in kept[:count]}
            located = tuple(p for p in located if p.gene.rowid in delivered)
        return Retrieval(qs, tuple(kept[:count]), tier if count else "abstain", candidates, cap, stages, located, mass,
                         project=answered, silence_features=features)

    def _returnable(self, window: list[tuple[int, tuple[float, dict[str, float]]]],
                    party: str | None) -> list[tuple[int, float, dict[str, float]]]:
        """(rowid, score, signals) of the window's genes that may be returned: not archived, and the
        party's when one asks; read from the genes' marks, not their text."""
        marks = self.genome.gene_marks(r for r, _ in window)
        out: list[tuple[int, float, dict[str, float]]] = []
        for rowid, (score, parts) in window:
            mark = marks.get(rowid)
            if mark is None or mark[0] == "archived" or (party is not None and party not in mark[1:]):
                continue
            out.append((rowid, round(score, 6), parts))
        return out

    def _lead(self, ranked: list[tuple[int, tuple[float, dict[str, float]]]]
              ) -> tuple[list[tuple[int, tuple[float, dict[str, float]]]], str | None]:
        """Evidence-led scope (retrieve/scope.py): the ranking it keeps, and the leader's name."""
        kept, found = lead_ranking(self.genome, self.catalog, ranked)
        return kept, found.project


def _only(scores: dict[int, float], allowed: np.ndarray) -> dict[int, float]:
    inside = contains(allowed, scores)
    return {r: v for r, v in scores.items() if r in inside}


def _names(answered: str | None) -> tuple[str, ...]:
    return tuple(answered.split(",")) if answered else ()


def _by_pointers(items: list[ScoredGene], kept: list[ScoredGene], located: Sequence[Pointer],
                 floor_frac: float) -> list[ScoredGene]:
    """The genes to deliver with pointers (the packet's): those of the best pointers first, then the rest of the
    gene ranking past its floor.

    Why: the pointer ranking weighs each span's own words and cosine beside its gene's score, and finds the
    function a question in words means where the gene ranking alone does not (`fingerprint`, ungated, ranks by
    it). The packet delivered the best genes instead and narrowed each to its best pointer, so "mark the response
    as a file to be saved with a file name" had `res.attachment` first in `fingerprint` and nowhere in the packet's
    six items. A pointer below the floor's share of the best pointer leads nothing; the tier still decides how many.
    """
    by_row = {it.gene.rowid: it for it in items}
    top = located[0].score if located else 0.0
    led: dict[int | None, ScoredGene] = {}
    for p in located:
        if p.score < floor_frac * top:
            break
        if p.gene.rowid in by_row:
            led.setdefault(p.gene.rowid, by_row[p.gene.rowid])
    return [*led.values(), *(it for it in kept if it.gene.rowid not in led)]


class _QuerySpans:
    """One query's span cosines: the pointer ranking asks for them (`locate`) and, where the best genes' own
    vectors leave a message silent, the silence gate reads those genes' per gene; whichever asks first computes
    them, the other reads what it left. `genes`: the located genes, best first (span_dense.chosen_spans picks)."""

    def __init__(self, retriever: Retriever, embedder: Any, vector: np.ndarray, genes: list[Gene],
                 worded: int | None = None) -> None:
        self.retriever, self.embedder, self.vector, self.genes = retriever, embedder, vector, genes
        self.worded = worded  # spans chosen for their words past the best genes (None: span_dense's WORDED_SPANS)
        self.found: dict[tuple[int, int], float] | None = None

    def __call__(self, spans: SpanScores) -> dict[tuple[int, int], float]:
        chosen = chosen_spans(self.genes, spans, worded=self.worded)
        try:
            self.found = span_similarities(self.embedder, self.vector, self.genes, chosen,
                                           self.retriever.settings.embedding, self.retriever.span_vectors)
        except Exception as exc:  # the model failing on the spans costs that signal, not the answer
            log.warning("span embeddings failed (%s); pointers ranked without them", exc)
            self.found = {}
        return self.found

    def best_per_gene(self, terms: WeighedTerms) -> dict[int, float]:
        """The best genes' rowid → the best cosine among the symbol spans it packs (the spans chosen for their
        words elsewhere are the pointers' evidence, not the gate's: it was chosen on the best genes alone)."""
        lead = self.genes[:DENSE_GENES]
        found = self.found if self.found is not None else self(span_scores(self.retriever.genome, lead, terms))
        rows = {g.rowid for g in lead}
        out: dict[int, float] = {}
        for (rowid, _), cosine in found.items():
            if rowid in rows:
                out[rowid] = max(out.get(rowid, -1.0), cosine)
        return out
