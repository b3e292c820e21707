"""Tokens an agent pays for the MCP answers: the renderers before issue 29 and now, same items.

    python benchmarks/bench_mcp_tokens.py [--json OUT] [--budget 4000]

A genome is built in a temporary HELIX_HOME from real code nobody here wrote (the
standard library's json, email, logging and http packages, no embeddings). For 20
questions the backend's answers are computed once (/context and /context/packet, through
the manager the HTTP routes call), then rendered twice: with the renderers as they were
before (kept below, verbatim in behaviour: the indented JSON dump and the `<GENE>` text
followed by an id list with every path again) and with helix_context/mcp_render.py. Both
renderings hold the same gene ids, which the script checks. Tokens are counted with
helix_context.tokens.count_tokens (cl100k_base). Target: after <= 60 % of before. For
helix_context the excerpt text itself (the compressed file content, identical in both)
is printed apart, with the ratio of what surrounds it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _results import write_results

PACKAGES = ("json", "email", "logging", "http")
QUESTIONS = [
    "how does json decode a string with escape sequences",
    "where is the JSONDecodeError raised with line and column",
    "how does the json encoder handle circular references",
    "sort_keys and indent options when dumping json",
    "how are non-ASCII characters escaped by json.dumps",
    "parse an email message from bytes with a policy",
    "how does email header folding work for long lines",
    "where are MIME multipart boundaries generated",
    "decode a quoted-printable email body",
    "email address parsing of display name and addr-spec",
    "how does a RotatingFileHandler decide to roll over",
    "logging basicConfig force and handlers arguments",
    "where is the logger hierarchy resolved from dotted names",
    "how does a LoggerAdapter add extra context",
    "logging Formatter formatException and stack info",
    "http client chunked transfer encoding reading",
    "how does HTTPConnection send request headers",
    "parse cookies with SimpleCookie and Morsel",
    "BaseHTTPRequestHandler parse_request and the request line",
    "http status codes enum and their phrases",
]


# ── the renderers as they were before issue 29 (helix_context/mcp_server.py) ──


def before_dump(data: Any) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False, default=str)


def before_context(data: dict[str, Any]) -> str:
    health = data.get("context_health") or {}
    lines = [data.get("expressed_context", "").rstrip(), ""]
    lines.append(f"[context_health status={health.get('status')} coverage={health.get('coverage', 0):.2f} "
                 f"freshness={health.get('freshness', 0):.2f} tier={data.get('tier')} tokens={data.get('tokens')} "
                 f"genes {health.get('genes_expressed')}/{health.get('genes_available')}]")
    genes = data.get("genes") or []
    if genes:
        lines.append("[gene ids (open with helix_gene_get / helix_neighbors):]")
        lines.extend(f"{g.get('gene_id')} {g.get('src')}" for g in genes)
    return "\n".join(lines)


def _ids(text: str) -> set[str]:
    return set(re.findall(r"[0-9a-f]{32}", text))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="write the results here as JSON")
    parser.add_argument("--budget", type=int, default=4000, help="token budget of each /context answer")
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="helix-bench-mcp-"))
    os.environ["HELIX_HOME"] = str(home)
    from helix_context.config import load_config
    from helix_context.manager import HelixContextManager
    from helix_context.mcp_render import context_units, packet_units
    from helix_context.tokens import count_tokens, tokenizer_name

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    helix = HelixContextManager(load_config())
    started = time.perf_counter()
    report = helix.ingest_path([str(stdlib / p) for p in PACKAGES], embed=False)
    print(f"indexed {report.files_ingested} files, {report.genes_added} chunks in "
          f"{time.perf_counter() - started:.1f} s; tokens counted with {tokenizer_name()}", file=sys.stderr)

    rows = []
    totals = {"context_before": 0, "context_after": 0, "packet_before": 0, "packet_after": 0, "excerpts": 0}
    for question in QUESTIONS:
        window = helix.build_context(question, budget_tokens=args.budget).to_dict()
        packet = helix.packet(question, "edit").to_dict()
        ctx_before, ctx_after = before_context(window), "\n".join(context_units(window))
        pkt_before, pkt_after = before_dump(packet), "\n".join(packet_units(packet))
        if _ids(ctx_before) != _ids(ctx_after) or _ids(pkt_before) != _ids(pkt_after):
            print(f"the renderings of {question!r} name different gene ids", file=sys.stderr)
            return 1
        row = {"question": question, "items": len(packet["verified"]) + len(packet["stale_risk"]),
               "genes": len(window["genes"]),
               "context_before": count_tokens(ctx_before), "context_after": count_tokens(ctx_after),
               "packet_before": count_tokens(pkt_before), "packet_after": count_tokens(pkt_after),
               "excerpts": count_tokens(window["expressed_context"])}
        for key in totals:
            totals[key] += row[key]
        rows.append(row)
    helix.close()

    print(f"{'question':<58} {'genes':>5} {'ctx before':>10} {'after':>6} {'items':>5} {'pkt before':>10} {'after':>6}")
    for r in rows:
        print(f"{r['question'][:58]:<58} {r['genes']:>5} {r['context_before']:>10} {r['context_after']:>6} "
              f"{r['items']:>5} {r['packet_before']:>10} {r['packet_after']:>6}")
    ratios = {
        "helix_context": totals["context_after"] / max(1, totals["context_before"]),
        "helix_context_packet": totals["packet_after"] / max(1, totals["packet_before"]),
    }
    ex = totals["excerpts"]
    ratios["helix_context_beyond_excerpts"] = (totals["context_after"] - ex) / max(1, totals["context_before"] - ex)
    all_before = totals["context_before"] + totals["packet_before"]
    all_after = totals["context_after"] + totals["packet_after"]
    ratios["both"] = all_after / max(1, all_before)
    print()
    print(f"helix_context         before {totals['context_before']:>7} tokens  after {totals['context_after']:>7}  "
          f"= {ratios['helix_context']:.1%}")
    print(f"  of which the excerpts themselves (the same text in both): {ex} tokens; the rest "
          f"{totals['context_before'] - ex} -> {totals['context_after'] - ex} = {ratios['helix_context_beyond_excerpts']:.1%}")
    print(f"helix_context_packet  before {totals['packet_before']:>7} tokens  after {totals['packet_after']:>7}  "
          f"= {ratios['helix_context_packet']:.1%}  (target <= 60 %)")
    print(f"both                  before {all_before:>7} tokens  after {all_after:>7}  = {ratios['both']:.1%}")
    write_results(args.json, {"rows": rows, "totals": totals, "ratios": ratios, "tokenizer": tokenizer_name()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
