"""Needles in a haystack: do planted facts land in the delivered context, and survive compression?

    python benchmarks/bench_needle.py [--files 3000] [--json OUT]

Builds a deterministic haystack of thousands of unrelated files (Python
modules, configs, Markdown, logs) in which every service has the same keys
(port, timeout, retries…), plants one distinguishing fact per needle, asks a
question per needle, and prints: needles whose fact lands in the delivered
tier, tokens delivered, and the critical-token keep rate after compression —
with headroom compression and, as the baseline in the same run, with plain
truncation (HELIX_DISABLE_HEADROOM=1).
"""

from __future__ import annotations

import _checkout  # noqa: F401  (this checkout's helix_context, not an installed one)

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _results import write_results

WORDS = ("alpha beta gamma delta ledger invoice shipment cart billing catalog inventory search profile session "
         "audit report export import scheduler worker queue cache index token upload media thumbnail email "
         "notify webhook metrics tracing policy quota region tenant account customer order payment refund").split()

NEEDLES = (
    ("services/gateway/config.toml", "config", "port = 11437",
     "what port does the gateway service listen on?", "11437"),
    # "billing" is a haystack word (src/*/billing_*.py all set MAX_RETRIES): the needle's service must be unique
    ("services/settlement/retry.py", "code", "MAX_RETRIES = 7",
     "how many retries does the settlement service make (MAX_RETRIES)?", "7"),
    ("deploy/search/values.yaml", "config", "api_timeout_ms: 2500",
     "search api_timeout_ms in the deploy values", "2500"),
    ("src/geo/regions.py", "code", 'DEFAULT_REGION = "eu-west-3"',
     "which DEFAULT_REGION does geo use?", "eu-west-3"),
    ("logs/worker-2026-11-02.log", "log", "ERROR job=8841 reason=quota_exceeded tenant=acme-42",
     "why did worker job 8841 fail?", "quota_exceeded"),
    ("docs/runbooks/cache.md", "markdown", "The cache eviction TTL is 900 seconds (cache_ttl_s = 900).",
     "what is the cache eviction TTL?", "900"),
)


def _name(rng: random.Random) -> str:
    return f"{rng.choice(WORDS)}_{rng.choice(WORDS)}"


def make_haystack(root: Path, n_files: int, seed: int = 7) -> int:
    rng = random.Random(seed)
    total = 0
    for i in range(n_files):
        kind = i % 4
        service = f"{rng.choice(WORDS)}{i}"
        if kind == 0:
            path = root / "services" / service / "config.toml"
            text = (f"[{service}]\nport = {8000 + rng.randrange(900)}\nhost = \"10.0.{rng.randrange(255)}.{rng.randrange(255)}\"\n"
                    f"timeout_ms = {rng.randrange(100, 9000)}\nretries = {rng.randrange(1, 9)}\n"
                    f"log_level = \"{rng.choice(['info', 'debug', 'warn'])}\"\n")
        elif kind == 1:
            path = root / "src" / service / f"{_name(rng)}.py"
            funcs = []
            for _ in range(rng.randrange(2, 6)):
                fn = _name(rng)
                funcs.append(f"def {fn}(value, retries={rng.randrange(1, 9)}):\n"
                             f"    \"\"\"{' '.join(rng.choice(WORDS) for _ in range(10))}.\"\"\"\n"
                             f"    return value * {rng.randrange(2, 99)}\n")
            text = f"MAX_RETRIES = {rng.randrange(1, 6)}\nTIMEOUT_S = {rng.randrange(1, 60)}\n\n\n" + "\n\n".join(funcs)
        elif kind == 2:
            path = root / "docs" / f"{service}.md"
            text = f"# {service.title()}\n\n" + "\n\n".join(
                f"## {rng.choice(WORDS).title()}\n\n" + " ".join(rng.choice(WORDS) for _ in range(60)) + "."
                for _ in range(3))
        else:
            path = root / "logs" / f"{service}.log"
            text = "\n".join(
                f"2026-11-0{rng.randrange(1, 9)}T10:{rng.randrange(60):02}:{rng.randrange(60):02} "
                f"{rng.choice(['INFO', 'INFO', 'INFO', 'WARN'])} job={rng.randrange(10000)} "
                f"{' '.join(rng.choice(WORDS) for _ in range(8))}" for _ in range(40))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
        total += len(text)
    for rel, kind, fact, _, _ in NEEDLES:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "config" and rel.endswith(".toml"):
            text = f"[gateway]\nhost = \"0.0.0.0\"\n{fact}\nworkers = 4\n"
        elif kind == "config":
            text = f"search:\n  replicas: 3\n  {fact}\n  image: search:1.4.2\n"
        elif kind == "code":
            text = f'"""Settings."""\n\n{fact}\nBACKOFF_S = 2\n\n\ndef load():\n    return {{}}\n'
        elif kind == "log":
            text = "\n".join([f"2026-11-02T09:00:{s:02} INFO job={8000 + s} started" for s in range(30)]
                             + [f"2026-11-02T09:01:00 {fact}"]
                             + [f"2026-11-02T09:02:{s:02} INFO job={9000 + s} done" for s in range(30)])
        else:
            text = f"# Cache runbook\n\n## Eviction\n\n{fact}\n\n## Alerts\n\nPage the on-call when hit rate drops.\n"
        path.write_text(text + "\n")
    return total


def run(helix, label: str) -> dict:
    landed, tokens, keep, latency = 0, [], [], []
    per_needle = []
    for rel, _, _fact, question, answer in NEEDLES:
        t = time.perf_counter()
        window = helix.build_context(question, record=False)
        latency.append(time.perf_counter() - t)
        delivered = any(g.src.split(":")[0].endswith(rel) for g in window.genes)
        in_text = answer in window.expressed_context
        ok = delivered and in_text
        landed += ok
        tokens.append(window.tokens)
        keep.append(window.critical_keep_rate)
        per_needle.append({"needle": rel, "delivered": delivered, "answer_in_context": in_text,
                           "tier": window.tier, "genes": len(window.genes), "tokens": window.tokens})
    return {
        "label": label,
        "needles_landed": landed,
        "needles": len(NEEDLES),
        "tokens_mean": round(statistics.fmean(tokens), 1),
        "critical_keep_rate": round(statistics.fmean(keep), 4),
        "p50_ms": round(1000 * sorted(latency)[len(latency) // 2], 2),
        "per_needle": per_needle,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=3000)
    parser.add_argument("--json")
    parser.add_argument("--no-embed", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        root = tmp_path / "haystack"
        make_haystack(root, args.files)
        os.environ["HELIX_HOME"] = str(tmp_path / "home")
        from helix_context.config import load_config
        from helix_context.manager import HelixContextManager

        base = load_config()
        helix = HelixContextManager(base)
        report = helix.ingest_path(root, embed=not args.no_embed)
        print(f"haystack: {report.files_ingested} files, {helix.genome.stats()['total_genes']} genes "
              f"({report.seconds:.1f} s)", file=sys.stderr)
        results = {"files": report.files_ingested, "genes": helix.genome.stats()["total_genes"]}
        results["headroom"] = run(helix, "headroom compression")
        truncating = HelixContextManager(base.replace(assembly={"headroom": False}), genome=helix.genome)
        results["truncate"] = run(truncating, "baseline: plain truncation")
        helix.close()

    print(f"{'assembly':<30}{'landed':>8}{'tokens':>9}{'keep rate':>11}{'p50 ms':>9}")
    for key in ("headroom", "truncate"):
        r = results[key]
        print(f"{r['label']:<30}{r['needles_landed']:>5}/{r['needles']}{r['tokens_mean']:>9.0f}"
              f"{r['critical_keep_rate']:>11.3f}{r['p50_ms']:>9.1f}")
    for item in results["headroom"]["per_needle"]:
        print(f"  {item['needle']:<32} delivered={item['delivered']!s:<5} answer={item['answer_in_context']!s:<5} "
              f"tier={item['tier']:<8} genes={item['genes']:<3} tokens={item['tokens']}")
    write_results(args.json, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
