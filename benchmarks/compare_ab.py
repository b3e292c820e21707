"""Compare two benchmark result files and say whether B ships.

    python benchmarks/compare_ab.py A.json B.json [--higher-better k1,k2] [--lower-better k3,k4]
                                   [--threshold PCT] [--json]

Both files are (nested) JSON; every numeric leaf becomes a dotted key
(`retrieval.helix.ndcg@10`, `latency.p95_ms`, `runs.0.seconds`). Each metric's
direction comes from --higher-better / --lower-better (exact keys, last key
segments, or fnmatch patterns such as `*.p95*`), else from its name: *_ms, p50 /
p95 / p99, latency, seconds, *_s, bytes, rss, errors → lower is better; ndcg,
recall, mrr, precision, accuracy, mb_per_s, throughput, landed, keep_rate, hit
→ higher is better. Metrics with no known direction are shown but not judged.

Exit code: 0 ship (at least one metric better beyond the threshold, none worse
beyond it), 2 no gain (nothing better beyond the threshold), 3 regression (any
metric worse beyond the threshold), 1 unreadable input.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

EXIT_SHIP, EXIT_ERROR, EXIT_NO_GAIN, EXIT_REGRESSION = 0, 1, 2, 3

# checked in this order: the first family whose pattern matches a key decides
HIGHER_PATTERNS = (
    r"ndcg", r"recall", r"mrr", r"precision", r"accuracy", r"\bf1\b", r"mb_per_s", r"per_s(ec)?\b", r"throughput",
    r"\bqps\b", r"\brps\b", r"tokens_per", r"landed", r"keep_rate", r"hit(_rate|s)?\b", r"coverage", r"speedup",
    r"\bmap\b", r"success", r"pass(_rate|ed)?\b", r"win_rate",
)
LOWER_PATTERNS = (
    r"_ms\b", r"\bms\b", r"\bp\d{2,3}\b", r"latency", r"seconds", r"_s\b", r"\bsecs?\b", r"duration", r"elapsed",
    r"time\b", r"bytes", r"\brss\b", r"_mb\b", r"memory", r"vram", r"errors?\b", r"fail(ures?|ed)?\b",
    r"timeouts?\b", r"miss(es)?\b", r"loss\b", r"regret",
)


class InputError(Exception):
    pass


def flatten(data: Any, prefix: str = "") -> dict[str, float]:
    """Numeric leaves (bools excluded) as {dotted.key: value}; list items are numbered."""
    out: dict[str, float] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            out.update(flatten(value, f"{prefix}.{i}" if prefix else str(i)))
    elif isinstance(data, (int, float)) and not isinstance(data, bool):
        if math.isfinite(float(data)):
            out[prefix or "value"] = float(data)
    return out


def _normalise(text: str) -> str:
    # word boundaries: '.', '-', '@' and case changes separate words; '_' is kept (p95_ms -> "p95_ms")
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text).lower()
    return re.sub(r"[.\-@/ ]+", " ", text)


def _user_match(key: str, patterns: list[str]) -> bool:
    last = key.rsplit(".", 1)[-1]
    for pattern in patterns:
        if key == pattern or last == pattern or key.endswith("." + pattern) or fnmatch.fnmatchcase(key, pattern):
            return True
    return False


def direction(key: str, higher: list[str], lower: list[str]) -> int:
    """+1 higher is better, -1 lower is better, 0 unknown."""
    if _user_match(key, higher):
        return 1
    if _user_match(key, lower):
        return -1
    # the last segment decides when it can (p95 under "throughput" is still a latency)
    for scope in (key.rsplit(".", 1)[-1], key):
        words = _normalise(scope)
        for pattern in HIGHER_PATTERNS:
            if re.search(pattern, words):
                return 1
        for pattern in LOWER_PATTERNS:
            if re.search(pattern, words):
                return -1
    return 0


def change_pct(a: float, b: float) -> float:
    if a == b:
        return 0.0
    if a == 0:
        return math.copysign(math.inf, b)
    return (b - a) / abs(a) * 100.0


def compare(a: dict[str, float], b: dict[str, float], higher: list[str], lower: list[str],
            threshold: float) -> dict[str, Any]:
    rows = []
    better = worse = 0
    for key in sorted(set(a) & set(b)):
        sign = direction(key, higher, lower)
        pct = change_pct(a[key], b[key])
        if sign == 0:
            verdict = "info"
        elif abs(pct) <= threshold:
            verdict = "same"
        elif pct * sign > 0:
            verdict = "better"
            better += 1
        else:
            verdict = "worse"
            worse += 1
        rows.append({"key": key, "a": a[key], "b": b[key], "delta": b[key] - a[key], "pct": pct,
                     "direction": {1: "higher", -1: "lower", 0: "?"}[sign], "verdict": verdict})
    if worse:
        code, decision = EXIT_REGRESSION, "regression"
    elif better:
        code, decision = EXIT_SHIP, "ship"
    else:
        code, decision = EXIT_NO_GAIN, "no gain"
    return {"rows": rows, "better": better, "worse": worse, "only_a": sorted(set(a) - set(b)),
            "only_b": sorted(set(b) - set(a)), "decision": decision, "exit_code": code, "threshold_pct": threshold}


def _fmt(value: float) -> str:
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return f"{value:.4f}".rstrip("0").rstrip(".") if not float(value).is_integer() else f"{int(value)}"
    return f"{value:.4g}"


def _pct(value: float) -> str:
    return f"{value:+.2f}%" if math.isfinite(value) else ("+inf%" if value > 0 else "-inf%")


def render(result: dict[str, Any], name_a: str, name_b: str) -> str:
    rows = result["rows"]
    width = max([len("metric"), *(len(r["key"]) for r in rows)])
    lines = [f"A = {name_a}", f"B = {name_b}", "",
             f"{'metric':<{width}}  {'A':>12}  {'B':>12}  {'delta':>12}  {'change':>9}  dir     verdict"]
    mark = {"better": "better +", "worse": "WORSE -", "same": "same", "info": "(info)"}
    for r in rows:
        lines.append(f"{r['key']:<{width}}  {_fmt(r['a']):>12}  {_fmt(r['b']):>12}  {_fmt(r['delta']):>12}  "
                     f"{_pct(r['pct']):>9}  {r['direction']:<6}  {mark[r['verdict']]}")
    for side, keys in (("A", result["only_a"]), ("B", result["only_b"])):
        if keys:
            shown = ", ".join(keys[:10]) + (f", … {len(keys) - 10} more" if len(keys) > 10 else "")
            lines.append(f"only in {side}: {shown}")
    lines.append("")
    lines.append(f"{result['better']} better, {result['worse']} worse beyond ±{result['threshold_pct']:g}% "
                 f"→ {result['decision'].upper()} (exit {result['exit_code']})")
    return "\n".join(lines)


def load(path: str) -> dict[str, float]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    except ValueError as exc:
        raise InputError(f"{path} is not JSON: {exc}") from None
    flat = flatten(data)
    if not flat:
        raise InputError(f"{path} holds no numeric values to compare")
    return flat


def _keys(values: list[str]) -> list[str]:
    return [k.strip() for v in values for k in v.split(",") if k.strip()]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 1: 2 and 3 are verdicts here
        self.print_usage(sys.stderr)
        print(f"compare_ab.py: {message}", file=sys.stderr)
        raise SystemExit(EXIT_ERROR)


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", help="baseline results (JSON)")
    parser.add_argument("b", help="candidate results (JSON)")
    parser.add_argument("--higher-better", action="append", default=[], metavar="K1,K2",
                        help="keys (or last segments, or fnmatch patterns) where higher is better")
    parser.add_argument("--lower-better", action="append", default=[], metavar="K1,K2",
                        help="keys where lower is better")
    parser.add_argument("--threshold", type=float, default=1.0, metavar="PCT",
                        help="changes within ±PCT percent count as the same (default 1.0)")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    args = parser.parse_args(argv)
    if args.threshold < 0:
        parser.error("--threshold must be 0 or more")
    try:
        a, b = load(args.a), load(args.b)
    except InputError as exc:
        print(f"compare_ab.py: {exc}", file=sys.stderr)
        return EXIT_ERROR
    result = compare(a, b, _keys(args.higher_better), _keys(args.lower_better), args.threshold)
    if not result["rows"]:
        print("compare_ab.py: the two files share no numeric keys", file=sys.stderr)
        return EXIT_ERROR
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print(render(result, args.a, args.b))
    return result["exit_code"]


if __name__ == "__main__":
    raise SystemExit(main())
