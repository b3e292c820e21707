"""/context and the proxy serve what the files say now: a real tree is ingested, then files are
edited, deleted and renamed on disk (no re-ingest), and the real app is asked over HTTP."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from openai import OpenAI

from tests.server.upstream_stub import UpstreamStub

BILLING = '''"""Billing rules."""


def late_fee(days_late):
    """The fee charged for an overdue invoice."""
    rate = 0.015
    grace_days = 5
    return max(0, days_late - grace_days) * rate


def invoice_total(lines):
    """Sum of an invoice's line amounts."""
    return sum(line.amount for line in lines)
'''

SHIPPING = '''"""Shipping rules."""


def parcel_surcharge(weight_kg):
    """Extra charge for a heavy parcel."""
    threshold_kg = 23
    return 12 if weight_kg > threshold_kg else 0
'''

LATE_Q = "how is the late_fee for an overdue invoice computed, what rate and grace_days?"
PARCEL_Q = "parcel_surcharge for a heavy parcel weight_kg threshold_kg"


def _bump(path: Path) -> None:
    """A later mtime, as an editor save some seconds after ingest would leave."""
    later = time.time() + 30
    os.utime(path, (later, later))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    root.mkdir()
    (root / "billing.py").write_text(BILLING, encoding="utf-8")
    (root / "shipping.py").write_text(SHIPPING, encoding="utf-8")
    return root


@pytest.fixture
def server(settings, server_factory, tree: Path):
    cfg = settings.replace(embedding={"enabled": False}, ner={"enabled": False}, assembly={"headroom": False})
    srv = server_factory(cfg)
    report = srv.app.state.helix.ingest_path(tree, embed=False)
    assert report.files_ingested == 2
    return srv


def _context(server, query: str) -> dict:
    with server.client() as client:
        response = client.post("/context", json={"query": query})
    assert response.status_code == 200, response.text
    return response.json()


def test_unchanged_files_are_served_as_indexed_and_aligned(server):
    data = _context(server, LATE_Q)
    assert "grace_days = 5" in data["expressed_context"]
    health = data["context_health"]
    assert health["stale_dropped"] == 0 and health["refreshed_from_disk"] == 0
    assert "<live_check>" not in data["expressed_context"]


def test_edited_file_is_served_from_its_current_text(server, tree: Path):
    path = tree / "billing.py"
    path.write_text(BILLING.replace("grace_days = 5", "grace_days = 10").replace("0.015", "0.02"), encoding="utf-8")
    _bump(path)
    data = _context(server, LATE_Q)
    text = data["expressed_context"]
    assert "grace_days = 10" in text and "0.02" in text
    assert "grace_days = 5" not in text and "0.015" not in text
    health = data["context_health"]
    assert health["refreshed_from_disk"] >= 1 and health["status"] != "aligned"
    assert any("billing.py" in line for line in health["live_check"])


def test_edit_that_moves_the_function_serves_its_new_lines(server, tree: Path):
    path = tree / "billing.py"
    moved = BILLING.replace('"""Billing rules."""\n', '"""Billing rules."""\n\nimport math\nCURRENCY = "EUR"\n\n')
    path.write_text(moved, encoding="utf-8")
    _bump(path)
    data = _context(server, LATE_Q)
    new_start = moved.splitlines().index("def late_fee(days_late):") + 1
    srcs = [g["src"] for g in data["genes"]]
    assert any(s.endswith(f"billing.py:{new_start}-{new_start + 4}") or f"billing.py:{new_start}-" in s
               for s in srcs), srcs
    assert "grace_days = 5" in data["expressed_context"]


def test_deleted_file_is_left_out_and_reported(server, tree: Path):
    assert "threshold_kg = 23" in _context(server, PARCEL_Q)["expressed_context"]
    (tree / "shipping.py").unlink()
    data = _context(server, PARCEL_Q)
    assert "threshold_kg = 23" not in data["expressed_context"]
    health = data["context_health"]
    assert health["stale_dropped"] >= 1 and health["status"] != "aligned"
    assert any("shipping.py" in line and "gone" in line for line in health["live_check"])


def test_renamed_file_is_not_served_under_its_old_name(server, tree: Path):
    (tree / "shipping.py").rename(tree / "freight.py")
    data = _context(server, PARCEL_Q)
    assert "shipping.py" not in " ".join(g["src"] for g in data["genes"])
    assert data["context_health"]["stale_dropped"] >= 1


def test_rewritten_function_that_cannot_be_found_again_is_dropped(server, tree: Path):
    path = tree / "shipping.py"
    path.write_text('"""Shipping moved to the carrier API."""\n\nCARRIER = "acme"\n', encoding="utf-8")
    _bump(path)
    data = _context(server, PARCEL_Q)
    assert "threshold_kg" not in data["expressed_context"]
    assert data["context_health"]["stale_dropped"] >= 1


# ── the proxy injects what /context assembles: same rule ──


@pytest.fixture
def proxied(settings, server_factory, tree: Path, monkeypatch):

    with UpstreamStub() as stub:
        cfg = settings.replace(
            proxy={"upstream_url": stub.url, "upstream_kind": "auto", "timeout_s": 5.0, "connect_timeout_s": 1.0},
            embedding={"enabled": False}, ner={"enabled": False}, assembly={"headroom": False})
        srv = server_factory(cfg)
        srv.app.state.helix.ingest_path(tree, embed=False)
        client = OpenAI(base_url=f"{srv.url}/v1", api_key="x", max_retries=0, timeout=30)
        yield stub, client


def _injected(stub: UpstreamStub) -> str:
    body = stub.last_chat()["json"]
    return "\n".join(m["content"] for m in body["messages"] if m["role"] == "system")


def test_proxy_injects_current_text_after_an_edit(proxied, tree: Path):
    stub, client = proxied
    client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": LATE_Q}])
    assert "grace_days = 5" in _injected(stub)

    path = tree / "billing.py"
    path.write_text(BILLING.replace("grace_days = 5", "grace_days = 10"), encoding="utf-8")
    _bump(path)
    client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": LATE_Q}])
    injected = _injected(stub)
    assert "grace_days = 10" in injected and "grace_days = 5" not in injected
    assert "<live_check>" in injected and "billing.py" in injected


def test_proxy_injects_nothing_from_a_deleted_file_and_says_so(proxied, tree: Path):
    stub, client = proxied
    (tree / "shipping.py").unlink()
    client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": PARCEL_Q}])
    injected = _injected(stub)
    assert "threshold_kg = 23" not in injected and "parcel_surcharge(" not in injected
    report = injected.split("</live_check>")[0]
    assert "<live_check>" in report and "shipping.py" in report and "gone" in report


def test_proxy_after_a_rename_serves_no_text_under_the_old_name(proxied, tree: Path):
    stub, client = proxied
    (tree / "shipping.py").rename(tree / "freight.py")
    client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": PARCEL_Q}])
    injected = _injected(stub)
    assert "threshold_kg = 23" not in injected
    assert '<GENE src="' + str(tree / "shipping.py") not in injected
    assert "shipping.py" in injected.split("</live_check>")[0]


# ── `helix query` from a terminal: the same rule, in another process ──


def test_cli_query_serves_the_edited_text_and_says_what_it_re_read(tree: Path, settings):
    import subprocess
    import sys

    from tests.conftest import REPO

    env = {**os.environ, "PYTHONPATH": str(REPO), "HELIX_EMBEDDING_ENABLED": "false", "HELIX_NER_ENABLED": "false"}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "helix_context.cli", *args], capture_output=True, text=True,
                              timeout=120, env=env, cwd=REPO)

    assert cli("ingest", str(tree), "--no-embed", "--quiet").returncode == 0
    path = tree / "billing.py"
    path.write_text(BILLING.replace("grace_days = 5", "grace_days = 10"), encoding="utf-8")
    _bump(path)
    (tree / "shipping.py").unlink()
    done = cli("query", LATE_Q)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "grace_days = 10" in done.stdout and "grace_days = 5" not in done.stdout
    assert "[refreshed]" in done.stderr and "re-read from disk=" in done.stderr
