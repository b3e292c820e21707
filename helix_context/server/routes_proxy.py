"""POST /v1/chat/completions, GET /v1/models, GET /sessions, POST /consolidate.

Thin: parse, call the proxy library (helix_context.llm: chat, ribosome), shape the answer.
Errors keep OpenAI's shape ``{"error": {"message", "type", "code"}}`` so OpenAI
clients raise their usual exceptions with Helix's advice in the message.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from helix_context.manager import HelixContextManager
from helix_context.llm.chat import ChatProxy
from helix_context.llm.ribosome import consolidate
from helix_context.llm.upstream import ClientGone, ProxyError
from helix_context.llm.wire import ChatCompletionRequest
from helix_context.server.deps import get_helix
from helix_context.server.fast_path import JsonFastPath


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    yield
    proxy = getattr(app.state, "proxy", None)
    if proxy is not None:
        await proxy.aclose()
        app.state.proxy = None



CHAT_PATH = "/v1/chat/completions"


def proxy_for(app: Any) -> ChatProxy:
    """One ChatProxy (pooled upstream client, session recorder) per app, made on first use."""
    proxy = getattr(app.state, "proxy", None)
    if proxy is None:
        proxy = ChatProxy(app.state.helix, app.state.settings)
        app.state.proxy = proxy
    return proxy


async def get_proxy(request: Request) -> ChatProxy:
    """:func:`proxy_for` as a dependency. async on purpose: FastAPI runs plain-def dependencies in its
    threadpool, which costs a thread hop per request and would let concurrent first requests build several
    proxies."""
    return proxy_for(request.app)


async def answer_chat(proxy: ChatProxy, body: ChatCompletionRequest, request: Request) -> Response:
    """One chat, from the parsed request to the response: the route and the fast path
    (:func:`fast_path`) both answer through here, so they cannot drift apart."""
    try:
        prepared = await proxy.prepare(body, headers=request.headers,
                                       client_host=request.client.host if request.client else None)
        if prepared.stream:
            stream = await proxy.open_stream(prepared, is_disconnected=request.is_disconnected)
            return StreamingResponse(stream, media_type="text/event-stream",
                                     headers={**prepared.headers(), "Cache-Control": "no-cache",
                                              "X-Accel-Buffering": "no"})
        completion = await proxy.complete(prepared, is_disconnected=request.is_disconnected)
        return Response(completion.body(), media_type="application/json", headers=prepared.headers())
    except ProxyError as exc:
        return JSONResponse(exc.body(), status_code=exc.status)
    except ClientGone:
        return Response(status_code=499)  # nobody is listening; keeps the access log honest


async def chat_completions(body: ChatCompletionRequest, request: Request,
                           proxy: ChatProxy = Depends(get_proxy)) -> Response:
    """OpenAI chat completions with Helix context injected (headers: X-Helix-Session, X-Helix-Inject: off)."""
    return await answer_chat(proxy, body, request)


async def _fast_chat(request: Request, body: ChatCompletionRequest) -> Response:
    return await answer_chat(proxy_for(request.app), body, request)


def fast_path(app: Any, *, route: Any) -> Any:
    """The app factory wraps its routes in this, inside the guard: well-formed chats skip FastAPI's
    per-request machinery and anything else reaches `route`, the chat route above (see
    helix_context.server.fast_path)."""
    return JsonFastPath(app, route=route, model=ChatCompletionRequest, handler=_fast_chat)


async def list_models(proxy: ChatProxy = Depends(get_proxy)) -> JSONResponse | dict[str, Any]:
    """The upstream's models in OpenAI's list shape (Ollama's /api/tags translated)."""
    try:
        return await proxy.upstream.list_models()
    except ProxyError as exc:
        return JSONResponse(exc.body(), status_code=exc.status)


async def sessions(limit: int = Query(50, ge=1, le=1000), proxy: ChatProxy = Depends(get_proxy),
                   helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    """Chat sessions seen by the proxy, most recent first: id, agent, last seen, requests, genes delivered."""
    await proxy.recorder.flush()
    return {"sessions": await run_in_threadpool(helix.genome.sessions, limit)}


async def consolidate_sessions(limit: int = Query(2000, ge=1, le=100_000), proxy: ChatProxy = Depends(get_proxy),
                               helix: HelixContextManager = Depends(get_helix)) -> dict[str, Any]:
    """Distil the session buffer into "session notes" genes (ribosome summary when enabled and not paused)."""
    async with proxy.consolidate_lock:
        await proxy.recorder.flush()
        report = await consolidate(helix, proxy.ribosome, limit=limit)
    return report.to_dict()
