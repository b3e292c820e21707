"""Retrieval, assembly and packets on a real genome built from real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helix_context import HelixContextManager
from helix_context.retrieve.budget import zone_cap
from helix_context.retrieve.query import extract

FILES = {
    "app/config.toml": '[server]\nport = 11437\nhost = "127.0.0.1"\n\n[genome]\npath = "~/.helix/genome.db"\n',
    "app/users.py": (
        '"""User records."""\n\n\n'
        "def getUserName(user_id: int) -> str:\n"
        '    """Look a user\'s display name up in the directory."""\n'
        "    return DIRECTORY[user_id].display_name\n\n\n"
        "def delete_user_record(user_id: int) -> None:\n"
        "    DIRECTORY.pop(user_id, None)\n"
    ),
    "app/billing.py": (
        "INVOICE_DUE_DAYS = 30\n\n\n"
        "def compute_invoice_total(lines):\n"
        '    """Sum invoice lines including tax."""\n'
        "    return sum(line.amount * (1 + line.tax_rate) for line in lines)\n"
    ),
    "docs/deploy.md": (
        "# Deploying\n\n## Docker\n\nBuild the image with `docker build -t helix .` and run it.\n\n"
        "## Kubernetes\n\nApply the manifests in deploy/k8s; the service listens on port 11437.\n"
    ),
    "logs/worker.log": (
        "2026-11-01T10:00:00 INFO job=1 started\n2026-11-01T10:00:01 INFO job=1 done\n"
        "2026-11-01T10:00:02 ERROR job=2 failed: connection refused to db-primary:5432\n"
    ),
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture
def loaded(helix: HelixContextManager, project: Path) -> HelixContextManager:
    helix.ingest_path(project)
    return helix


def top_path(helix: HelixContextManager, query: str) -> str:
    results = helix.fingerprint(query, max_results=5)
    assert results, f"nothing for {query!r}"
    return results[0]["source_id"]


def test_query_signals() -> None:
    qs = extract('Where does getUserName read "display name" in app/users.py? db', {"db": ("database",)})
    assert "getUserName" in qs.identifiers
    assert {"get", "user", "name"} <= set(qs.identifier_parts)
    assert "users" in qs.path_tokens and "users.py" in qs.path_tokens
    assert "display name" in qs.phrases
    assert "database" in qs.expansions
    assert "where" not in qs.terms


def test_finds_the_right_chunk(loaded: HelixContextManager, project: Path) -> None:
    assert top_path(loaded, "which port does the server listen on").endswith(("config.toml", "deploy.md"))
    assert top_path(loaded, "get_user_name").endswith("users.py")
    assert top_path(loaded, "invoice total with tax").endswith("billing.py")
    assert top_path(loaded, "why did job 2 fail connection refused").endswith("worker.log")
    result = loaded.fingerprint("compute_invoice_total", max_results=3)[0]
    assert result["start_line"] <= 4 <= result["end_line"]
    assert set(result) == {"gene_id", "source_id", "project", "symbol", "kind", "start_line", "end_line", "score",
                           "signals"}
    assert result["symbol"] == "compute_invoice_total" and result["kind"] == "function"
    assert result["signals"] and all(isinstance(v, float) for v in result["signals"].values())


def test_path_in_query_steers_to_that_file(loaded: HelixContextManager) -> None:
    results = loaded.fingerprint("port in deploy.md", max_results=5)
    assert results[0]["source_id"].endswith("deploy.md")
    assert "path" in results[0]["signals"]


def test_abstains_when_nothing_relevant(loaded: HelixContextManager) -> None:
    window = loaded.build_context("lattice quantum chromodynamics gluon propagator")
    assert window.tier == "abstain"
    assert window.expressed_context == ""
    assert window.context_health.status == "silent"  # the message is about nothing indexed: says so
    assert window.context_health.reason
    packet = loaded.packet("lattice quantum chromodynamics gluon propagator", task_type="explain")
    assert packet.known_empty and packet.notes


def test_expressed_context_format_and_budget(loaded: HelixContextManager) -> None:
    window = loaded.build_context("server port host configuration", budget_tokens=400)
    text = window.expressed_context
    assert text.startswith("<expressed_context>") and text.rstrip().endswith("</expressed_context>")
    assert '<GENE src="' in text and "config.toml:1-" in text
    assert 'facts="' in text and "port=11437" in text
    assert window.tokens <= 400
    health = window.context_health
    assert health.status in ("aligned", "sparse") and health.genes_expressed >= 1
    assert 0 <= health.coverage <= 1 and 0 <= health.freshness <= 1


def test_the_token_count_a_window_reports_is_its_texts_count(loaded: HelixContextManager, project: Path) -> None:
    """The window's count is summed from its parts (no text is tokenized twice); it must still be the
    count of the text the model receives, whatever the genes end or start with."""
    from helix_context.tokens import count_tokens

    odd = {
        "odd/brackets.py": "def shipping_quote(order):\n    return {'total': (order.weight * RATE)}\n",
        "odd/spaced.py": "\n\n\ndef shipping_label(order):  \n    return  )  \n   \n",
        "odd/quotes.py": 'SHIPPING_NOTE = """it\'s fragile: handle with care \u2026"""\n',
        "odd/unicode.md": "# Shipping \u00e9t\u00e9\n\nLes colis partent \u00e0 9\u00a0h \u2014 shipping r\u00e8gles \U0001f69a\n",
        "odd/long.py": "\n".join(f"def shipping_rule_{i}(x):\n    return x * {i} + OFFSET_{i}  # shipping rule {i}"
                                  for i in range(120)),
    }
    for rel, text in odd.items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(text, encoding="utf-8")
    loaded.ingest_path(project)
    windows = [loaded.build_context(q, budget_tokens=b, model=m)
               for q in ("shipping quote label rules", "server port host configuration", "shipping")
               for b in (200, 900, 6000) for m in (None, "qwen2.5:0.5b")]
    for mode in ("condensed", "minimal", "none"):
        manager = HelixContextManager(loaded.settings.replace(assembly={"decoder_mode": mode}), genome=loaded.genome)
        windows.append(manager.build_context("shipping quote label rules", budget_tokens=2000))
    assert sum(len(w.genes) for w in windows) > 20 and any(w.layout == "small" and "<answer_slate>" in w.expressed_context
                                                            for w in windows)
    assert any(g.method != "none" for w in windows for g in w.genes)  # compressed bodies are counted too
    for window in windows:
        assert window.tokens == count_tokens(window.expressed_context), window.expressed_context[:200]
        assert window.tokens <= window.budget_tokens


def test_small_models_get_the_answer_slate_first(loaded: HelixContextManager) -> None:
    window = loaded.build_context("server port", model="qwen2.5:0.5b")
    assert window.layout == "small"
    body = window.expressed_context
    assert body.index("<answer_slate>") < body.index("<GENE")
    assert "port=11437" in body.split("</answer_slate>")[0]
    big = loaded.build_context("server port", model="llama3.1:70b")
    assert big.layout == "standard" and "<answer_slate>" not in big.expressed_context


def test_decoder_modes_change_the_framing(loaded: HelixContextManager) -> None:
    texts = {}
    for mode in ("full", "condensed", "minimal", "none"):
        manager = HelixContextManager(loaded.settings.replace(assembly={"decoder_mode": mode}), genome=loaded.genome)
        texts[mode] = manager.build_context("server port").expressed_context
    assert len(texts["full"]) > len(texts["condensed"]) > len(texts["minimal"]) > len(texts["none"])


def test_budget_zone_never_pushes_past_the_window(loaded: HelixContextManager) -> None:
    settings = loaded.settings.replace(budget={"zone_enabled": True})
    manager = HelixContextManager(settings, genome=loaded.genome)
    roomy = manager.build_context("server port configuration", prompt_tokens=100, context_window=8192)
    tight = manager.build_context("server port configuration", prompt_tokens=7000, context_window=8192)
    full = manager.build_context("server port configuration", prompt_tokens=8100, context_window=8192)
    assert roomy.zone.zone == "green" and tight.zone.zone == "red"
    assert tight.tokens <= 8192 - 7000 - settings.budget.answer_reserve_tokens
    assert len(tight.genes) <= len(roomy.genes)
    assert full.genes == () and full.expressed_context == ""
    cap = zone_cap(7000, 8192, 12000, 12, settings.budget)
    assert cap.max_tokens + 7000 + settings.budget.answer_reserve_tokens <= 8192


def test_coactivation_is_learned_and_survives_a_restart(loaded: HelixContextManager) -> None:
    for _ in range(3):
        loaded.build_context("server port configuration deploy")
    links = loaded.genome.coactivation_links()
    assert links and max(count for *_, count, _ in links) >= 3
    again = HelixContextManager(loaded.settings)
    assert again.genome.coactivation_links() == links
    again.close()


def test_project_scoping(helix: HelixContextManager, project: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.toml").write_text("[server]\nport = 9999\n")
    helix.ingest_path([project, other])
    scoped = helix.fingerprint("server port", project="other")
    assert scoped and all(r["source_id"].startswith(str(other)) for r in scoped)


def test_freshness_edit_then_delete(loaded: HelixContextManager, project: Path) -> None:
    query = "server port host configuration config.toml"
    first = loaded.packet(query, task_type="edit")
    assert any(i.source_id.endswith("config.toml") for i in first.verified)
    (project / "app" / "config.toml").write_text('[server]\nport = 12000\nhost = "0.0.0.0"\n')
    edited = loaded.packet(query, task_type="edit")
    item = next(i for i in edited.items if i.source_id.endswith("config.toml"))
    assert item.verdict == "needs_refresh"
    assert any(t.source_id.endswith("config.toml") and t.priority == 1 for t in edited.refresh_targets)
    (project / "app" / "config.toml").unlink()
    deleted = loaded.packet(query, task_type="edit")
    item = next(i for i in deleted.items if i.source_id.endswith("config.toml"))
    assert item.verdict == "needs_refresh" and item.source_check == "missing"


def test_bad_queries_get_clear_answers(loaded: HelixContextManager) -> None:
    for empty in ("", "   \t\n"):  # one clear refusal (a 400 over HTTP), not an empty answer
        with pytest.raises(ValueError, match="query is empty: say what you need context for"):
            loaded.build_context(empty)
        with pytest.raises(ValueError, match="query is empty"):
            loaded.packet(empty)
    assert loaded.build_context("port\x00\x01\x1b[31m config").tier != "error"
    huge = "server port " + "x" * 1_000_000
    assert loaded.build_context(huge).tokens <= loaded.settings.budget.token_budget
    with pytest.raises(ValueError, match="task_type"):
        loaded.packet("port", task_type="dance")
    for bad in (0, -5):
        with pytest.raises(ValueError, match="budget"):
            loaded.build_context("port", budget_tokens=bad)


def test_original_helix_packet_api(loaded: HelixContextManager) -> None:
    from helix_context.answer.packet import build_context_packet, get_refresh_targets

    packet = build_context_packet("server port", task_type="edit", genome=loaded.genome)
    assert packet.verified or packet.stale_risk
    assert isinstance(get_refresh_targets("server port", loaded.genome), list)


def test_fingerprint_batch_cli(loaded: HelixContextManager, tmp_path: Path) -> None:
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"id": "a", "query": "server port"}) + "\n"
                       + json.dumps({"id": 7, "query": "invoice total"}) + "\n")
    proc = subprocess.run([sys.executable, "-m", "helix_context.cli", "fingerprint", "--batch", str(queries),
                           "--max-results", "3"], capture_output=True, text=True, env=os.environ.copy(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [line["id"] for line in lines] == ["a", 7]
    assert lines[1]["results"][0]["source_id"].endswith("billing.py")
    assert set(lines[0]["results"][0]) == {"gene_id", "source_id", "project", "symbol", "kind", "start_line",
                                           "end_line", "score", "signals"}


def test_an_ingest_leaves_the_full_text_index_merged(loaded: HelixContextManager) -> None:
    """Each write adds full-text segments; the manager merges them after each ingest (genome/fulltext.py), so
    every word a question looks up is looked up in one place, not once per write."""
    for i in range(3):  # three more writes: three more segments
        loaded.ingest(f"invoice totals are rounded per line, note {i}", metadata={"path": f"notes{i}.md"}, embed=False)
    assert loaded.genome.merge_full_text() == 1  # nothing was left to merge
