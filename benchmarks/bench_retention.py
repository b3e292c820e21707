"""Growth under sustained traffic: bookkeeping rows and server RSS, retention off vs on, same run.

Issue 14 measured ~13 co-activation rows per /context call, every chat's text kept forever and
~5 KB of server memory per request. This starts the real backend twice (`python -m uvicorn
helix_context.server:app`, optional parts off) on fresh genomes of the same documents:

  baseline   retention effectively off (caps and TTLs far beyond the run)
  retention  the caps given here (defaults: a small genome needs small caps to show the plateau)

and drives --context /context calls and --chats chats (through the proxy to a stub upstream) with
the same seeded queries, sampling row counts and the server's RSS ten times. It prints both tables,
rows added per 1 000 /context calls in the second half, and RSS growth per request there.

Caps hold at every moment (issue 26): a second thread reads the genome file all through each run
(every --sample-ms) and keeps the largest count it saw of each capped quantity — co-activation
edges of any one gene, sessions, chat-buffer rows — printed against its cap. Each chat opens a new
session, so the run pushes past every cap.

    python benchmarks/bench_retention.py [--context 10000] [--chats 1000] [--docs 300] [--full]
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).absolute().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "server"))

from helix_context.genome.store import Genome  # noqa: E402 - imported after the sys.path line above that makes it importable
from upstream_stub import UpstreamStub  # noqa: E402 - imported after the sys.path line above that makes it importable

WORDS = [f"topic{i}" for i in range(60)]
OFF = {"COACTIVATION_PER_GENE": "1000000", "MAX_SESSIONS": "1000000", "MAX_BUFFER_ROWS": "100000000",
       "PRUNE_EVERY": "100000000", "PRUNE_INTERVAL_S": "1000000", "COACTIVATION_HALF_LIFE_DAYS": "100000"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CAPPED = {"coactivation_per_gene_max": "COACTIVATION_PER_GENE", "sessions": "MAX_SESSIONS",
          "session_buffer": "MAX_BUFFER_ROWS"}


class PeakSampler:
    """Reads the genome file every `every_s` while the run goes and keeps the largest count of each table."""

    def __init__(self, path: Path, every_s: float) -> None:
        self.path, self.every_s = path, every_s
        self.peaks: dict[str, int] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        genome = Genome(self.path, readonly=True)
        try:
            while not self._stop.is_set():
                for key, value in genome.retention_rows().items():
                    self.peaks[key] = max(self.peaks.get(key, 0), value)
                self.samples += 1
                self._stop.wait(self.every_s)
        finally:
            genome.close()


def run(label: str, retention: dict[str, str], args: argparse.Namespace, upstream: str) -> list[dict]:
    home = Path(tempfile.mkdtemp(prefix=f"helix-bench-retention-{label}-"))
    port = free_port()
    lean = {} if args.full else {"HELIX_EMBEDDING_ENABLED": "0", "HELIX_NER_ENABLED": "0",
                                 "HELIX_ASSEMBLY_HEADROOM": "0"}
    env = {**os.environ, "HELIX_HOME": str(home), "HELIX_SERVER_PORT": str(port), "PYTHONPATH": str(ROOT),
           **lean, "HELIX_INGEST_WORKERS": "1", "HELIX_PROXY_UPSTREAM_URL": upstream,
           **{f"HELIX_RETENTION_{k}": v for k, v in retention.items()}}
    log = open(home / "backend.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "helix_context.server:app", "--host", "127.0.0.1",
                             "--port", str(port), "--log-level", "warning"], env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    samples: list[dict] = []
    try:
        with httpx.Client(base_url=url, timeout=60, trust_env=False) as c:
            for _ in range(1200):
                try:
                    if c.get("/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
            rng = random.Random(7)
            for i in range(args.docs):
                doc = f"Document {i} about {' '.join(rng.sample(WORDS, 6))} and the handler_{i} routine."
                c.post("/ingest", json={"content": doc, "embed": args.full, "metadata": {"path": f"docs/{i}.md"}})
            server = psutil.Process(proc.pid)
            sampler = PeakSampler(home / "genome.db", args.sample_ms / 1000).__enter__()
            rng = random.Random(11)
            every = max(1, args.context // max(1, args.chats))
            step = max(1, args.context // 10)
            started = time.perf_counter()
            for n in range(1, args.context + 1):
                c.post("/context", json={"query": " ".join(rng.sample(WORDS, 3))})
                if n % every == 0:
                    c.post("/v1/chat/completions", headers={"X-Helix-Session": f"s{n}"},
                           json={"model": "gpt-4o-mini",
                                 "messages": [{"role": "user", "content": f"what about {rng.choice(WORDS)}? " * 20}]})
                if n % step == 0:
                    genome = Genome(home / "genome.db", readonly=True)
                    rows = genome.retention_rows()
                    genome.close()
                    samples.append({"calls": n, "rss": server.memory_info().rss, **rows})
                    print(f"  {label:9} {n:>6} calls  rss {samples[-1]['rss'] / 2**20:6.1f} MiB  "
                          f"coactivation {rows['coactivation']:>6}  sessions {rows['sessions']:>5}  "
                          f"buffer {rows['session_buffer']:>6}", file=sys.stderr, flush=True)
            samples[-1]["seconds"] = time.perf_counter() - started
            time.sleep(0.5)  # the proxy records a chat just after answering it
            sampler.__exit__()
            samples[-1]["peaks"] = dict(sampler.peaks)
            samples[-1]["peak_samples"] = sampler.samples
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
    return samples


def second_half(samples: list[dict]) -> dict[str, float]:
    a, b = samples[len(samples) // 2 - 1], samples[-1]
    calls = b["calls"] - a["calls"]
    return {"coactivation_per_1k": (b["coactivation"] - a["coactivation"]) / calls * 1000,
            "buffer_per_1k": (b["session_buffer"] - a["session_buffer"]) / calls * 1000,
            "sessions_per_1k": (b["sessions"] - a["sessions"]) / calls * 1000,
            "rss_bytes_per_request": (b["rss"] - a["rss"]) / calls,
            "final_coactivation": b["coactivation"], "final_buffer": b["session_buffer"],
            "final_sessions": b["sessions"], "final_rss_mib": b["rss"] / 2**20, "seconds": b.get("seconds", 0.0)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--context", type=int, default=10_000)
    parser.add_argument("--chats", type=int, default=1_000)
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--per-gene", default="4")
    parser.add_argument("--max-sessions", default="40")
    parser.add_argument("--max-buffer-rows", default="150")
    parser.add_argument("--prune-every", default="25")
    parser.add_argument("--sample-ms", type=float, default=50.0, help="how often the peak sampler reads the genome")
    parser.add_argument("--full", action="store_true",
                        help="with the optional parts of helix.toml (embeddings, NER, headroom) instead of none")
    args = parser.parse_args()
    on = {"COACTIVATION_PER_GENE": args.per_gene, "MAX_SESSIONS": args.max_sessions,
          "MAX_BUFFER_ROWS": args.max_buffer_rows, "PRUNE_EVERY": args.prune_every}
    with UpstreamStub(kinds=("openai",)) as stub:
        runs = {"baseline": run("baseline", OFF, args, stub.url), "retention": run("retention", on, args, stub.url)}
    results = {label: second_half(samples) for label, samples in runs.items()}
    print(f"{args.context} /context calls, {args.chats} chats, {args.docs} documents; second half of the run "
          "(timings are noisy on a shared machine)")
    keys = list(results["baseline"])
    print(f"{'':24}{'baseline':>14}{'retention':>14}")
    for key in keys:
        print(f"{key:24}{results['baseline'][key]:>14.2f}{results['retention'][key]:>14.2f}")
    peaks = {label: samples[-1]["peaks"] for label, samples in runs.items()}
    reads = {label: samples[-1]["peak_samples"] for label, samples in runs.items()}
    print(f"\nlargest count seen during the run (the genome read every {args.sample_ms:g} ms: "
          f"{reads['baseline']} / {reads['retention']} reads) against each cap")
    print(f"{'':28}{'cap':>8}{'baseline':>12}{'retention':>12}  held")
    for key, setting in CAPPED.items():
        cap = int(on[setting])
        got = peaks["retention"].get(key, 0)
        print(f"{key:28}{cap:>8}{peaks['baseline'].get(key, 0):>12}{got:>12}  {'yes' if got <= cap else 'NO'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
