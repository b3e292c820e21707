"""Which approximate-nearest-neighbour library the dense index uses: usearch (int8) vs hnswlib (float32).

    python benchmarks/bench_ann.py GENOME_DB [--limit 100000] [--queries 200] [--threads 1] [--json OUT]
                                   [--replicate 11 --only usearch_i8]   (a ~1M-vector point from 90k real ones)

Reads the real stored vectors of a genome (e.g. one `bench_scale.py --keep DIR` left in
DIR/snap_90000/genome.db), takes `--queries` of them (plus a little noise) as queries,
and for each library prints build seconds, memory the index adds to the process,
median search ms for k=100, and recall@100 against the exact float scan (the baseline,
measured in the same run) at several search widths (ef).
"""

from __future__ import annotations

import argparse
import gc
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np
import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _results import write_results  # noqa: E402 - imported after the sys.path line above that makes it importable

from helix_context.genome.ann import CONNECTIVITY, EXPANSION_ADD, _usearch_index_class  # noqa: E402 - imported after the sys.path line above that makes it importable
from helix_context.genome.vectors import EMBED_DIM, iter_live_vectors  # noqa: E402 - imported after the sys.path line above that makes it importable

K = 100
EFS = (100, 160, 256)


def rss() -> int:
    gc.collect()
    return psutil.Process().memory_info().rss


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f.tolist()) & set(t.tolist())) / K for f, t in zip(found, truth)]))


def bench_usearch(codes: np.ndarray, queries: np.ndarray, truth: np.ndarray, threads: int) -> dict:
    before = rss()
    index = _usearch_index_class()(ndim=EMBED_DIM, metric="cos", dtype="i8", connectivity=CONNECTIVITY,
                                   expansion_add=EXPANSION_ADD)
    t = time.perf_counter()
    index.add(np.arange(len(codes), dtype=np.uint64), codes.astype(np.float32) / 127.0, threads=threads)
    out = {"build_s": round(time.perf_counter() - t, 1), "memory_mb": round((rss() - before) / 2**20)}
    for ef in EFS:
        index.expansion_search = ef
        times, found = [], []
        for q in queries:
            t = time.perf_counter()
            m = index.search(q / np.abs(q).max(), K)
            times.append(time.perf_counter() - t)
            found.append(np.asarray(m.keys))
        out[f"ef{ef}"] = {"recall": round(recall(found, truth), 4), "ms": round(float(np.median(times)) * 1000, 3)}
    return out


def bench_hnswlib(codes: np.ndarray, queries: np.ndarray, truth: np.ndarray, threads: int) -> dict:
    import hnswlib

    before = rss()
    index = hnswlib.Index(space="cosine", dim=EMBED_DIM)
    index.init_index(max_elements=len(codes), ef_construction=EXPANSION_ADD, M=CONNECTIVITY)
    index.set_num_threads(threads)
    t = time.perf_counter()
    for start in range(0, len(codes), 20_000):  # float32 copies, one batch at a time
        block = codes[start:start + 20_000].astype(np.float32)
        index.add_items(block, np.arange(start, start + len(block)))
    out = {"build_s": round(time.perf_counter() - t, 1), "memory_mb": round((rss() - before) / 2**20)}
    for ef in EFS:
        index.set_ef(ef)
        times, found = [], []
        for q in queries:
            t = time.perf_counter()
            labels, _ = index.knn_query(q.reshape(1, -1), k=K)
            times.append(time.perf_counter() - t)
            found.append(labels[0])
        out[f"ef{ef}"] = {"recall": round(recall(found, truth), 4), "ms": round(float(np.median(times)) * 1000, 3)}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("genome", type=Path)
    parser.add_argument("--limit", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--replicate", type=int, default=1,
                        help="stack the real vectors N times, each copy nudged by noise, to reach ~1M (synthetic scale)")
    parser.add_argument("--only", choices=("usearch_i8", "hnswlib_f32"), help="measure one library")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    conn = sqlite3.connect(f"{args.genome.resolve().as_uri()}?mode=ro", uri=True)
    blocks = []
    for _, block in iter_live_vectors(conn):
        blocks.append(block.copy())
        if sum(len(b) for b in blocks) >= args.limit:
            break
    codes = np.concatenate(blocks)[: args.limit]
    rng = np.random.default_rng(0)
    if args.replicate > 1:
        copies = [codes] + [np.clip(codes.astype(np.int16) + rng.integers(-6, 7, size=codes.shape, dtype=np.int16),
                                    -127, 127).astype(np.int8) for _ in range(args.replicate - 1)]
        codes = np.concatenate(copies)
    picked = rng.choice(len(codes), args.queries, replace=False)
    queries = codes[picked].astype(np.float32) / 127.0
    queries += rng.normal(size=queries.shape).astype(np.float32) * 0.02
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    # baseline: exact float scan over the same int8 codes
    truth_parts, scan_s = [], 0.0
    for start in range(0, len(codes), 100_000):  # float copies one slice at a time: bounded memory at 1M
        unit = codes[start:start + 100_000].astype(np.float32)
        unit /= np.maximum(np.linalg.norm(unit, axis=1, keepdims=True), 1e-9)
        t = time.perf_counter()
        sims = queries @ unit.T
        scan_s += time.perf_counter() - t
        top = np.argpartition(-sims, K - 1, axis=1)[:, :K]
        truth_parts.append((top + start, np.take_along_axis(sims, top, axis=1)))
    ids = np.concatenate([p[0] for p in truth_parts], axis=1)
    sims = np.concatenate([p[1] for p in truth_parts], axis=1)
    truth = np.take_along_axis(ids, np.argsort(-sims, axis=1)[:, :K], axis=1)
    scan_ms = scan_s / len(queries) * 1000
    made = f" ({args.replicate} nudged copies of the real ones)" if args.replicate > 1 else " (real)"
    print(f"{len(codes)} vectors from {args.genome}{made}; {len(queries)} queries; exact numpy scan "
          f"(float32, in slices) {scan_ms:.2f} ms per query", flush=True)
    results = {"vectors": len(codes), "queries": len(queries), "exact_scan_ms": round(scan_ms, 3)}
    for name, fn in (("usearch_i8", bench_usearch), ("hnswlib_f32", bench_hnswlib)):
        if args.only and name != args.only:
            continue
        results[name] = fn(codes, queries, truth, args.threads)
        print(f"{name}: {results[name]}", flush=True)
    write_results(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
