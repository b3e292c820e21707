"""Server latency over HTTP: /context, /context/packet, and what the proxy adds to a chat call.

    python benchmarks/bench_server.py [--genes 10000] [--requests 400] [--concurrency 20]
                                      [--kind openai|ollama] [--json OUT]
    python benchmarks/bench_server.py --in-process [--genome-cache DIR] [--answers OUT.json] [--profile OUT.prof]

Builds a genome of ~10k genes (the deterministic haystack of bench_needle.py:
Python modules, configs, Markdown, logs; ingested without embeddings), serves the
real app with uvicorn in a subprocess, starts the upstream stub
(tests/server/upstream_stub.py) in another, and drives both with asyncio + httpx:

- POST /context and POST /context/packet: p50 / p95, at 1 client and at N clients;
- POST /context with pasted issues of ~20 KB (title, prose, a traceback, a code block, program
  output; `--issue-kb`) at 1 client, against the short questions of the same run;
- POST /v1/chat/completions straight to the stub (the baseline, same run), then
  through the proxy with retrieval off (X-Helix-Inject: off) and on: p50 / p95,
  and the proxy's added latency = proxied − direct, at N concurrent clients.

`--in-process` skips HTTP: the same questions and pasted issues go straight to
`build_context` (and `fingerprint`) in this process, each timed in CPU time
(`time.process_time`), which a loaded machine disturbs far less than latency.
`--answers` writes every answer (context without its timings, and the pointers) so two
versions of the code can be checked to answer the same, byte for byte; `--profile`
writes a cProfile of the issues; `--genome-cache` builds the genome once and reuses it
(each run works on a fresh copy, since a delivery records co-activation). Answers name
files by their absolute path: compare two versions on one cache, or on genomes each
version ingested from the same corpus files (when the versions ingest differently).

Targets: /context p95 <= 40 ms (1 client); proxy overhead p50 <= 5 ms with retrieval off.
Everything runs on this machine (loopback only); every loop is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from bench_needle import NEEDLES, WORDS, make_haystack  # noqa: E402 - imported after the sys.path line above that makes it importable

CHAT_MODEL = "llama3.1:8b"  # not a "small" model: no /no_think or temperature rewrite in the way

SERVER_SCRIPT = """
import sys, uvicorn
from helix_context.server import factory
app = factory.create_app()
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
"""


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def cpu_s(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


def summary(latencies_s: list[float]) -> dict[str, float]:
    ms = [x * 1000 for x in latencies_s]
    return {"n": len(ms), "p50_ms": round(pct(ms, 0.5), 2), "p95_ms": round(pct(ms, 0.95), 2),
            "mean_ms": round(statistics.fmean(ms), 2) if ms else float("nan")}


# ── genome ──


def build_genome(home: Path, target_genes: int) -> dict:
    env = {"HELIX_HOME": str(home), "HELIX_CONFIG": str(REPO / "helix.toml"), "HELIX_EMBEDDING_ENABLED": "0"}
    os.environ.update(env)
    from helix_context.config import load_config
    from helix_context.manager import HelixContextManager

    helix = HelixContextManager(load_config())
    started = time.perf_counter()
    genes, round_no, files = 0, 0, 0
    try:
        while genes < target_genes and round_no < 20:
            remaining = target_genes - genes
            per_file = genes / files if files else 1.6
            n_files = max(50, int(remaining / max(per_file, 0.5) * 1.05))
            root = home / "corpus" / f"part{round_no}"
            make_haystack(root, n_files, seed=7 + round_no)
            helix.ingest_path(root, embed=False)
            files += n_files
            genes = helix.genome.stats()["total_genes"]
            round_no += 1
            print(f"  genome: {genes} genes from {files} files ({time.perf_counter() - started:.1f} s)", flush=True)
    finally:
        helix.close()
    return {"genes": genes, "files": files, "build_s": round(time.perf_counter() - started, 1)}


# ── processes ──


def start_stub(kinds: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(REPO / "tests" / "server" / "upstream_stub.py"), "--port", "0",
                             "--kinds", kinds], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("READY"):
        proc.kill()
        raise RuntimeError(f"upstream stub did not start: {line!r}")
    return proc, f"http://127.0.0.1:{line.split()[1]}"


def start_server(home: Path, upstream: str, kind: str, log_path: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "HELIX_HOME": str(home), "HELIX_CONFIG": str(REPO / "helix.toml"),
           "HELIX_EMBEDDING_ENABLED": "0", "HELIX_PROXY_UPSTREAM_URL": upstream,
           "HELIX_PROXY_UPSTREAM_KIND": kind, "PYTHONPATH": str(REPO)}
    env.pop("HELIX_API_KEY", None)
    log = open(log_path, "wb")
    proc = subprocess.Popen([sys.executable, "-c", SERVER_SCRIPT, str(port)], env=env, stdout=log,
                            stderr=subprocess.STDOUT, cwd=str(REPO))
    url = f"http://127.0.0.1:{port}"
    wait_healthy(proc, url, 120, log_path)
    return proc, url


def wait_healthy(proc: subprocess.Popen, url: str, timeout_s: float, log_path: Path) -> None:
    """Until the started server answers /health; a server that exits or never answers is stopped and reported."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited ({proc.returncode}); see {log_path}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    stop(proc)
    raise RuntimeError(f"server did not answer /health within {timeout_s:g} s; see {log_path}")


def stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


# ── load ──


async def drive(url: str, requests: list[tuple[str, dict, dict]], concurrency: int,
                timeout: float = 60.0) -> tuple[list[float], int]:
    """Send every (path, json, headers) with `concurrency` workers; latencies of the 2xx answers, errors."""
    latencies: list[float] = []
    errors = 0
    queue = list(reversed(requests))
    # the proxy's own lean transport: the load generator shares the 2 cores with the server and the
    # stub, so the less CPU it burns per request, the less it disturbs what is measured
    from helix_context.llm.lean_http import LeanHTTPTransport

    async with httpx.AsyncClient(base_url=url, timeout=timeout, transport=LeanHTTPTransport(),
                                 trust_env=False) as client:

        async def worker() -> None:
            nonlocal errors
            while queue:
                path, body, headers = queue.pop()
                t = time.perf_counter()
                try:
                    resp = await client.post(path, json=body, headers=headers)
                    await resp.aread()
                    ok = resp.status_code < 300
                except httpx.HTTPError:
                    ok = False
                if ok:
                    latencies.append(time.perf_counter() - t)
                else:
                    errors += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, errors


def queries(n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    base = [q for _, _, _, q, _ in NEEDLES]
    templates = ("what port does the {a}{i} service listen on?", "{a} {b} retries timeout_ms",
                 "how does {a} handle {b} errors?", "def {a}_{b}", "why did job {j} fail in the {a} worker?",
                 "{a} {b} {c} configuration")
    out = []
    for k in range(n):
        if k % 5 == 0:
            out.append(base[k // 5 % len(base)])
        else:
            out.append(rng.choice(templates).format(a=rng.choice(WORDS), b=rng.choice(WORDS), c=rng.choice(WORDS),
                                                    i=rng.randrange(4000), j=rng.randrange(10000)))
    return out


def pasted_issues(n: int, kb: int, seed: int = 13) -> list[str]:
    """Issue-shaped queries of ~`kb` KB over the haystack's vocabulary: the worst case for term weighing,
    since every word, path and name in them is also in the genome."""
    rng = random.Random(seed)
    out = []
    for k in range(n):
        a, b = rng.choice(WORDS), rng.choice(WORDS)
        parts = [f"{a} {b} retries fail after the {rng.choice(WORDS)} worker restarts ({k})", ""]
        while sum(len(p) + 1 for p in parts) < kb * 1024:
            w = rng.sample(WORDS, 6)
            parts += [f"When the {w[0]} {w[1]} runs with {w[2]} enabled the {w[3]} step fails and the {w[4]} "
                      f"queue keeps {rng.randrange(1000)} items of {w[5]} behind it.",
                      "```", "Traceback (most recent call last):"]
            parts += [f'  File "src/{rng.choice(WORDS)}/{rng.choice(WORDS)}_{i}.py", line {rng.randrange(900)}, '
                      f"in {rng.choice(WORDS)}_{rng.choice(WORDS)}" for i in range(8)]
            parts += [f"{w[0].title()}Error: {w[1]} {w[2]} timeout_ms={rng.randrange(9000)}", "```", "```python",
                      f">>> {w[3]}_{w[4]}(retries={rng.randrange(9)}, region='{w[5]}')"]
            parts += [f"{rng.choice(WORDS)}={rng.randrange(10**6)} {rng.choice(WORDS)}=ok" for _ in range(6)]
            parts.append("```")
        out.append("\n".join(parts)[:kb * 1024])
    return out


# ── in process (CPU time, answers, profile) ──


def cached_genome(cache: Path | None, home: Path, genes: int) -> dict:
    """A genome in `home`: built there, or copied from `cache` (built into it first when missing)."""
    if cache is None:
        return build_genome(home, genes)
    marker = cache / "genome.json"
    if not marker.exists():
        cache.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps(build_genome(cache, genes)))
    for path in cache.glob("genome.db*"):
        shutil.copy2(path, home / path.name)
    return json.loads(marker.read_text())


def timed_calls(fn, items: list[str]) -> tuple[list[float], list]:
    """CPU seconds of `fn(item)` for each item, and what it returned."""
    cpu, out = [], []
    for item in items:
        t = time.process_time()
        out.append(fn(item))
        cpu.append(time.process_time() - t)
    return cpu, out


def answer_record(window) -> dict:
    """What /context answers, minus what depends on the clock: its stage timings, and the genes'
    freshness (their age at the time of asking). Everything else must be equal run to run."""
    data = window.to_dict()
    data.pop("stage_seconds", None)
    data["context_health"].pop("freshness", None)
    return data


def in_process(args: argparse.Namespace, home: Path) -> dict:
    """The bench's questions and pasted issues through build_context in this process, timed in CPU time."""
    os.environ.update({"HELIX_HOME": str(home), "HELIX_CONFIG": str(REPO / "helix.toml"),
                       "HELIX_EMBEDDING_ENABLED": "0"})
    genome = cached_genome(args.genome_cache, home, args.genes)
    from helix_context.config import load_config
    from helix_context.manager import HelixContextManager

    helix = HelixContextManager(load_config())
    qs, issues = queries(args.requests), pasted_issues(max(20, args.requests // 4), args.issue_kb)
    results: dict = {"genome": genome}
    try:
        timed_calls(helix.build_context, qs[:20] + issues[:3])  # warm-up: parts load, caches fill
        cpu_q, ans_q = timed_calls(helix.build_context, qs)
        profiler = None
        if args.profile:
            import cProfile

            profiler = cProfile.Profile(time.process_time)  # CPU time: waiting for a core is not cost
            profiler.enable()
        cpu_i, ans_i = timed_calls(helix.build_context, issues)
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(str(args.profile))
        for name, cpu in (("question", cpu_q), ("issue", cpu_i)):
            ms = [c * 1000 for c in cpu]
            results[f"{name}_cpu_ms"] = {"n": len(ms), "mean": round(statistics.fmean(ms), 2),
                                         "p50": round(pct(ms, 0.5), 2), "p95": round(pct(ms, 0.95), 2)}
            print(f"  build_context CPU per {name}: {results[f'{name}_cpu_ms']}", flush=True)
        if args.answers:
            pointers = [helix.fingerprint(q, 10) for q in qs + issues]
            args.answers.write_text(json.dumps({"context": [answer_record(w) for w in ans_q + ans_i],
                                                "pointers": pointers}, indent=1, sort_keys=True))
            print(f"  answers written to {args.answers}", flush=True)
    finally:
        helix.close()
    return results


def chat_body(question: str) -> dict:
    return {"model": CHAT_MODEL, "messages": [{"role": "system", "content": "You answer briefly."},
                                              {"role": "user", "content": question}], "max_tokens": 64}


def run(args: argparse.Namespace, home: Path) -> dict:
    results: dict = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
                     "concurrency": args.concurrency, "requests": args.requests, "kind": args.kind}
    print(f"building a {args.genes}-gene genome in {home} …", flush=True)
    results["genome"] = build_genome(home, args.genes)

    stub_proc = server_proc = None
    try:
        stub_proc, stub_url = start_stub("ollama,openai")
        server_proc, url = start_server(home, stub_url, args.kind, home / "server.log")
        qs = queries(args.requests)
        context_reqs = [("/context", {"query": q}, {}) for q in qs]
        packet_reqs = [("/context/packet", {"query": q, "task_type": "edit"}, {}) for q in qs]

        # warm-up: parts load, caches fill, connections open
        asyncio.run(drive(url, context_reqs[:20] + packet_reqs[:20], 4))
        warm_chat = [("/v1/chat/completions", chat_body(q), {}) for q in qs[:20]]
        asyncio.run(drive(url, warm_chat, 4))
        direct_path = "/api/chat" if args.kind == "ollama" else "/v1/chat/completions"

        def direct_body(q: str) -> dict:
            body = chat_body(q)
            if args.kind == "ollama":
                body = {"model": CHAT_MODEL, "messages": body["messages"], "stream": False,
                        "options": {"num_predict": 64, "num_ctx": 2048}}
            return body

        asyncio.run(drive(stub_url, [(direct_path, direct_body(q), {}) for q in qs[:20]], 4))

        server_ps, stub_ps = psutil.Process(server_proc.pid), psutil.Process(stub_proc.pid)

        def served(reqs: list, conc: int) -> dict:
            """Latency, plus the server's CPU ms per request: on a loaded machine the latency is mostly
            waiting for a core, and the CPU it spent is the figure that compares across runs."""
            before = cpu_s(server_ps)
            lat, err = asyncio.run(drive(url, reqs, conc))
            return {**summary(lat), "errors": err,
                    "server_cpu_ms_per_req": round((cpu_s(server_ps) - before) / max(1, len(reqs)) * 1000, 3)}

        for name, reqs in (("context", context_reqs), ("packet", packet_reqs)):
            for conc in (1, args.concurrency):
                results[f"{name}_c{conc}"] = served(reqs, conc)
                print(f"  /{'context' if name == 'context' else 'context/packet'} at {conc:>2} client(s): "
                      f"{results[f'{name}_c{conc}']}", flush=True)

        issue_reqs = [("/context", {"query": q}, {}) for q in pasted_issues(max(20, args.requests // 4), args.issue_kb)]
        results["context_issue_c1"] = {**served(issue_reqs, 1), "kb": args.issue_kb}
        print(f"  /context with {args.issue_kb} KB pasted issues at 1 client: {results['context_issue_c1']}", flush=True)

        off = {"X-Helix-Inject": "off"}

        def measured(target: str, reqs: list, conc: int) -> dict:
            """Latency, plus CPU seconds per request spent by the server and by the stub."""
            before = (cpu_s(server_ps), cpu_s(stub_ps))
            lat, err = asyncio.run(drive(target, reqs, conc))
            n = max(1, len(reqs))
            return {**summary(lat), "errors": err,
                    "server_cpu_ms_per_req": round((cpu_s(server_ps) - before[0]) / n * 1000, 3),
                    "stub_cpu_ms_per_req": round((cpu_s(stub_ps) - before[1]) / n * 1000, 3)}

        for conc in sorted({1, args.concurrency}):
            d = measured(stub_url, [(direct_path, direct_body(q), {}) for q in qs], conc)
            p_off = measured(url, [("/v1/chat/completions", chat_body(q), off) for q in qs], conc)
            p_on = measured(url, [("/v1/chat/completions", chat_body(q), {}) for q in qs], conc)
            results[f"proxy_c{conc}"] = {
                "direct": d,
                "retrieval_off": p_off,
                "retrieval_on": p_on,
                "overhead_off_p50_ms": round(p_off["p50_ms"] - d["p50_ms"], 2),
                "overhead_off_p95_ms": round(p_off["p95_ms"] - d["p95_ms"], 2),
                "overhead_on_p50_ms": round(p_on["p50_ms"] - d["p50_ms"], 2),
                "overhead_on_p95_ms": round(p_on["p95_ms"] - d["p95_ms"], 2),
                "ratio_off_p50": round(p_off["p50_ms"] / d["p50_ms"], 2) if d["p50_ms"] else None,
            }
            r = results[f"proxy_c{conc}"]
            print(f"  chat at {conc:>2} client(s): direct p50 {d['p50_ms']} ms / p95 {d['p95_ms']} ms; "
                  f"proxy (retrieval off) p50 {p_off['p50_ms']} / p95 {p_off['p95_ms']}; "
                  f"proxy (retrieval on) p50 {p_on['p50_ms']} / p95 {p_on['p95_ms']}", flush=True)
            print(f"    added by the proxy: off p50 {r['overhead_off_p50_ms']} ms, p95 {r['overhead_off_p95_ms']} ms; "
                  f"on p50 {r['overhead_on_p50_ms']} ms, p95 {r['overhead_on_p95_ms']} ms", flush=True)
            print(f"    server CPU per proxied request: {p_off['server_cpu_ms_per_req']} ms (retrieval off), "
                  f"{p_on['server_cpu_ms_per_req']} ms (on); stub CPU per request {d['stub_cpu_ms_per_req']} ms",
                  flush=True)
    finally:
        stop(server_proc)
        stop(stub_proc)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--genes", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=400, help="requests per measurement")
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--kind", choices=("openai", "ollama"), default="openai", help="upstream wire format")
    parser.add_argument("--issue-kb", type=int, default=20, help="size of the pasted-issue queries")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary HELIX_HOME")
    parser.add_argument("--in-process", action="store_true",
                        help="no server: build_context's CPU time per question and per pasted issue")
    parser.add_argument("--genome-cache", type=Path, help="--in-process: build the genome here once, reuse it after")
    parser.add_argument("--answers", type=Path, help="--in-process: write every answer here (to compare versions)")
    parser.add_argument("--profile", type=Path, help="--in-process: write a cProfile of the pasted issues here")
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="helix-bench-server-"))
    if args.in_process:
        try:
            results = in_process(args, home)
        finally:
            shutil.rmtree(home, ignore_errors=True)
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
        return 0
    try:
        results = run(args, home)
    finally:
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)
        else:
            print(f"kept {home}")

    c1, cn = results["context_c1"], results[f"context_c{args.concurrency}"]
    pn = results[f"proxy_c{args.concurrency}"]
    print()
    print(f"genome: {results['genome']['genes']} genes ({results['genome']['files']} files, "
          f"built in {results['genome']['build_s']} s); upstream wire format: {args.kind}")
    print(f"/context        1 client: p50 {c1['p50_ms']} ms  p95 {c1['p95_ms']} ms   (target p95 <= 40 ms: "
          f"{'met' if c1['p95_ms'] <= 40 else 'MISSED'})")
    print(f"/context       {args.concurrency:>2} clients: p50 {cn['p50_ms']} ms  p95 {cn['p95_ms']} ms")
    ci = results["context_issue_c1"]
    print(f"/context        1 client, {args.issue_kb} KB pasted issues: p50 {ci['p50_ms']} ms  p95 {ci['p95_ms']} ms "
          f"(target p95 <= 40 ms: {'met' if ci['p95_ms'] <= 40 else 'MISSED'}; short questions above)")
    print(f"server CPU per /context, 1 client: {ci['server_cpu_ms_per_req']} ms per {args.issue_kb} KB pasted issue, "
          f"{c1['server_cpu_ms_per_req']} ms per short question (compares across runs on a loaded machine)")
    p1, pk = results["packet_c1"], results[f"packet_c{args.concurrency}"]
    print(f"/context/packet 1 client: p50 {p1['p50_ms']} ms  p95 {p1['p95_ms']} ms")
    print(f"/context/packet {args.concurrency:>2} clients: p50 {pk['p50_ms']} ms  p95 {pk['p95_ms']} ms")
    q1 = results["proxy_c1"]
    for label, r in (("1 client", q1), (f"{args.concurrency} clients", pn)):
        print(f"chat, {label}: direct to the stub (baseline) p50 {r['direct']['p50_ms']} ms; proxy overhead p50 "
              f"{r['overhead_off_p50_ms']} ms with retrieval off (target <= 5 ms: "
              f"{'met' if r['overhead_off_p50_ms'] <= 5 else 'MISSED'}), {r['overhead_on_p50_ms']} ms with retrieval on")
    print(f"server CPU per proxied chat (retrieval off): {pn['retrieval_off']['server_cpu_ms_per_req']} ms — at "
          f"{args.concurrency} clients on {os.cpu_count()} cores shared with the stub and the load generator, "
          "added latency is mostly waiting for that CPU")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
