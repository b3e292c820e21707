"""Retrieval quality and latency on a BEIR-layout dataset, against plain BM25 in the same run.

    python benchmarks/bench_retrieval.py ../shared/data/scifact [--split test] [--json OUT]

Prints nDCG@10, Recall@100, MRR@10 and per-query latency p50 / p95 for Helix's
ranking (each fusion mode), for its single signals over the same genes (full text
alone, every lexical signal without the dense one, the dense signal alone) and
for a plain BM25 baseline (bm25s).
Targets: SciFact nDCG@10 >= 0.70 (BM25 ~0.665, MiniLM alone ~0.645); p95 <= 30 ms.
"""

from __future__ import annotations

import _checkout  # noqa: F401  (this checkout's helix_context, not an installed one)

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _results import write_results


def load_beir(root: Path, split: str) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, int]]]:
    corpus: dict[str, str] = {}
    with open(root / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            corpus[str(doc["_id"])] = (doc.get("title", "") + "\n" + doc.get("text", "")).strip()
    queries: dict[str, str] = {}
    with open(root / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            queries[str(q["_id"])] = q["text"]
    qrels: dict[str, dict[str, int]] = {}
    with open(root / "qrels" / f"{split}.tsv", encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            parts = line.rstrip("\n").split("\t")
            if i == 0 and not parts[-1].lstrip("-").isdigit():
                continue
            qid, did, rel = parts[0], parts[1], int(parts[2])
            qrels.setdefault(qid, {})[did] = rel
    return corpus, {q: queries[q] for q in qrels if q in queries}, qrels


def ndcg_at(ranked: list[str], rels: dict[str, int], k: int = 10) -> float:
    dcg = sum((2 ** rels.get(d, 0) - 1) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(rels.values(), reverse=True)[:k]
    idcg = sum((2 ** r - 1) / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: list[str], rels: dict[str, int], k: int = 100) -> float:
    relevant = {d for d, r in rels.items() if r > 0}
    return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0


def mrr_at(ranked: list[str], rels: dict[str, int], k: int = 10) -> float:
    for i, d in enumerate(ranked[:k]):
        if rels.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def score(runs: dict[str, list[str]], qrels: dict[str, dict[str, int]], latencies: list[float]) -> dict:
    qids = list(runs)
    lat = sorted(latencies)
    return {
        "ndcg@10": round(statistics.fmean(ndcg_at(runs[q], qrels[q]) for q in qids), 4),
        "recall@100": round(statistics.fmean(recall_at(runs[q], qrels[q]) for q in qids), 4),
        "mrr@10": round(statistics.fmean(mrr_at(runs[q], qrels[q]) for q in qids), 4),
        "p50_ms": round(1000 * lat[len(lat) // 2], 2) if lat else None,
        "p95_ms": round(1000 * lat[min(len(lat) - 1, int(len(lat) * 0.95))], 2) if lat else None,
        "queries": len(qids),
    }


def bm25_baseline(corpus: dict[str, str], queries: dict[str, str], qrels: dict) -> dict:
    import bm25s

    ids = list(corpus)
    tokens = bm25s.tokenize([corpus[i] for i in ids], stopwords="en", show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    runs, lat = {}, []
    for qid, text in queries.items():
        t = time.perf_counter()
        q = bm25s.tokenize([text], stopwords="en", show_progress=False)
        docs, _ = retriever.retrieve(q, k=100, show_progress=False)
        lat.append(time.perf_counter() - t)
        runs[qid] = [ids[int(i)] for i in docs[0]]
    return score(runs, qrels, lat)


def helix_runs(helix, queries: dict[str, str], qrels: dict) -> dict:
    runs, lat = {}, []
    for qid, text in queries.items():
        t = time.perf_counter()
        results = helix.fingerprint(text, max_results=100)
        lat.append(time.perf_counter() - t)
        seen: list[str] = []
        for r in results:
            if r["source_id"] not in seen:
                seen.append(r["source_id"])
        runs[qid] = seen
    return score(runs, qrels, lat)


def tune(helix, base, queries: dict[str, str], qrels: dict, limit: int = 300) -> dict[str, float]:
    """Grid-search the fusion weights on (a sample of) the train split: nDCG@10, best first."""
    import itertools

    from helix_context.retrieve.fusion import fuse_weighted
    from helix_context.retrieve.query import extract
    from helix_context.retrieve.scorers import LEXICAL_SCORERS, dense_scorer

    retriever = helix.retriever
    sample = dict(list(queries.items())[:limit])
    cached = {}
    for qid, text in sample.items():
        qs = extract(text, base.synonyms)
        per = {name: scorer(helix.genome, qs, base.retrieval.candidate_pool) for name, scorer in LEXICAL_SCORERS.items()}
        per["dense"] = dense_scorer(helix.genome, retriever._query_vector(qs.text), base.retrieval.candidate_pool)
        cached[qid] = per
    rowid_to_doc = {}
    for per in cached.values():
        for scores in per.values():
            rowid_to_doc.update({r: None for r in scores if r not in rowid_to_doc})
    genes = helix.genome.genes_by_rowid(list(rowid_to_doc))
    rowid_to_doc = {r: g.source_path for r, g in genes.items()}
    grid = {"weight_fts": (0.6, 0.8, 1.0, 1.2), "weight_dense": (0.4, 0.6, 0.8, 1.0, 1.3),
            "weight_tags": (0.0, 0.2, 0.4, 0.6), "weight_path": (0.0, 0.5)}
    scored = []
    for combo in itertools.product(*grid.values()):
        weights = dict(zip(grid, combo, strict=True))
        w = {"fts": weights["weight_fts"], "dense": weights["weight_dense"], "tags": weights["weight_tags"],
             "path": weights["weight_path"]}
        total = 0.0
        for qid, per in cached.items():
            fused = fuse_weighted(per, w)
            ranked = [rowid_to_doc.get(r) for r, _ in sorted(fused.items(), key=lambda kv: -kv[1][0])[:10]]
            total += ndcg_at(ranked, qrels[qid])
        scored.append((total / len(cached), weights))
    scored.sort(key=lambda t: -t[0])
    for value, weights in scored[:5]:
        print(f"train nDCG@10 {value:.4f}  {weights}", file=sys.stderr)
    return scored[0][1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--split", default="test")
    parser.add_argument("--json")
    parser.add_argument("--no-embed", action="store_true", help="lexical signals only")
    parser.add_argument("--home", type=Path, help="keep the genome here and reuse it on the next run")
    parser.add_argument("--tune", action="store_true",
                        help="grid-search fusion weights on the train split, then report the test split with them")
    args = parser.parse_args()
    corpus, queries, qrels = load_beir(args.dataset, args.split)
    print(f"{args.dataset.name}: {len(corpus)} docs, {len(queries)} {args.split} queries", file=sys.stderr)

    results: dict = {"dataset": args.dataset.name, "split": args.split}
    results["bm25s"] = bm25_baseline(corpus, queries, qrels)

    with tempfile.TemporaryDirectory() as tmp:
        home = args.home or Path(tmp)
        os.environ["HELIX_HOME"] = str(home)
        from helix_context.config import load_config
        from helix_context.manager import HelixContextManager

        base = load_config()
        helix = HelixContextManager(base)
        if helix.genome.stats()["total_genes"] == 0:
            t = time.perf_counter()
            report = helix.ingestor(embed=not args.no_embed).ingest_texts(
                (text, "text", {"path": doc_id}) for doc_id, text in corpus.items())
            results["ingest_seconds"] = round(time.perf_counter() - t, 1)
            print(f"ingested {report.files_ingested} docs in {results['ingest_seconds']} s", file=sys.stderr)
        results["genes"] = helix.genome.stats()["total_genes"]
        if args.tune:
            _, train_queries, train_qrels = load_beir(args.dataset, "train")
            best = tune(helix, base, train_queries, train_qrels)
            results["tuned_weights"] = best
            base = base.replace(retrieval=best)
        helix.retriever.retrieve("warm up")  # the dense matrix and caches load once, as at server start
        for fusion in ("weighted", "rrf"):
            helix.settings = base.replace(retrieval={"fusion": fusion})
            helix._retriever = None
            results[f"helix_{fusion}"] = helix_runs(helix, queries, qrels)
        lexical = {f"{p}{n}": 0.0 for p in ("weight_", "code_weight_")
                   for n in ("fts", "tags", "path", "path_terms", "definition", "coactivation")}
        for name, weights in (("fts_only", {"weight_dense": 0.0, "weight_tags": 0.0, "weight_path": 0.0}),
                              ("lexical_only", {"weight_dense": 0.0, "code_weight_dense": 0.0}),
                              ("dense_only", lexical)):
            if args.no_embed and name == "dense_only":
                continue
            helix.settings = base.replace(retrieval=weights)
            helix._retriever = None
            results[f"helix_{name}"] = helix_runs(helix, queries, qrels)
        helix.close()

    print(f"{'ranking':<22}{'nDCG@10':>9}{'R@100':>8}{'MRR@10':>8}{'p50 ms':>9}{'p95 ms':>9}")
    for key in [k for k in results if isinstance(results[k], dict) and "ndcg@10" in results[k]]:
        r = results[key]
        print(f"{key:<22}{r['ndcg@10']:>9.4f}{r['recall@100']:>8.4f}{r['mrr@10']:>8.4f}{r['p50_ms']:>9.2f}{r['p95_ms']:>9.2f}")
    print(f"(targets: nDCG@10 >= 0.70, p95 <= 30 ms; genes in genome: {results['genes']})")
    write_results(args.json, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
