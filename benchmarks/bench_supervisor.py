"""Supervisor restart latency, against a baseline measured in the same run.

Measures (median of --runs, each on the real backend process):
  baseline        cold start of `python -m uvicorn helix_context.server:app` until /health answers
                  (what the old launcher did on every start and restart — without its fixed sleeps)
  crash → serving `kill -9` of the supervised backend until /health answers from the new process
  (overhead)      kill -9 until the replacement process is spawned: what the supervisor itself adds
  restart         "Restart backend" (Supervisor.request_restart, the tray's action) until /health
                  answers from the new process

Targets: crash → serving <= 3 s, restart <= 3 s. Each crash run measures a first crash in its
flap window (the backoff for repeated crashes is a policy choice, not a latency).

    python benchmarks/bench_supervisor.py [--runs 5]
"""

from __future__ import annotations

import _checkout  # noqa: F401  (this checkout's helix_context, not an installed one)

import argparse
import logging
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).absolute().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_S = 3.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def health_pid(url: str) -> int | None:
    try:
        r = httpx.get(f"{url}/health", timeout=0.5, trust_env=False)
        return r.json().get("pid") if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def wait_new_pid(url: str, old: int | None, timeout: float = 60.0) -> float:
    """Seconds until /health answers from a pid other than `old` (polled every 10 ms)."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        pid = health_pid(url)
        if pid is not None and pid != old:
            return time.perf_counter() - start
        time.sleep(0.01)
    raise TimeoutError(f"{url} did not come back within {timeout}s")


def settle(pid: int | None, timeout: float = 20.0) -> None:
    """Wait until the backend has finished its start-up work (background warm-up threads use the
    CPU for a while after /health answers); otherwise the next measurement competes with it."""
    import psutil

    if pid is None:
        return
    try:
        proc = psutil.Process(pid)
        deadline = time.monotonic() + timeout
        proc.cpu_percent(None)
        while time.monotonic() < deadline:
            time.sleep(0.25)
            if proc.cpu_percent(None) < 5.0:
                return
    except psutil.Error:
        return


def cold_start(home: Path) -> float:
    """The baseline: spawn uvicorn with the app and poll /health, as the old launcher did."""
    port = free_port()
    env = {**os.environ, "HELIX_HOME": str(home), "HELIX_SERVER_PORT": str(port)}
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "helix_context.server:app", "--host", "127.0.0.1",
                             "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_new_pid(f"http://127.0.0.1:{port}", None)
        return time.perf_counter() - start
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def measure(home: Path, runs: int) -> tuple[list[float], list[float], list[float]]:
    """Interleaved rounds (baseline, crash, restart) so machine noise hits all three alike."""
    from helix_context.config import load_config
    from supervisor import Supervisor

    logging.getLogger("helix").setLevel(logging.ERROR)
    os.environ["HELIX_HOME"] = str(home / "supervised")
    settings = load_config().replace(server={"port": free_port()},
                                     watchers={"ollama_url": f"http://127.0.0.1:{free_port()}"})
    sup = Supervisor(settings).start()
    base, crash, restart, overhead = [], [], [], []
    running = lambda s: s["backend"]["status"] == "running"  # noqa: E731 - a one-line helper beside its only use
    try:
        if sup.wait_for(running, timeout=60) is None:
            raise RuntimeError(f"backend did not start: {sup.snapshot()['backend']}")
        url = settings.base_url
        for _ in range(runs):
            settle(health_pid(url))
            base.append(cold_start(home / "baseline"))

            pid = health_pid(url)
            settle(pid)
            sup.policy.reset()  # each run: a first crash in its flap window
            killed_at = time.time()
            os.kill(pid, signal.SIGKILL if hasattr(signal, "SIGKILL") else signal.SIGTERM)
            crash.append(wait_new_pid(url, pid))
            snap = sup.wait_for(running, timeout=60)
            overhead.append(snap["backend"]["started_at"] - killed_at)  # exit seen → new process spawned

            pid = health_pid(url)
            settle(pid)
            start = time.perf_counter()
            sup.request_restart("benchmark")
            wait_new_pid(url, pid)
            restart.append(time.perf_counter() - start)
            sup.wait_for(running, timeout=60)
    finally:
        sup.shutdown()
    return base, crash, restart, overhead


def fmt(xs: list[float]) -> str:
    return f"median {statistics.median(xs):6.3f} s   (min {min(xs):.3f}, max {max(xs):.3f}, n={len(xs)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="helix-bench-sup-") as tmp:
        base, crash, restart, overhead = measure(Path(tmp), args.runs)
    b = statistics.median(base)
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {args.runs} runs each")
    print(f"baseline: cold uvicorn start → /health   {fmt(base)}")
    for name, xs in (("kill -9 → /health again          ", crash), ("Restart backend → serving again   ", restart)):
        m = statistics.median(xs)
        verdict = "OK" if m <= TARGET_S else "OVER TARGET"
        print(f"{name}{fmt(xs)}   {m / b:4.2f}× baseline   target <= {TARGET_S:g} s: {verdict}")
    print(f"  of which the supervisor's part (kill -9 → replacement spawned): "
          f"median {statistics.median(overhead) * 1000:.0f} ms; the rest is the backend's own cold start")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
