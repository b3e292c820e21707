"""One index, many projects, over real HTTP: every source has a project, questions stay in theirs,
and a message about nothing indexed gets silence (the API, the proxy with the real `openai`
client, the CLI in its own process). MCP roots scoping is in tests/test_mcp.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import openai
import pytest
from openai import OpenAI

from helix_context.config import Settings
from helix_context.genome.store import Genome
from helix_context.sources.projects import default_project, ensure_projects
from tests.server.test_proxy import UpstreamStub
from tests.sources.conftest import fast_settings, wait_until, write

REPO = Path(__file__).resolve().parents[2]

LEDGER = '''"""Quarterly ledger reconciliation for the billing service."""

LEDGER_TOLERANCE_CENTS = 5


def load_config(path):
    """Read the billing settings: currency, ledger tolerance and the bank feed URL."""
    return {"currency": "EUR", "tolerance": LEDGER_TOLERANCE_CENTS, "feed": path}


def reconcile_ledger_quarterly(entries, bank_rows):
    """Match ledger entries to bank rows for one quarter; unmatched entries are returned."""
    matched = {row.ref for row in bank_rows}
    return [entry for entry in entries if entry.ref not in matched]


class InvoiceSettlement:
    """Settles paid invoices against the ledger every night."""

    def settle_invoice(self, invoice, payment):
        return invoice.amount_cents - payment.amount_cents <= LEDGER_TOLERANCE_CENTS
'''

WEATHER = '''"""Rainfall forecasts for the weather station."""


def load_config(path):
    """Read the station settings: sensor calibration, forecast horizon and the radar feed URL."""
    return {"horizon_hours": 48, "radar": path}


def forecast_rainfall_hourly(pressure_readings, humidity_readings):
    """Predict rainfall in millimetres for each of the next hours from barometric pressure and humidity."""
    drops = [a - b for a, b in zip(pressure_readings, pressure_readings[1:])]
    return [max(0.0, d * h / 100.0) for d, h in zip(drops, humidity_readings)]


class RadarCalibration:
    """Corrects the radar's reflectivity for the antenna's elevation angle."""

    def calibrate_radar(self, reflectivity, elevation_deg):
        return reflectivity * (1.0 + elevation_deg / 90.0)
'''


@pytest.fixture
def two_projects(settings: Settings, server_factory, tmp_path: Path):
    """The real app with two folders added as sources without a project: `billing` and `forecast`."""
    billing = write(tmp_path / "work" / "billing" / "ledger.py", LEDGER).parent
    forecast = write(tmp_path / "work" / "forecast" / "weather.py", WEATHER).parent
    stub = UpstreamStub(kinds=("openai",)).__enter__()
    cfg = fast_settings(settings, watch=True).replace(
        proxy={"upstream_url": stub.url, "upstream_kind": "openai", "timeout_s": 5.0, "connect_timeout_s": 1.0,
               "model_projects": ("gpt-4o*=forecast",)})
    server = server_factory(cfg)
    with server.client() as client:
        for folder in (billing, forecast):
            assert client.post("/sources", json={"path": str(folder)}).status_code == 202
    assert server.app.state.sources.wait_idle(60)
    server.billing, server.forecast, server.stub = billing, forecast, stub
    yield server
    stub.__exit__(None, None, None)


def _post(server, route: str, **body):
    with server.client() as client:
        return client.post(route, json=body)


def test_sources_get_their_folder_name_as_project_and_show_it(two_projects) -> None:
    with two_projects.client() as client:
        status = client.get("/sources").json()
    assert sorted(s["project"] for s in status["sources"]) == ["billing", "forecast"]
    assert "projects billing, forecast" in status["summary"]  # the tray's status line


def test_a_named_project_is_obeyed_by_every_route(two_projects) -> None:
    for project, folder in (("billing", two_projects.billing), ("forecast", two_projects.forecast)):
        r = _post(two_projects, "/fingerprint", query="load_config settings", project=project)
        assert r.status_code == 200, r.text
        results = r.json()["results"]
        assert results and all(h["project"] == project and h["source_id"].startswith(str(folder)) for h in results)
        packet = _post(two_projects, "/context/packet", query="load_config settings", project=[project]).json()
        items = packet["verified"] + packet["stale_risk"]
        assert packet["project"] == project and items and all(i["project"] == project for i in items)
        window = _post(two_projects, "/context", query="load_config settings", project=project).json()
        assert window["genes"] and all(g["project"] == project for g in window["genes"])
        assert str(folder) in window["expressed_context"]


def test_without_a_project_the_evidence_decides_and_each_item_says_its_project(two_projects) -> None:
    packet = _post(two_projects, "/context/packet", query="reconcile the ledger entries with the bank rows").json()
    items = packet["verified"] + packet["stale_risk"]
    assert packet["project"] == "billing" and items
    assert {i["project"] for i in items} == {"billing"}
    results = _post(two_projects, "/fingerprint", query="predict rainfall from barometric pressure").json()["results"]
    assert results[0]["project"] == "forecast" and {r["project"] for r in results} == {"forecast"}


RETRY = '''"""Retry a flaky call with exponential backoff (vendored into each service)."""

import time


def retry_with_backoff(call, attempts=5, base_delay_s=0.2):
    """Call `call` until it succeeds, sleeping twice as long after each failure."""
    for attempt in range(attempts):
        try:
            return call()
        except OSError:
            time.sleep(base_delay_s * 2 ** attempt)
    return call()
'''


def test_a_file_two_projects_share_is_found_in_each_under_its_own_path(settings: Settings, server_factory,
                                                                       tmp_path: Path) -> None:
    """Two services vendor the same helper (or two checkouts of one repository are two projects): the second
    copy's chunks were the first's genes, so its project held nothing of its own. A question scoped to it was
    answered with the other project's file, or refused as an unknown project. Within one project identical
    chunks are still stored once."""
    billing = write(tmp_path / "work" / "billing" / "ledger.py", LEDGER).parent
    write(billing / "vendor" / "retry.py", RETRY)
    write(billing / "vendor" / "retry_copy.py", RETRY)  # the same text twice in one project: one set of genes
    forecast = write(tmp_path / "work" / "forecast" / "weather.py", WEATHER).parent
    write(forecast / "vendor" / "retry.py", RETRY)
    server = server_factory(fast_settings(settings, watch=False))
    with server.client() as client:
        for folder in (billing, forecast):
            assert client.post("/sources", json={"path": str(folder)}).status_code == 202
    assert server.app.state.sources.wait_idle(60)
    for project, folder in (("billing", billing), ("forecast", forecast)):
        results = _post(server, "/fingerprint", query="retry a flaky call with exponential backoff",
                        project=project).json()["results"]
        assert "retry_with_backoff" in [r["symbol"] for r in results[:3]], results
        assert all(r["project"] == project and r["source_id"].startswith(str(folder)) for r in results), results
        window = _post(server, "/context", query="retry a flaky call with exponential backoff", project=project).json()
        assert str(folder / "vendor") in window["expressed_context"], window["expressed_context"][:500]
    genome = server.app.state.helix.genome
    held = genome.conn.execute("SELECT project, COUNT(*) FROM genes WHERE content = ? GROUP BY project",
                               (genome.conn.execute("SELECT content FROM genes g JOIN symbols s ON s.gene = g.id "
                                                    "WHERE s.name = 'retry_with_backoff' LIMIT 1").fetchone()[0],)
                               ).fetchall()
    assert sorted(held) == [("billing", 1), ("forecast", 1)], held


def test_a_project_name_no_scope_can_name_is_refused(two_projects, tmp_path: Path) -> None:
    folder = write(tmp_path / "work" / "payroll" / "pay.py", "def pay():\n    return 1\n").parent
    for name in ("pay,roll", "pay\u0000roll"):
        r = _post(two_projects, "/sources", path=str(folder), project=name)
        assert r.status_code == 400 and "comma or a control character" in r.json()["error"]["message"], r.text
        r = _post(two_projects, "/ingest", content="payroll notes", metadata={"path": "notes/pay.md", "project": name})
        assert r.status_code == 400, r.text


def test_unknown_project_is_refused_with_the_known_ones(two_projects) -> None:
    for route in ("/context", "/context/packet", "/fingerprint", "/context/refresh-plan"):
        r = _post(two_projects, route, query="load_config", project="payroll")
        assert r.status_code == 400, (route, r.text)
        message = r.json()["error"]["message"]
        assert "payroll" in message and "billing" in message and "forecast" in message


@pytest.mark.parametrize("query", ["", "   \n\t"])
def test_an_empty_query_is_one_clear_400_on_every_route(two_projects, query: str) -> None:
    for route in ("/context", "/context/packet", "/fingerprint", "/context/refresh-plan"):
        r = _post(two_projects, route, query=query)
        assert r.status_code == 400, (route, r.text)
        assert r.json()["error"]["message"].startswith("query is empty: say what you need context for"), route


def test_a_message_about_nothing_indexed_gets_silence_with_the_reason(two_projects) -> None:
    for text in ("write a haiku about autumn leaves", "What is the capital of France?",
                 "thanks, that's all for today"):
        window = _post(two_projects, "/context", query=text).json()
        assert window["expressed_context"] == "" and window["genes"] == [], text
        assert window["context_health"]["status"] == "silent" and window["context_health"]["reason"], text
        packet = _post(two_projects, "/context/packet", query=text, project="billing").json()
        assert packet["known_empty"] is True and packet["notes"][0].startswith("silent:"), text
    # on-topic questions keep their context
    window = _post(two_projects, "/context", query="how are paid invoices settled against the ledger?").json()
    assert "settle_invoice" in window["expressed_context"]


def test_a_project_whose_sources_are_missing_or_paused_is_known_empty_with_that_reason(two_projects) -> None:
    with two_projects.client() as client:
        client.post("/sources/pause")
        packet = client.post("/context/packet", json={"query": "load_config", "project": "forecast"}).json()
        assert packet["known_empty"] is True and "paused" in packet["notes"][0]
        client.post("/sources/resume")
    assert two_projects.app.state.sources.wait_idle(60)
    shutil.rmtree(two_projects.forecast)
    wait_until(lambda: any(s["state"] == "missing" for s in two_projects.app.state.sources.status()["sources"]),
               timeout=30, what="the forecast folder to be reported missing")
    packet = _post(two_projects, "/context/packet", query="load_config", project="forecast").json()
    assert packet["known_empty"] is True and "missing" in packet["notes"][0]
    assert not packet["verified"] and not packet["stale_risk"]


def test_the_proxy_scopes_by_header_or_model_and_stays_silent_off_topic(two_projects) -> None:
    client = OpenAI(base_url=f"{two_projects.url}/v1", api_key="x", max_retries=0, timeout=30)
    stub = two_projects.stub

    def system_texts() -> list[str]:
        return [m["content"] for m in stub.last_chat()["json"]["messages"] if m["role"] == "system"]

    raw = client.chat.completions.with_raw_response.create(
        model="llama3.1:8b", messages=[{"role": "user", "content": "write a haiku about autumn leaves"}])
    assert raw.headers["x-helix-context"] == "none" and raw.headers["x-helix-genes"] == "0"
    assert system_texts() == []  # the chat went upstream unchanged
    assert stub.last_chat()["json"]["messages"] == [{"role": "user", "content": "write a haiku about autumn leaves"}]
    with two_projects.client() as http:  # the dashboard's verdict counts show the silence
        summary = http.get("/dashboard/data").json()["summary"]
    assert summary["verdicts"].get("no_context", 0) >= 1

    raw = client.chat.completions.with_raw_response.create(
        model="llama3.1:8b", messages=[{"role": "user", "content": "what does load_config read?"}],
        extra_headers={"X-Helix-Project": "billing"})
    assert raw.headers["x-helix-context"] == "injected" and raw.headers["x-helix-project"] == "billing"
    (context,) = system_texts()
    assert "ledger.py" in context and "weather.py" not in context

    raw = client.chat.completions.with_raw_response.create(  # [proxy] model_projects: gpt-4o* → forecast
        model="gpt-4o-mini", messages=[{"role": "user", "content": "what does load_config read?"}])
    assert raw.headers["x-helix-project"] == "forecast"
    (context,) = system_texts()
    assert "weather.py" in context and "ledger.py" not in context

    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": "load_config"}],
                                       extra_headers={"X-Helix-Project": "payroll"})
    assert "billing" in str(err.value) and "forecast" in str(err.value)


def test_the_cli_scopes_to_the_source_it_runs_in(two_projects, helix_home: Path) -> None:
    env = {**os.environ, "HELIX_HOME": str(helix_home), "HELIX_EMBEDDING_ENABLED": "0", "HELIX_NER_ENABLED": "0",
           "PYTHONPATH": str(REPO), "HELIX_SERVER_PORT": str(two_projects.port)}
    for folder, project in ((two_projects.billing, "billing"), (two_projects.forecast, "forecast")):
        out = subprocess.run([sys.executable, "-m", "helix_context.cli", "fingerprint", "load_config settings",
                              "--json"], cwd=folder, env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        results = json.loads(out.stdout)
        assert results and {r["project"] for r in results} == {project}
    out = subprocess.run([sys.executable, "-m", "helix_context.cli", "fingerprint", "load_config", "--json",
                          "--project", "forecast"], cwd=two_projects.billing, env=env, capture_output=True,
                         text=True, timeout=120)
    assert {r["project"] for r in json.loads(out.stdout)} == {"forecast"}


def test_start_up_migration_gives_old_sources_a_project_and_relabels_their_genes(
        settings: Settings, tmp_path: Path) -> None:
    from helix_context.manager import HelixContextManager

    repo = tmp_path / "checkouts" / "ledger-repo"
    (repo / ".git").mkdir(parents=True)
    folder = write(repo / "services" / "billing" / "ledger.py", LEDGER).parent
    plain = write(tmp_path / "notes" / "weather.py", WEATHER).parent
    helix = HelixContextManager(settings.replace(embedding={"enabled": False}, ner={"enabled": False}))
    try:
        for path in (folder, plain):  # recorded before projects were required: no project, genes under another
            helix.genome.add_source(str(path), None, 0.0)
            helix.ingest_path(path, project="old-name")
        genome: Genome = helix.genome
        assert {r.project for r in genome.list_sources()} == {None}
        done = dict(ensure_projects(genome))
        assert done == {str(folder): "ledger-repo", str(plain): "notes"}
        assert default_project(folder) == "ledger-repo"  # the git top level's name
        rows = genome.conn.execute("SELECT DISTINCT project FROM genes WHERE retired_at IS NULL").fetchall()
        assert sorted(r[0] for r in rows) == ["ledger-repo", "notes"]
        assert ensure_projects(genome) == []  # once
        assert {h["project"] for h in helix.fingerprint("load_config", project="notes")} == {"notes"}
    finally:
        helix.close()
