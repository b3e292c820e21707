"""What reading every file through safe_open costs, beside a plain read of the same files in the same run.

    python benchmarks/bench_safe_read.py [FOLDER] [--rounds 5]

safe_open.read_file opens without following links, checks the opened handle (fstat, its real path
against the roots), and reads on a reader thread with a time limit (issue 25). The plain read is
`Path.read_bytes()`, what the ingest did before. Default folder: the Python standard library's
`json`, `email`, `http`, `urllib`, `logging`, `asyncio`, `xml`, `importlib` packages (the ingest
benchmark's tree). Prints microseconds per file, median and best of the rounds, both ways, and the ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import sysconfig
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from helix_context.safe_open import ReadRule, read_file  # noqa: E402 - after the path is set

STDLIB_PACKAGES = ("json", "email", "http", "urllib", "logging", "asyncio", "xml", "importlib")


def _files(folders: list[Path]) -> list[Path]:
    return [p for folder in folders for p in sorted(folder.rglob("*.py")) if p.is_file() and not p.is_symlink()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", nargs="?")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    folders = [Path(args.folder).resolve()] if args.folder else [stdlib / name for name in STDLIB_PACKAGES]
    files = _files(folders)
    rule = ReadRule(tuple(folders), False, 2_000_000, 10.0)
    plain: list[float] = []
    safe: list[float] = []
    total = 0
    for _ in range(args.rounds):
        t = time.perf_counter()
        for path in files:
            total += len(path.read_bytes())
        plain.append(time.perf_counter() - t)
        t = time.perf_counter()
        for path in files:
            got = read_file(path, rule)
            if not hasattr(got, "data"):
                raise SystemExit(f"{path}: {got}")
        safe.append(time.perf_counter() - t)
    print(f"{len(files)} files, {total / args.rounds / 1e6:.1f} MB per round, {args.rounds} rounds, {os.cpu_count()} cores")
    for label, pick in (("median", statistics.median), ("best", min)):
        p, s = pick(plain), pick(safe)
        print(f"  {label:6} plain Path.read_bytes: {p / len(files) * 1e6:7.1f} us per file (baseline, same run);"
              f" safe_open.read_file: {s / len(files) * 1e6:7.1f} us per file ({s / p:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
