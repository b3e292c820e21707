"""The chat wire formats: OpenAI's request/response models, and translation to and from Ollama's.

Why apart: these are pure functions over plain dicts (no I/O), shared by the upstream client
(requests and non-streaming answers), the stream relay (chunks and server-sent events) and the
chat proxy (the request model and the text of a message), and tested on their own.

Ollama's native ``/api/chat`` is used rather than its ``/v1`` endpoint because only the native API
honours ``options.num_ctx``; :func:`openai_to_ollama` always sets it.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from helix_context.llm.wire_json import json_bytes

# Body fields that steer Helix and are never forwarded upstream.
HELIX_FIELDS = ("session_id", "helix_inject")
SSE_DONE = b"data: [DONE]\n\n"


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
    def _content_present(self) -> ChatMessage:
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


# ── translation: OpenAI ⇄ Ollama (pure functions) ───────────────────────────────


def text_of(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a content-part list."""
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
                               "content": text_of(msg.get("content"))}
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


def openai_tool_calls(calls: list[dict[str, Any]], *, with_index: bool) -> list[dict[str, Any]]:
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


def finish_reason_of(data: Mapping[str, Any], had_tool_calls: bool) -> str:
    if had_tool_calls:
        return "tool_calls"
    reason = data.get("done_reason") or "stop"
    return "length" if reason == "length" else "stop"


def usage_of(data: Mapping[str, Any]) -> dict[str, int]:
    prompt = int(data.get("prompt_eval_count") or 0)
    completion = int(data.get("eval_count") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def new_completion_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex[:24]


_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
               float: "a number", type(None): "null"}


def ollama_chat_problem(data: Any) -> str | None:
    """Why `data` is not an Ollama /api/chat answer (or stream line) the proxy can relay, or None.

    Why: a broken or foreign upstream can send any JSON value; the relay read it as a dict and failed
    with a 500 (or a stream cut off with no error event). The caller answers 502 / an error event
    saying what came instead."""
    if not isinstance(data, dict):
        return f"{_JSON_TYPES.get(type(data), 'a value')} instead of a chat answer object"
    msg = data.get("message")
    if msg is None:
        return None
    if not isinstance(msg, dict):
        return f"its message is {_JSON_TYPES.get(type(msg), 'a value')}, not an object"
    if not isinstance(msg.get("content") or "", str) or not isinstance(msg.get("thinking") or "", str):
        return "its message content is not text"
    if not isinstance(msg.get("tool_calls") or [], list):
        return "its message's tool_calls is not a list"
    return None


def ollama_to_openai(data: Mapping[str, Any], *, model: str, completion_id: str | None = None) -> dict[str, Any]:
    """Ollama's final /api/chat answer as an OpenAI chat.completion."""
    msg = data.get("message") or {}
    message: dict[str, Any] = {"role": "assistant", "content": msg.get("content", "")}
    if msg.get("thinking"):
        message["reasoning_content"] = msg["thinking"]
    calls = msg.get("tool_calls") or []
    if calls:
        message["tool_calls"] = openai_tool_calls(calls, with_index=False)
    return {
        "id": completion_id or new_completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": data.get("model") or model,
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": finish_reason_of(data, bool(calls))}],
        "usage": usage_of(data),
    }


def chunk_event(completion_id: str, created: int, model: str, delta: dict[str, Any],
           finish_reason: str | None = None) -> dict[str, Any]:
    return {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}


def sse_event(obj: Any) -> bytes:
    return b"data: " + json_bytes(obj, allow_nan=True) + b"\n\n"



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
