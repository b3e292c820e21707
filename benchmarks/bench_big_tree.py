"""Ingest of one big source tree (the Linux kernel): wall time, MB/s, peak memory, the progress bar's ETA.

    apt-get install linux-source-6.1 && mkdir /tmp/linux && tar -xJf /usr/src/linux-source-6.1.tar.xz -C /tmp/linux
    python benchmarks/bench_big_tree.py /tmp/linux/linux-source-6.1 --no-gitignore [--embed] [--json OUT]

Runs `helix ingest TREE --progress` (without embeddings unless --embed) in a subprocess
with a fresh HELIX_HOME, samples the memory and CPU time of the CLI and its parse workers
together every 0.25 s, and keeps the progress bar's output to show the ETA it printed.
Baseline, same run: walking the tree and reading every file's bytes (the floor any indexer
pays). CPU seconds are reported beside wall time: on a machine shared with other work the
wall time says how much CPU the ingest was given, the CPU time what it needed (CPU seconds
/ cores is the wall time it would take with every core to itself).
Target (issue #16): the kernel (~1.3 GB) in <= 5 min on 2 cores without embeddings,
memory bounded whatever the tree's size.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from _results import write_results  # noqa: E402 - imported after the sys.path line above that makes it importable
from bench_scale import tree_rss  # noqa: E402 - imported after the sys.path line above that makes it importable


def read_everything(root: Path) -> tuple[int, int, float]:
    started = time.perf_counter()
    files = size = 0
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                continue
            try:
                with open(path, "rb") as fh:
                    size += len(fh.read())
                files += 1
            except OSError:
                pass
    return files, size, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree", type=Path)
    parser.add_argument("--embed", action="store_true")
    parser.add_argument("--no-gitignore", action="store_true",
                        help="index what .gitignore excludes too (Debian's linux-source tree ends its .gitignore "
                             "with '/*': everything at the top level is ignored)")
    parser.add_argument("--limit-s", type=float, default=0,
                        help="stop the ingest after this many seconds and report the rate reached (0: no limit)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    files, size, read_s = read_everything(args.tree)
    print(f"baseline: walk + read {files} files, {size / 2**20:.0f} MB in {read_s:.1f} s", flush=True)

    home = Path(tempfile.mkdtemp(prefix="helix-bench-tree-"))
    env = {**os.environ, "HELIX_HOME": str(home), "HELIX_CONFIG": str(REPO / "helix.toml"), "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "helix_context.cli", "ingest", str(args.tree), "--json", "--progress"]
    if not args.embed:
        cmd.append("--no-embed")
    if args.no_gitignore:
        env["HELIX_INGEST_RESPECT_GITIGNORE"] = "0"
    try:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(REPO))
        out: list[bytes] = []
        err: list[bytes] = []
        readers = [threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True),
                   threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)]
        for r in readers:
            r.start()
        peak = 0
        samples: list[tuple[float, int]] = []
        cpu: dict[int, float] = {}  # last CPU seconds seen per process of the tree
        watched = psutil.Process(proc.pid)
        stopped = False
        while proc.poll() is None:
            if args.limit_s and time.perf_counter() - started > args.limit_s:
                for p in [*watched.children(recursive=True), watched]:
                    try:
                        p.terminate()
                    except psutil.Error:
                        pass
                proc.wait(30)
                stopped = True
                break
            try:
                rss = tree_rss(watched)
                peak = max(peak, rss)
                samples.append((time.perf_counter() - started, rss))
                for p in [watched, *watched.children(recursive=True)]:
                    times = p.cpu_times()
                    cpu[p.pid] = times.user + times.system
            except psutil.Error:
                pass
            time.sleep(0.25)
        for r in readers:
            r.join()
        seconds = time.perf_counter() - started
        if stopped:  # what was committed before the stop
            conn = sqlite3.connect(f"{(home / 'genome.db').as_uri()}?mode=ro", uri=True)
            n_files, n_bytes = conn.execute("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM files").fetchone()
            n_genes = conn.execute("SELECT COUNT(*) FROM genes").fetchone()[0]
            conn.close()
            report = {"bytes": n_bytes, "files_ingested": n_files, "genes_added": n_genes, "stopped_after_s": seconds}
        elif proc.returncode != 0:
            print(err[0].decode()[-3000:], file=sys.stderr)
            return 1
        else:
            report = json.loads(out[0])
        db_mb = sum(f.stat().st_size for f in home.glob("genome.db*")) / 2**20
    finally:
        shutil.rmtree(home, ignore_errors=True)
    bar = [line for line in re.split(r"[\r\n]", err[0].decode(errors="replace")) if "%|" in line]
    quarters = [max((r for t, r in samples if t <= seconds * q / 4), default=0) for q in (1, 2, 3, 4)]
    results = {"tree": str(args.tree), "embeddings": args.embed, "seconds": round(seconds, 1),
               "stopped_at_limit": stopped, "tree_files": files, "tree_mb": round(size / 2**20),
               "mb_per_s": round(report.get("bytes", 0) / 2**20 / seconds, 2), "files": report.get("files_ingested"),
               "genes": report.get("genes_added"), "skipped": len(report.get("files_skipped", [])),
               "peak_rss_mb": round(peak / 2**20), "peak_rss_by_quarter_mb": [round(q / 2**20) for q in quarters],
               "cpu_s": round(sum(cpu.values()), 1), "processes": len(cpu),
               "db_mb": round(db_mb), "baseline_read_s": round(read_s, 1),
               "progress_sample": bar[len(bar) // 2][:160] if bar else None}
    print(json.dumps(results, indent=2))
    if stopped:
        per_file = results["cpu_s"] / max(results["files"] or 1, 1)
        print(f"stopped after {seconds:.0f} s: {results['files']} of {files} files ingested; at this rate the whole "
              f"tree takes ~{size / 2**20 / max(results['mb_per_s'], 1e-9):.0f} s by bytes, "
              f"~{files / max(results['files'] or 1, 1) * seconds:.0f} s by files; its CPU time at this cost a file "
              f"~{per_file * files:.0f} CPU s (~{per_file * files / (os.cpu_count() or 1):.0f} s on "
              f"{os.cpu_count()} cores to itself)")
    print(f"ingest of {results['files']} files ({report.get('bytes', 0) / 2**20:.0f} MB) in {seconds:.0f} s = "
          f"{results['mb_per_s']} MB/s, peak memory {results['peak_rss_mb']} MB "
          f"(running peak at each quarter: {results['peak_rss_by_quarter_mb']} MB); "
          f"{results['cpu_s']} CPU s in {results['processes']} processes "
          f"({results['files'] / max(results['cpu_s'], 1e-9):.0f} files per CPU s, "
          f"{results['cpu_s'] / max(results['files'] or 1, 1) * 1000:.1f} ms a file); "
          f"baseline read of the tree {read_s:.0f} s; target <= 300 s without embeddings: "
          f"{'met' if seconds <= 300 else 'MISSED'}")
    write_results(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
