"""The parity table of bench_team.py: the same retrieval benchmarks on SQLite and on PostgreSQL, in one run.

    python benchmarks/bench_team.py --parity-only [--parity-queries 300] [--parity-loc 3] [--no-embed]
                                    [--parity-sets scifact,code,localization]

Each dataset is ingested into a fresh SQLite genome and a fresh PostgreSQL database (the same
files, the same settings, embeddings on unless --no-embed), then asked the same questions:

- SciFact (../shared/data/scifact, test split): nDCG@10 and MRR@10 of `fingerprint` (bench_retrieval.py);
- bench_code_retrieval.py's 66 questions over standard-library packages: strict MRR@10 of the pointers;
- bench_localization.py, a sample of its swe-dev issues: file Hit@5 and function Hit@10.

Every metric is printed for both backends with the difference; the target is |difference| ≤ 0.02.
The scoring functions are the benchmarks' own (imported), so a number here means what it means there.
"""

from __future__ import annotations

import _checkout  # noqa: F401  (this checkout's helix_context, not an installed one)

import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TARGET = 0.02

Pair = Callable[[str], Any]  # backend name ("sqlite" | "postgres") → a fresh HelixContextManager


@contextmanager
def backends(settings: Any, admin_url: str, work: Path) -> Iterator[Pair]:
    """A factory of fresh managers: a new SQLite file or a new PostgreSQL database per call."""
    import psycopg

    from helix_context.manager import HelixContextManager, open_genome

    made: list[Any] = []
    count = [0]

    def make(backend: str) -> Any:
        count[0] += 1
        if backend == "sqlite":
            chosen = settings.replace(genome={"path": str(work / f"parity{count[0]}.db"), "url": ""})
            helix = HelixContextManager(chosen)
        else:
            name = f"helix_parity{count[0]}"
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE {name}")
            chosen = settings.replace(genome={"url": admin_url.replace("/postgres?", f"/{name}?")})
            helix = HelixContextManager(chosen, genome=open_genome(chosen))
        made.append(helix)
        return helix

    try:
        yield make
    finally:
        for helix in made:
            helix.close()


def scifact(make: Pair, data: Path, n_queries: int, embed: bool) -> dict[str, dict[str, float]]:
    from bench_retrieval import load_beir, mrr_at, ndcg_at

    corpus, queries, qrels = load_beir(data, "test")
    asked = dict(list(queries.items())[:n_queries])
    out: dict[str, dict[str, float]] = {}
    for backend in ("sqlite", "postgres"):
        helix = make(backend)
        t = time.perf_counter()
        helix.ingestor(embed=embed).ingest_texts((text, "text", {"path": doc_id}) for doc_id, text in corpus.items())
        print(f"  scifact {backend}: {len(corpus)} docs ingested in {time.perf_counter() - t:.0f} s", flush=True)
        ndcg, mrr = [], []
        for qid, text in asked.items():
            ranked = list(dict.fromkeys(r["source_id"] for r in helix.fingerprint(text, max_results=100)))
            ndcg.append(ndcg_at(ranked, qrels[qid]))
            mrr.append(mrr_at(ranked, qrels[qid]))
        out[backend] = {"scifact nDCG@10": round(statistics.fmean(ndcg), 4),
                        "scifact MRR@10": round(statistics.fmean(mrr), 4)}
    return _pivot(out)


def code(make: Pair, embed: bool) -> dict[str, dict[str, float]]:
    from bench_code_retrieval import QUERIES, pointer_spans, strict_mrr
    from bench_ingest import corpus

    out: dict[str, dict[str, float]] = {}
    for backend in ("sqlite", "postgres"):
        helix = make(backend)
        t = time.perf_counter()
        for root in corpus():
            helix.ingest_path(root, embed=embed)
        print(f"  code {backend}: ingested in {time.perf_counter() - t:.0f} s", flush=True)
        ranked = [pointer_spans(helix.retriever, q) for q, _, _ in QUERIES]
        out[backend] = {"code strict MRR@10": round(strict_mrr(ranked), 4)}
    return _pivot(out)


def localization(make: Pair, data: Path, n: int, embed: bool, work: Path) -> dict[str, dict[str, float]]:
    from bench_localization import extract, file_metrics, helix_answer, load_instances, sample, span_metrics

    rows = sample(load_instances(data), n)
    bare = work / "repo.git"
    if not bare.exists():
        import subprocess
        subprocess.run(["git", "clone", "-q", "--bare", str(data / "sympy.bundle"), str(bare)], check=True)
    per: dict[str, list[dict[str, float]]] = {"sqlite": [], "postgres": []}
    helixes = {backend: make(backend) for backend in per}
    tree = work / "tree"
    for row in rows:
        extract(bare, row["tag"], tree)
        for backend, helix in helixes.items():
            t = time.perf_counter()
            helix.ingest_path(tree, embed=embed)
            files, spans, _ = helix_answer(helix, row["problem_statement"], tree)
            per[backend].append({**file_metrics(files, set(row["gold"])), **span_metrics(spans, row["gold"])})
            print(f"  localization {row['instance_id']} {backend}: ingest + answer {time.perf_counter() - t:.0f} s",
                  flush=True)
    out = {backend: {f"localization ({len(rows)} issues) file Hit@5": round(statistics.fmean(r["file_hit@5"] for r in rs), 4),
                     f"localization ({len(rows)} issues) function Hit@10":
                         round(statistics.fmean(r["func_hit@10"] for r in rs), 4)}
           for backend, rs in per.items()}
    return _pivot(out)


def _pivot(by_backend: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """{backend: {metric: v}} → {metric: {sqlite, postgres, difference}}."""
    out: dict[str, dict[str, float]] = {}
    for metric in by_backend["sqlite"]:
        lite, team = by_backend["sqlite"][metric], by_backend["postgres"][metric]
        out[metric] = {"sqlite": lite, "postgres": team, "difference": round(team - lite, 4)}
    return out


def parity_table(settings: Any, admin_url: str, *, n_queries: int, n_issues: int, embed: bool,
                 data: Path, sets: set[str] | None = None) -> dict[str, dict[str, float]]:
    """Every metric on both backends (the three benchmarks above), printed as they finish."""
    work = Path(tempfile.mkdtemp(prefix="helix-parity-"))
    table: dict[str, dict[str, float]] = {}
    try:
        with backends(settings, admin_url, work) as make:
            sets = sets or {"scifact", "code", "localization"}
            if "scifact" in sets:
                table.update(scifact(make, data / "scifact", n_queries, embed))
                _print(table)
            if "code" in sets:
                table.update(code(make, embed))
                _print(table)
            if "localization" in sets and n_issues > 0:
                table.update(localization(make, data / "swe-dev", n_issues, embed, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\nparity table (target: |difference| <= 0.02)")
    _print(table)
    return table


def _print(table: dict[str, dict[str, float]]) -> None:
    print(f"{'metric':<46}{'sqlite':>9}{'postgres':>10}{'diff':>9}")
    for metric, row in table.items():
        mark = "ok" if abs(row["difference"]) <= TARGET else "MISSED"
        print(f"{metric:<46}{row['sqlite']:>9.4f}{row['postgres']:>10.4f}{row['difference']:>+9.4f}  {mark}")
    sys.stdout.flush()
