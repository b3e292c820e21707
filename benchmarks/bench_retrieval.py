"""Retrieval quality and latency on a BEIR-layout dataset, against plain BM25 in the same run.

    python benchmarks/bench_retrieval.py ../shared/data/scifact [--split test] [--json OUT]

Prints nDCG@10, Recall@100, MRR@10 and per-query latency p50 / p95 for Helix's
ranking (each fusion mode) and for a plain BM25 baseline (bm25s).
Targets: SciFact nDCG@10 >= 0.70 (BM25 ~0.665, MiniLM alone ~0.645); p95 <= 30 ms.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--split", default="test")
    parser.add_argument("--json")
    parser.add_argument("--no-embed", action="store_true", help="lexical signals only")
    args = parser.parse_args()
    corpus, queries, qrels = load_beir(args.dataset, args.split)
    print(f"{args.dataset.name}: {len(corpus)} docs, {len(queries)} {args.split} queries", file=sys.stderr)

    os.environ.setdefault("HELIX_EMBEDDING_MODEL_DIR", str(Path.home() / ".cache" / "helix-bench-models"))
    results: dict = {"dataset": args.dataset.name, "split": args.split}
    results["bm25s"] = bm25_baseline(corpus, queries, qrels)

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["HELIX_HOME"] = tmp
        from helix_context.config import load_config
        from helix_context.manager import HelixContextManager

        base = load_config()
        helix = HelixContextManager(base)
        t = time.perf_counter()
        report = helix.ingestor(embed=not args.no_embed).ingest_texts(
            (text, "text", {"path": doc_id}) for doc_id, text in corpus.items())
        results["ingest_seconds"] = round(time.perf_counter() - t, 1)
        results["genes"] = helix.genome.stats()["total_genes"]
        print(f"ingested {report.files_ingested} docs → {results['genes']} genes in {results['ingest_seconds']} s",
              file=sys.stderr)
        helix.retriever.retrieve("warm up")  # noqa: the dense matrix and caches load once, as at server start
        for fusion in ("weighted", "rrf"):
            helix.settings = base.replace(retrieval={"fusion": fusion})
            helix._retriever = None
            results[f"helix_{fusion}"] = helix_runs(helix, queries, qrels)
        for name, weights in (("fts_only", {"weight_dense": 0.0, "weight_tags": 0.0, "weight_path": 0.0}),
                              ("dense_only", {"weight_fts": 0.0, "weight_tags": 0.0, "weight_path": 0.0})):
            if args.no_embed and name == "dense_only":
                continue
            helix.settings = base.replace(retrieval=weights)
            helix._retriever = None
            results[f"helix_{name}"] = helix_runs(helix, queries, qrels)
        helix.close()

    print(f"{'ranking':<22}{'nDCG@10':>9}{'R@100':>8}{'MRR@10':>8}{'p50 ms':>9}{'p95 ms':>9}")
    for key in [k for k in results if isinstance(results[k], dict)]:
        r = results[key]
        print(f"{key:<22}{r['ndcg@10']:>9.4f}{r['recall@100']:>8.4f}{r['mrr@10']:>8.4f}{r['p50_ms']:>9.2f}{r['p95_ms']:>9.2f}")
    print(f"(targets: nDCG@10 >= 0.70, p95 <= 30 ms; genes in genome: {results['genes']})")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
