"""Choose the code-ranking weights by measurement on the development issues (swe-dev), reproducibly.

    python benchmarks/tune_localization.py collect --keep DIR [--sample N | --all]
    python benchmarks/tune_localization.py collect-stdlib --keep DIR
    python benchmarks/tune_localization.py tune --keep DIR [--rounds 2] [--half odd|even]

`collect` ingests each instance's tree (as bench_localization.py does) and records,
per issue, what every scorer found before any weighting (Retriever.evidence), the
spans of every candidate gene with their own lexical score (locate.span_scores),
and the gold answer. `tune` then ranks those records with the same fusion, pointer
and file-ranking code the server runs: it prints the shipped weights' file Hit@5 /
MRR@10, function Hit@10 and strict MRR@10 against the BM25 baselines (cached in the
same folder), the same with each code signal switched off (what each adds), and a
coordinate ascent from the shipped weights (each weight over a small range in turn,
best kept; the objective lifts the weakest ratio to its baseline first).
`collect-stdlib` records the 66 plain-language questions of bench_code_retrieval.py
the same way (with every candidate span's own cosine, retrieve/span_dense.py), so a
weighting is chosen on two kinds of question (whole issues and "which function does
X"), scored there by strict MRR@10. Records keep the query signals and weighed words,
so the question-aware weighting (retrieve/question.py) is replayed per record; `tune`
also prints the dense-only and lexical-only rankings and each profile applied to all.

Why records: one ingest of a sympy tree costs a minute on two cores; one ranking
costs milliseconds, so a grid of weightings is cheap once the evidence is kept. `--half` tunes on every other
record and prints the shipped and the tuned weighting on the other half: a gain that does not
carry over to records the ascent never saw is noise, not a better weighting.
Only the development set is used; nothing here knows about sympy.
"""

from __future__ import annotations

import _checkout  # noqa: F401  (this checkout's helix_context, not an installed one)

import argparse
import json
import os
import pickle
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from bench_localization import (DATA, Tokens, baseline_row, extract, file_metrics, load_instances, prepare_work, sample,
                                span_metrics)

KS = (1, 5, 10)


@dataclass(frozen=True)
class Record:
    instance_id: str
    gold: dict[str, list[int]]
    per_signal: dict[str, dict[int, float]]
    defs: dict
    genes: dict  # rowid → Gene without content
    spans: dict  # rowid → [(SymbolRow | None, first, last, lex)]
    root: str
    qs: object = None  # QuerySignals: what the question-aware weighting reads of the query
    terms: object = None  # WeighedTerms: the query's words weighed against this genome
    span_dense: object = None  # (gene rowid, first line) → cosine of that span embedded alone (span_dense.py)


class _Unpickler(pickle.Unpickler):
    """Records written by this script run as __main__ name their class `__main__.Record`."""

    def find_class(self, module: str, name: str):
        return Record if name == "Record" else super().find_class(module, name)


def packed_spans(genes: dict, spans: dict) -> dict:
    """Every span of every candidate code gene packing two or more: a record holds them all, and a replay keeps
    the ones the server would embed for its ranking (span_dense.chosen_spans)."""
    return {r: list(own) for r, own in spans.items() if len(own) >= 2 and r in genes and genes[r].content_type == "code"}


def load(path: Path):
    """A record (or the stdlib's list of them); one collected before spans carried their header flag (locate.py,
    2026-12-07) would replay the code before, so it is refused with what to do."""
    with path.open("rb") as fh:
        found = _Unpickler(fh).load()
    for record in found if isinstance(found, list) else [found]:
        if any(len(span) != 6 for own in record.spans.values() for span in own):
            raise SystemExit(f"{path} was collected by older code (its spans lack the header flag): "
                             "collect the records again (collect / collect-stdlib)")
    return found


def collect(args: argparse.Namespace) -> int:
    rows = load_instances(args.data)
    rows = rows if args.all else sample(rows, args.sample)
    work: Path = args.keep
    bare = prepare_work(work, args.data)
    records = work / "records"
    records.mkdir(exist_ok=True)
    cache_file = work / "baselines.json"
    cached: dict[str, dict] = json.loads(cache_file.read_text()) if cache_file.exists() else {}

    from helix_context.config import load_config
    from helix_context.manager import HelixContextManager
    from helix_context.retrieve.locate import span_scores

    from helix_context.retrieve.span_dense import SpanVectors, span_similarities

    settings = load_config()
    helix = HelixContextManager(settings)
    tree = work / "tree"
    tokens = Tokens()
    for n, row in enumerate(rows, 1):
        out = records / f"{row['instance_id']}.pkl"
        if out.exists():
            continue
        started = time.perf_counter()
        extract(bare, row["tag"], tree)
        helix.ingest_path(tree, embed=True)
        ev = helix.retriever.evidence(row["problem_statement"])
        rowids = {r for scores in ev.per_signal.values() for r in scores}
        genes = helix.genome.genes_by_rowid(rowids)
        spans = span_scores(helix.genome, list(genes.values()), ev.terms, asked=ev.defs.keys())
        # every candidate's span cosines, as collect-stdlib records them: the server adds them to each
        # pointer of its best genes (locate_dense), so a replay without them ranks what it never serves
        dense = span_similarities(helix.embedder, ev.vector, list(genes.values()), packed_spans(genes, spans),
                                  settings.embedding, SpanVectors())
        root = str(tree.resolve())
        slim = {r: replace(g, content="", tags=(), facts=()) for r, g in genes.items()}
        pickle.dump(Record(row["instance_id"], row["gold"], ev.per_signal, ev.defs, slim, spans, root, ev.qs, ev.terms,
                           dense), out.open("wb"))
        if row["instance_id"] not in cached:
            cached[row["instance_id"]] = baseline_row(tree, row, tokens)
            cache_file.write_text(json.dumps(cached))
        print(f"[{n}/{len(rows)}] {row['instance_id']} {time.perf_counter() - started:.0f} s", file=sys.stderr)
    helix.close()
    return 0


def collect_stdlib(args: argparse.Namespace) -> int:
    from bench_code_retrieval import QUERIES, bm25_function_spans, strict_mrr, target_spans
    from bench_ingest import corpus

    work: Path = args.keep
    work.mkdir(parents=True, exist_ok=True)
    os.environ["HELIX_HOME"] = str(work / "home-stdlib")
    from helix_context.config import load_config
    from helix_context.manager import HelixContextManager
    from helix_context.retrieve.locate import span_scores

    from helix_context.retrieve.span_dense import SpanVectors, span_similarities

    settings = load_config()
    helix = HelixContextManager(settings)
    helix.ingest_path(corpus(), embed=True)
    memory = SpanVectors()
    out = []
    for question, relpath, names in QUERIES:
        ev = helix.retriever.evidence(question)
        rowids = {r for scores in ev.per_signal.values() for r in scores}
        genes = helix.genome.genes_by_rowid(rowids)
        spans = span_scores(helix.genome, list(genes.values()), ev.terms, asked=ev.defs.keys())
        # every candidate's spans (replay keeps those of its own best genes, as the server does)
        dense = span_similarities(helix.embedder, ev.vector, list(genes.values()), packed_spans(genes, spans),
                                  settings.embedding, memory)
        slim = {r: replace(g, content="", tags=(), facts=()) for r, g in genes.items()}
        out.append(Record(question, {relpath: [list(t) for t in target_spans(relpath, names)]}, ev.per_signal,
                          ev.defs, slim, spans, "", ev.qs, ev.terms, dense))
    helix.close()
    pickle.dump(out, (work / "stdlib.pkl").open("wb"))
    (work / "stdlib_bm25.json").write_text(json.dumps({"strict_mrr10": strict_mrr(bm25_function_spans(corpus()))}))
    print(f"{len(out)} questions recorded", file=sys.stderr)
    return 0


# ── ranking a record under one weighting, with the server's own code ──

def prose_weights() -> dict[str, float]:
    from helix_context.config import load_config

    cfg = load_config().retrieval
    return {"fts": cfg.weight_fts, "tags": cfg.weight_tags, "path": cfg.weight_path,
            "path_terms": cfg.weight_path_terms, "dense": cfg.weight_dense, "definition": cfg.weight_definition}


def code_weights() -> dict[str, float]:
    from helix_context.config import load_config

    cfg = load_config().retrieval
    return {"fts": cfg.code_weight_fts, "tags": cfg.code_weight_tags, "path": cfg.code_weight_path,
            "path_terms": cfg.code_weight_path_terms, "dense": cfg.code_weight_dense,
            "definition": cfg.code_weight_definition}


_PROSE: dict[str, float] = {}
_TESTS_WANTED: dict[str, bool] = {}
_TESTS_DATA: list[Path] = [DATA]


def tests_wanted(record: Record) -> bool:
    """Whether the record's question asks about tests (the query text is the issue, or the question itself)."""
    if not _TESTS_WANTED:
        from helix_context.retrieve.locate import wants_tests
        from helix_context.retrieve.query import extract as extract_signals

        for row in (load_instances(_TESTS_DATA[0]) if (_TESTS_DATA[0] / "instances.jsonl").exists() else []):
            _TESTS_WANTED[row["instance_id"]] = wants_tests(extract_signals(row["problem_statement"]))
    if record.instance_id not in _TESTS_WANTED:
        from helix_context.retrieve.locate import wants_tests
        from helix_context.retrieve.query import extract as extract_signals

        _TESTS_WANTED[record.instance_id] = wants_tests(extract_signals(record.instance_id))
    return _TESTS_WANTED[record.instance_id]


@dataclass(frozen=True)
class Question:
    """The question-aware weighting (retrieve/question.py): factors at lexicality 0, and the lexicality used.

    `lexicality=None`: each record's own (what the server computes); a number: that one for every record
    (0.0 or 1.0 show each profile alone).
    """

    dense: float = 1.0
    lexical: float = 1.0
    lexicality: float | None = None
    span_lexical: float = 1.0  # a pointer's own words and cosine (locate.QuestionFactors)
    span_dense: float = 1.0
    header: float = 1.0  # a file's header


_KINDS: dict[str, float] = {}


def lexicality(record: Record) -> float:
    if record.instance_id not in _KINDS:
        from helix_context.retrieve.question import query_kind

        _KINDS[record.instance_id] = query_kind(record.qs, record.terms, bool(record.defs)).lexicality \
            if record.qs is not None and record.terms is not None else 1.0
    return _KINDS[record.instance_id]


def rank(record: Record, weights: dict[str, float], locate_w, window: int, question: Question = Question()):
    """Files and spans for one record, with `weights` as the code weights (prose keeps its configured ones)."""
    from helix_context.models import ScoredGene
    from helix_context.retrieve import locate as locate_mod
    from helix_context.retrieve.fusion import blend_weights, fuse_weighted
    from helix_context.retrieve.locate import QuestionFactors
    from helix_context.retrieve.span_dense import chosen_spans

    if not _PROSE:
        _PROSE.update(prose_weights())
    s = lexicality(record) if question.lexicality is None else question.lexicality
    weights = blend_weights(weights, s, question.dense, question.lexical)
    locate_w = locate_w.blended(s, QuestionFactors(question.lexical, question.span_lexical, question.span_dense,
                                                   question.header))
    code_rows = {r for r, g in record.genes.items() if g.content_type == "code"}
    fused = fuse_weighted(record.per_signal, _PROSE, code_rows, weights)
    ranked = sorted(fused.items(), key=lambda kv: (-kv[1][0], kv[0]))
    items = [ScoredGene(record.genes[r], score, parts) for r, (score, parts) in ranked[:window]
             if r in record.genes and record.genes[r].tier != "archived"]
    wanted = tests_wanted(record)
    located = {it.gene.rowid: record.spans[it.gene.rowid] for it in items if it.gene.rowid in record.spans}
    worded = locate_mod.worded_spans(s, locate_w)  # as the retriever chooses (Retriever._span_cosines)
    chosen = {(r, span[1]) for r, own in chosen_spans([it.gene for it in items], located, worded=worded).items()
              for span in own}
    span_dense = {k: v for k, v in (record.span_dense or {}).items() if k in chosen}
    pointers = locate_mod.score_pointers(items, record.spans, record.defs, locate_w, tests_wanted=wanted,
                                         gene_dense=record.per_signal.get("dense"), span_dense=span_dense)
    mass = {}
    if locate_w.mass > 0:
        wide = [(record.genes[r].source_path, s) for r, (s, _) in ranked[:locate_mod.MASS_WINDOW]
                if r in record.genes and record.genes[r].source_path]
        mass = locate_mod.file_mass(wide, tests_factor=locate_w.tests, tests_wanted=wanted)
    files = locate_mod.rank_files(pointers, mass=mass, mass_weight=locate_w.mass)
    root = record.root

    def rel(p: str | None) -> str:
        p = (p or "").replace("\\", "/")
        return p[len(root) + 1:] if p.startswith(root + "/") else p

    spans = [(rel(p.path), p.start_line, p.end_line) for p in pointers[:10]]
    return [rel(h.path) for h in files[:10]], spans


def score(records: list[Record], weights, locate_w, window: int, question: Question = Question()) -> dict[str, float]:
    rows = []
    for rec in records:
        files, spans = rank(rec, weights, locate_w, window, question)
        rows.append({**file_metrics(files, set(rec.gold)), **span_metrics(spans, rec.gold)})
    return {k: round(statistics.fmean(r[k] for r in rows), 3) for k in rows[0]}


def strict(records: list[Record], weights, locate_w, window: int, question: Question = Question()) -> float:
    from bench_code_retrieval import strict_hit

    total = 0.0
    for rec in records:
        (relpath, targets), = rec.gold.items()
        _, spans = rank(rec, weights, locate_w, window, question)
        hit = next((i for i, s in enumerate(spans[:10], 1) if strict_hit(s, relpath, [tuple(t) for t in targets])), None)
        total += 1.0 / hit if hit else 0.0
    return round(total / len(records), 3)


def tune(args: argparse.Namespace) -> int:
    """Coordinate ascent from the shipped weights: each weight in turn over a small range, best kept."""
    from dataclasses import asdict

    from helix_context.config import load_config
    from helix_context.ingest.embed_models import locate_dense
    from helix_context.retrieve.locate import LocateWeights
    from helix_context.retrieve.retriever import LOCATE_WINDOW

    _TESTS_DATA[0] = args.data
    cached = json.loads((args.keep / "baselines.json").read_text()) if (args.keep / "baselines.json").exists() else {}
    records = [r for r in (load(p) for p in sorted((args.keep / "records").glob("*.pkl"))) if r.instance_id in cached] \
        if (args.keep / "records").exists() else []
    stdlib = load(args.keep / "stdlib.pkl") if (args.keep / "stdlib.pkl").exists() else []
    if not records and not stdlib:
        raise SystemExit(f"no records under {args.keep}: run `collect` or `collect-stdlib` first")
    held: tuple[list[Record], list[Record]] = ([], [])
    if args.half:  # tune on every other record, then check the choice on the records it never saw
        first = 0 if args.half == "even" else 1
        held = ([r for i, r in enumerate(records) if i % 2 != first], [r for i, r in enumerate(stdlib) if i % 2 != first])
        records = [r for i, r in enumerate(records) if i % 2 == first]
        stdlib = [r for i, r in enumerate(stdlib) if i % 2 == first]

    def baselines(recs: list[Record], lib: list[Record]) -> tuple[float, float, float]:
        file_ = max(statistics.fmean(cached[r.instance_id][n]["file_hit@5"] for r in recs)
                    for n in ("files", "funcs")) if recs else 1.0
        func = statistics.fmean(cached[r.instance_id]["funcs"]["func_hit@10"] for r in recs) if recs else 1.0
        strict_ = json.loads((args.keep / "stdlib_bm25.json").read_text())["strict_mrr10"] if lib else 1.0
        return file_, func, strict_

    base_file, base_func, base_strict = baselines(records, stdlib)
    settings = load_config()
    cfg = settings.retrieval
    weights = code_weights()
    span_weight = locate_dense(settings.embedding.model, cfg.locate_dense)
    locate_w = LocateWeights(cfg.locate_gene, cfg.locate_symbol, cfg.locate_definition, cfg.locate_name,
                             cfg.locate_tests, cfg.locate_file_mass, span_weight)
    question = Question(cfg.question_dense, cfg.question_lexical, span_lexical=cfg.question_span_lexical,
                        span_dense=cfg.question_span_dense, header=cfg.question_header)
    shipped_locate, shipped_question = locate_w, question

    def measure(w: dict[str, float], lw: LocateWeights, q: Question) -> tuple[float, dict[str, float]]:
        m = score(records, w, lw, LOCATE_WINDOW, q) if records else \
            {"file_hit@5": 0.0, "file_mrr@10": 0.0, "func_hit@10": 0.0}
        m["strict_mrr@10"] = strict(stdlib, w, lw, LOCATE_WINDOW, q) if stdlib else 0.0
        ratios = ((m["file_hit@5"] / max(base_file, 1e-9), m["func_hit@10"] / max(base_func, 1e-9)) if records else ()) \
            + ((m["strict_mrr@10"] / max(base_strict, 1e-9),) if stdlib else ())
        # every target is a ratio to its baseline: lift the weakest one first, then the sum
        return sum(ratios) + 2.0 * min(ratios) + 0.25 * m["file_mrr@10"], m

    def show(label: str, w: dict[str, float], lw: LocateWeights, q: Question, m: dict[str, float]) -> None:
        print(f"{label}: file Hit@5 {m['file_hit@5']:.3f} ({m['file_hit@5'] / base_file:.2f}x), file MRR@10 "
              f"{m['file_mrr@10']:.3f}, function Hit@10 {m['func_hit@10']:.3f} ({m['func_hit@10'] / base_func:.2f}x), "
              f"strict MRR@10 {m['strict_mrr@10']:.3f} ({m['strict_mrr@10'] / base_strict:.2f}x)")
        if args.verbose:
            print(f"    code weights {w}; locate {asdict(lw)}; question {asdict(q)}")

    print(f"{len(records)} issues, {len(stdlib)} stdlib questions; baselines (bm25s): file Hit@5 {base_file:.3f}, "
          f"function Hit@10 {base_func:.3f}, strict MRR@10 {base_strict:.3f}")
    if records:
        kinds = sorted(lexicality(r) for r in records)
        print(f"lexicality, issues: min {kinds[0]:.2f} median {statistics.median(kinds):.2f} max {kinds[-1]:.2f}")
    if stdlib:
        kinds = sorted(lexicality(r) for r in stdlib)
        print(f"lexicality, questions: min {kinds[0]:.2f} median {statistics.median(kinds):.2f} max {kinds[-1]:.2f}")
    best, m = measure(weights, locate_w, question)
    show("shipped", weights, locate_w, question, m)
    dense_only = {k: (v if k == "dense" else 0.0) for k, v in weights.items()}
    lexical_only = {**weights, "dense": 0.0}
    singles = [("dense only", dense_only, replace(locate_w, symbol=0.0, definition=0.0, name=0.0), Question()),
               ("lexical only", lexical_only, replace(locate_w, dense=0.0), Question()),
               ("identifier profile for all", weights, locate_w, replace(question, lexicality=1.0)),
               ("question profile for all", weights, locate_w, replace(question, lexicality=0.0))]
    for label, w, lw, q in singles:
        _, am = measure(w, lw, q)
        show(label, w, lw, q, am)
    for name in weights:
        if weights[name] == 0:
            continue
        _, am = measure({**weights, name: 0.0}, locate_w, question)
        show(f"without {name}", {**weights, name: 0.0}, locate_w, question, am)
    ranges = {"fts": (0.4, 0.6, 0.8, 1.0, 1.2, 1.5), "tags": (0.0, 0.3, 0.6, 0.9), "path": (0.25, 0.5, 1.0),
              "path_terms": (0.0, 0.1, 0.2, 0.4), "dense": (0.5, 0.75, 1.0, 1.5, 2.0),
              "definition": (0.4, 0.8, 1.2, 1.6, 2.0)}
    locate_ranges = {"symbol": (0.3, 0.45, 0.6, 0.8), "definition": (0.4, 0.8, 1.2, 1.6),
                     "name": (0.0, 0.15, 0.3, 0.5, 0.75), "tests": (0.3, 0.5, 0.7, 0.85, 1.0),
                     "mass": (0.0, 0.25, 0.5, 0.75, 1.0, 1.5), "dense": (0.0, 0.25, 0.5, 0.75, 1.0, 1.5)}
    question_ranges = {"dense": (1.0, 1.5, 2.0, 3.0, 4.0), "lexical": (0.1, 0.25, 0.4, 0.6, 0.8, 1.0)}
    if args.only_question:
        ranges, locate_ranges = {}, {k: v for k, v in locate_ranges.items() if k == "dense"}
    started = time.perf_counter()
    for round_ in range(args.rounds):
        for name, values in ranges.items():
            for v in values:
                total, tm = measure({**weights, name: v}, locate_w, question)
                if total > best + 1e-9:
                    best, weights, m = total, {**weights, name: v}, tm
        for name, values in locate_ranges.items():
            for v in values:
                lw = replace(locate_w, **{name: v})
                total, tm = measure(weights, lw, question)
                if total > best + 1e-9:
                    best, locate_w, m = total, lw, tm
        for name, values in question_ranges.items():
            for v in values:
                q = replace(question, **{name: v})
                total, tm = measure(weights, locate_w, q)
                if total > best + 1e-9:
                    best, question, m = total, q, tm
        show(f"round {round_ + 1} ({time.perf_counter() - started:.0f} s)", weights, locate_w, question, m)
        print(f"    code weights {weights}; locate {asdict(locate_w)}; question {asdict(question)}")
    if args.half:
        records, stdlib = held
        base_file, base_func, base_strict = baselines(records, stdlib)
        print(f"held-out half: {len(records)} issues, {len(stdlib)} stdlib questions")
        show("  shipped weights", code_weights(), shipped_locate, shipped_question,
             measure(code_weights(), shipped_locate, shipped_question)[1])
        show("  tuned weights", weights, locate_w, question, measure(weights, locate_w, question)[1])
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("collect", "collect-stdlib", "tune"))
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--keep", type=Path, required=True, help="work folder: genome, tree, records, baselines")
    parser.add_argument("--all", action="store_true")
    parser.add_argument("--sample", type=int, default=25)
    parser.add_argument("--rounds", type=int, default=2, help="coordinate-ascent rounds")
    parser.add_argument("--only-question", action="store_true",
                        help="tune only the question-aware factors and the span dense weight")
    parser.add_argument("--verbose", action="store_true", help="print the weights of every line")
    parser.add_argument("--half", choices=("odd", "even"),
                        help="tune on every other record only, then print both weightings on the other half")
    args = parser.parse_args()
    return {"collect": collect, "collect-stdlib": collect_stdlib, "tune": tune}[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
