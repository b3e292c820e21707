"""The stream relay: an upstream's streamed chat as OpenAI ``chat.completion.chunk`` server-sent events.

Why apart: relaying is its own state machine (first delta carries the role, tool calls, the
final usage chunk, a stream that breaks mid-way) and it must never hold the caller: pieces are
yielded as they arrive, and closing the relay closes the upstream response so the model stops.

- Ollama's NDJSON lines are translated into chunks, its final (``done``) line into the finish
  chunk and, when asked for, a usage chunk;
- an OpenAI-compatible server's SSE is passed through line by line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import httpx

from helix_context.llm.lean_http import RawResponse
from helix_context.llm.wire import (
    SSE_DONE,
    chunk_event,
    finish_reason_of,
    ollama_chat_problem,
    new_completion_id,
    openai_tool_calls,
    sse_event,
    usage_of,
)

log = logging.getLogger("helix.proxy")


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
        return sse_event({"error": {"message": message, "type": "upstream_error", "code": "upstream_stream_broken"}})

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

    async def _relay_openai(self) -> AsyncGenerator[bytes, None]:
        parts: list[str] = []
        events = 0
        async for line in self.response.aiter_lines():
            if not line:
                continue
            if not events and not line.startswith(("data:", "event:", "id:", "retry:", ":")):
                # not server-sent events (a proxy's HTML page, plain text, JSON): relayed as they were, the
                # caller's client failed on them or read nothing
                yield self._error_event(f"the upstream answered the stream with something that is not server-sent "
                                        f"events: {line[:200]!r}. {self.error_hint}".strip())
                return
            events += 1
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
            if not events:
                yield self._error_event(f"the upstream ended the stream without sending anything. {self.error_hint}"
                                        .strip())

    async def _relay_ollama(self) -> AsyncGenerator[bytes, None]:
        cid, created = new_completion_id(), int(time.time())
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
            problem = ollama_chat_problem(data)
            if problem is not None:
                yield self._error_event(f"Ollama sent a line the proxy cannot relay ({problem}): {line[:200]}")
                return
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
                delta["tool_calls"] = openai_tool_calls(msg["tool_calls"], with_index=True)
                tool_calls = True
            if delta:
                yield sse_event(chunk_event(cid, created, model, delta))
                first = False
            if data.get("done"):
                usage = usage_of(data)
                self.answer = Answer("".join(parts), usage["prompt_tokens"], usage["completion_tokens"], True)
                yield sse_event(chunk_event(cid, created, model, {}, finish_reason_of(data, tool_calls)))
                if self.include_usage:
                    yield sse_event({"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                                "choices": [], "usage": usage})
                yield SSE_DONE
                return
        raise httpx.RemoteProtocolError("Ollama closed the stream before its final (done) line")
