"""What the proxy says to a model server, without a server of its own: OpenAI <-> Ollama translation
(llm/wire.py), num_ctx sizing (llm/profiles.py), the upstream client's transport seam (llm/upstream.py),
and the lean HTTP/1.1 transport (llm/lean_http.py) against raw loopback servers that misbehave on purpose.
The proxy end to end over HTTP is tests/server/test_proxy.py."""

from __future__ import annotations

import asyncio
import json
import socket

import httpx
import pytest

from helix_context.llm.profiles import num_ctx_for
from helix_context.llm.upstream import UpstreamClient
from helix_context.llm.wire import (
    ChatCompletionRequest,
    ollama_models_to_openai,
    ollama_to_openai,
    openai_to_ollama,
)

# ── pure translation (no server) ──


def test_openai_to_ollama_translates_params_and_sets_num_ctx():
    payload = {"model": "qwen3:0.6b", "messages": [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "look"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get", "arguments": "{\"a\": 1}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"}],
        "temperature": 0.2, "max_tokens": 99, "stop": "END", "seed": 7, "stream": True,
        "response_format": {"type": "json_object"}, "keep_alive": 0}
    out = openai_to_ollama(payload, num_ctx=4096)
    assert out["options"] == {"temperature": 0.2, "seed": 7, "num_predict": 99, "stop": ["END"], "num_ctx": 4096}
    assert out["messages"][0] == {"role": "system", "content": "be brief"}
    assert out["messages"][1]["images"] == ["QUJD"] and out["messages"][1]["content"] == "look"
    assert out["messages"][2]["tool_calls"] == [{"function": {"name": "get", "arguments": {"a": 1}}}]
    assert out["messages"][3]["tool_name"] == "get"
    assert out["format"] == "json" and out["keep_alive"] == 0 and out["stream"] is True


def test_ollama_answers_become_openai_shapes():
    done = {"model": "m", "message": {"role": "assistant", "content": "hi"}, "done": True, "done_reason": "length",
            "prompt_eval_count": 11, "eval_count": 3}
    out = ollama_to_openai(done, model="m")
    assert out["object"] == "chat.completion" and out["choices"][0]["message"]["content"] == "hi"
    assert out["choices"][0]["finish_reason"] == "length"
    assert out["usage"] == {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
    models = ollama_models_to_openai({"models": [{"name": "a:1b", "modified_at": "2026-01-02T03:04:05.1234567Z"}]})
    assert models["data"][0]["id"] == "a:1b" and models["data"][0]["created"] > 1_700_000_000


def test_num_ctx_covers_prompt_and_answer_in_powers_of_two():
    assert num_ctx_for(10, 100) == 2048
    n = num_ctx_for(6000, 1024)
    assert n >= 6000 + 1024 and n & (n - 1) == 0
    assert num_ctx_for(10, 10, requested=32768) == 32768


def test_request_model_keeps_unknown_fields_and_names_bad_ones():
    req = ChatCompletionRequest.model_validate({"model": "m", "messages": [{"role": "user", "content": "x"}],
                                                "tools": [{"type": "function"}], "frobnicate": 1})
    assert req.model_dump(exclude_unset=True)["frobnicate"] == 1
    with pytest.raises(Exception, match="role"):
        ChatCompletionRequest.model_validate({"messages": [{"role": "wizard", "content": "x"}]})


def test_upstream_client_takes_an_injected_transport():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.path, json.loads(request.content) if request.content else None))
        if request.url.path == "/api/version":
            return httpx.Response(200, json={"version": "0.12"})
        return httpx.Response(200, json={"model": "m", "message": {"role": "assistant", "content": "ok"},
                                         "done": True, "prompt_eval_count": 5, "eval_count": 1})

    from helix_context.config import ProxySettings

    async def go():
        client = UpstreamClient(ProxySettings(upstream_url="http://upstream.test/v1/"),
                                transport=httpx.MockTransport(handler))
        data, answer = await client.chat({"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                                         num_ctx=4096)
        await client.aclose()
        return data, answer, client.known_kind

    data, answer, kind = asyncio.run(go())
    assert kind == "ollama"
    assert answer.text == "ok" and data["usage"]["prompt_tokens"] == 5
    assert seen[-1][0] == "/api/chat" and seen[-1][1]["options"]["num_ctx"] == 4096


# ── the lean HTTP/1.1 transport ──


def _run_with_raw_server(script, client_calls):
    """Serve `script(reader, writer, n)` on loopback (n = connection number) and run client_calls(url)."""

    async def main():
        count = 0

        async def handle(reader, writer):
            nonlocal count
            count += 1
            try:
                await script(reader, writer, count)
            finally:
                writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        try:
            result = await client_calls(url)
        finally:
            server.close()
        return result, count

    return asyncio.run(main())


async def _read_request(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length")), 0)
    return head, await reader.readexactly(length)


async def _requests(reader):
    """Requests on one kept-alive connection, until the client closes it."""
    while True:
        try:
            yield await _read_request(reader)
        except asyncio.IncompleteReadError:
            return


def test_lean_transport_keeps_connections_alive_and_decodes_bodies():
    from helix_context.llm.lean_http import LeanHTTPTransport

    async def script(reader, writer, n):
        async for head, body in _requests(reader):
            path = head.split(b" ")[1]
            if path == b"/len":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Echo: " + str(len(body)).encode()
                             + b"\r\n\r\nhello")
            elif path == b"/chunked":
                writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                             b"3;ext=1\r\nabc\r\n4\r\ndefg\r\n0\r\nX-Trailer: t\r\n\r\n")
            elif path == b"/close":
                writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end")
                await writer.drain()
                return
            await writer.drain()

    async def calls(url):
        async with httpx.AsyncClient(base_url=url, transport=LeanHTTPTransport()) as client:
            a = await client.post("/len", json={"x": 1})
            b = await client.get("/chunked")
            async with client.stream("GET", "/chunked") as resp:
                pieces = [p async for p in resp.aiter_raw()]
            c = await client.get("/len")
            d = await client.get("/close")
            e = await client.get("/len")
        return a, b, pieces, c, d, e

    (a, b, pieces, c, d, e), connections = _run_with_raw_server(script, calls)
    assert a.text == "hello" and a.headers["x-echo"] == "7"
    assert b.text == "abcdefg" and pieces == [b"abc", b"defg"]
    assert c.text == "hello" and d.text == "until the end" and e.text == "hello"
    assert connections == 2  # one kept alive for four requests; a new one after "Connection: close"


def test_lean_transport_retries_a_stale_keepalive_and_maps_errors():
    from helix_context.llm.lean_http import LeanHTTPTransport

    async def script(reader, writer, n):
        head, _ = await _read_request(reader)
        path = head.split(b" ")[1]
        if path == b"/once":  # answers, then drops the kept-alive connection
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        elif path == b"/cut":
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
        elif path == b"/slow":
            await asyncio.sleep(2)
        await writer.drain()

    async def calls(url):
        async with httpx.AsyncClient(base_url=url, transport=LeanHTTPTransport()) as client:
            first = await client.get("/once")
            await asyncio.sleep(0.05)
            second = await client.get("/once")  # the pooled connection is dead: a fresh one is used
            errors = []
            for path, kwargs in (("/cut", {}), ("/slow", {"timeout": 0.3})):
                try:
                    await client.get(path, **kwargs)
                except httpx.HTTPError as exc:
                    errors.append(exc)
        with socket.socket() as held:  # a port held but not listening: the connection is refused
            held.bind(("127.0.0.1", 0))
            refused = f"http://127.0.0.1:{held.getsockname()[1]}"
            async with httpx.AsyncClient(base_url=refused, transport=LeanHTTPTransport()) as client:
                try:
                    await client.get("/")
                except httpx.HTTPError as exc:
                    errors.append(exc)
        return first, second, errors

    (first, second, errors), _ = _run_with_raw_server(script, calls)
    assert first.text == second.text == "ok"
    assert [type(e) for e in errors] == [httpx.RemoteProtocolError, httpx.ReadTimeout, httpx.ConnectError]


def test_lean_transport_raw_face_splits_lines_across_reads_and_inflates_gzip():
    import gzip

    from helix_context.llm.lean_http import LeanHTTPTransport, Timeouts

    async def script(reader, writer, n):
        async for head, body in _requests(reader):
            if head.split(b" ")[1] == b"/lines":  # lines cut mid-way, a \r\n split over two chunks, a lone \r
                writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                for part in (b"data: o", b"ne\r", b"\n\ndata: two\rdata: thr", "ee\u2028\n".encode(), b"tail"):
                    writer.write(b"%x\r\n%s\r\n" % (len(part), part))
                    await writer.drain()
                    await asyncio.sleep(0.01)
                writer.write(b"0\r\n\r\n")
            else:
                packed = gzip.compress(body)
                writer.write(b"HTTP/1.1 201 Created\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n"
                             % len(packed) + packed)
            await writer.drain()

    async def calls(url):
        host, port = url.removeprefix("http://").split(":")
        transport = LeanHTTPTransport()
        timeouts = Timeouts(1.0, 5.0, 5.0)
        try:
            head = b"GET /lines HTTP/1.1\r\nHost: x\r\n\r\n"
            lines = [line async for line in (await transport.send(host, int(port), head, b"", timeouts,
                                                                   method="GET")).aiter_lines()]
            head = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n\r\n"
            echo = await transport.send(host, int(port), head, b'{"a":1}', timeouts)
            return lines, echo.status_code, echo.reason_phrase, await echo.aread(), echo.json()
        finally:
            await transport.aclose()

    (lines, status, reason, content, data), connections = _run_with_raw_server(script, calls)
    assert lines == ["data: one", "", "data: two", "data: three\u2028", "tail"]
    assert (status, reason, content, data) == (201, "Created", b'{"a":1}', {"a": 1})
    assert connections == 1  # the streamed answer was read to its end, so its connection was reused


# ── Ollama upstream over HTTP ──
