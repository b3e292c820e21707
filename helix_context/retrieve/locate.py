"""Ranked genes → pointers at the symbol that matched, and files ranked by their symbols' evidence.

Why a stage of its own: storage packs small neighbours into one gene, so the
gene ranking says *which stretch of a file* is relevant, not which function. Here
each candidate gene is cut at the symbols that start in it (from the symbols
table, filled at ingest), every symbol is scored on its own lines with the
query's weighed words (BM25 with the genome's document frequencies), and a
symbol the query names as code (a call, a frame, an exception) gets the
definition evidence. A gene without symbols (prose, config) is its own pointer.

File ranking sums a file's best pointers with decreasing weights: one strong
symbol or several good ones both lift a file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from helix_context.genome.fts_text import split_identifier
from helix_context.genome.storage import GenomeStore
from helix_context.genome.symbols_sql import SymbolRow
from helix_context.models import FileHit, Gene, Pointer, QuerySignals, ScoredGene
from helix_context.retrieve.fusion import DENSE_FLOOR
from helix_context.retrieve.terms import WeighedTerms, stem_words

MAX_DEFINITIONS_PER_NAME = 12  # a name defined more often than this locates nothing
# a definition whose name differs from the query's spelling only in case (`Sin` for `sin(x)`): names are
# looked up without case, since prose capitalises them, but code names them exactly in nearly every language
CASE_MISMATCH = 0.5
# a traceback frame's function, or the symbol holding a place's line, in a file of that name: the text says
# where the code broke, which outweighs any name its prose uses (those weigh at most 1.0). Among pointers
# and files only: in the fused gene ranking it stands at the top of the names' scale (1.0), as before
# (chosen on swe-dev, the development set; any factor from 1.75 to 4 gives the same figures)
FRAME_WEIGHT = 2.0
K1, B, AVG_CHARS = 1.2, 0.75, 900.0
FILE_DECAY = (1.0, 0.35, 0.15)  # weights of a file's best, second and third pointer
MASS_WINDOW = 200  # genes of the fused ranking whose files gather "mass"
MASS_DECAY = 0.5  # each further gene of one file adds this much less


@dataclass(frozen=True)
class LocateWeights:
    gene: float = 1.0  # the containing gene's fused score (normalised to the best gene)
    symbol: float = 0.6  # BM25 of the symbol's own lines (normalised to the best symbol)
    definition: float = 0.8  # the query names this symbol as code
    name: float = 0.0  # the query's words are the words of the symbol's name (normalised to the best name)
    tests: float = 1.0  # a span in a test file counts this much when the query does not ask about tests
    mass: float = 0.0  # files: weight of a file's share of the wider ranking next to its best pointers
    dense: float = 0.0  # the span's own cosine to the query (its gene's, when the gene holds one span)
    header: float = 1.0  # a file's header (its lines before its first definition) counts this share of its score

    def blended(self, lexicality: float, question: QuestionFactors) -> LocateWeights:
        """These weights for one query: each factor of `question` at lexicality 0, none at 1, linear in between.

        Why the span's own evidence has factors of its own: a gene's fused score speaks for every function the
        gene packs, while a question in words is answered by one of them, told apart by its own words and cosine.
        They reach 1 at lexicality SPAN_QUESTION_UNTIL, where text is an issue's (every swe-dev issue is), whose
        pointers keep the weighing chosen on issues. Chosen on the development data (stdlib, express and commander
        questions, swe-dev issues; docs/performance.md)."""
        s = min(1.0, max(0.0, lexicality))
        span = min(1.0, s / SPAN_QUESTION_UNTIL)

        def at(factor: float, x: float) -> float:
            return factor + (1.0 - factor) * x

        return replace(self, symbol=self.symbol * at(question.span_lexical, span),
                       definition=self.definition * at(question.lexical, s),
                       dense=self.dense * at(question.span_dense, span),
                       header=self.header * at(question.header, span))


SPAN_QUESTION_UNTIL = 0.5  # lexicality from which a pointer's own evidence is weighed as for an issue


def worded_spans(lexicality: float, weights: LocateWeights) -> int | None:
    """How many spans past the best genes are embedded for their own words (span_dense.chosen_spans's `worded`):
    its default (None) for a question in words; none for text that reads as an issue (its words are many and
    spread over callers and tests: on the swe-dev issues those spans cost a file its first place and found no
    function), nor where the spans' words weigh nothing (`locate_symbol` 0: the dense-only ranking the benchmarks
    print beside the fusion)."""
    return None if lexicality < SPAN_QUESTION_UNTIL and weights.symbol > 0 else 0


@dataclass(frozen=True)
class QuestionFactors:
    """What a question in plain words (lexicality 0) multiplies a pointer's evidence by (`[retrieval] question_*`)."""

    lexical: float = 0.4  # the query naming the symbol as code
    span_lexical: float = 2.4  # the span's own words
    span_dense: float = 4.5  # the span's own cosine
    # a file's header: its docstring sums up every function of the file, so it sits close to any question about
    # one of them ("serialize a Python object to a JSON formatted string": `json/encoder.py:1-35` above `dumps`),
    # while a question in words asks for the function. From lexicality 0.5 (an issue's) it counts in full: an
    # issue's imports and module names do point at files
    header: float = 0.7


TEST_WORDS = frozenset({"test", "tests", "testing", "pytest", "unittest", "spec", "specs", "conftest"})
_TEST_DIRS = frozenset({"test", "tests", "testing", "__tests__", "spec", "specs"})
_TEST_FILE_RE = re.compile(r"^(?:test_.*|.*_tests?\.\w+|.*\.(?:test|spec)\.\w+|conftest\.py)$", re.I)


def is_test_path(path: str | None) -> bool:
    """Test code by the conventions most languages share (tests/ folders, test_*.py, *_test.go, *.spec.ts).

    Why: an issue describes behaviour, and the code that has it is not the code that checks it;
    a test file repeats the issue's words in every assertion and would crowd the answer.
    """
    if not path:
        return False
    parts = path.replace("\\", "/").split("/")
    return bool(_TEST_FILE_RE.match(parts[-1])) or any(p.lower() in _TEST_DIRS for p in parts[:-1])


def wants_tests(qs: QuerySignals) -> bool:
    words = qs.term_counts or tuple((t, 1) for t in qs.terms)
    return any(w in TEST_WORDS for w, _ in words)


def start_definitions(genome: GenomeStore, qs: QuerySignals) -> Callable[[], dict[int, tuple[SymbolRow, float]]]:
    """Symbol id → (symbol, weight) for symbols the query names, when the returned function is called;
    rarer names weigh more, and a traceback frame's function in a file of the frame's name is the
    strongest case. The read is sent now: the retriever starts it before the lexical reads, so that on
    the team genome it shares their round trip."""
    if not qs.definitions:
        return dict
    reading = genome.start_named_and_framed([d.lower() for d in qs.definitions], MAX_DEFINITIONS_PER_NAME, qs.frames)
    return lambda: _weighed_definitions(qs, *reading())


def _weighed_definitions(qs: QuerySignals, found: dict[str, list[SymbolRow]], framed: dict[str, list[SymbolRow]]
                         ) -> dict[int, tuple[SymbolRow, float]]:
    frame_files = {(f.lower(), fn.lower()) for f, fn in qs.frames}
    spellings: dict[str, set[str]] = {}
    for d in qs.definitions:
        spellings.setdefault(d.lower(), set()).add(d)
    out: dict[int, tuple[SymbolRow, float]] = {}
    for rank, name in enumerate(spellings):
        rows = found.get(name)
        if rows and len(rows) <= MAX_DEFINITIONS_PER_NAME:
            # where some definitions spell the name as the query does, the others weigh less
            exact = {r.id for r in rows if r.name.rsplit(".", 1)[-1] in spellings[name]}
            base = 1.0 / (1.0 + math.log(len(rows))) / (1.0 + 0.05 * rank)
            for row in rows:
                weight = base if not exact or row.id in exact else base * CASE_MISMATCH
                tail = row.path.replace("\\", "/").rsplit("/", 1)[-1].lower()
                if (tail, name) in frame_files:
                    weight = FRAME_WEIGHT
                if row.id not in out or out[row.id][1] < weight:
                    out[row.id] = (row, weight)
        for row in framed.get(name, ()):  # a frame's function in a file of the frame's name, however common
            out[row.id] = (row, FRAME_WEIGHT)
    return out


def definition_gene_scores(defs: dict[int, tuple[SymbolRow, float]]) -> dict[int, float]:
    """The definition signal per gene, for fusion: the best named symbol the gene holds (a frame's counts
    as the strongest name, 1.0: its extra weight picks among the pointers of the genes ranked)."""
    scores: dict[int, float] = {}
    for row, weight in defs.values():
        scores[row.gene] = max(scores.get(row.gene, 0.0), min(weight, 1.0))
    return scores


def _term_patterns(terms: WeighedTerms) -> list[tuple[re.Pattern[str] | str, float]]:
    pats: list[tuple[re.Pattern[str] | str, float]] = []
    for stem in terms.stems:
        weight = terms.weights.get(stem, 0.0)
        if len(stem) >= 4:
            pats.append((stem, weight))  # substring: also finds it inside identifiers
        else:
            pats.append((re.compile(r"(?<![a-z0-9])" + re.escape(stem)), weight))
    return pats


def _bm25(text: str, pats: Sequence[tuple[re.Pattern[str] | str, float]]) -> float:
    if not text:
        return 0.0
    norm = K1 * (1.0 - B + B * len(text) / AVG_CHARS)
    total = 0.0
    for pat, weight in pats:
        tf = text.count(pat) if isinstance(pat, str) else len(pat.findall(text))
        if tf:
            total += weight * tf * (K1 + 1.0) / (tf + norm)
    return total


LEAD_LINES = 3  # lines before a gene's first symbol that are a span of their own


def _spans(gene: Gene, symbols: list[SymbolRow], continued: SymbolRow | None = None,
           modules: Collection[str] = ()) -> list[tuple[SymbolRow | None, int, int]]:
    """(symbol, first, last line of its own text inside this gene); a class's own text is its header
    (its lines up to its first method or nested class: its constants, an enum's members, are part of it),
    and so is a function's that holds a module (`modules`: `_module_functions`).
    `continued`: the function the gene's opening lines belong to (`_continued`), which they point at."""
    if not symbols:
        return [(continued, gene.start_line, gene.end_line)]
    out: list[tuple[SymbolRow | None, int, int]] = []
    first = symbols[0].start_line
    if first - gene.start_line >= LEAD_LINES:
        out.append((continued, gene.start_line, first - 1))
    for i, sym in enumerate(symbols):
        last = min(sym.end_line, gene.end_line)
        if sym.kind == "class" or sym.name in modules:
            inner = next((s.start_line for s in symbols[i + 1:]
                          if sym.start_line < s.start_line <= sym.end_line and s.kind != "constant"), None)
            if inner is not None:
                last = min(last, inner - 1)
        out.append((sym, sym.start_line, max(sym.start_line, last)))
    return out


# gene rowid → its spans: (symbol, first line, last line, BM25 of its lines, its name's words, is a file's header)
SpanScores = dict[int, list[tuple[SymbolRow | None, int, int, float, float, bool]]]


def _name_score(name: str, terms: WeighedTerms, stems: dict[str, str]) -> float:
    """Weight of the query words that are words of the symbol's own (last) name.

    Why: a function is named for what it does, so "parse a date header into a datetime"
    says `parsedate_to_datetime` more surely than any body text does, and it tells
    `escape` from `unescape` where a substring match cannot.
    """
    leaf = name.rsplit(".", 1)[-1]
    words = split_identifier(leaf) or [leaf.lower()]
    total = 0.0
    seen: set[str] = set()
    for word in words:
        stem = stems.get(word)
        if stem is None:
            stem = stems[word] = stem_words([word])[0]
        if stem not in seen:
            seen.add(stem)
            total += terms.weights.get(stem, 0.0)
    return total


def _continued(genes: Sequence[Gene], by_gene: Mapping[int, list[SymbolRow]], files: _FileSymbols) -> dict[int, SymbolRow]:
    """Gene rowid → the function or method that the gene's opening lines are the rest of.

    Why: storage cuts a function longer than a gene into several genes, and the later ones hold no
    symbol's first line. Their lines would be a nameless pointer beside the function's own, taking
    a second place in the answer for one function; named for the function they belong to, the two
    become one pointer at it (`score_pointers` keeps the better), scored as before by its own lines.
    Classes are left out: a class's body between its methods is better shown as those lines than as
    the whole class; so are constants (a long literal's rest is data, not a function), and functions that
    hold a module (`_module_functions`: lodash's `runInContext`, 15,000 lines around its 300 functions). Measured
    (bench_code_retrieval.py strict MRR@10, both models, no question lost): MiniLM 0.612 → 0.620,
    code-minilm 0.634 → 0.636.
    """
    out: dict[int, SymbolRow] = {}
    for gene in genes:
        own = by_gene.get(gene.rowid or -1, [])
        if (gene.content_type != "code" or not gene.source_path or gene.rowid is None or gene.start_line <= 1
                or (own and own[0].start_line - gene.start_line < LEAD_LINES)):
            continue
        found, modules = files.of(gene)
        around = [s for s in found if s.kind not in ("class", "constant") and s.name not in modules
                  and s.start_line < gene.start_line <= s.end_line]
        if around:
            out[gene.rowid] = max(around, key=lambda s: s.start_line)  # the innermost
    return out


MODULE_FUNCTION = 3  # a function that defines this many functions or classes directly inside it holds a module
# where a function is also how a module is written (the module pattern, UMD, lodash's `runInContext`); in Python a
# function defining functions is a closure factory, pointed at whole (`json.encoder._make_iterencode`)
MODULE_LANGUAGES = frozenset({"javascript", "typescript", "tsx", "vue", "svelte", "html"})


def _module_functions(symbols: Sequence[SymbolRow]) -> set[str]:
    """Names of the functions that hold a module, as a class holds its methods: those defining MODULE_FUNCTION or
    more symbols directly inside (a UMD wrapper, lodash's `runInContext`); a closure's one or two helpers do not.
    Asked only of files in MODULE_LANGUAGES."""
    inside: dict[str, int] = {}
    for sym in symbols:
        if "." in sym.name:
            holder = sym.name.rsplit(".", 1)[0]
            inside[holder] = inside.get(holder, 0) + 1
    return {s.name for s in symbols if s.kind in ("function", "method") and inside.get(s.name, 0) >= MODULE_FUNCTION}


class _FileSymbols:
    """A file's symbols and its module functions, read once per query for the genes that need them."""

    def __init__(self, genome: GenomeStore) -> None:
        self.genome = genome
        self.seen: dict[str, tuple[list[SymbolRow], set[str]]] = {}

    def of(self, gene: Gene) -> tuple[list[SymbolRow], set[str]]:
        """The symbols of the gene's file, and its module functions."""
        path = gene.source_path or ""
        if path not in self.seen:
            found = self.genome.symbols_of_path(path)
            self.seen[path] = (found, _module_functions(found) if gene.language in MODULE_LANGUAGES else set())
        return self.seen[path]

    def defines(self, gene: Gene) -> bool:
        """Whether the gene's file defines a function, class or the like (a constant alone is data, not code
        that a header would sum up)."""
        return bool(gene.source_path) and any(s.kind != "constant" for s in self.of(gene)[0])

    def modules_in(self, gene: Gene, own: Sequence[SymbolRow]) -> set[str]:
        """The module functions among `own` (the gene's symbols) that run past the gene: one that fits in it is
        scored whole, as any function."""
        longer = {s.name for s in own if s.kind in ("function", "method") and s.end_line > gene.end_line}
        if not gene.source_path or not longer or gene.language not in MODULE_LANGUAGES:
            return set()
        return longer & self.of(gene)[1]


def span_scores(genome: GenomeStore, genes: Sequence[Gene], terms: WeighedTerms, *,
                asked: Collection[int] = ()) -> SpanScores:
    """Gene rowid → its spans (symbol, first, last line) with the BM25 of each span's own lines, its name's
    words, and whether it is a file's header: its lines before the first definition of a file that has some.

    A constant is a span of its own only where the query names it (`asked`: symbol ids, the
    definitions the query uses as code): "where is MAX_RETRIES set" points at its line, while a
    question in words is answered by functions and classes, as the one-line spans of a module's
    capitals would otherwise crowd them out (stdlib strict MRR@10 fell 0.654 → 0.641 with them).

    Apart from the pointer scoring so that one query's spans can be scored once and ranked under
    many weightings (benchmarks/tune_localization.py).
    """
    by_gene = {rowid: [s for s in syms if s.kind != "constant" or s.id in asked]
               for rowid, syms in genome.symbols_in_genes([g.rowid for g in genes if g.rowid]).items()}
    files = _FileSymbols(genome)
    continued = _continued(genes, by_gene, files)
    pats = _term_patterns(terms)
    stems: dict[str, str] = {}
    out: SpanScores = {}
    for gene in genes:
        lines = gene.content.split("\n")
        spans = []
        own = by_gene.get(gene.rowid or -1, [])
        for sym, first, last in _spans(gene, own, continued.get(gene.rowid or -1), files.modules_in(gene, own)):
            a, b = max(0, first - gene.start_line), max(0, last - gene.start_line + 1)
            # the name scores the part holding the definition line; a continuation, its own lines only
            named = _name_score(sym.name, terms, stems) if sym is not None and first == sym.start_line else 0.0
            header = sym is None and first == 1 and gene.content_type == "code" and (bool(own) or files.defines(gene))
            spans.append((sym, first, last, _bm25("\n".join(lines[a:b]).lower(), pats), named, header))
        out[gene.rowid or -1] = spans
    return out


def _span_cosines(own: Sequence[tuple[ScoredGene, tuple[Any, ...]]], gene_dense: Mapping[int, float],
                  span_dense: Mapping[tuple[int, int], float]) -> list[float | None]:
    """Each code span's cosine to the query: its own where it was embedded alone, else its gene's.

    Prose, config and logs get none: their gene's dense evidence is already in the gene's fused
    score with the weights chosen on prose (SciFact), and one span per gene has nothing to tell apart.
    """
    out: list[float | None] = []
    for sg, span in own:
        if sg.gene.content_type != "code":
            out.append(None)
            continue
        rowid = sg.gene.rowid or -1
        cos = span_dense.get((rowid, span[1]))
        out.append(cos if cos is not None else gene_dense.get(rowid))
    return out


def _dense_norm(cosines: Sequence[float | None]) -> list[float]:
    """Cosines on fusion's dense scale: 0 at the floor, 1 at the best, damped when even the best is weak."""
    top = max((c for c in cosines if c is not None), default=0.0)
    if top <= DENSE_FLOOR:
        return [0.0] * len(cosines)
    span = max(top - DENSE_FLOOR, 1e-6)
    damp = min(1.0, top / 0.5)
    return [max(0.0, (c - DENSE_FLOOR) / span) * damp if c is not None else 0.0 for c in cosines]


def score_pointers(ranked: Sequence[ScoredGene], spans: SpanScores, defs: dict[int, tuple[SymbolRow, float]],
                   weights: LocateWeights = LocateWeights(), *, tests_wanted: bool = False,
                   gene_dense: Mapping[int, float] | None = None,
                   span_dense: Mapping[tuple[int, int], float] | None = None) -> list[Pointer]:
    """Pointers for the ranked genes from their span scores, best first.

    `gene_dense`: gene rowid → the dense scorer's cosine; `span_dense`: (gene rowid, first line) →
    the cosine of a span embedded alone (span_dense.py). With `weights.dense`, each pointer adds its
    span's cosine, so of the small functions one gene packs, the one the question means comes first.
    """
    if not ranked:
        return []
    best_gene = max(sg.score for sg in ranked) or 1.0
    own = [(sg, span) for sg in ranked for span in spans.get(sg.gene.rowid or -1, ())]
    best_lex = max((span[3] for _, span in own), default=0.0) or 1.0
    best_name = max((span[4] for _, span in own), default=0.0) or 1.0
    dense = (_dense_norm(_span_cosines(own, gene_dense or {}, span_dense or {})) if weights.dense > 0
             else [0.0] * len(own))
    pointers: list[Pointer] = []
    for (sg, (sym, first, last, lex, named, header)), dense_value in zip(own, dense, strict=True):
        gene = sg.gene
        parts = {"gene": round(weights.gene * sg.score / best_gene, 6),
                 "symbol": round(weights.symbol * lex / best_lex, 6)}
        if dense_value > 0:
            parts["span_dense"] = round(weights.dense * dense_value, 6)
        if named > 0 and weights.name > 0:
            parts["name"] = round(weights.name * named / best_name, 6)
        if sym is not None and sym.id in defs:
            parts["definition"] = round(weights.definition * defs[sym.id][1], 6)
        score = sum(parts.values())
        if header:
            score *= weights.header
        if weights.tests != 1.0 and not tests_wanted and is_test_path(gene.source_path):
            score *= weights.tests
        if sym is not None:
            pointers.append(Pointer(gene, sym.path, sym.name, sym.kind, sym.start_line, sym.end_line,
                                    round(score, 6), {**sg.signals, **parts}))
        else:
            pointers.append(Pointer(gene, gene.source_path, gene.symbol, None, first, last, round(score, 6),
                                    {**sg.signals, **parts}))
    pointers.sort(key=lambda p: (-p.score, p.path or "", p.start_line))
    seen: set[tuple[str | None, int, int]] = set()  # a function cut into several genes: its best part stands
    out: list[Pointer] = []
    for p in pointers:
        if (p.path, p.start_line, p.end_line) not in seen:
            seen.add((p.path, p.start_line, p.end_line))
            out.append(p)
    return out


def locate(genome: GenomeStore, ranked: Sequence[ScoredGene], terms: WeighedTerms,
           defs: dict[int, tuple[SymbolRow, float]], weights: LocateWeights = LocateWeights(),
           *, tests_wanted: bool = False, gene_dense: Mapping[int, float] | None = None,
           span_cosines: Callable[[SpanScores], Mapping[tuple[int, int], float]] | None = None,
           locations: Sequence[tuple[str, int]] = ()) -> list[Pointer]:
    """Pointers for the ranked genes, best first (`span_cosines`: the spans → their own cosines, span_dense.py;
    `locations`: (file name, line) places the query names, each pinning the symbol that holds its line)."""
    if not ranked:
        return []
    spans = span_scores(genome, [sg.gene for sg in ranked], terms, asked=defs.keys())
    if locations:
        defs = {**defs, **located_symbols(ranked, spans, locations, defs)}
    span_dense = span_cosines(spans) if span_cosines is not None and weights.dense > 0 else None
    return score_pointers(ranked, spans, defs, weights, tests_wanted=tests_wanted, gene_dense=gene_dense,
                          span_dense=span_dense)


def located_symbols(ranked: Sequence[ScoredGene], spans: SpanScores, locations: Sequence[tuple[str, int]],
                    defs: Mapping[int, tuple[SymbolRow, float]]) -> dict[int, tuple[SymbolRow, float]]:
    """Symbol id → (symbol, FRAME_WEIGHT) for the innermost symbol holding each named line, in ranked genes of a
    file of that name: a compiler's or linter's `file:line` says where, as a traceback frame does.

    Only the genes already ranked are looked at (the file's name in the query brings its genes in
    through the path signal), so a place costs no read; a line outside every symbol pins nothing."""
    wanted: dict[str, set[int]] = {}
    for name, line in locations:
        wanted.setdefault(name.lower(), set()).add(line)
    out: dict[int, tuple[SymbolRow, float]] = {}
    for sg in ranked:
        lines = wanted.get((sg.gene.source_path or "").replace("\\", "/").rsplit("/", 1)[-1].lower())
        if not lines:
            continue
        for line in lines:
            holding = [sym for sym, *_ in spans.get(sg.gene.rowid or -1, ())
                       if sym is not None and sym.start_line <= line <= sym.end_line]
            if holding:
                sym = min(holding, key=lambda s: s.end_line - s.start_line)
                if sym.id not in defs or defs[sym.id][1] < FRAME_WEIGHT:
                    out[sym.id] = (sym, FRAME_WEIGHT)
    return out


def file_mass(ranked: Sequence[tuple[str, float]], *, tests_factor: float = 1.0,
              tests_wanted: bool = False) -> dict[str, float]:
    """Path → how much of the wider fused ranking its genes hold (best file 1.0).

    Why: pointers come from the best few dozen genes only; a file whose many genes all
    rank fairly well (the module the issue is about) deserves credit a single strong
    stray gene elsewhere does not get. Later genes of one file count less and less.
    """
    mass: dict[str, float] = {}
    seen: dict[str, int] = {}
    best = max((s for _, s in ranked), default=0.0) or 1.0
    for path, score in ranked:
        k = seen.get(path, 0)
        seen[path] = k + 1
        factor = tests_factor if tests_factor != 1.0 and not tests_wanted and is_test_path(path) else 1.0
        mass[path] = mass.get(path, 0.0) + factor * score / best * MASS_DECAY ** k
    top = max(mass.values(), default=0.0) or 1.0
    return {p: m / top for p, m in mass.items()}


def rank_files(pointers: Sequence[Pointer], per_file: int = 3, *, mass: dict[str, float] | None = None,
               mass_weight: float = 0.0) -> list[FileHit]:
    """Files by the evidence of their best pointers (plus their mass); each keeps its best `per_file` spans."""
    groups: dict[str, list[Pointer]] = {}
    for p in pointers:
        key = p.path or p.gene.gene_id
        group = groups.setdefault(key, [])
        if not any(q.start_line == p.start_line and q.symbol == p.symbol for q in group):
            group.append(p)
    own = {path: sum(w * p.score for w, p in zip(FILE_DECAY, group, strict=False)) for path, group in groups.items()}
    if mass and mass_weight > 0:
        top = max(own.values(), default=0.0) or 1.0
        own = {path: v / top + mass_weight * mass.get(path, 0.0) for path, v in own.items()}
    hits = [FileHit(path, round(own[path], 6), tuple(group[:per_file])) for path, group in groups.items()]
    hits.sort(key=lambda h: (-h.score, h.path))
    return hits


GROUP_BY = ("symbol", "file")


def pointer_dict(p: Pointer) -> dict[str, Any]:
    """The wire form of a pointer (fingerprint results, MCP)."""
    return {"gene_id": p.gene.gene_id, "source_id": p.path, "project": p.gene.project, "symbol": p.symbol,
            "kind": p.kind,
            "start_line": p.start_line, "end_line": p.end_line, "score": p.score, "signals": p.signals}


def file_hit_dict(hit: FileHit) -> dict[str, Any]:
    return {"source_id": hit.path, "project": hit.pointers[0].gene.project if hit.pointers else None,
            "score": hit.score,
            "symbols": [{k: v for k, v in pointer_dict(p).items() if k != "signals"} for p in hit.pointers]}
