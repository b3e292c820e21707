"""The OpenAI-compatible proxy: inject expressed context, forward to the user's LLM server.

Two upstream kinds:

- **ollama** — Ollama's native ``/api/chat``. OpenAI requests are translated, and
  ``options.num_ctx`` is always set: without it Ollama silently truncates the
  prompt to its default context (its ``/v1`` endpoint ignores ``num_ctx``, which is
  why the native API is used). Ollama's NDJSON stream is translated back into
  OpenAI ``chat.completion.chunk`` server-sent events, its final answer into a
  ``chat.completion`` with usage from ``prompt_eval_count`` / ``eval_count``.
- **openai** — any OpenAI-compatible server (llama.cpp, vLLM, LM Studio, …):
  ``/v1/chat/completions`` passed through, its SSE relayed line by line.

``auto`` probes the upstream once (``/api/version`` answers → Ollama, else
``/v1/models`` → OpenAI) and caches the answer.

This is the only module that talks to LLM servers (the ribosome calls through
:class:`UpstreamClient`). Streams are relayed as they arrive; a caller that goes
away mid-stream closes the upstream response, so the model stops generating (a
caller that hangs up on a non-streaming request cancels it too).

Layers, top down: :class:`ChatProxy` (inject context, think suppression, num_ctx,
session recording) → :class:`UpstreamClient` (kind detection, translation, error
mapping to OpenAI-shaped 502/404s) → :class:`~helix_context.lean_http.LeanHTTPTransport`
(a small keep-alive HTTP/1.1 client for ``http://`` upstreams: chats go to it
directly, probes and model lists through httpx on top of it; tests inject any
``httpx.AsyncBaseTransport`` instead, and everything then goes through httpx).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import logging
import math
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import anyio
import httpx
from pydantic import BaseModel, ConfigDict, Field, model_validator

from helix_context import chat_scope
from helix_context.retrieve.scope import UnknownProject
from helix_context.assemble import estimate_messages_tokens
from helix_context.config import ProxySettings, Settings
from helix_context.lean_http import LeanHTTPTransport, RawResponse, Timeouts
from helix_context.model_profile import profile

if TYPE_CHECKING:
    from helix_context.manager import HelixContextManager
    from helix_context.ribosome import Ribosome

log = logging.getLogger("helix.proxy")

NO_THINK = "/no_think"
DISCONNECT_POLL_S = 0.5
MIN_NUM_CTX = 2048
# Body fields that steer Helix and are never forwarded upstream.
HELIX_FIELDS = ("session_id", "helix_inject")
_OFF = ("0", "off", "false", "no", "none")
_ON = ("1", "on", "true", "yes")


# ── request models ──────────────────────────────────────────────────────────────

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]


class ChatMessage(BaseModel):
    """One OpenAI chat message. Unknown fields are kept and forwarded."""

    model_config = ConfigDict(extra="allow")

    role: Role
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None

    @model_validator(mode="after")
    def _content_present(self) -> "ChatMessage":
        if self.role in ("system", "developer", "user") and self.content is None:
            raise ValueError(f"a {self.role} message needs content (a string or a list of content parts)")
        return self


class ChatCompletionRequest(BaseModel):
    """POST /v1/chat/completions. Unknown fields (tools, response_format, …) pass through."""

    model_config = ConfigDict(extra="allow")

    model: str | None = Field(None, max_length=300)
    messages: list[ChatMessage] = Field(..., min_length=1)
    stream: bool = False
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    stream_options: dict[str, Any] | None = None
    user: str | None = Field(None, max_length=256)
    session_id: str | None = Field(None, max_length=256, description="Helix session (else X-Helix-Session)")
    helix_inject: bool | None = Field(None, description="false: forward without injecting context")


# ── errors ──────────────────────────────────────────────────────────────────────


class ProxyError(Exception):
    """A chat request that cannot be served; ``body()`` is OpenAI's error shape, ``status`` the HTTP status."""

    def __init__(self, message: str, *, status: int = 502, code: str = "upstream_error",
                 kind: str = "upstream_error", upstream_status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.kind = kind
        self.upstream_status = upstream_status

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"message": self.message, "type": self.kind, "code": self.code}
        if self.upstream_status is not None:
            error["upstream_status"] = self.upstream_status
        return {"error": error}


class ClientGone(Exception):
    """The caller hung up before the answer was ready."""


class UpstreamError(ProxyError):
    """The upstream could not answer: 502 unless a clearer 4xx fits (an unknown model is 404)."""


def _advice(kind: str | None, model: str | None = None) -> str:
    if kind == "ollama":
        pull = f" and the model pulled (`ollama pull {model}`)" if model else ""
        return f"Is Ollama running (`ollama serve`){pull}?"
    if kind == "openai":
        return "Is the OpenAI-compatible server running and serving that model?"
    pull = f" and the model pulled (`ollama pull {model}`)" if model else ""
    return (f"Is Ollama running (`ollama serve`){pull}, or your OpenAI-compatible server started? "
            "Set [proxy] upstream_url (HELIX_PROXY_UPSTREAM_URL) to where it listens")


def _upstream_message(response: httpx.Response | RawResponse) -> str:
    """The error text an upstream put in its body (Ollama: {"error": "..."}; OpenAI: {"error": {"message"}})."""
    try:
        data = response.json()
    except (ValueError, UnicodeDecodeError):
        text = response.text.strip()
        return text[:500] if text else response.reason_phrase
    if isinstance(data, dict):
        err = data.get("error", data.get("detail", data.get("message")))
        if isinstance(err, dict):
            err = err.get("message") or json.dumps(err)[:500]
        if err:
            return str(err)[:500]
    return json.dumps(data)[:500]


# ── translation: OpenAI ⇄ Ollama (pure functions) ───────────────────────────────


def num_ctx_for(prompt_tokens: int, answer_tokens: int, requested: int | None = None) -> int:
    """Context for Ollama: prompt (+20 % for tokenizer differences) + answer, rounded up to a power of two.

    Powers of two keep the number of distinct values small: Ollama reloads a model
    whenever num_ctx changes, so rounding to fine steps would reload it constantly.
    """
    need = math.ceil(max(0, prompt_tokens) * 1.2) + max(0, answer_tokens) + 64
    size = MIN_NUM_CTX
    while size < need:
        size *= 2
    if requested:
        size = max(size, int(requested))
    return size


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content
                         if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _images_of(content: Any) -> list[str]:
    """Base64 images of OpenAI image_url parts (data: URLs), as Ollama wants them."""
    images: list[str] = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type") == "image_url":
                url = part.get("image_url")
                url = url.get("url") if isinstance(url, dict) else url
                if isinstance(url, str) and url.startswith("data:") and "," in url:
                    images.append(url.split(",", 1)[1])
    return images


def _ollama_tool_calls(tool_calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for call in tool_calls:
        fn = call.get("function") or {}
        args = fn.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except ValueError:
                args = {"_raw": args}
        out.append({"function": {"name": fn.get("name", ""), "arguments": args or {}}})
    return out


def openai_to_ollama(payload: Mapping[str, Any], *, num_ctx: int) -> dict[str, Any]:
    """An OpenAI chat request as Ollama's /api/chat request."""
    messages = []
    tool_names: dict[str, str] = {}
    for msg in payload["messages"]:
        role = msg.get("role")
        out: dict[str, Any] = {"role": "system" if role == "developer" else role,
                               "content": _text_of(msg.get("content"))}
        images = _images_of(msg.get("content"))
        if images:
            out["images"] = images
        if msg.get("tool_calls"):
            out["tool_calls"] = _ollama_tool_calls(msg["tool_calls"])
            for call in msg["tool_calls"]:
                if call.get("id"):
                    tool_names[call["id"]] = (call.get("function") or {}).get("name", "")
        if role == "tool" and msg.get("tool_call_id") in tool_names:
            out["tool_name"] = tool_names[msg["tool_call_id"]]
        messages.append(out)

    options: dict[str, Any] = {}
    caller_options = payload.get("options")
    if isinstance(caller_options, dict):
        options.update(caller_options)
    for src, dst in (("temperature", "temperature"), ("top_p", "top_p"), ("seed", "seed"),
                     ("frequency_penalty", "frequency_penalty"), ("presence_penalty", "presence_penalty"),
                     ("top_k", "top_k"), ("min_p", "min_p"), ("repeat_penalty", "repeat_penalty")):
        if payload.get(src) is not None:
            options[dst] = payload[src]
    max_tokens = payload.get("max_completion_tokens") or payload.get("max_tokens")
    if max_tokens:
        options["num_predict"] = max_tokens
    stop = payload.get("stop")
    if stop:
        options["stop"] = [stop] if isinstance(stop, str) else list(stop)
    options["num_ctx"] = num_ctx

    request: dict[str, Any] = {"model": payload["model"], "messages": messages,
                               "stream": bool(payload.get("stream")), "options": options}
    fmt = payload.get("format")
    response_format = payload.get("response_format")
    if fmt is None and isinstance(response_format, dict):
        if response_format.get("type") == "json_object":
            fmt = "json"
        elif response_format.get("type") == "json_schema":
            fmt = (response_format.get("json_schema") or {}).get("schema") or "json"
    if fmt is not None:
        request["format"] = fmt
    for key in ("tools", "keep_alive", "think"):
        if payload.get(key) is not None:
            request[key] = payload[key]
    return request


def _openai_tool_calls(calls: list[dict[str, Any]], *, with_index: bool) -> list[dict[str, Any]]:
    out = []
    for i, call in enumerate(calls):
        fn = call.get("function") or {}
        args = fn.get("arguments", {})
        item: dict[str, Any] = {"id": call.get("id") or f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                                "function": {"name": fn.get("name", ""),
                                             "arguments": args if isinstance(args, str) else json.dumps(args)}}
        if with_index:
            item["index"] = i
        out.append(item)
    return out


def _finish_reason(data: Mapping[str, Any], had_tool_calls: bool) -> str:
    if had_tool_calls:
        return "tool_calls"
    reason = data.get("done_reason") or "stop"
    return "length" if reason == "length" else "stop"


def _usage(data: Mapping[str, Any]) -> dict[str, int]:
    prompt = int(data.get("prompt_eval_count") or 0)
    completion = int(data.get("eval_count") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _completion_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex[:24]


def ollama_to_openai(data: Mapping[str, Any], *, model: str, completion_id: str | None = None) -> dict[str, Any]:
    """Ollama's final /api/chat answer as an OpenAI chat.completion."""
    msg = data.get("message") or {}
    message: dict[str, Any] = {"role": "assistant", "content": msg.get("content", "")}
    if msg.get("thinking"):
        message["reasoning_content"] = msg["thinking"]
    calls = msg.get("tool_calls") or []
    if calls:
        message["tool_calls"] = _openai_tool_calls(calls, with_index=False)
    return {
        "id": completion_id or _completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": data.get("model") or model,
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": _finish_reason(data, bool(calls))}],
        "usage": _usage(data),
    }


def _chunk(completion_id: str, created: int, model: str, delta: dict[str, Any],
           finish_reason: str | None = None) -> dict[str, Any]:
    return {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}


def _sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


SSE_DONE = b"data: [DONE]\n\n"


_FRACTION_RE = re.compile(r"(\.\d+)")


def ollama_models_to_openai(tags: Mapping[str, Any]) -> dict[str, Any]:
    """Ollama's /api/tags as OpenAI's model list."""
    data = []
    for m in tags.get("models") or []:
        created = 0
        stamp = m.get("modified_at")
        if isinstance(stamp, str):
            # Ollama writes nanoseconds (2026-01-02T03:04:05.123456789-07:00); Python reads up to micro
            stamp = _FRACTION_RE.sub(lambda m: m.group(1)[:7], stamp.replace("Z", "+00:00"))
            try:
                created = int(datetime.fromisoformat(stamp).timestamp())
            except ValueError:
                created = 0
        data.append({"id": m.get("name") or m.get("model"), "object": "model", "created": created,
                     "owned_by": "ollama"})
    return {"object": "list", "data": data}


# ── the upstream client ─────────────────────────────────────────────────────────


@dataclass
class Answer:
    """What came back, for the session buffer and telemetry."""

    text: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finished: bool = False


class ChatStream:
    """An open upstream stream, relayed as OpenAI SSE bytes. Iterate once; closing closes the upstream."""

    def __init__(self, response: httpx.Response | RawResponse, kind: str, model: str, include_usage: bool,
                 on_done: Callable[[Answer], Any] | None = None, error_hint: str = "") -> None:
        self.response = response
        self.kind = kind
        self.model = model
        self.include_usage = include_usage
        self.answer = Answer()
        self.on_done = on_done
        self.error_hint = error_hint
        self._closed = False

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            # shielded: this also runs while the task is being cancelled (caller gone)
            with anyio.CancelScope(shield=True):
                await self.response.aclose()

    def _error_event(self, message: str) -> bytes:
        return _sse({"error": {"message": message, "type": "upstream_error", "code": "upstream_stream_broken"}})

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            relay = self._relay_ollama() if self.kind == "ollama" else self._relay_openai()
            async with contextlib.aclosing(relay):
                async for piece in relay:
                    yield piece
        except httpx.HTTPError as exc:
            log.warning("upstream stream broke: %s", exc)
            yield self._error_event(f"the upstream stream broke off ({type(exc).__name__}: {exc}). "
                                    f"{self.error_hint}".strip())
        finally:
            await self.aclose()
        if self.answer.finished and self.on_done is not None:
            try:
                result = self.on_done(self.answer)
                if asyncio.iscoroutine(result):
                    await result
            except Exception:  # recording is best effort; the caller already has the answer
                log.exception("recording the exchange failed")

    async def _relay_openai(self) -> AsyncIterator[bytes]:
        parts: list[str] = []
        async for line in self.response.aiter_lines():
            if not line:
                continue
            if not line.startswith("data:"):
                yield line.encode() + b"\n"  # event:/id:/comment lines, kept as they are
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                self.answer.finished = True
                self.answer.text = "".join(parts)
                yield SSE_DONE
                continue
            try:
                obj = json.loads(data)
            except ValueError:
                obj = None
            if isinstance(obj, dict):
                for choice in obj.get("choices") or ():
                    content = (choice.get("delta") or {}).get("content")
                    if isinstance(content, str) and choice.get("index", 0) == 0:
                        parts.append(content)
                usage = obj.get("usage")
                if isinstance(usage, dict):
                    self.answer.prompt_tokens = usage.get("prompt_tokens")
                    self.answer.completion_tokens = usage.get("completion_tokens")
            yield b"data: " + data.encode() + b"\n\n"
        if not self.answer.finished:  # ended cleanly but without [DONE]: relay what we have
            self.answer.text = "".join(parts)
            self.answer.finished = bool(parts)

    async def _relay_ollama(self) -> AsyncIterator[bytes]:
        cid, created = _completion_id(), int(time.time())
        parts: list[str] = []
        first = True
        tool_calls = False
        async for line in self.response.aiter_lines():
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except ValueError:
                log.warning("unreadable line from Ollama: %.200s", line)
                continue
            if data.get("error"):
                yield self._error_event(f"Ollama: {data['error']}")
                return
            model = data.get("model") or self.model
            msg = data.get("message") or {}
            delta: dict[str, Any] = {}
            if first:
                delta["role"] = "assistant"
            content = msg.get("content") or ""
            if content:
                delta["content"] = content
                parts.append(content)
            elif first:
                delta["content"] = ""
            if msg.get("thinking"):
                delta["reasoning_content"] = msg["thinking"]
            if msg.get("tool_calls"):
                delta["tool_calls"] = _openai_tool_calls(msg["tool_calls"], with_index=True)
                tool_calls = True
            if delta:
                yield _sse(_chunk(cid, created, model, delta))
                first = False
            if data.get("done"):
                usage = _usage(data)
                self.answer = Answer("".join(parts), usage["prompt_tokens"], usage["completion_tokens"], True)
                yield _sse(_chunk(cid, created, model, {}, _finish_reason(data, tool_calls)))
                if self.include_usage:
                    yield _sse({"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                                "choices": [], "usage": usage})
                yield SSE_DONE
                return
        raise httpx.RemoteProtocolError("Ollama closed the stream before its final (done) line")


def normalise_base_url(url: str) -> str:
    """http://host:port[/v1|/api][/] → http://host:port (paths are added per upstream kind)."""
    base = url.strip().rstrip("/")
    for suffix in ("/v1", "/api"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base


class _DirectRoute:
    """How chats reach an ``http://`` upstream through :meth:`LeanHTTPTransport.send`, bypassing
    ``httpx.AsyncClient``: the target prefix, the constant part of the request head, the timeouts."""

    __slots__ = ("headers", "host", "port", "prefix", "timeouts", "transport")

    def __init__(self, transport: LeanHTTPTransport, url: httpx.URL, api_key: str, timeouts: Timeouts) -> None:
        self.transport = transport
        self.host = url.host
        self.port = url.port or 80
        self.prefix = url.raw_path.rstrip(b"/")
        auth = f"Authorization: Bearer {api_key}\r\n".encode("latin-1") if api_key else b""
        # what httpx would send, less what only a browser-facing server cares about; identity encoding
        # because a loopback answer is cheaper to take as it is than to inflate
        self.headers = (b"Host: " + url.netloc + b"\r\nAccept: */*\r\nAccept-Encoding: identity\r\n"
                        b"Connection: keep-alive\r\nUser-Agent: helix-context\r\n"
                        b"Content-Type: application/json\r\n" + auth)
        self.timeouts = timeouts

    @classmethod
    def for_upstream(cls, base_url: str, transport: httpx.AsyncBaseTransport | None, api_key: str,
                     timeouts: Timeouts) -> _DirectRoute | None:
        """A route when chats can skip httpx: our own transport, a plain http URL with nothing unusual."""
        if not isinstance(transport, LeanHTTPTransport):
            return None
        try:
            url = httpx.URL(base_url)
        except httpx.InvalidURL:
            return None
        if url.scheme != "http" or not url.host or url.query or url.userinfo or url.fragment:
            return None
        return cls(transport, url, api_key, timeouts)

    async def post_json(self, path: str, body: Any) -> RawResponse:
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
        head = (b"POST " + self.prefix + path.encode() + b" HTTP/1.1\r\n" + self.headers
                + b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n")
        return await self.transport.send(self.host, self.port, head, data, self.timeouts)


class UpstreamClient:
    """HTTP client for the configured upstream LLM server.

    ``transport`` (or a whole ``client``) is the seam for tests; the default is a
    pooled httpx client that ignores proxy environment variables (the upstream is
    almost always on loopback, and HTTP_PROXY must not capture it). Chats to an
    ``http://`` upstream over the default :class:`LeanHTTPTransport` skip the httpx
    client (:class:`_DirectRoute`): its per-request bookkeeping cost more CPU than
    the rest of the proxy.
    """

    def __init__(self, settings: ProxySettings, *, transport: httpx.AsyncBaseTransport | None = None,
                 client: httpx.AsyncClient | None = None, api_key: str = "") -> None:
        self.settings = settings
        self.url = settings.upstream_url
        self.base_url = normalise_base_url(settings.upstream_url)
        self._kind: str | None = settings.upstream_kind if settings.upstream_kind != "auto" else None
        self._kind_lock = asyncio.Lock()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        self._owns_client = client is None
        if client is None and transport is None:
            transport = LeanHTTPTransport()
        self.client = client or httpx.AsyncClient(
            base_url=self.base_url, transport=transport, trust_env=False, headers=headers,
            timeout=httpx.Timeout(settings.timeout_s, connect=settings.connect_timeout_s),
        )
        timeouts = Timeouts(settings.connect_timeout_s, settings.timeout_s, settings.timeout_s)
        self._direct = (_DirectRoute.for_upstream(self.base_url, transport, api_key, timeouts)
                        if client is None else None)

    async def aclose(self) -> None:
        if self._owns_client:
            await self.client.aclose()

    # ── kind detection ──

    @property
    def known_kind(self) -> str | None:
        return self._kind

    async def kind(self) -> str:
        """ollama | openai: configured, or probed once and cached."""
        if self._kind is not None:
            return self._kind
        async with self._kind_lock:
            if self._kind is None:
                self._kind = await self._probe()
                log.info("upstream %s detected as %s", self.url, self._kind)
        return self._kind

    async def _probe(self) -> str:
        timeout = httpx.Timeout(self.settings.connect_timeout_s * 2, connect=self.settings.connect_timeout_s)
        try:
            resp = await self.client.get("/api/version", timeout=timeout)
            if resp.status_code == 200:
                try:
                    if isinstance(resp.json(), dict) and "version" in resp.json():
                        return "ollama"
                except ValueError:
                    pass
            resp = await self.client.get("/api/tags", timeout=timeout)
            if resp.status_code == 200:
                try:
                    if isinstance(resp.json(), dict) and "models" in resp.json():
                        return "ollama"
                except ValueError:
                    pass
            return "openai"  # /v1/models may need a key or be missing; chat will say so
        except httpx.HTTPError as exc:
            raise self._transport_error(exc, None, None) from None

    def forget_kind(self) -> None:
        """Probe again next time (after a connection failure the server may have been swapped)."""
        if self.settings.upstream_kind == "auto":
            self._kind = None

    # ── errors ──

    def _transport_error(self, exc: httpx.HTTPError, kind: str | None, model: str | None) -> UpstreamError:
        if isinstance(exc, httpx.TimeoutException):
            phase = "connect to" if isinstance(exc, httpx.ConnectTimeout) else "get an answer from"
            limit = self.settings.connect_timeout_s if isinstance(exc, httpx.ConnectTimeout) else self.settings.timeout_s
            return UpstreamError(
                f"timed out after {limit:g} s trying to {phase} the upstream LLM server at {self.url}. "
                f"{_advice(kind, model)} A large model may still be loading: raise [proxy] timeout_s "
                "(HELIX_PROXY_TIMEOUT_S) if it needs longer.",
                code="upstream_timeout")
        return UpstreamError(
            f"cannot reach the upstream LLM server at {self.url} ({type(exc).__name__}: {exc or 'no detail'}). "
            f"{_advice(kind, model)}",
            code="upstream_unreachable")

    def _status_error(self, response: httpx.Response, kind: str, model: str | None, path: str) -> UpstreamError:
        detail = _upstream_message(response)
        status = response.status_code
        if status == 404 and "model" in detail.lower():
            fix = (f"Pull it with `ollama pull {model}`" if kind == "ollama"
                   else "Load it on the upstream server") + " or pick one from GET /v1/models."
            return UpstreamError(f"model {model!r} is not available on the upstream {self.url}: {detail}. {fix}",
                                 status=404, code="model_not_found", kind="invalid_request_error",
                                 upstream_status=status)
        if status == 404:
            other = "openai" if kind == "ollama" else "ollama"
            return UpstreamError(
                f"the upstream {self.url} has no {path} (404: {detail}). It does not look like an {kind} server: "
                f"check [proxy] upstream_url, or set [proxy] upstream_kind = \"{other}\".",
                code="upstream_http_404", upstream_status=status)
        if status in (401, 403):
            return UpstreamError(f"the upstream {self.url} refused the request ({status}: {detail}). "
                                 "It needs credentials Helix does not have.",
                                 code=f"upstream_http_{status}", upstream_status=status)
        return UpstreamError(f"the upstream LLM server at {self.url} answered {status} on {path}: {detail}. "
                             f"{_advice(kind, model)}",
                             code=f"upstream_http_{status}", upstream_status=status)

    # ── chat ──

    def _build(self, kind: str, payload: Mapping[str, Any], num_ctx: int) -> tuple[str, dict[str, Any]]:
        if kind == "ollama":
            return "/api/chat", openai_to_ollama(payload, num_ctx=num_ctx)
        body = {k: v for k, v in payload.items() if k not in HELIX_FIELDS and k not in ("options", "keep_alive")}
        return "/v1/chat/completions", body

    async def _post(self, path: str, body: dict[str, Any]) -> httpx.Response | RawResponse:
        """POST ``body`` as JSON; the answer's body is left unread (read or close it). httpx errors pass."""
        if self._direct is not None:
            return await self._direct.post_json(path, body)
        return await self.client.send(self.client.build_request("POST", path, json=body), stream=True)

    async def chat(self, payload: Mapping[str, Any], *, num_ctx: int | None = None) -> tuple[dict[str, Any], Answer]:
        """Non-streaming chat: an OpenAI chat.completion dict (whatever the upstream kind) and its Answer."""
        data, _, answer = await self.chat_raw(payload, num_ctx=num_ctx)
        return data, answer

    async def chat_raw(self, payload: Mapping[str, Any], *,
                       num_ctx: int | None = None) -> tuple[dict[str, Any], bytes | None, Answer]:
        """:meth:`chat`, plus the upstream's own JSON bytes when they already are the OpenAI answer (an
        OpenAI-compatible upstream): the proxy relays those as they are instead of encoding the dict again."""
        kind = await self.kind()
        model = payload.get("model")
        path, body = self._build(kind, {**payload, "stream": False}, num_ctx or MIN_NUM_CTX)
        try:
            response = await self._post(path, body)
            try:
                raw = await response.aread()
            finally:
                await response.aclose()
        except httpx.HTTPError as exc:
            if not isinstance(exc, httpx.TimeoutException):
                self.forget_kind()
            raise self._transport_error(exc, kind, model) from None
        if response.status_code >= 400:
            raise self._status_error(response, kind, model, path)
        try:
            data = json.loads(raw)
        except ValueError:
            raise UpstreamError(f"the upstream {self.url} answered {path} with something that is not JSON: "
                                f"{response.text[:200]!r}", code="upstream_bad_response") from None
        if kind == "ollama":
            if not isinstance(data, dict) or data.get("error"):
                raise UpstreamError(f"Ollama at {self.url}: {data.get('error') if isinstance(data, dict) else data}",
                                    code="upstream_error")
            data = ollama_to_openai(data, model=str(model))
        # relayed as it came only when it already is the OpenAI answer, in UTF-8; else the dict is encoded
        relay = raw if kind == "openai" and isinstance(data, dict) and json.detect_encoding(raw) == "utf-8" else None
        answer = Answer(finished=True)
        try:
            answer.text = data["choices"][0]["message"].get("content") or ""
            usage = data.get("usage") or {}
            answer.prompt_tokens = usage.get("prompt_tokens")
            answer.completion_tokens = usage.get("completion_tokens")
        except (KeyError, IndexError, TypeError, AttributeError):
            pass
        return data, relay, answer

    async def open_stream(self, payload: Mapping[str, Any], *, num_ctx: int | None = None,
                          on_done: Callable[[Answer], Any] | None = None) -> ChatStream:
        """Start a streaming chat. Errors before the first byte raise UpstreamError (the caller can still
        answer 502); the returned ChatStream relays OpenAI SSE bytes and must be iterated or closed."""
        kind = await self.kind()
        model = payload.get("model")
        path, body = self._build(kind, {**payload, "stream": True}, num_ctx or MIN_NUM_CTX)
        try:
            response = await self._post(path, body)
        except httpx.HTTPError as exc:
            if not isinstance(exc, httpx.TimeoutException):
                self.forget_kind()
            raise self._transport_error(exc, kind, model) from None
        if response.status_code >= 400:
            try:
                await response.aread()
            except httpx.HTTPError:
                pass
            finally:
                await response.aclose()
            raise self._status_error(response, kind, model, path)
        include_usage = bool((payload.get("stream_options") or {}).get("include_usage"))
        return ChatStream(response, kind, str(model), include_usage, on_done, error_hint=_advice(kind, model))

    async def list_models(self) -> dict[str, Any]:
        """GET /v1/models in OpenAI's shape, whatever the upstream kind."""
        kind = await self.kind()
        path = "/api/tags" if kind == "ollama" else "/v1/models"
        try:
            response = await self.client.get(path)
        except httpx.HTTPError as exc:
            self.forget_kind()
            raise self._transport_error(exc, kind, None) from None
        if response.status_code >= 400:
            raise self._status_error(response, kind, None, path)
        try:
            data = response.json()
        except ValueError:
            raise UpstreamError(f"the upstream {self.url} answered {path} with something that is not JSON",
                                code="upstream_bad_response") from None
        return ollama_models_to_openai(data) if kind == "ollama" else data


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
            return _text_of(msg.get("content")).strip()
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
                if NO_THINK not in _text_of(content):
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
            self.raw = json.dumps(self.data, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
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

    def __init__(self, helix: "HelixContextManager", settings: Settings | None = None, *,
                 upstream: UpstreamClient | None = None, transport: httpx.AsyncBaseTransport | None = None) -> None:
        from helix_context.ribosome import Ribosome

        self.helix = helix
        self.settings = settings or helix.settings
        self.upstream = upstream or UpstreamClient(self.settings.proxy, transport=transport,
                                                   api_key=self.settings.proxy.api_key)
        self.ribosome: Ribosome = Ribosome(self.settings, self.upstream, helix.ribosome_state)
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

    async def open_stream(self, prepared: PreparedChat) -> ChatStream:
        return await self.upstream.open_stream(prepared.payload, num_ctx=self._num_ctx(prepared),
                                               on_done=functools.partial(self._done, prepared))

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


class SessionRecorder:
    """Writes exchanges to the session buffer off the request path, batched, in one worker.

    ``flush()`` waits until everything recorded so far is in the genome (GET
    /sessions and POST /consolidate call it, so they always see the latest chat).
    """

    def __init__(self, helix: "HelixContextManager") -> None:
        self.helix = helix
        self._queue: asyncio.Queue[tuple[str, str, int, list[tuple[str, str]]]] | None = None
        self._worker: asyncio.Task[None] | None = None

    def record(self, session_id: str, agent: str, genes: int, exchange: list[tuple[str, str]]) -> None:
        if self._queue is None:
            self._queue = asyncio.Queue()
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._run(self._queue))
        self._queue.put_nowait((session_id, agent, genes, exchange))

    async def _run(self, queue: asyncio.Queue) -> None:
        while True:
            batch = [await queue.get()]
            while not queue.empty():
                batch.append(queue.get_nowait())
            try:
                await anyio.to_thread.run_sync(self._write, batch)
            except Exception:
                log.exception("could not record %d exchange(s) in the session buffer", len(batch))
            finally:
                for _ in batch:
                    queue.task_done()

    def _write(self, batch: list[tuple[str, str, int, list[tuple[str, str]]]]) -> None:
        genome = self.helix.genome
        messages: dict[str, list[tuple[str, str]]] = {}
        for session_id, _, _, exchange in batch:  # one transaction per session, in arrival order
            messages.setdefault(session_id, []).extend(exchange)
        for session_id, rows in messages.items():
            if rows:
                genome.buffer_exchange(session_id, rows)
        for session_id, agent, genes, _ in batch:  # one per request: it counts requests
            genome.touch_session(session_id, agent, genes)

    async def flush(self) -> None:
        if self._queue is not None and self._worker is not None and not self._worker.done():
            await self._queue.join()

    async def aclose(self) -> None:
        try:
            await asyncio.wait_for(self.flush(), timeout=10)
        except (asyncio.TimeoutError, Exception):
            log.warning("session recorder did not drain before shutdown")
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except (asyncio.CancelledError, Exception):
                pass
