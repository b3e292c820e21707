"""The OpenAI-compatible chat proxy: take the last user message as the query, inject context, forward.

``POST /v1/chat/completions`` as a library. :class:`ChatProxy` prepares a request (the
expressed context goes in after the caller's own system messages; small models get think
suppression and temperature 0), forwards it through :class:`~helix_context.llm.upstream.UpstreamClient`
(streamed or not), and records usage: telemetry, and the exchange in the session buffer
(:class:`~helix_context.llm.sessions.SessionRecorder`).

The LLM wing, top down: ``chat`` → ``upstream`` (kind detection, errors) → ``wire`` (OpenAI ⇄
Ollama shapes) and ``streaming`` (SSE/NDJSON relay) → ``lean_http`` (keep-alive HTTP/1.1 for
``http://`` upstreams). ``profiles`` says what a model name implies (small, no-think, num_ctx);
``ribosome`` is the optional small-LLM helper. Only this package talks to model servers.

Streams are relayed as they arrive; a caller that goes away mid-stream closes the upstream
response, so the model stops generating (a caller that hangs up on a non-streaming request
cancels it too).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import httpx

from helix_context.answer.assemble import estimate_messages_tokens
from helix_context.config import Settings
from helix_context.llm import chat_scope
from helix_context.llm.profiles import num_ctx_for, profile
from helix_context.llm.ribosome import Ribosome
from helix_context.llm.sessions import SessionRecorder
from helix_context.llm.streaming import Answer, ChatStream
from helix_context.llm.upstream import ClientGone, ProxyError, UpstreamClient
from helix_context.llm.wire import HELIX_FIELDS, ChatCompletionRequest, text_of
from helix_context.llm.wire_json import json_bytes
from helix_context.retrieve.scope import UnknownProject

if TYPE_CHECKING:
    from helix_context.manager import HelixContextManager

log = logging.getLogger("helix.proxy")

NO_THINK = "/no_think"
DISCONNECT_POLL_S = 0.5
_OFF = ("0", "off", "false", "no", "none")
_ON = ("1", "on", "true", "yes")


# ── the proxy: inject, forward, learn ──────────────────────────────────────────


@dataclass
class PreparedChat:
    payload: dict[str, Any]  # the OpenAI request to forward (context injected)
    model: str
    stream: bool
    query: str
    session_id: str
    agent: str
    genes: int = 0
    context_tokens: int = 0
    answer_tokens: int = 0  # room asked for the answer (max_tokens, else the configured reserve)
    caller_ctx: int | None = None  # num_ctx the caller asked for (Ollama-style options)
    injected: bool = False
    context: dict[str, str] = field(default_factory=lambda: chat_scope.context_headers(False, None))
    started: float = field(default_factory=time.perf_counter)
    _prompt_tokens: int | None = field(default=None, repr=False)

    @property
    def prompt_tokens(self) -> int:
        """Estimate of the forwarded prompt. Counted on first use: only Ollama's num_ctx and an upstream
        that reports no usage need it, and counting is a tokenizer pass over every message."""
        if self._prompt_tokens is None:
            self._prompt_tokens = estimate_messages_tokens(self.payload["messages"])
        return self._prompt_tokens

    @property
    def num_ctx(self) -> int:
        return num_ctx_for(self.prompt_tokens, self.answer_tokens, self.caller_ctx)

    def headers(self) -> dict[str, str]:
        return {"X-Helix-Session": self.session_id, "X-Helix-Genes": str(self.genes),
                "X-Helix-Context-Tokens": str(self.context_tokens), **self.context}


def last_user_text(messages: list[dict[str, Any]]) -> str:
    for msg in reversed(messages):
        if msg.get("role") == "user":
            return text_of(msg.get("content")).strip()
    return ""


def session_for(headers: Mapping[str, str], body: Mapping[str, Any], client_host: str | None) -> tuple[str, str]:
    """(session id, agent). Header X-Helix-Session, body session_id / user, else derived from the caller."""
    agent = (headers.get("x-helix-agent") or headers.get("user-agent") or "").strip()[:120]
    sid = (headers.get("x-helix-session") or body.get("session_id") or body.get("user") or "").strip()
    if not sid:
        digest = hashlib.sha256(f"{client_host or '-'}|{agent}".encode()).hexdigest()[:16]
        sid = f"anon-{digest}"
    return sid[:256], agent


def _flag(value: str | None) -> bool | None:
    if value is None:
        return None
    low = value.strip().lower()
    return False if low in _OFF else True if low in _ON else None


def _insert_context(messages: list[dict[str, Any]], context: str) -> None:
    """After the caller's leading system/developer messages (their instructions stay first)."""
    at = 0
    while at < len(messages) and messages[at].get("role") in ("system", "developer"):
        at += 1
    messages.insert(at, {"role": "system", "content": context})


def _append_no_think(messages: list[dict[str, Any]]) -> None:
    for msg in messages:
        if msg.get("role") in ("system", "developer"):
            content = msg.get("content")
            if isinstance(content, str):
                if NO_THINK not in content:
                    msg["content"] = f"{content.rstrip()}\n{NO_THINK}" if content.strip() else NO_THINK
                return
            if isinstance(content, list):
                if NO_THINK not in text_of(content):
                    msg["content"] = [*content, {"type": "text", "text": NO_THINK}]
                return
    messages.insert(0, {"role": "system", "content": NO_THINK})


@dataclass
class Completion:
    """A non-streaming answer: the OpenAI chat.completion, and its JSON as the upstream sent it when that
    already is the OpenAI shape (relayed byte for byte: no second encoding on the hot path)."""

    data: dict[str, Any]
    raw: bytes | None = None

    def body(self) -> bytes:
        if self.raw is None:
            self.raw = json_bytes(self.data)  # a lone surrogate passes through as JSON's escape (wire_json.py)
        return self.raw


async def unless_caller_leaves(call: Awaitable[Any], is_disconnected: Callable[[], Awaitable[bool]]) -> Any:
    """Await ``call`` in this task; if the caller hangs up meanwhile (checked every DISCONNECT_POLL_S),
    cancel it (which closes its upstream connection) and raise ClientGone.

    A timer rather than a watcher task and ``asyncio.wait``: those cost a task, futures and callbacks on
    every chat, where a timer costs one handle and only does work for answers slower than the interval."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    gone = False
    checker: asyncio.Task[None] | None = None
    timer: asyncio.TimerHandle

    async def check() -> None:
        nonlocal gone, timer
        try:
            left = await is_disconnected()
        except Exception as exc:  # cannot tell: stop watching, let the answer come
            log.debug("disconnect check failed: %s", exc)
            return
        if left:
            gone = True
            log.info("caller went away; cancelling the upstream request")
            task.cancel()
        else:
            timer = loop.call_later(DISCONNECT_POLL_S, start_check)

    def start_check() -> None:
        nonlocal checker
        checker = loop.create_task(check())

    timer = loop.call_later(DISCONNECT_POLL_S, start_check)
    try:
        return await call
    except asyncio.CancelledError:
        if gone and task.uncancel() == 0:
            raise ClientGone() from None
        raise
    finally:
        timer.cancel()
        if checker is not None and not checker.done():
            checker.cancel()


class ChatProxy:
    """POST /v1/chat/completions as a library: prepare (inject), forward (stream or not), record."""

    def __init__(self, helix: HelixContextManager, settings: Settings | None = None, *,
                 upstream: UpstreamClient | None = None, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.helix = helix
        self.settings = settings or helix.settings
        self.upstream = upstream or UpstreamClient(self.settings.proxy, transport=transport,
                                                   api_key=self.settings.proxy.api_key)
        self.ribosome = Ribosome(self.settings, self.upstream, helix.ribosome_state)
        self.recorder = SessionRecorder(helix)
        self.consolidate_lock = asyncio.Lock()  # one consolidation at a time: rows are taken once

    async def aclose(self) -> None:
        await self.recorder.aclose()
        await self.upstream.aclose()

    # ── prepare ──

    async def prepare(self, request: ChatCompletionRequest, *, headers: Mapping[str, str],
                      client_host: str | None) -> PreparedChat:
        payload = request.model_dump(exclude_unset=True)
        model = (request.model or self.settings.proxy.default_model or "").strip()
        if not model:
            raise ProxyError("model: required — name the model in the request, or set [proxy] default_model "
                                "(HELIX_PROXY_DEFAULT_MODEL)", status=422, code="model_required",
                                kind="invalid_request_error")
        payload["model"] = model
        session_id, agent = session_for(headers, payload, client_host)
        inject_flag = _flag(headers.get("x-helix-inject"))
        if inject_flag is None:
            inject_flag = request.helix_inject
        inject = self.settings.proxy.inject_context if inject_flag is None else inject_flag
        for key in HELIX_FIELDS:
            payload.pop(key, None)

        messages: list[dict[str, Any]] = payload["messages"]
        query = last_user_text(messages)
        prof = profile(model, self.settings.assembly.small_model_max_params_b)
        prepared = PreparedChat(payload=payload, model=model, stream=request.stream, query=query,
                                session_id=session_id, agent=agent)

        options = payload.get("options")  # Ollama-style extras a caller may send
        caller_ctx = options.get("num_ctx") if isinstance(options, dict) else None
        if not isinstance(caller_ctx, int) or caller_ctx <= 0:
            caller_ctx = None
        if inject and query:
            project = chat_scope.chat_project(headers, model, self.settings.proxy)
            window = await self._build_context(query, model, messages, caller_ctx or prof.context_window, project)
            if window is not None and window.expressed_context.strip():
                _insert_context(messages, window.expressed_context)
                prepared.genes = len(window.genes)
                prepared.context_tokens = window.tokens
                prepared.injected = True
            prepared.context = chat_scope.context_headers(prepared.injected, window)  # silence: "none"

        if prof.small:
            if prof.no_think:
                _append_no_think(messages)
            if payload.get("temperature") is None:
                payload["temperature"] = 0.0

        prepared.answer_tokens = int(payload.get("max_completion_tokens") or payload.get("max_tokens")
                                     or self.settings.budget.answer_reserve_tokens)
        prepared.caller_ctx = caller_ctx
        return prepared

    async def _build_context(self, query: str, model: str, messages: list[dict[str, Any]],
                             context_window: int | None, project: str | None = None) -> Any:
        retrieval_query = query
        if self.ribosome.available():
            extra = await self.ribosome.expand_query(query)
            if extra:
                retrieval_query = f"{query} {' '.join(extra)}"
        call = functools.partial(self.helix.build_context, retrieval_query, model=model, project=project,
                                 prompt_tokens=estimate_messages_tokens(messages), context_window=context_window)
        try:
            return await anyio.to_thread.run_sync(call)
        except UnknownProject as exc:  # the caller named a project that does not exist: say which do
            raise ProxyError(str(exc), status=400, code="unknown_project", kind="invalid_request_error") from None
        except Exception as exc:  # retrieval trouble degrades to "no context", never a failed chat
            log.warning("context retrieval failed, forwarding without context: %s", exc)
            return None

    # ── forward ──

    async def complete(self, prepared: PreparedChat,
                       is_disconnected: Callable[[], Awaitable[bool]] | None = None) -> Completion:
        """Forward a non-streaming chat. With ``is_disconnected``, a caller that hangs up while the model
        is still working cancels the upstream request (checked every half second) and ClientGone is raised."""
        call = self.upstream.chat_raw(prepared.payload, num_ctx=self._num_ctx(prepared))
        if is_disconnected is None:
            data, raw, answer = await call
        else:
            data, raw, answer = await unless_caller_leaves(call, is_disconnected)
        self._done(prepared, answer)
        return Completion(data, raw)

    async def open_stream(self, prepared: PreparedChat,
                          is_disconnected: Callable[[], Awaitable[bool]] | None = None) -> ChatStream:
        """Start a streaming chat. With ``is_disconnected``, a caller that hangs up before the upstream's
        first byte (a model still loading) cancels the upstream request, as :meth:`complete` does; once the
        stream runs, the response's own disconnect handling closes it."""
        call = self.upstream.open_stream(prepared.payload, num_ctx=self._num_ctx(prepared),
                                         on_done=functools.partial(self._done, prepared))
        return await (call if is_disconnected is None else unless_caller_leaves(call, is_disconnected))

    def _num_ctx(self, prepared: PreparedChat) -> int | None:
        """num_ctx matters to Ollama only: an upstream known to speak OpenAI is spared the token count."""
        return None if self.upstream.known_kind == "openai" else prepared.num_ctx

    def _done(self, prepared: PreparedChat, answer: Answer) -> None:
        seconds = time.perf_counter() - prepared.started
        telemetry = getattr(self.helix, "telemetry", None)
        if telemetry is not None:
            try:
                telemetry.record_chat(prepared.model,
                                      answer.prompt_tokens if answer.prompt_tokens is not None else prepared.prompt_tokens,
                                      answer.completion_tokens if answer.completion_tokens is not None else -1,
                                      seconds, self.upstream.known_kind or self.upstream.url)
            except Exception:
                log.exception("telemetry record_chat failed")
        exchange = [("user", prepared.query)] if prepared.query else []
        if answer.text:
            exchange.append(("assistant", answer.text))
        self.recorder.record(prepared.session_id, prepared.agent, prepared.genes, exchange)

