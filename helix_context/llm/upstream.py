"""The upstream client: how Helix reaches the user's model server, and what it says when it cannot.

Two upstream kinds:

- **ollama** — Ollama's native ``/api/chat`` (requests translated by :mod:`helix_context.llm.wire`,
  with ``options.num_ctx`` always set);
- **openai** — any OpenAI-compatible server (llama.cpp, vLLM, LM Studio, …):
  ``/v1/chat/completions`` passed through.

``auto`` probes the upstream once (``/api/version`` answers → Ollama, else ``/v1/models`` →
OpenAI) and caches the answer. Chats to an ``http://`` upstream go straight to
:class:`~helix_context.llm.lean_http.LeanHTTPTransport` (:class:`_DirectRoute`); probes and model
lists go through httpx on top of it; tests inject any ``httpx.AsyncBaseTransport`` instead.

Failures become :class:`ProxyError` / :class:`UpstreamError` (part of :mod:`helix_context.errors`'
tree), carrying OpenAI's error shape and a message that says what to check.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from helix_context import errors
from helix_context.config import ProxySettings
from helix_context.llm.lean_http import LeanHTTPTransport, RawResponse, Timeouts
from helix_context.llm.profiles import MIN_NUM_CTX
from helix_context.llm.streaming import Answer, ChatStream
from helix_context.llm.wire import (
    HELIX_FIELDS,
    ollama_chat_problem,
    ollama_models_to_openai,
    ollama_to_openai,
    openai_to_ollama,
)
from helix_context.llm.wire_json import json_bytes
from helix_context.redact import redact_url

log = logging.getLogger("helix.proxy")


# ── errors ──────────────────────────────────────────────────────────────────────


class ProxyError(errors.UpstreamError):
    """A chat request that cannot be served; ``body()`` is OpenAI's error shape, ``status`` the HTTP status.

    Part of the one error tree, under :class:`helix_context.errors.UpstreamError`: every proxy failure
    is met on the way to the model server. Unlike the rest of the tree, the status, code and kind are
    per instance (an unknown model is 404, a missing model name 422, an unreachable server 502),
    because OpenAI clients read them from the body and act on them.
    """

    def __init__(self, message: str, *, status: int = 502, code: str = "upstream_error",
                 kind: str = "upstream_error", upstream_status: int | None = None) -> None:
        super().__init__(message)
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
    """The caller hung up before the answer was ready.

    Deliberately outside :mod:`helix_context.errors`' tree: it is a control-flow signal, not a
    failure anyone is told about. Nobody is left to answer, so the route ends the request quietly;
    a ``HelixError`` handler must never turn it into an error response or an error log.
    """


class UpstreamError(ProxyError):
    """The upstream could not answer: 502 unless a clearer 4xx fits (an unknown model is 404).

    Same name as :class:`helix_context.errors.UpstreamError`, which it specialises (through
    :class:`ProxyError`) with OpenAI's error body.
    """


def _advice(kind: str | None, model: str | None = None) -> str:
    if kind == "ollama":
        pull = f" and the model pulled (`ollama pull {model}`)" if model else ""
        return f"Is Ollama running (`ollama serve`){pull}?"
    if kind == "openai":
        return "Is the OpenAI-compatible server running and serving that model?"
    pull = f" and the model pulled (`ollama pull {model}`)" if model else ""
    return (f"Is Ollama running (`ollama serve`){pull}, or your OpenAI-compatible server started? "
            "Set [proxy] upstream_url (HELIX_PROXY_UPSTREAM_URL) to where it listens.")


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


# ── the client ──────────────────────────────────────────────────────────────────


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
        data = json_bytes(body)  # a lone surrogate passes through as JSON's escape (wire_json.py)
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
        # the URL as messages and logs show it: a user:password in upstream_url stays out of both
        # (every chat client that shows an error would otherwise hold the upstream's password)
        self.url = redact_url(settings.upstream_url)
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
        except httpx.TimeoutException:
            raise UpstreamError(
                f"timed out after {timeout.read:g} s asking the upstream LLM server at {self.url} what kind of "
                "server it is. Is it running and answering? Setting [proxy] upstream_kind (HELIX_PROXY_UPSTREAM_KIND) "
                "to \"ollama\" or \"openai\" skips this check.", code="upstream_timeout") from None
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

    def _status_error(self, response: httpx.Response | RawResponse, kind: str, model: str | None, path: str) -> UpstreamError:
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
            problem = ollama_chat_problem(data)
            if problem is not None:
                raise UpstreamError(f"the upstream {self.url} answered {path} with {problem}: {raw[:200]!r}",
                                    code="upstream_bad_response")
            if data.get("error"):
                raise UpstreamError(f"Ollama at {self.url}: {data['error']}", code="upstream_error")
            data = ollama_to_openai(data, model=str(model))
        elif not isinstance(data, dict):
            raise UpstreamError(f"the upstream {self.url} answered {path} with JSON that is not a chat completion "
                                f"object: {raw[:200]!r}", code="upstream_bad_response")
        # relayed as it came only when it already is the OpenAI answer, in UTF-8; else the dict is encoded
        relay = raw if kind == "openai" and json.detect_encoding(raw) == "utf-8" else None  # data is a dict here
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

