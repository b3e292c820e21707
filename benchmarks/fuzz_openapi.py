"""Fuzz the whole HTTP API from its own OpenAPI schema and count the answers that are 500s.

    python benchmarks/fuzz_openapi.py [--max-examples 60] [--json results.json]

Starts what a user runs: `helix serve` (lean: no models) on a free port with a fresh HELIX_HOME, and
the test suite's upstream stub (tests/server/upstream_stub.py, a real HTTP server speaking OpenAI's and
Ollama's wire formats) so the proxy routes forward for real. Then schemathesis generates requests for
every operation in /openapi.json (the `not_a_server_error` check, a fixed seed, NUL bytes allowed) and writes
every exchange to a HAR file; this script counts the statuses there. The promise (issue 25): no 500.
A 502/503 is a legitimate answer (an upstream that refused, a part still loading) and is counted apart.

`/admin/shutdown` is left out: it stops the server under test (it is tested on its own).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmarks._results import write_results  # noqa: E402 - after the path is set

LEAN = {"HELIX_EMBEDDING_ENABLED": "0", "HELIX_NER_ENABLED": "0", "HELIX_ASSEMBLY_HEADROOM": "0",
        "HELIX_INGEST_WORKERS": "1", "PYTHONUNBUFFERED": "1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _schemathesis() -> str | None:
    found = shutil.which("schemathesis")
    local = Path(sys.executable).parent / "schemathesis"
    return found or (str(local) if local.exists() else None)


def _wait(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} never answered")


def _statuses(har: Path) -> collections.Counter[int]:
    entries = json.loads(har.read_text())["log"]["entries"]
    return collections.Counter(int(e["response"]["status"]) for e in entries if e.get("response"))


def run_fuzz(max_examples: int, workdir: Path, *, timeout_s: float = 600, only: str | None = None) -> dict[str, Any]:
    """Start the backend and the stub, fuzz, stop both; the counts by status and the 500s' requests.
    `only`: a regular expression of the paths to fuzz (default: every operation)."""
    exe = _schemathesis()
    if exe is None:
        raise RuntimeError("schemathesis is not installed: pip install -e .[test]")
    stub_port, port = _free_port(), _free_port()
    env = {**os.environ, **LEAN, "PYTHONPATH": str(REPO), "HELIX_HOME": str(workdir / "home"),
           "HELIX_SERVER_PORT": str(port), "HELIX_PROXY_UPSTREAM_URL": f"http://127.0.0.1:{stub_port}",
           "HELIX_PROXY_UPSTREAM_KIND": "openai"}
    env.pop("HELIX_API_KEY", None)
    procs = [subprocess.Popen([sys.executable, str(REPO / "tests" / "server" / "upstream_stub.py"),
                               "--port", str(stub_port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env=env),
             subprocess.Popen([sys.executable, "-m", "helix_context.cli", "serve"], env=env, cwd=workdir,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    har = workdir / "fuzz.har"
    try:
        url = f"http://127.0.0.1:{port}"
        _wait(url + "/health", 90)
        started = time.perf_counter()
        proc = subprocess.run(
            [exe, "run", url + "/openapi.json", "--checks", "not_a_server_error", "--max-examples", str(max_examples),
             "--seed", "25", "--generation-allow-x00", "true", "--request-timeout", "30", "--exclude-path", "/admin/shutdown",
             "--continue-on-failure", "--report-har-path", str(har), "--workers", "1",
             *(["--include-path-regex", only] if only else [])],
            capture_output=True, text=True, timeout=timeout_s, cwd=workdir, env=env)
        seconds = time.perf_counter() - started
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
    counts = _statuses(har) if har.exists() else collections.Counter()
    entries = json.loads(har.read_text())["log"]["entries"] if har.exists() else []
    failures = [f"{e['request']['method']} {e['request']['url']}" for e in entries
                if e.get("response") and int(e["response"]["status"]) == 500]
    return {"requests": sum(counts.values()), "server_errors_500": counts.get(500, 0),
            "other_5xx": sum(n for s, n in counts.items() if s >= 500 and s != 500),
            "by_status": {str(k): v for k, v in sorted(counts.items())}, "seconds": round(seconds, 1),
            "max_examples": max_examples, "schemathesis_exit": proc.returncode, "first_500s": failures[:10],
            "schemathesis_tail": proc.stdout[-4000:]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-examples", type=int, default=60)
    parser.add_argument("--only", help="regular expression of the paths to fuzz (default: all)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="helix-fuzz-") as tmp:
        result = run_fuzz(args.max_examples, Path(tmp), only=args.only)
    print(f"openapi fuzz: {result['requests']} requests in {result['seconds']} s "
          f"(max {args.max_examples} examples per operation)")
    print(f"  500s: {result['server_errors_500']}   (issue 25 found 2 kinds of 500 on 17089c2: a NUL in a path, "
          "a lone surrogate in a chat)")
    print(f"  other 5xx: {result['other_5xx']}   by status: {result['by_status']}")
    for line in result["first_500s"]:
        print(f"  500: {line}")
    write_results(args.json, {k: v for k, v in result.items() if k != "schemathesis_tail"})
    return 1 if result["server_errors_500"] else 0


if __name__ == "__main__":
    sys.exit(main())
