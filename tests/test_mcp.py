"""The MCP server over real stdio, driven by the official `mcp` client library.

Each test spawns `python -m helix_context.mcp_server` exactly as Claude Code or
Claude Desktop would, against the real backend on a free port (or against
nothing, for the backend-down case).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from helix_context.config import Settings
from helix_context.tokens import count_tokens

mcp = pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters  # noqa: E402 - after importorskip("mcp"): the module is skipped without the package
from mcp.client.stdio import stdio_client  # noqa: E402 - after importorskip("mcp"): the module is skipped without the package

TOOLS = {"helix_context", "helix_context_packet", "helix_refresh_targets", "helix_ingest", "helix_stats",
         "helix_health", "helix_gene_get", "helix_neighbors"}
REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

LEDGER_PY = '''"""Quarterly ledger reconciliation for the billing service."""

LEDGER_TOLERANCE_CENTS = 5


def reconcile_ledger_quarterly(entries, bank_rows):
    """Match ledger entries to bank rows for one quarter; unmatched entries are returned."""
    matched = {row.ref for row in bank_rows}
    return [entry for entry in entries if entry.ref not in matched]


class LedgerAuditTrail:
    """Keeps every ledger reconciliation run so auditors can replay it."""

    def __init__(self, store):
        self.store = store

    def record_ledger_run(self, quarter, unmatched):
        self.store.append({"quarter": quarter, "unmatched": len(unmatched)})
'''


# ── plumbing ──


def _is_error(result: Any) -> bool:
    return bool(getattr(result, "is_error", getattr(result, "isError", False)))


def _text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def _schema(tool: Any) -> dict:
    return getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None) or {}


def _env(url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.startswith("HELIX_") or k in ("PATH", "HOME", "TIKTOKEN_CACHE_DIR")}
    env.update(HELIX_MCP_URL=url, PYTHONPATH=str(REPO), **extra)
    return env


def run_session(env: dict[str, str], body: Callable[[ClientSession], Awaitable[Any]], errlog: Path) -> Any:
    async def main() -> Any:
        params = StdioServerParameters(command=sys.executable, args=["-m", "helix_context.mcp_server"], env=env,
                                       cwd=str(REPO))
        with errlog.open("a", encoding="utf-8") as err:
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write) as session:
                    await asyncio.wait_for(session.initialize(), 60)
                    return await body(session)

    return asyncio.run(main())


def _fields(text: str) -> dict[str, Any]:
    """helix_stats / helix_health: one `key: compact JSON` line per top-level key."""
    out: dict[str, Any] = {}
    for line in text.splitlines():
        key, _, value = line.partition(": ")
        out[key] = json.loads(value)
    return out


async def read_pages(session: ClientSession, cap: int, name: str, **arguments: Any) -> list[str]:
    """Every page of one answer, following the notes; each page must fit the cap."""
    pages: list[str] = []
    while True:
        error, text = await call(session, name, **arguments, page=len(pages) + 1)
        assert not error, text
        assert count_tokens(text) <= cap, (len(pages) + 1, count_tokens(text))
        pages.append(text)
        match = re.search(r"page (\d+) of (\d+)", text)
        if match is None or match.group(1) == match.group(2):
            return pages
        assert f"page={len(pages) + 1}" in text
        assert len(pages) < 100


async def call(session: ClientSession, name: str, **arguments: Any) -> tuple[bool, str]:
    result = await asyncio.wait_for(session.call_tool(name, arguments), 120)
    return _is_error(result), _text(result)


@pytest.fixture
def backend(settings: Settings, server_factory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """The real backend (with the gene routes), ingest allowed under tmp_path/allowed; lean parts for speed."""

    allowed = tmp_path / "allowed"
    allowed.mkdir()
    lean = settings.replace(server={"allowed_ingest_roots": (str(allowed),)}, embedding={"enabled": False},
                            ner={"enabled": False})
    server = server_factory(lean)
    server.allowed = allowed
    return server


# ── tests ──


def test_every_tool_over_stdio_against_the_real_backend(backend, tmp_path: Path) -> None:
    source = backend.allowed / "billing" / "ledger.py"
    source.parent.mkdir()
    source.write_text(LEDGER_PY, encoding="utf-8")

    async def body(session: ClientSession) -> None:
        listed = await session.list_tools()
        tools = {t.name: t for t in listed.tools}
        assert set(tools) == TOOLS
        for tool in tools.values():
            assert tool.description and len(tool.description) > 60, tool.name
            assert _schema(tool).get("type") == "object"
        assert _schema(tools["helix_context"])["required"] == ["query"]
        assert "page" in _schema(tools["helix_context"])["properties"]
        assert _schema(tools["helix_neighbors"])["properties"]["limit"]["maximum"] == 200

        error, text = await call(session, "helix_health")
        assert not error, text
        assert _fields(text)["genome"]["status"] == "ok"

        error, text = await call(session, "helix_ingest", path=str(source))
        assert not error, text
        assert "files_ingested=1" in text

        error, text = await call(session, "helix_context", query="reconcile ledger quarterly LedgerAuditTrail LEDGER_TOLERANCE_CENTS")
        assert not error, text
        assert "<expressed_context>" in text and "reconcile_ledger_quarterly" in text
        assert str(source) in text
        ids = re.findall(r'<GENE id="([0-9a-f]{32})" src="([^"]+)"', text)
        assert len(ids) >= 2, text  # two genes delivered together: they become neighbours
        assert all(src.startswith(str(source)) for _, src in ids)
        assert text.count(str(source)) == len(ids)  # each path once per gene: no trailing id list repeats it
        ids = [gid for gid, _ in ids]

        error, text = await call(session, "helix_context_packet", query="where is reconcile_ledger_quarterly",
                                 task_type="edit")
        assert not error, text
        lines = [json.loads(line) for line in text.splitlines()]  # compact JSON, one unit per line
        assert "confidence" in lines[0] and "query" not in lines[0]
        groups = [line for line in lines if "group" in line]
        files = [line for line in lines if "file" in line]
        assert groups and all(line["reason"] for line in groups)  # a group's reason, said once
        assert any(line["file"] == str(source) for line in files)
        assert text.count(str(source)) == len([f for f in files if f["file"] == str(source)])  # each path once
        for line in files:
            for item in line["items"]:
                assert {"verdict", "src", "source_id", "signals"}.isdisjoint(item), item

        error, text = await call(session, "helix_refresh_targets", query="reconcile_ledger_quarterly", task_type="debug")
        assert not error, text
        assert "reconcile_ledger_quarterly" not in text  # the query is not echoed back
        if "nothing to refresh" not in text:
            assert all(isinstance(json.loads(line), dict) for line in text.splitlines())

        error, text = await call(session, "helix_stats")
        assert not error, text
        assert _fields(text)["total_genes"] >= 2

        error, text = await call(session, "helix_gene_get", gene_id=ids[0])
        assert not error, text
        assert f"gene_id: {ids[0]}" in text and "--- content ---" in text
        assert f"sources: {source}:" in text
        assert "provenance: source_kind=file" in text

        error, text = await call(session, "helix_neighbors", gene_id=ids[0], limit=5)
        assert not error, text
        assert ids[1] in text and "coactivation=" in text

        # text ingest: helix_context finds it next
        note = "Deployment note: the quasar_flux_capacitor service listens on port 7781 behind nginx."
        error, text = await call(session, "helix_ingest", content=note, content_type="text",
                                 source_path="notes/deploy.md")
        assert not error, text
        error, text = await call(session, "helix_context", query="quasar_flux_capacitor port")
        assert not error, text
        assert "7781" in text and "notes/deploy.md" in text

        # bad input is a tool error that says what to fix, not a crash
        error, text = await call(session, "helix_gene_get", gene_id="0" * 32)
        assert error and "no gene" in text
        error, text = await call(session, "helix_ingest", path=str(tmp_path / "outside.py"))
        assert error and "allowed_ingest_roots" in text
        error, text = await call(session, "helix_ingest")
        assert error and "either path" in text
        # text never stands in for a file on disk: an absolute source_path is refused (409), with the reason
        error, text = await call(session, "helix_ingest", content=note, source_path=str(tmp_path / "real.py"))
        assert error and "absolute path" in text
        error, text = await call(session, "helix_stats", page=3)
        assert error and "page 3 does not exist" in text
        error, _ = await call(session, "helix_health")
        assert not error  # the session survived all of that

    run_session(_env(backend.url), body, tmp_path / "mcp-stderr.log")


def test_cut_answers_say_how_to_get_the_rest_and_the_next_page_works(backend, tmp_path: Path) -> None:
    cap = 150
    lines = [f"setting_{i:03d} = value_{i:03d}  # explains knob number {i} of the frobnicator" for i in range(25)]  # one gene
    config_text = "\n".join(lines) + "\n"

    async def body(session: ClientSession) -> None:
        error, text = await call(session, "helix_ingest", content=config_text, content_type="text",
                                 source_path="frobnicator.conf")
        assert not error, text
        first_error, first = await call(session, "helix_stats")
        assert not first_error
        assert "page 1 of" in first and "page=2" in first and "helix_stats" in first
        pages = await read_pages(session, cap, "helix_stats")
        assert pages[0] == first
        assert len(pages) > 1 and "the end of this answer" in pages[-1]
        bodies = "\n".join(re.sub(r"\n\n\[helix: [^\]]*\]$", "", p) for p in pages)
        for key in ("total_genes", "genes_by_tier", "parts", "generation"):
            assert re.search(rf"^{key}: ", bodies, flags=re.M), key  # each key's line whole on some page

        pages = await read_pages(session, cap, "helix_context", query="frobnicator knob setting_007",
                                 budget_tokens=4000)
        assert "or ask a narrower query or a smaller budget_tokens" in pages[0]
        ids = re.findall(r'<GENE id="([0-9a-f]{32})" src="frobnicator', "\n".join(pages))
        assert ids, "helix_context named no gene id on any page"

        # a packet's pages are cut between items, never inside one: every line of every page is whole JSON
        for i in range(12):
            error, text = await call(session, "helix_ingest", content=f"def knob_{i}(frobnicator):\n    return "
                                     f"frobnicator.setting_{i:03d}\n", content_type="code",
                                     source_path=f"knobs/knob_{i}.py")
            assert not error, text
        pages = await read_pages(session, cap, "helix_context_packet", query="frobnicator setting knob",
                                 task_type="explain")
        assert len(pages) > 1
        for page in pages:
            body = re.sub(r"\n\n\[helix: [^\]]*\]$", "", page)
            for line in body.splitlines():
                json.loads(line)  # a line cut in the middle of an item would not parse

        # a whole gene read page by page gives back every line
        pages = await read_pages(session, cap, "helix_gene_get", gene_id=ids[0])
        assert len(pages) > 1
        joined = "\n".join(pages)
        for line in lines:
            assert line in joined

    run_session(_env(backend.url, HELIX_MCP_MAX_TOKENS=str(cap)), body, tmp_path / "mcp-stderr.log")


def test_backend_down_is_a_clear_tool_error(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens here

    async def body(session: ClientSession) -> None:
        listed = await session.list_tools()
        assert {t.name for t in listed.tools} == TOOLS  # listing works without a backend
        for name, args in (("helix_context", {"query": "anything"}), ("helix_stats", {}),
                           ("helix_gene_get", {"gene_id": "abc"}), ("helix_ingest", {"content": "x y z"})):
            error, text = await call(session, name, **args)
            assert error, (name, text)
            assert f"Helix backend not reachable at {url}" in text
            assert "helix serve" in text
        error, text = await call(session, "helix_health")  # still alive after the errors
        assert error and "not reachable" in text

    run_session(_env(url), body, tmp_path / "mcp-stderr.log")


def test_stdout_carries_only_protocol_messages(tmp_path: Path) -> None:
    """Logs (at INFO here) go to stderr; every stdout line is a JSON-RPC message."""
    env = _env(f"http://127.0.0.1:{free_port()}", HELIX_MCP_LOG_LEVEL="INFO")
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "raw-test", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "helix_stats", "arguments": {}}},
    ]
    proc = subprocess.Popen([sys.executable, "-m", "helix_context.mcp_server"], cwd=REPO, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    answers: dict[int, dict] = {}
    try:
        for request in requests:
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            if "id" not in request:
                continue
            while request["id"] not in answers:
                line = proc.stdout.readline()
                assert line, "the server closed stdout early: " + proc.stderr.read()
                message = json.loads(line)  # anything that is not JSON-RPC fails here
                assert message.get("jsonrpc") == "2.0"
                if "id" in message:
                    answers[message["id"]] = message
        proc.stdin.close()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = proc.stderr.read()
    assert "helix MCP server over stdio" in stderr
    assert len(answers[2]["result"]["tools"]) == len(TOOLS)
    result = answers[3]["result"]
    assert result.get("isError") is True
    assert "not reachable" in result["content"][0]["text"]


def test_gene_routes_answer_with_advice(backend) -> None:
    """GET /genes/{id} and /genes/{id}/neighbors, straight over HTTP."""
    with backend.client() as http:
        report = http.post("/ingest", json={"content": "alpha_beta_gamma = 42\n", "content_type": "config",
                                            "metadata": {"path": "conf/ab.conf"}}).json()
        assert report["genes_added"] == 1
        gene_id = http.post("/fingerprint", json={"query": "alpha_beta_gamma"}).json()["results"][0]["gene_id"]
        gene = http.get(f"/genes/{gene_id}").json()
        assert gene["gene_id"] == gene_id and "alpha_beta_gamma = 42" in gene["content"]
        assert gene["sources"] == [{"path": "conf/ab.conf", "start_line": 1, "end_line": 1}]
        assert set(gene["provenance"]) >= {"source_kind", "observed_at", "last_verified_at", "volatility_class"}
        assert set(gene["attribution"]) == {"org", "device", "user", "agent"}
        assert ["alpha_beta_gamma", "42"] in gene["facts"]
        near = http.get(f"/genes/{gene_id}/neighbors", params={"limit": 3}).json()
        assert near["gene"]["gene_id"] == gene_id and near["neighbors"] == []
        missing = http.get("/genes/" + "0" * 32)
        assert missing.status_code == 404 and "no gene" in missing.json()["error"]["message"]
        assert http.get(f"/genes/{gene_id}/neighbors", params={"limit": 0}).status_code == 422
        assert http.get("/genes/" + "x" * 200).status_code == 422


def test_without_helix_mcp_url_the_backend_is_found_from_its_state_file(settings: Settings) -> None:
    """A backend started on another port (HELIX_SERVER_PORT, `helix serve --port`) writes its URL into
    HELIX_HOME's state file; the MCP server reads it when HELIX_MCP_URL is not set."""
    from helix_context import signals
    from helix_context.mcp_server import build_server

    assert not settings.mcp.url
    assert build_server(settings).helix_backend.url == settings.base_url  # nothing announced: helix.toml's
    signals.write_server_state("running", pid=os.getpid(), home=settings.home, url="http://127.0.0.1:45123")
    assert build_server(settings).helix_backend.url == "http://127.0.0.1:45123"
    signals.write_server_state("stopped", pid=os.getpid(), home=settings.home, url="http://127.0.0.1:45123")
    assert build_server(settings).helix_backend.url == settings.base_url  # a stopped backend is not used
    explicit = settings.replace(mcp={"url": "http://127.0.0.1:45999"})
    assert build_server(explicit).helix_backend.url == "http://127.0.0.1:45999"  # HELIX_MCP_URL wins


# ── scoping to the client's workspace roots ──


WEATHER_PY = '''"""Rainfall forecasts for the weather station."""


def load_settings(path):
    """Read the station settings: radar calibration and the forecast horizon."""
    return {"horizon_hours": 48, "radar": path}
'''

BILLING_SETTINGS_PY = '''"""Billing settings."""


def load_settings(path):
    """Read the billing settings: currency and the ledger tolerance."""
    return {"currency": "EUR", "feed": path}
'''


def run_session_with_roots(env: dict[str, str], roots: list[Path] | None,
                           body: Callable[[ClientSession], Awaitable[Any]], errlog: Path) -> Any:
    """Like run_session, with a client that answers roots/list with `roots` (None: offers no roots)."""
    from mcp import types

    async def list_roots(context: Any) -> Any:
        return types.ListRootsResult(roots=[types.Root(uri=p.resolve().as_uri(), name=p.name) for p in roots or []])

    async def main() -> Any:
        params = StdioServerParameters(command=sys.executable, args=["-m", "helix_context.mcp_server"], env=env,
                                       cwd=str(REPO))
        with errlog.open("a", encoding="utf-8") as err:
            async with stdio_client(params, errlog=err) as (read, write):
                callback = list_roots if roots is not None else None
                async with ClientSession(read, write, list_roots_callback=callback) as session:
                    await asyncio.wait_for(session.initialize(), 60)
                    return await body(session)

    return asyncio.run(main())


def test_tools_scope_to_the_sources_holding_the_client_roots(backend, tmp_path: Path) -> None:
    billing = backend.allowed / "billing"
    station = backend.allowed / "station"
    (billing / "settings.py").parent.mkdir(parents=True)
    (billing / "settings.py").write_text(BILLING_SETTINGS_PY, encoding="utf-8")
    (station / "weather.py").parent.mkdir(parents=True)
    (station / "weather.py").write_text(WEATHER_PY, encoding="utf-8")
    with backend.client() as client:
        for folder in (billing, station):
            assert client.post("/sources", json={"path": str(folder)}).status_code == 202
    assert backend.app.state.sources.wait_idle(60)
    env = _env(backend.url)

    def sources_of(text: str) -> set[str]:
        """The folders of the verified and stale_risk items in a packet answer (one JSON object per line)."""
        folders: set[str] = set()
        group = None
        for line in text.splitlines():
            if not line.startswith("{"):
                continue
            unit = json.loads(line)
            group = unit.get("group", group)
            if "file" in unit and group in ("verified", "stale_risk"):
                folders.add(Path(unit["file"]).parent.name)
        return folders

    async def asked(session: ClientSession) -> tuple[set[str], tuple[bool, str], tuple[bool, str]]:
        error, text = await call(session, "helix_context_packet", query="load_settings path", task_type="explain")
        assert not error, text
        return sources_of(text), await call(session, "helix_context", query=""), \
            await call(session, "helix_context_packet", query="load_settings", project="station")

    # a root inside the billing checkout: only billing's code; an explicit project still wins
    scoped, empty, named = run_session_with_roots(env, [billing], asked, tmp_path / "mcp.log")
    assert scoped == {"billing"}
    assert sources_of(named[1]) == {"station"}
    # an empty query: one clear error, not a raw validation message
    assert empty[0] and "query is empty: say what you need context for" in empty[1]
    assert "validation" not in empty[1].lower()
    # a root above both checkouts: both projects are in scope
    both, _, _ = run_session_with_roots(env, [backend.allowed], asked, tmp_path / "mcp.log")
    assert both and both <= {"billing", "station"}
    # no roots offered: no scope, the evidence decides (nothing is refused)
    unscoped, _, _ = run_session_with_roots(env, None, asked, tmp_path / "mcp.log")
    assert unscoped


def test_a_client_that_declared_no_roots_is_never_asked_for_them(backend, tmp_path: Path) -> None:
    """The protocol has a server ask for roots only a client that declared them; a client that ignores the
    request cost every scoped call the 5 s wait. A raw stdio client: what the server sends is all recorded."""
    import subprocess
    import threading

    proc = subprocess.Popen([sys.executable, "-m", "helix_context.mcp_server"], env=_env(backend.url), cwd=str(REPO),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    seen: list[dict] = []
    answered = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            message = json.loads(line)
            seen.append(message)
            if message.get("id") == 2 and "method" not in message:
                answered.set()

    threading.Thread(target=read, daemon=True).start()

    def send(message: dict) -> None:
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "bare", "version": "1"}}})
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "helix_context", "arguments": {"query": "load settings"}}})
        assert answered.wait(60), seen
    finally:
        proc.stdin.close()
        proc.wait(30)
    assert not [m for m in seen if m.get("method") == "roots/list"], seen
