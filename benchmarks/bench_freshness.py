"""The living index: how fast a watched folder's edits reach /context, and what watching costs.

    python benchmarks/bench_freshness.py [--files 3000] [--edits 20] [--switch 500] [--idle-s 60] [--json OUT]

A real backend (`helix serve`, embeddings on) in a child process watches a tree of
~3,000 real Python files copied from this venv's site-packages into a temporary
folder (never into the repository). It measures, each next to a baseline taken
in the same run:

1. write → /context serves the new text, over `--edits` edits (p50 / p95).
   Baselines: one /context request alone; the old way — `helix ingest FILE` in a
   terminal (process start, model load, ingest) after each edit.
   Target: p95 <= 2 s.
2. a branch switch that rewrites `--switch` files (most changed, some deleted, some
   new) in one burst: time until the genome holds exactly what a clean ingest of
   the new tree holds (file hashes, and the live gene ids checked against a clean
   ingest into a fresh genome). Baseline: a plain `helix ingest` of those files
   (the new versions) into a fresh genome. Target: <= 2x the baseline.
3. the backend's CPU while idle over `--idle-s` seconds: with the tree watched,
   next to a second backend without sources; and with all trees watched, next to
   that second backend holding the same trees indexed but not watched ([sources]
   watch = false), over the same seconds. Target: the difference <= 1 % of one core.
4. the backend's memory (RSS) with 1 and with 3 sources of ~3,000 files each,
   next to the backend without sources.
Timings on a shared 2-core VM are noisy: run it twice before believing a number.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

from _results import write_results

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from helix_context.genome.store import Genome  # noqa: E402 - imported after the sys.path line above that makes it importable
from helix_context.ingest.walk import FileEntry, walk  # noqa: E402 - imported after the sys.path line above that makes it importable


# ── corpus: real code nobody here wrote ─────────────────────────────────────


def real_files(limit: int, *, min_bytes: int = 400, max_bytes: int = 12_000, seed: int = 7) -> list[tuple[Path, Path]]:
    """(source file, path relative to site-packages) for .py files the walk would index, shuffled."""
    site = Path(sysconfig.get_paths()["purelib"])
    picked = []
    for item in walk([site], max_file_bytes=max_bytes):
        if isinstance(item, FileEntry) and item.path.suffix == ".py" and item.size >= min_bytes:
            try:
                item.path.read_bytes().decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            picked.append((item.path, item.path.relative_to(site)))
    random.Random(seed).shuffle(picked)
    return picked[:limit]


def copy_tree(files: list[tuple[Path, Path]], root: Path) -> None:
    for src, rel in files:
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)


def disk_state(root: Path) -> dict[str, str]:
    out = {}
    for item in walk([root], max_file_bytes=2_000_000):
        if isinstance(item, FileEntry):
            out[str(item.path)] = hashlib.sha256(item.path.read_bytes()).hexdigest()
    return out


# ── a backend in a child process ────────────────────────────────────────────


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def helix_env(home: Path) -> dict[str, str]:
    env = {**os.environ, "HELIX_HOME": str(home), "HELIX_CONFIG": str(REPO / "helix.toml"),
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return env


class Backend:
    def __init__(self, home: Path, *, watch: bool = True) -> None:
        self.home = home
        home.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(home / "backend.log", "wb")
        env = {**helix_env(home), "HELIX_SOURCES_WATCH": "1" if watch else "0"}
        self.proc = subprocess.Popen([sys.executable, "-m", "helix_context.cli", "serve", "--port", str(self.port)],
                                     env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.http = httpx.Client(base_url=self.url, timeout=120)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if self.http.get("/health").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise SystemExit(f"the backend did not start; see {home / 'backend.log'}")
        self.ps = psutil.Process(self.proc.pid)

    def wait_parts(self) -> None:
        """Until the embedding model is loaded (the first /context loads nothing more)."""
        self.http.post("/context", json={"query": "warm up"})

    def wait_idle(self, timeout: float = 3600) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.http.get("/sources").json()
            if not status["indexing"]:
                return status
            time.sleep(0.25)
        raise SystemExit("indexing did not finish")

    def context(self, query: str) -> str:
        return self.http.post("/context", json={"query": query}).json()["expressed_context"]

    def cpu_s(self) -> float:
        t = self.ps.cpu_times()
        return t.user + t.system

    def rss_mb(self) -> float:
        return self.ps.memory_info().rss / 1e6

    def stop(self) -> None:
        try:
            self.http.post("/admin/shutdown")
            self.proc.wait(30)
        except (httpx.HTTPError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(10)
        self.http.close()
        self.log.close()


def cli_ingest(home: Path, paths: list[str], *, embed: bool = True) -> tuple[float, dict[str, Any]]:
    """`helix ingest … --json` in a fresh process: (wall seconds, its report)."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "helix_context.cli", "ingest", *paths, "--json", "--quiet",
                           *([] if embed else ["--no-embed"])],
                          env=helix_env(home), capture_output=True, text=True, check=True)
    return time.perf_counter() - started, json.loads(done.stdout)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


# ── the measurements ────────────────────────────────────────────────────────


def edits(backend: Backend, tree: Path, n: int, tmp: Path) -> dict[str, Any]:
    rng = random.Random(11)
    files = sorted(p for p in tree.rglob("*.py"))
    latencies, query_only = [], []
    for i in range(n):
        marker = f"helix_bench_marker_{i}_{rng.getrandbits(32):08x}"
        target = rng.choice(files)
        started = time.perf_counter()
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(f"\n\ndef {marker}():\n    return {i}\n")
        while marker not in backend.context(marker):
            if time.perf_counter() - started > 60:
                raise SystemExit(f"edit {i} ({target}) never reached /context")
            time.sleep(0.02)
        latencies.append(time.perf_counter() - started)
        t = time.perf_counter()
        backend.context(marker)
        query_only.append(time.perf_counter() - t)
        time.sleep(0.3)
    # the old way: an edit, then `helix ingest FILE` by hand
    target = files[0]
    with open(target, "a", encoding="utf-8") as fh:
        fh.write("\n\ndef helix_bench_manual():\n    return 0\n")
    manual, _ = cli_ingest(tmp / "manual-home", [str(target)])
    return {"edits": n, "p50_s": round(pct(latencies, 0.5), 3), "p95_s": round(pct(latencies, 0.95), 3),
            "max_s": round(max(latencies), 3), "context_alone_p50_s": round(pct(query_only, 0.5), 3),
            "manual_cli_ingest_s": round(manual, 3)}


def branch_switch(backend: Backend, tree: Path, n: int, spare: list[tuple[Path, Path]], tmp: Path) -> dict[str, Any]:
    rng = random.Random(5)
    files = sorted(p for p in tree.rglob("*.py"))
    chosen = rng.sample(files, n)
    deleted = chosen[: n // 10]
    modified = chosen[n // 10:]
    added = [tree / "new_on_branch" / rel for _src, rel in spare[: n // 10]]
    new_versions = [src for src, _rel in spare[n // 10: n // 10 + len(modified)]]
    started = time.perf_counter()
    for path in deleted:
        path.unlink()
    for path, src in zip(modified, new_versions):
        shutil.copyfile(src, path)
    for path, (src, _rel) in zip(added, spare[: n // 10]):
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, path)
    written = time.perf_counter() - started
    want = disk_state(tree)
    genome = Genome(backend.home / "genome.db", readonly=True)
    try:
        while True:
            got = {p: r.content_hash for p, r in genome.file_records(under=str(tree) + os.sep).items()}
            if got == want:
                break
            if time.perf_counter() - started > 1800:
                raise SystemExit("the genome never matched the new tree")
            time.sleep(0.25)  # each look reads ~3,000 rows: looking more often would slow the backend it times
        converged = time.perf_counter() - started
        backend.wait_idle()
        live_watched = sorted({g.gene_id for g in genome.iter_genes() if g.source_path and g.source_path.startswith(str(tree))})
    finally:
        genome.close()
    # what a clean ingest of the new tree holds (no embeddings: gene ids do not depend on them)
    clean_home = tmp / "clean-home"
    cli_ingest(clean_home, [str(tree)], embed=False)
    clean = Genome(clean_home / "genome.db", readonly=True)
    try:
        clean_files = {p: r.content_hash for p, r in clean.file_records(under=str(tree) + os.sep).items()}
        clean_genes = sorted({g.gene_id for g in clean.iter_genes()})
    finally:
        clean.close()
    # baseline: a plain `helix ingest` of the changed files (their new versions) into a fresh genome
    batch = tmp / "switch-batch"
    for i, path in enumerate([*modified, *added]):
        target = batch / f"f{i // 100}" / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    wall, report = cli_ingest(tmp / "switch-home", [str(batch)])
    return {"files_changed": len(modified), "files_deleted": len(deleted), "files_added": len(added),
            "write_s": round(written, 3), "watched_converged_s": round(converged, 3),
            "equals_clean_ingest": clean_files == want and live_watched == clean_genes,
            "plain_ingest_s": round(report["seconds"], 3), "plain_ingest_wall_s": round(wall, 3),
            "ratio_vs_plain_ingest": round(converged / report["seconds"], 2) if report["seconds"] else None}


def idle_cpu(watched: Backend, bare: Backend, seconds: float) -> dict[str, Any]:
    time.sleep(2.0)  # let the last request's work settle
    w0, b0 = watched.cpu_s(), bare.cpu_s()
    started = time.perf_counter()
    time.sleep(seconds)
    elapsed = time.perf_counter() - started
    w1, b1 = watched.cpu_s(), bare.cpu_s()
    return {"seconds": round(elapsed, 1), "watched_backend_pct_of_core": round(100 * (w1 - w0) / elapsed, 3),
            "baseline_backend_pct_of_core": round(100 * (b1 - b0) / elapsed, 3),
            "watching_costs_pct_of_core": round(100 * ((w1 - w0) - (b1 - b0)) / elapsed, 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=3000, help="files per watched tree")
    parser.add_argument("--edits", type=int, default=20)
    parser.add_argument("--switch", type=int, default=500, help="files a branch switch changes")
    parser.add_argument("--idle-s", type=float, default=60.0)
    parser.add_argument("--sources", type=int, default=3, help="trees watched for the memory figure")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()

    pool = real_files(args.files * args.sources + args.switch * 2)
    trees = [pool[i * args.files:(i + 1) * args.files] for i in range(args.sources)]
    spare = pool[args.files * args.sources:]
    if len(spare) < args.switch:  # a small venv: the branch's new files are reused from the other trees
        spare = [*spare, *pool[args.files:]]
    results: dict[str, Any] = {"cores": os.cpu_count(), "files_per_tree": args.files}
    with tempfile.TemporaryDirectory(prefix="helix-bench-freshness-") as tmp_name:
        tmp = Path(tmp_name)
        roots = []
        for i, files in enumerate(trees):
            root = tmp / f"tree{i}"
            copy_tree(files, root)
            roots.append(root)
        print(f"corpus: {args.sources} trees x {args.files} real .py files from site-packages "
              f"({sum(f.stat().st_size for f in roots[0].rglob('*.py')) / 1e6:.1f} MB each)", flush=True)

        # the baseline backend: no sources during the idle figure; at the end the same sources, not watched
        bare = Backend(tmp / "home-bare", watch=False)
        backend = Backend(tmp / "home")
        try:
            backend.wait_parts()
            bare.wait_parts()
            results["rss_mb_without_sources"] = round(bare.rss_mb(), 1)
            started = time.perf_counter()
            backend.http.post("/sources", json={"path": str(roots[0])}).raise_for_status()
            status = backend.wait_idle()
            results["first_index_s"] = round(time.perf_counter() - started, 2)
            results["first_index_files"] = status["sources"][0]["files"]
            results["first_index_genes"] = status["sources"][0]["genes"]
            print(f"indexed tree0: {results['first_index_files']} files, {results['first_index_genes']} genes in "
                  f"{results['first_index_s']} s (embeddings on)", flush=True)

            results["edit_to_context"] = edits(backend, roots[0], args.edits, tmp)
            e = results["edit_to_context"]
            print(f"write -> /context serves it: p50 {e['p50_s']} s, p95 {e['p95_s']} s, max {e['max_s']} s over "
                  f"{e['edits']} edits (target p95 <= 2 s) | baselines: /context alone {e['context_alone_p50_s']} s, "
                  f"`helix ingest FILE` by hand {e['manual_cli_ingest_s']} s", flush=True)

            results["branch_switch"] = branch_switch(backend, roots[0], args.switch, spare, tmp)
            b = results["branch_switch"]
            print(f"branch switch ({b['files_changed']} changed, {b['files_deleted']} deleted, {b['files_added']} new): "
                  f"genome equals the new tree after {b['watched_converged_s']} s; equals a clean ingest: "
                  f"{b['equals_clean_ingest']} | baseline: plain `helix ingest` of those files {b['plain_ingest_s']} s "
                  f"({b['plain_ingest_wall_s']} s with process start) -> {b['ratio_vs_plain_ingest']}x (target <= 2x)",
                  flush=True)

            results["rss_mb_one_source"] = round(backend.rss_mb(), 1)
            results["idle_cpu_vs_empty"] = idle_cpu(backend, bare, args.idle_s)
            c = results["idle_cpu_vs_empty"]
            print(f"idle over {c['seconds']} s, 1 watched tree: backend {c['watched_backend_pct_of_core']} % of a core "
                  f"| baseline: backend without sources (and without genes) "
                  f"{c['baseline_backend_pct_of_core']} %", flush=True)

            for root in roots[1:]:
                backend.http.post("/sources", json={"path": str(root)}).raise_for_status()
            status = backend.wait_idle()
            results["rss_mb_sources"] = {len(status["sources"]): round(backend.rss_mb(), 1)}
            results["files_watched"] = sum(s["files"] for s in status["sources"])
            results["genes"] = sum(s["genes"] for s in status["sources"])
            for root in roots:
                bare.http.post("/sources", json={"path": str(root)}).raise_for_status()
            bare_status = bare.wait_idle()
            results["rss_mb_same_sources_not_watched"] = round(bare.rss_mb(), 1)
            results["files_per_source"] = [s["files"] for s in status["sources"]]
            backend.http.post("/sources/pause").raise_for_status()  # stops every watcher
            time.sleep(2.0)
            results["rss_mb_watchers_stopped"] = round(backend.rss_mb(), 1)
            results["idle_cpu"] = idle_cpu(backend, bare, args.idle_s)
            c = results["idle_cpu"]
            print(f"idle over {c['seconds']} s, {len(status['sources'])} watched trees: backend "
                  f"{c['watched_backend_pct_of_core']} % of a core | baseline: the same sources indexed, not watched "
                  f"{c['baseline_backend_pct_of_core']} % -> watching costs {c['watching_costs_pct_of_core']} % "
                  f"(target <= 1 %)", flush=True)
            print(f"memory: backend without sources {results['rss_mb_without_sources']} MB, with 1 source "
                  f"{results['rss_mb_one_source']} MB, with {len(status['sources'])} sources "
                  f"({'+'.join(str(n) for n in results['files_per_source'])} = {results['files_watched']} files, "
                  f"{results['genes']} genes) {results['rss_mb_sources'][len(status['sources'])]} MB | baseline: "
                  f"the same {len(bare_status['sources'])} sources indexed, not watched "
                  f"{results['rss_mb_same_sources_not_watched']} MB (indexed once: no edits, no branch switch); "
                  f"the watched backend once its watchers are stopped {results['rss_mb_watchers_stopped']} MB",
                  flush=True)
        finally:
            backend.stop()
            bare.stop()
    write_results(args.json, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
