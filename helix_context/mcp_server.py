"""Helix as MCP tools over stdio: `python -m helix_context.mcp_server`.

A thin client of the backend's HTTP API (HELIX_MCP_URL, default the server's
host and port): it starts nothing itself, holds no genome, and when the
backend is down every tool answers with an error that says how to start it.

stdout is the protocol channel: everything this process logs goes to stderr.
Every answer stays under [mcp] max_tokens (HELIX_MCP_MAX_TOKENS, counted with
helix_context.tokens.count_tokens). A longer answer is cut into pages between its
units (an item, a file's items, a `<GENE>` block: helix_context/mcp_render.py says
what each tool shows), never inside one that fits a page; each page ends with a note naming the page to ask for next
(`page=N` with the same arguments), and the full answer is kept for a few
minutes so the pages of one answer fit together.

Works with the official `mcp` SDK 2.x (MCPServer) and 1.x (FastMCP).
"""

from __future__ import annotations

import collections
import hashlib
import inspect
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import quote

import httpx
from pydantic import Field

from helix_context import mcp_render, mcp_scope, signals
from helix_context.config import Settings, load_config
from helix_context.errors import ConfigError, HelixError, InvalidRequest, UpstreamError
from helix_context.tokens import count_tokens, truncate_to_tokens

log = logging.getLogger("helix.mcp")

SERVER_NAME = "helix-context"
MIN_MAX_TOKENS = 120  # below this the paging note itself would not fit
PAGE_CACHE_ENTRIES = 32
PAGE_CACHE_TTL_S = 600.0
MAX_INGEST_CHARS = 4_000_000

INSTRUCTIONS = (
    "Helix Context indexes the user's own files (code, docs, configs, logs) and answers from them. "
    "Use helix_context for compressed excerpts to read, helix_context_packet for pointers with a trust verdict "
    "before editing, helix_refresh_targets for what to re-read, helix_gene_get / helix_neighbors to open a gene "
    "id you were given. Long answers come in pages: repeat the call with page=N as the note at the end says."
)


# parameter types: the descriptions and limits become each tool's JSON schema
# no min_length: an empty query gets Helix's own message (what to send), not a raw validation error
Query = Annotated[str, Field(max_length=100_000,
                             description="what you need context for: a question, identifiers, file names")]
Page = Annotated[int, Field(ge=1, description="page of a long answer, 1 = first; a cut answer ends with a note "
                                              "naming the next page (same arguments, page=N)")]
Project = Annotated[str | None, Field(max_length=500, description=(
    "only genes of this project ('a,b' for several); default: the projects of your workspace roots, "
    "else the project the evidence leads to"))]
TaskType = Annotated[Literal["plan", "explain", "review", "edit", "debug", "ops", "quote"],
                     Field(description="what the evidence is for; edit / debug / quote need fresher evidence "
                                       "than plan / explain")]
GeneId = Annotated[str, Field(min_length=1, max_length=128,
                              description="a gene id from helix_context's gene list, a packet item or a neighbour")]
ContentType = Annotated[Literal["code", "markdown", "text", "log", "config", "json", "diff"] | None,
                        Field(description="how to chunk content (default: detected)")]


try:  # the tools ask the client for its workspace roots through the request's Context
    from mcp.server.mcpserver import Context as McpContext
except ImportError:  # mcp 1.x
    try:
        from mcp.server.fastmcp import Context as McpContext  # type: ignore[no-redef,attr-defined,unused-ignore]  # 1.x name
    except ImportError:
        McpContext = None  # type: ignore[assignment,misc]  # no SDK: build_server reports it


class BackendError(UpstreamError):
    """The backend could not be reached or refused the request; the message says what to do.

    An UpstreamError: for the MCP server the Helix backend is the upstream it relays to."""


# ── token cap and pages ──


@dataclass
class _Pages:
    pages: list[str]
    at: float


class Pager:
    """Cuts answers to the token cap and remembers recent ones so later pages come from the same answer."""

    def __init__(self, max_tokens: int, *, ttl_s: float = PAGE_CACHE_TTL_S, entries: int = PAGE_CACHE_ENTRIES) -> None:
        if max_tokens < MIN_MAX_TOKENS:
            log.warning("[mcp] max_tokens=%s is too small for an answer and its paging note; using %s",
                        max_tokens, MIN_MAX_TOKENS)
            max_tokens = MIN_MAX_TOKENS
        self.max_tokens = max_tokens
        self.ttl_s = ttl_s
        self.entries = entries
        self._cache: collections.OrderedDict[str, _Pages] = collections.OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(tool: str, args: dict[str, Any]) -> str:
        canonical = json.dumps({"tool": tool, "args": args}, sort_keys=True, default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()

    def _note(self, tool: str, page: int, total: int, hint: str) -> str:
        if page < total:
            text = (f"[helix: answer cut to fit the {self.max_tokens}-token cap: page {page} of {total}. "
                    f"For the rest, call {tool} again with the same arguments and page={page + 1}")
            return text + (f", or {hint}" if hint else "") + ".]"
        return f"[helix: page {page} of {total}, the end of this answer.]"

    @staticmethod
    def _cut(text: str, budget: int) -> list[str]:
        """A text cut at line boundaries into pieces of `budget` tokens (a unit larger than a page)."""
        pieces: list[str] = []
        rest = text
        while rest:
            piece = truncate_to_tokens(rest, budget)
            if not piece:  # cannot happen with budget > 0; guard against an endless loop anyway
                piece = rest[: max(1, len(rest) // 2)]
            pieces.append(piece)
            rest = rest[len(piece):].lstrip("\n")
        return pieces

    def _split(self, answer: str | list[str], tool: str, hint: str) -> list[str]:
        units = [answer] if isinstance(answer, str) else answer
        text = "\n".join(units)
        if count_tokens(text) <= self.max_tokens:
            return [text]
        # the note is counted at its longest (3-digit page numbers) so every page fits with its note
        reserve = count_tokens(self._note(tool, 998, 999, hint)) + 4
        budget = max(16, self.max_tokens - reserve)
        pages: list[str] = []
        current: list[str] = []
        used = 0
        for unit in units:
            size = count_tokens(unit) + 1  # + its line break
            if current and used + size > budget:
                pages.append("\n".join(current))
                current, used = [], 0
            if size > budget:  # one unit larger than a page: only then is a unit cut
                pages.extend(self._cut(unit, budget))
                continue
            current.append(unit)
            used += size
        if current:
            pages.append("\n".join(current))
        total = len(pages)
        return [f"{body.rstrip()}\n\n{self._note(tool, i, total, hint)}" for i, body in enumerate(pages, 1)]

    def _get(self, key: str) -> list[str] | None:
        with self._lock:
            entry = self._cache.get(key)
            if entry is None:
                return None
            if time.monotonic() - entry.at > self.ttl_s:
                del self._cache[key]
                return None
            self._cache.move_to_end(key)
            return entry.pages

    def _put(self, key: str, pages: list[str]) -> None:
        with self._lock:
            self._cache[key] = _Pages(pages, time.monotonic())
            self._cache.move_to_end(key)
            while len(self._cache) > self.entries:
                self._cache.popitem(last=False)

    async def answer(self, tool: str, args: dict[str, Any], page: int,
                     render: Callable[[], Awaitable[str | list[str]]], hint: str = "") -> str:
        """Page `page` (1-based) of the answer `render()` produces; cached per tool + arguments."""
        if not isinstance(page, int) or page < 1:
            raise InvalidRequest(f"page must be 1 or more, got {page!r}")
        key = self.key(tool, args)
        pages = None if page == 1 else self._get(key)
        if pages is None:
            pages = self._split(await render(), tool, hint)
            if len(pages) > 1:
                self._put(key, pages)
        if page > len(pages):
            raise InvalidRequest(f"page {page} does not exist: this answer has {len(pages)} page(s)")
        return pages[page - 1]

    def fit(self, text: str, advice: str) -> str:
        """One-shot answers (ingest reports): cut to the cap with a note, no pages."""
        if count_tokens(text) <= self.max_tokens:
            return text
        note = f"\n\n[helix: cut to fit the {self.max_tokens}-token cap; {advice}.]"
        return truncate_to_tokens(text, self.max_tokens - count_tokens(note) - 2).rstrip() + note


# ── backend client ──


class Backend:
    """The backend's HTTP API, with errors turned into advice."""

    def __init__(self, url: str, *, timeout_s: float, api_key: str = "",
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.transport = transport

    def unreachable(self) -> str:
        return f"Helix backend not reachable at {self.url}: start it with `helix serve` or the tray"

    async def request(self, method: str, path: str, *, json_body: dict[str, Any] | None = None,
                      params: dict[str, Any] | None = None, timeout_s: float | None = None) -> Any:
        timeout = httpx.Timeout(timeout_s or self.timeout_s, connect=min(5.0, timeout_s or self.timeout_s))
        try:
            async with httpx.AsyncClient(base_url=self.url, timeout=timeout, headers=self.headers,
                                         transport=self.transport, trust_env=False) as client:
                response = await client.request(method, path, json=json_body, params=params)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            log.info("backend %s unreachable: %s", self.url, exc)
            raise BackendError(self.unreachable()) from None
        except httpx.TimeoutException:
            raise BackendError(f"Helix backend at {self.url} did not answer {method} {path} within "
                               f"{timeout_s or self.timeout_s:.0f} s; it may be busy (a large ingest?). Try again, "
                               "or raise [mcp] timeout_s") from None
        except httpx.HTTPError as exc:
            raise BackendError(f"Helix backend at {self.url} failed on {method} {path}: {exc}. "
                               "Check that HELIX_MCP_URL points at `helix serve`") from None
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.status_code >= 400:
            message = ""
            if isinstance(data, dict) and isinstance(data.get("error"), dict):
                message = str(data["error"].get("message", ""))
            message = message or response.text[:500] or response.reason_phrase
            if response.status_code == 401:
                message += " (set HELIX_API_KEY for the MCP server to the backend's key)"
            raise BackendError(f"Helix backend refused {method} {path} ({response.status_code}): {message}")
        if data is None:
            raise BackendError(f"Helix backend at {self.url} answered {method} {path} with something that is not "
                               "JSON; is HELIX_MCP_URL pointing at a Helix backend?")
        return data


# ── rendering: what each tool shows the model ──


def render_gene(data: dict[str, Any]) -> str:
    prov = data.get("provenance") or {}
    attribution = data.get("attribution") or {}
    lines = [
        f"gene_id: {data.get('gene_id')}",
        f"src: {data.get('src')}",
        f"content_type: {data.get('content_type')}  language: {data.get('language')}  project: {data.get('project')}",
        f"symbol: {data.get('symbol')}",
        f"tier: {data.get('tier')}  access_count: {data.get('access_count')}",
        "provenance: " + ", ".join(f"{k}={v}" for k, v in prov.items()),
        "attribution: " + ", ".join(f"{k}={v}" for k, v in attribution.items()),
        "sources: " + "; ".join(f"{s['path']}:{s['start_line']}-{s['end_line']}" for s in data.get("sources") or []),
        "facts: " + "; ".join(f"{k}={v}" for k, v in data.get("facts") or []),
        "tags: " + ", ".join(data.get("tags") or []),
        "--- content ---",
        data.get("content", ""),
    ]
    return "\n".join(lines)


def render_neighbors(data: dict[str, Any]) -> str:
    gene = data.get("gene") or {}
    rows = data.get("neighbors") or []
    lines = [f"neighbours of {gene.get('gene_id')} ({gene.get('src')}): {len(rows)} gene(s) delivered together with it"]
    for row in rows:
        lines.append(f"{row.get('gene_id')} {row.get('src')} coactivation={row.get('coactivation')} "
                     f"type={row.get('content_type')} symbol={row.get('symbol')}")
    if not rows:
        lines.append("(none yet: genes become neighbours when /context delivers them together)")
    return "\n".join(lines)


def render_ingest(data: dict[str, Any]) -> str:
    skipped = data.get("files_skipped") or []
    keys = ("files_seen", "files_ingested", "files_unchanged", "genes_added", "genes_replaced", "genes_reused",
            "genes_retired", "bytes", "seconds", "embedded")
    summary = {k: data[k] for k in keys if k in data}
    summary["files_skipped"] = len(skipped)
    lines = ["ingested: " + ", ".join(f"{k}={v}" for k, v in summary.items())]
    for item in skipped[:50]:
        lines.append(f"skipped {item.get('path')}: {item.get('reason')}")
    if len(skipped) > 50:
        lines.append(f"… and {len(skipped) - 50} more skipped files (`helix ingest PATH --json` lists them all)")
    return "\n".join(lines)


# ── the MCP server ──


def _import_sdk() -> tuple[type, type[Exception]]:
    """(server class, tool error class) for mcp 2.x, else 1.x."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError

        return MCPServer, ToolError
    except ImportError:
        # older mcp releases name it FastMCP; the installed one may lack that module (hence the ignores)
        from mcp.server.fastmcp import FastMCP  # type: ignore[attr-defined, unused-ignore]
        from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef, unused-ignore]

        return FastMCP, ToolError


def build_server(settings: Settings, *, transport: httpx.AsyncBaseTransport | None = None) -> Any:
    """The MCP server object with all Helix tools registered (call `.run()` to serve stdio)."""
    server_cls, tool_error = _import_sdk()
    # HELIX_MCP_URL when set, else where the running backend says it serves (any port), else helix.toml's
    url = settings.mcp.url or signals.announced_backend_url(settings.home) or settings.base_url
    backend = Backend(url, timeout_s=settings.mcp.timeout_s, api_key=settings.api_key,
                      transport=transport)
    pager = Pager(settings.mcp.max_tokens)
    try:
        server = server_cls(SERVER_NAME, instructions=INSTRUCTIONS)
    except TypeError:  # very old SDKs: no instructions
        server = server_cls(SERVER_NAME)
    tool_params = inspect.signature(server.tool).parameters

    def register(fn: Callable[..., Awaitable[str]], description: str) -> None:
        kwargs: dict[str, Any] = {"name": fn.__name__, "description": description}
        if "structured_output" in tool_params:
            kwargs["structured_output"] = False  # text only: a structured copy would double the tokens
        server.tool(**kwargs)(fn)

    async def guarded(work: Awaitable[Any]) -> Any:
        try:
            return await work
        except HelixError as exc:  # the backend's refusal (BackendError) or bad tool input (InvalidRequest)
            raise tool_error(str(exc)) from None

    def _query(query: str) -> str:
        if not isinstance(query, str) or not query.strip():
            raise InvalidRequest("query is empty: say what you need context for (a question, identifiers, file names)")
        return query

    async def _scope(ctx: Any, project: str | None) -> str | None:
        """The project named, else those of the sources holding the client's workspace roots (roots/list)."""
        if project:
            return project
        roots = await mcp_scope.client_roots(ctx)
        if not roots:
            return None  # no roots: no scope, the evidence decides
        listed = await backend.request("GET", "/sources")
        return mcp_scope.roots_project(listed.get("sources") or [], roots)

    async def helix_context(
            query: Query,
            budget_tokens: Annotated[int | None, Field(gt=0, le=1_000_000, description=(
                "token budget for the excerpts (default: the server's [budget] token_budget)"))] = None,
            project: Project = None,
            page: Page = 1,
            ctx: McpContext = None) -> str:  # type: ignore[assignment]  # the SDK passes the request context
        scope = await guarded(_scope(ctx, project))

        async def run() -> list[str]:
            body: dict[str, Any] = {"query": _query(query)}
            if budget_tokens is not None:
                body["budget_tokens"] = budget_tokens
            if scope:
                body["project"] = scope
            return mcp_render.context_units(await backend.request("POST", "/context", json_body=body))

        args = {"query": query, "budget_tokens": budget_tokens, "project": scope}
        return await guarded(pager.answer("helix_context", args, page, run,
                                          "ask a narrower query or a smaller budget_tokens"))

    register(helix_context, (
        "Retrieve compressed excerpts of the user's indexed files (code, docs, configs, logs) relevant to a "
        "query, as <expressed_context><GENE id=… src=path:lines facts=…>…</GENE></expressed_context> (open a "
        "gene whole with helix_gene_get(id)), then one line saying how much matched. Use it before answering questions about the user's "
        "projects. budget_tokens caps the excerpts (default: the server's [budget] token_budget); project "
        "limits the search to one project (default: the projects of your workspace roots). A message about "
        "nothing indexed gets no excerpts (context_health status=silent, with the reason). Long answers come "
        "in pages: call again with page=2, 3, …"))

    async def helix_context_packet(
            query: Query,
            task_type: TaskType = "edit",
            project: Project = None,
            max_genes: Annotated[int | None, Field(gt=0, le=200, description="most items to return")] = None,
            group_by: Annotated[Literal["symbol", "file"], Field(description=(
                "symbol: items only; file: also `files`, ranked by their symbols' evidence"))] = "symbol",
            page: Page = 1,
            ctx: McpContext = None) -> str:  # type: ignore[assignment]  # the SDK passes the request context
        scope = await guarded(_scope(ctx, project))

        async def run() -> list[str]:
            body: dict[str, Any] = {"query": _query(query), "task_type": task_type, "group_by": group_by}
            if scope:
                body["project"] = scope
            if max_genes is not None:
                body["max_genes"] = max_genes
            return mcp_render.packet_units(await backend.request("POST", "/context/packet", json_body=body))

        args = {"query": query, "task_type": task_type, "project": scope, "max_genes": max_genes,
                "group_by": group_by}
        return await guarded(pager.answer("helix_context_packet", args, page, run, "pass a smaller max_genes"))

    register(helix_context_packet, (
        "Agent-facing pointers for a query (a question, or a whole pasted issue with its traceback), one JSON "
        "object per line: first confidence (and known_empty=true when nothing relevant is indexed: do not act "
        "on the items), then per trust verdict (verified / stale_risk / needs_refresh, from freshness, "
        "authority, a live check that the file still matches what was indexed, and relevance) a line with its "
        "reason, then that group's items by file: the function, method, class or constant that matched (gene_id, "
        "symbol, kind, lines, relevance, live_truth, preview); last, refresh targets. task_type is one of plan, explain, review, edit, debug, ops, quote (stricter tasks "
        "need fresher, more relevant evidence). Read the verified files directly; re-read stale ones before "
        "relying on them."))

    async def helix_refresh_targets(query: Query, task_type: TaskType = "edit", project: Project = None,
                                    page: Page = 1,
            ctx: McpContext = None) -> str:  # type: ignore[assignment]  # the SDK passes the request context
        scope = await guarded(_scope(ctx, project))

        async def run() -> list[str]:
            body: dict[str, Any] = {"query": _query(query), "task_type": task_type}
            if scope:
                body["project"] = scope
            return mcp_render.refresh_units(await backend.request("POST", "/context/refresh-plan", json_body=body))

        args = {"query": query, "task_type": task_type, "project": scope}
        return await guarded(pager.answer("helix_refresh_targets", args, page, run, "ask a narrower query"))

    register(helix_refresh_targets, (
        "What to re-read or re-ingest before acting on a query: files whose indexed copy is stale or changed, "
        "genes to verify, or queries that found nothing (known_empty), most urgent first (priority 1). "
        "task_type as in helix_context_packet."))

    async def helix_ingest(
            path: Annotated[str | None, Field(max_length=4096, description=(
                "a file or folder to index; the backend reads it, so it must be under [server] "
                "allowed_ingest_roots"))] = None,
            content: Annotated[str | None, Field(description="text to index (instead of path)")] = None,
            content_type: ContentType = None,
            project: Annotated[str | None, Field(max_length=500, description="project name for these genes")] = None,
            source_path: Annotated[str | None, Field(max_length=4096, description=(
                "a relative name for the content (like notes/design.md), shown as the genes' src; absolute "
                "paths are refused: they name files on disk, which are indexed by path"))] = None) -> str:
        async def run() -> str:
            if (path is None) == (content is None):
                raise InvalidRequest("pass either path (a file or folder the backend may read) or content (text), "
                                 "not both")
            body: dict[str, Any] = {}
            if project:
                body["project"] = project
            if path is not None:
                body["path"] = os.path.abspath(os.path.expanduser(path))
            else:
                if not content or not content.strip():
                    raise InvalidRequest("content is empty: nothing to ingest")
                if len(content) > MAX_INGEST_CHARS:
                    raise InvalidRequest(f"content is {len(content)} characters; send at most {MAX_INGEST_CHARS} "
                                     "per call, or ingest the file by path")
                body["content"] = content
                if content_type:
                    body["content_type"] = content_type
                if source_path:
                    body["metadata"] = {"path": source_path}
            try:
                data = await backend.request("POST", "/ingest", json_body=body,
                                             timeout_s=max(settings.mcp.timeout_s, 300.0))
            except BackendError as exc:
                if path is not None and "(403)" in str(exc):
                    raise BackendError(f"{exc}. Alternatively read the file yourself and pass its text as "
                                       "content (with source_path set to a relative name, like its file name)"
                                       ) from None
                raise
            return pager.fit(render_ingest(data), "`helix ingest PATH --json` prints the full report")

        return await guarded(run())

    register(helix_ingest, (
        "Add text or files to the user's Helix index so later helix_context calls find them. Either path: a "
        "file or folder (the backend reads it; it must be under [server] allowed_ingest_roots in helix.toml; "
        "unchanged files are skipped, changed ones replaced), or content: text to index, with an optional "
        "content_type (code, markdown, text, log, config, json, diff) and source_path naming where it came "
        "from. project groups the genes. Returns a short ingest report."))

    async def helix_stats(page: Page = 1) -> str:
        async def run() -> list[str]:
            return mcp_render.mapping_units(await backend.request("GET", "/stats"))

        return await guarded(pager.answer("helix_stats", {}, page, run))

    register(helix_stats, (
        "Size and makeup of the Helix genome: total genes, files, genes per tier / source kind / content type / "
        "project, bytes on disk, embeddings coverage, co-activation links, and which optional parts "
        "(embeddings, NER, compression) are active."))

    async def helix_health(page: Page = 1) -> str:
        async def run() -> list[str]:
            return mcp_render.mapping_units(await backend.request("GET", "/health"))

        return await guarded(pager.answer("helix_health", {}, page, run))

    register(helix_health, (
        "Whether the Helix backend is healthy: ok or degraded (and which part), the genome, the upstream LLM "
        "server setting, the optional helper model state, PID and uptime."))

    def _gene_path(gene_id: str) -> str:
        if not isinstance(gene_id, str) or not gene_id.strip():
            raise InvalidRequest("gene_id is empty: pass a gene id from helix_context or helix_context_packet")
        return "/genes/" + quote(gene_id.strip(), safe="")

    async def helix_gene_get(gene_id: GeneId, page: Page = 1) -> str:
        async def run() -> str:
            return render_gene(await backend.request("GET", _gene_path(gene_id)))

        return await guarded(pager.answer("helix_gene_get", {"gene_id": gene_id}, page, run))

    register(helix_gene_get, (
        "Open one gene by id (from helix_context's gene list or a packet item): its full stored content, "
        "source span(s), provenance (observed / verified times, volatility, authority), attribution, facts, "
        "tags, tier and access count."))

    async def helix_neighbors(
            gene_id: GeneId,
            limit: Annotated[int, Field(ge=1, le=200, description="most neighbours to return")] = 10,
            page: Page = 1) -> str:
        async def run() -> str:
            if not isinstance(limit, int) or not 1 <= limit <= 200:
                raise InvalidRequest(f"limit must be 1-200, got {limit!r}")
            data = await backend.request("GET", _gene_path(gene_id) + "/neighbors", params={"limit": limit})
            return render_neighbors(data)

        args = {"gene_id": gene_id, "limit": limit}
        return await guarded(pager.answer("helix_neighbors", args, page, run, "pass a smaller limit"))

    register(helix_neighbors, (
        "Genes that were delivered together with a given gene before (co-activation), strongest first: "
        "related code, config and docs worth reading next. limit: 1-200 (default 10)."))

    server.helix_backend = backend  # for tests and diagnostics
    server.helix_pager = pager
    return server


def main(argv: list[str] | None = None) -> int:
    wanted = os.environ.get("HELIX_MCP_LOG_LEVEL", "WARNING").strip().upper()
    known = wanted in logging.getLevelNamesMapping()
    logging.basicConfig(level=wanted if known else "WARNING", stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not known:  # a typo in the client's config must not stop the server it starts
        log.warning("HELIX_MCP_LOG_LEVEL=%r is not a log level (DEBUG, INFO, WARNING, ERROR); using WARNING", wanted)
    # stray prints while importing and configuring must not corrupt the protocol stream
    real_stdout, sys.stdout = sys.stdout, sys.stderr
    try:
        try:
            settings = load_config()
        except ConfigError as exc:
            print(f"helix mcp: configuration error: {exc}", file=sys.stderr)
            return 2
        server = build_server(settings)
        log.info("helix MCP server over stdio; backend %s, answers capped at %s tokens",
                 server.helix_backend.url, server.helix_pager.max_tokens)
    finally:
        sys.stdout = real_stdout
    try:
        server.run()  # stdio
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
