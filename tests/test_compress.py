"""Compression per content type with real headroom-ai, offline, and the critical-token floor."""

from __future__ import annotations

import ast
import importlib.util
import json
import random
import sys

import pytest

from helix_context.answer.compress import Compressed, Compressor, critical_tokens
from helix_context.tokens import count_tokens

needs_headroom = pytest.mark.skipif(importlib.util.find_spec("headroom") is None, reason="headroom-ai not installed")

# --------------------------------------------------------------------------- #
# realistic inputs
# --------------------------------------------------------------------------- #

PY_MODULE = '''"""Invoice export for the billing service.

Reads settled orders from the ledger and writes one CSV per customer. The files
are picked up nightly by the accounting system, so the column order and the
file names must not change without telling finance first.
"""

from __future__ import annotations

import csv
import logging
from pathlib import Path

logger = logging.getLogger(__name__)

EXPORT_DIR = Path("/srv/billing/exports")
VAT_RATE = 0.21


class LedgerReader:
    """Reads settled orders from the ledger database.

    The ledger is append-only: an order appears once it is settled and is never
    updated afterwards. Corrections are new rows with a negative amount, which
    is why totals are always computed here and never stored.
    """

    def __init__(self, connection) -> None:
        # the connection is owned by the caller; we never close it
        self.connection = connection

    def settled(self, since: str) -> list[dict]:
        """Return the orders settled since the given ISO date.

        Rows come back oldest first, which keeps the export stable between
        runs and makes the files easy to compare by eye.
        """
        cursor = self.connection.execute(
            "SELECT order_id, customer_id, amount_cents FROM ledger WHERE settled_at >= ? ORDER BY settled_at",
            (since,),
        )
        rows = []
        for order, customer, amount in cursor:
            # skip zero rows: they are placeholders written by the old importer
            if amount == 0:
                continue
            rows.append({"order": order, "customer": customer, "amount": amount})
        return rows


def gross(amount_cents: int) -> int:
    """Add VAT to a net amount, rounding half up to whole cents.

    Finance asked for half-up rounding in 2024; before that the export used
    banker's rounding, so older files can differ by one cent per line.
    """
    return int(amount_cents * (1 + VAT_RATE) + 0.5)


def export_customer(customer: str, rows: list[dict], out_dir: Path = EXPORT_DIR) -> Path:
    """Write one customer's rows to a CSV file and return its path.

    The file is written next to its final name first and then renamed, so the
    accounting system never sees a half-written file.
    """
    path = out_dir / f"invoices-{customer}.csv"
    tmp = path.with_suffix(".part")
    with tmp.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["order", "net", "gross"])
        for row in rows:
            writer.writerow([row["order"], row["amount"], gross(row["amount"])])
    tmp.replace(path)
    logger.info("wrote %s", path)
    return path
'''


def _make_log() -> tuple[str, list[str]]:
    rng = random.Random(7)
    lines, error_ids = [], []
    ms = 0
    for i in range(240):
        ms += rng.randint(5, 900)
        ts = f"2026-11-20T10:{(ms // 60000) % 60:02d}:{(ms // 1000) % 60:02d}.{ms % 1000:03d}Z"
        if i in (41, 97, 158, 203, 219):
            rid = f"req-{0x5A3F00 + i:06x}"
            error_ids.append(rid)
            lines.append(
                f"{ts} ERROR [worker-3] payment capture failed request_id={rid} "
                f"order_id=ORD-{10000 + i} code=E{500 + i % 7} upstream=https://pay.example.com/v2/capture"
            )
        elif i % 29 == 11:
            lines.append(f"{ts} WARN  [worker-1] slow response from inventory took_ms={rng.randint(900, 3000)}")
        else:
            lines.append(
                f"{ts} INFO  [worker-{i % 4}] processed batch size={rng.randint(10, 60)} "
                f"queue=orders lag_ms={rng.randint(1, 40)}"
            )
    return "\n".join(lines) + "\n", error_ids


LOG, LOG_ERROR_IDS = _make_log()

DIFF = '''diff --git a/helix_context/retrieve/fusion.py b/helix_context/retrieve/fusion.py
index 3f2a9c1..8b7d0e4 100644
--- a/helix_context/retrieve/fusion.py
+++ b/helix_context/retrieve/fusion.py
@@ -12,24 +12,28 @@ from dataclasses import dataclass
 import math
 from typing import Iterable
 
 from helix_context.models import Gene
 
 
 @dataclass(frozen=True)
 class Scored:
     gene_id: str
     score: float
 
 
-def fuse(results: Iterable[dict[str, float]], weights: dict[str, float]) -> list[Scored]:
-    """Weighted sum of normalised scorer outputs."""
+def fuse(results: dict[str, dict[str, float]], weights: dict[str, float], k: int = 60) -> list[Scored]:
+    """Weighted sum of normalised scorer outputs (or RRF when k > 0)."""
     totals: dict[str, float] = {}
-    for name, scores in results:
+    for name, scores in results.items():
         top = max(scores.values(), default=0.0) or 1.0
         w = weights.get(name, 0.0)
         for gene_id, s in scores.items():
             totals[gene_id] = totals.get(gene_id, 0.0) + w * s / top
+    if not totals:
+        return []
     ranked = sorted(totals.items(), key=lambda kv: kv[1], reverse=True)
     return [Scored(g, s) for g, s in ranked]
 
 
@@ -58,14 +62,16 @@ def score_floor(ranked: list[Scored], fraction: float) -> list[Scored]:
     if not ranked:
         return []
     top = ranked[0].score
-    cutoff = top * fraction
+    cutoff = top * max(0.0, min(1.0, fraction))
     kept = [r for r in ranked if r.score >= cutoff]
     return kept
 
 
 def explain(ranked: list[Scored]) -> str:
     lines = []
     for r in ranked:
         lines.append(f"{r.gene_id[:12]} {r.score:.3f}")
     return "\\n".join(lines)
+
+
+MAX_FUSED = 200
diff --git a/tests/retrieve/test_fusion.py b/tests/retrieve/test_fusion.py
index 1d4e5f6..a9b8c7d 100644
--- a/tests/retrieve/test_fusion.py
+++ b/tests/retrieve/test_fusion.py
@@ -1,9 +1,17 @@
 from helix_context.retrieve.fusion import Scored, fuse, score_floor
 
 
 def test_fuse_orders_by_weighted_score():
-    out = fuse([("fts", {"a": 2.0, "b": 1.0})], {"fts": 1.0})
+    out = fuse({"fts": {"a": 2.0, "b": 1.0}}, {"fts": 1.0})
     assert [s.gene_id for s in out] == ["a", "b"]
 
 
 def test_score_floor_keeps_top():
     ranked = [Scored("a", 1.0), Scored("b", 0.2)]
     assert [s.gene_id for s in score_floor(ranked, 0.5)] == ["a"]
+
+
+def test_fuse_empty_results():
+    assert fuse({}, {"fts": 1.0}) == []
+
+
+def test_score_floor_clamps_fraction():
+    assert len(score_floor([Scored("a", 1.0)], 1.7)) == 1
'''


def _make_json() -> str:
    rng = random.Random(3)
    records = []
    for i in range(40):
        records.append(
            {
                "id": 1000 + i,
                "service": ["billing", "search", "auth", "ingest"][i % 4],
                "status": "failed" if i in (9, 27) else "ok",
                "latency_ms": rng.randint(20, 400),
                "host": f"node-{i % 5}.dc1.internal",
                "commit": f"{rng.randint(0xA000000, 0xFFFFFFF):07x}",
            }
        )
    return json.dumps(records, indent=2)


JSON_RECORDS = _make_json()

PROSE = """Helix keeps a local index of everything you point it at. The index lives in a single SQLite file, so backing it up is as simple as copying that file while the server is stopped. Most people never need to think about it again after the first run.

When you ask a question, Helix looks for the passages that match it best. It combines keyword search with a small embedding model that runs on the CPU. The two scores are blended, and passages below a floor are dropped so that weak matches never crowd out strong ones. You can change the floor in helix.toml under retrieval.score_floor; the default of 0.35 works for most projects.

The answer is then trimmed to fit the model's context window. Long passages are compressed first: code keeps its signatures, logs keep their errors, and prose keeps the sentences that carry the most information. Nothing is sent anywhere. All of this happens on your machine, and it usually takes less than a tenth of a second.

If something looks wrong, the health page shows what is loaded and what is missing. A missing optional part never stops the server; it only makes one signal weaker. For example, without the embedding model Helix falls back to keyword search alone, which is still good at finding exact names such as load_config or /var/log/helix/server.log. Restarting the server from the tray menu reloads everything.

Updates are manual. Download the new release, stop the server, replace the files, and start it again. Your index is kept, and any schema changes are applied automatically on the first start after the update, usually within a few seconds.
"""

MARKDOWN = """# Installing Helix

Helix runs on Windows and Linux. It needs Python 3.11 or newer and about 400 MB of disk for the index and the models.

## Quick start

1. Install the package with `pip install helix-context`.
2. Run `helix ingest ~/projects/shop` to index a folder.
3. Start the server with `helix serve`; it listens on port 11437.

The first ingest of a large repository can take a few minutes. Later runs only look at files that changed, so they are fast.

## Configuration

Settings live in `~/.helix/helix.toml`. The most useful ones are:

- `retrieval.max_genes` limits how many passages one answer may use.
- `budget.token_budget` caps the size of the assembled context.

```toml
[proxy]
upstream_url = "http://127.0.0.1:11434"
```

## Troubleshooting

If the tray icon stays grey, the backend did not start. Open the log at `~/.helix/logs/server.log` and look for the first ERROR line. Most often another program already uses the port; change it with HELIX_SERVER_PORT and restart.
"""

CONFIG = """# Helix Context settings
[server]
host = "127.0.0.1"
port = 11437
log_level = "info"

[retrieval]
max_genes = 12
fusion = "weighted"
score_floor = 0.35
candidate_pool = 200

[budget]
token_budget = 12000
zone_enabled = false
default_context_window = 8192
"""


# --------------------------------------------------------------------------- #
# helpers
# --------------------------------------------------------------------------- #


@pytest.fixture(scope="module")
def compressor() -> Compressor:
    c = Compressor()
    assert c.available, c.reason
    return c


def _assert_floor(result: Compressed, source: str, tokens: list[str] | None = None) -> None:
    assert result.critical_kept == result.critical_total
    for tok in tokens if tokens is not None else critical_tokens(source):
        assert tok in result.text, f"lost critical token {tok!r}"


# --------------------------------------------------------------------------- #
# critical tokens
# --------------------------------------------------------------------------- #


def test_critical_tokens_find_technical_tokens():
    text = (
        "Open /var/log/helix/server.log or ./src/app/main.py (C:\\Users\\ana\\helix.toml on Windows).\n"
        "load_config and parseHeaders call InvoiceWriter.write via os.path.join.\n"
        "Listening on port 8080 after 3.75 s; build 9f86d08 at 0xdeadbeef, release v1.2.3.\n"
        "Set retries=3 and --log-level=debug; docs at https://example.com/docs/setup.\n"
    )
    found = critical_tokens(text)
    for tok in [
        "/var/log/helix/server.log",
        "./src/app/main.py",
        "C:\\Users\\ana\\helix.toml",
        "load_config",
        "parseHeaders",
        "InvoiceWriter.write",
        "os.path.join",
        "8080",
        "3.75",
        "9f86d08",
        "0xdeadbeef",
        "v1.2.3",
        "retries=3",
        "--log-level=debug",
        "https://example.com/docs/setup",
    ]:
        assert tok in found, tok


def test_critical_tokens_find_config_pairs():
    found = critical_tokens('port = 11437\nname: helix\ntimeout_s: 2.5\nupstream_url = "http://127.0.0.1:11434"\n')
    assert "port = 11437" in found
    assert "name: helix" in found
    assert "timeout_s: 2.5" in found
    assert 'upstream_url = "http://127.0.0.1:11434"' in found


def test_critical_tokens_ignore_plain_english():
    assert critical_tokens("The quick brown fox jumps over the lazy dog, and then it rests.") == []
    assert critical_tokens("Note: this is important. It happened in May, e.g. on a Monday.") == []
    assert critical_tokens("") == []


def test_critical_tokens_are_unique_and_in_order():
    found = critical_tokens("user_id=42 then user_id=42 again, then order_id=7 and user_id=42")
    assert found == ["user_id=42", "order_id=7"]


# --------------------------------------------------------------------------- #
# per content type, real headroom
# --------------------------------------------------------------------------- #


@needs_headroom
def test_python_module_compresses_parses_and_keeps_critical_tokens(compressor):
    r = compressor.compress(PY_MODULE, "code", "python")
    assert r.method == "headroom:code"
    assert r.tokens < r.original_tokens
    assert r.tokens == count_tokens(r.text)
    ast.parse(r.text)
    _assert_floor(r, PY_MODULE)


@needs_headroom
def test_python_without_language_hint_still_parses(compressor):
    r = compressor.compress(PY_MODULE, "code")
    ast.parse(r.text)
    _assert_floor(r, PY_MODULE)


@needs_headroom
def test_log_keeps_every_error_line(compressor):
    r = compressor.compress(LOG, "log")
    assert r.method == "headroom:log"
    assert r.tokens < r.original_tokens * 0.5
    for rid in LOG_ERROR_IDS:
        assert f"request_id={rid}" in r.text
    error_lines = [line for line in LOG.splitlines() if " ERROR " in line]
    for line in error_lines:
        assert line in r.text
    assert r.critical_kept == r.critical_total


@needs_headroom
def test_diff_keeps_changed_lines(compressor):
    r = compressor.compress(DIFF, "diff")
    assert r.method == "headroom:diff"
    assert r.tokens < r.original_tokens
    changed = [line for line in DIFF.splitlines() if line.startswith(("+", "-")) and line.strip("+-").strip()]
    for line in changed:
        assert line in r.text, line
    assert "tests/retrieve/test_fusion.py" in r.text
    assert r.critical_kept == r.critical_total


@needs_headroom
def test_json_records_compress_and_keep_values(compressor):
    r = compressor.compress(JSON_RECORDS, "json", query="which service failed")
    assert r.method == "headroom:json"
    assert r.tokens < r.original_tokens
    _assert_floor(r, JSON_RECORDS)
    records = json.loads(JSON_RECORDS)
    for rec in records:
        assert str(rec["id"]) in r.text
        assert rec["commit"] in r.text


@needs_headroom
def test_prose_compresses_and_keeps_critical_tokens(compressor):
    r = compressor.compress(PROSE, "text", query="how do I back up the index")
    assert r.method == "headroom:text"
    assert r.tokens < r.original_tokens
    _assert_floor(r, PROSE)
    assert "SQLite" in r.text  # the sentence the query is about


@needs_headroom
def test_markdown_keeps_headings_fences_and_critical_tokens(compressor):
    r = compressor.compress(MARKDOWN, "markdown")
    assert r.tokens < r.original_tokens
    _assert_floor(r, MARKDOWN)
    for heading in ("# Installing Helix", "## Quick start", "## Configuration", "## Troubleshooting"):
        assert heading in r.text
    assert r.text.count("```") % 2 == 0


@needs_headroom
def test_config_passes_through(compressor):
    r = compressor.compress(CONFIG, "config")
    assert r.method == "none"
    assert r.text == CONFIG
    assert r.critical_kept == r.critical_total > 0


@needs_headroom
def test_small_input_passes_through(compressor):
    small = "def add(a, b):\n    return a + b\n"
    r = compressor.compress(small, "code", "python")
    assert r.method == "none"
    assert r.text == small
    assert r.tokens == r.original_tokens == count_tokens(small)


@needs_headroom
def test_empty_input(compressor):
    r = compressor.compress("", "text")
    assert r.text == ""
    assert r.tokens == 0


@needs_headroom
def test_raw_keep_rate_is_reported(compressor):
    r = compressor.compress(LOG, "log")
    assert 0 <= r.critical_kept_raw <= r.critical_kept == r.critical_total


# --------------------------------------------------------------------------- #
# max_tokens
# --------------------------------------------------------------------------- #


@needs_headroom
def test_max_tokens_cut_prefers_what_the_query_mentions(compressor):
    target = LOG_ERROR_IDS[-1]
    r = compressor.compress(LOG, "log", query=f"why did {target} fail", max_tokens=120)
    assert r.tokens <= 120
    assert count_tokens(r.text) <= 120
    assert target in r.text
    assert r.critical_kept < r.critical_total  # the budget forced a cut


@needs_headroom
def test_max_tokens_cut_keeps_python_parsing(compressor):
    r = compressor.compress(PY_MODULE, "code", "python", max_tokens=150)
    assert r.tokens <= 150
    ast.parse(r.text)


@needs_headroom
def test_max_tokens_cut_on_config(compressor):
    r = compressor.compress(CONFIG, "config", query="what is the token budget", max_tokens=30)
    assert r.tokens <= 30
    assert "token_budget = 12000" in r.text


# --------------------------------------------------------------------------- #
# disabled, missing, failing
# --------------------------------------------------------------------------- #


def test_disabled_compressor_truncates_to_max_tokens():
    c = Compressor(use_headroom=False)
    assert not c.available
    assert "disabled" in c.reason
    r = c.compress(PROSE, "text", max_tokens=50)
    assert r.method == "truncate"
    assert r.tokens <= 50
    assert PROSE.startswith(r.text)
    assert r.original_tokens == count_tokens(PROSE)


def test_disabled_compressor_passes_through_without_budget():
    r = Compressor(use_headroom=False).compress(LOG, "log")
    assert r.method == "none"
    assert r.text == LOG


def test_helix_disable_headroom_env(monkeypatch):
    monkeypatch.setenv("HELIX_DISABLE_HEADROOM", "1")
    c = Compressor()
    assert not c.available
    assert "HELIX_DISABLE_HEADROOM" in c.reason


def test_missing_headroom_falls_back(monkeypatch):
    def no_headroom(self):
        raise ImportError("No module named 'headroom'")

    monkeypatch.setattr(Compressor, "_load", no_headroom)
    c = Compressor()
    assert not c.available
    assert "not installed" in c.reason
    r = c.compress(PY_MODULE, "code", "python", max_tokens=40)
    assert r.method == "truncate"
    assert r.tokens <= 40


@needs_headroom
def test_raising_compressor_falls_back_without_raising():
    c = Compressor()
    assert c.available

    class Boom:
        def compress(self, *args, **kwargs):
            raise RuntimeError("rust panic")

    c._impl["log"] = Boom()
    r = c.compress(LOG, "log", max_tokens=80)
    assert r.method == "truncate"
    assert r.tokens <= 80
    assert LOG.startswith(r.text)
    r = c.compress(LOG, "log")
    assert r.method == "none"
    assert r.text == LOG


# --------------------------------------------------------------------------- #
# offline
# --------------------------------------------------------------------------- #


@needs_headroom
def test_offline_environment_and_no_heavy_imports(compressor):
    import os

    for kind, text in (("code", PY_MODULE), ("log", LOG), ("diff", DIFF), ("json", JSON_RECORDS), ("text", PROSE)):
        compressor.compress(text, kind)
    assert os.environ.get("HEADROOM_OFFLINE") == "1"
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    assert os.environ.get("HEADROOM_CCR_BACKEND") == "memory"
    assert os.environ.get("HEADROOM_TELEMETRY") == "off"
    assert os.environ.get("TIKTOKEN_CACHE_DIR")
    assert "litellm" not in sys.modules
    assert not any("kompress" in name for name in sys.modules)
    info = compressor.info()
    assert info["available"] and info["code_compression"]


@needs_headroom
def test_concurrent_calls_agree(compressor):
    from concurrent.futures import ThreadPoolExecutor

    jobs = [(LOG, "log"), (DIFF, "diff"), (PROSE, "text"), (PY_MODULE, "code"), (JSON_RECORDS, "json")] * 3
    expected = {kind: compressor.compress(text, kind).text for text, kind in jobs[:5]}
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda job: (job[1], compressor.compress(job[0], job[1]).text), jobs))
    for kind, text in results:
        assert text == expected[kind]
