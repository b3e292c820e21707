"""The OpenAI-compatible proxy, end to end over HTTP.

The real app runs on uvicorn (tests/conftest.py LiveServer) with a tmp HELIX_HOME;
its upstream is tests/server/upstream_stub.py, a real HTTP server speaking Ollama's
and OpenAI's wire formats and recording what it received. Callers use the official
``openai`` client, as users do.
"""

from __future__ import annotations

import importlib.util
import json
import math
import socket
import sys
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest
from openai import OpenAI

from helix_context.answer.assemble import estimate_messages_tokens

_spec = importlib.util.spec_from_file_location("helix_upstream_stub", Path(__file__).with_name("upstream_stub.py"))
stub_module = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("helix_upstream_stub", stub_module)
_spec.loader.exec_module(stub_module)
UpstreamStub = stub_module.UpstreamStub

FACT = "The zorblax frobnicator listens on port 48213 and reads flux_capacity=7 from /etc/zorblax.toml."
QUESTION = "Which port does the zorblax frobnicator listen on?"


# ── fixtures ──


@pytest.fixture
def stub():
    with UpstreamStub() as s:
        yield s


@pytest.fixture
def openai_stub():
    """An OpenAI-only upstream (like llama.cpp's server: no /api/* routes)."""
    with UpstreamStub(kinds=("openai",)) as s:
        yield s


def _settings(settings, upstream_url: str, **proxy):
    return settings.replace(
        proxy={"upstream_url": upstream_url, "upstream_kind": "auto", "timeout_s": 5.0, "connect_timeout_s": 1.0,
               **proxy},
        embedding={"enabled": False}, ner={"enabled": False}, assembly={"headroom": False})


@pytest.fixture
def start(settings, server_factory, monkeypatch):
    """start(upstream_url, proxy=..., ribosome=...) -> (LiveServer, OpenAI client)."""


    def _start(upstream_url: str, *, ribosome: dict | None = None, **proxy):
        cfg = _settings(settings, upstream_url, **proxy)
        if ribosome:
            # what is asked here is whether the expansion reaches retrieval; whether a message sharing no
            # word with a one-gene, embedding-less genome is on topic is weigh/silence.py's (tests/server/test_scoping.py)
            cfg = cfg.replace(ribosome=ribosome, retrieval={"silence": False})
        server = server_factory(cfg)
        client = OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0, timeout=30)
        return server, client

    return _start


def _ingest(server, text: str = FACT, path: str = "srv/zorblax/README.md") -> None:
    report = server.app.state.helix.ingest(text, content_type="text", metadata={"path": path}, embed=False)
    assert report.genes_added >= 1


def _system_texts(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "system"]


# ── the proxy over HTTP ──


def test_non_stream_injects_expressed_context_for_ollama(stub, start):
    server, client = start(stub.url)
    _ingest(server)
    raw = client.chat.completions.with_raw_response.create(
        model="llama3.1:8b", messages=[{"role": "user", "content": QUESTION}], max_tokens=64)
    completion = raw.parse()
    assert completion.choices[0].message.content == stub.reply
    assert completion.usage.prompt_tokens > 0 and completion.usage.completion_tokens > 0
    assert int(raw.headers["x-helix-genes"]) >= 1

    sent = stub.last_chat()
    assert sent["path"] == "/api/chat"
    systems = _system_texts(sent["json"])
    assert systems and "<expressed_context>" in systems[0] and "48213" in systems[0]
    assert sent["json"]["messages"][-1] == {"role": "user", "content": QUESTION}
    # Ollama truncates silently without num_ctx: it must cover the whole prompt plus the answer
    num_ctx = sent["json"]["options"]["num_ctx"]
    assert num_ctx >= estimate_messages_tokens(sent["json"]["messages"]) + 64
    assert sent["json"]["options"]["num_predict"] == 64
    assert "/no_think" not in systems[0] and "temperature" not in sent["json"]["options"]  # not a small model


def test_a_lone_surrogate_in_a_chat_keeps_its_context(stub, settings, server_factory):
    """A chat message may carry a lone surrogate (`\\ud800`, which JSON allows); it is passed on to the model,
    and retrieval reads the rest: the embedding model's tokenizer refused it, and the chat went without
    context. Embeddings on: the tokenizer is the part that failed."""
    cfg = _settings(settings, stub.url).replace(embedding={"enabled": True})
    server = server_factory(cfg)
    server.app.state.helix.ingest(FACT, content_type="text", metadata={"path": "srv/zorblax/README.md"})
    body = ('{"model": "llama3.1:8b", "messages": [{"role": "user", "content": "\\ud800 ' + QUESTION + '"}]}')
    with server.client() as http:
        resp = http.post("/v1/chat/completions", content=body.encode(), headers={"content-type": "application/json"})
    assert resp.status_code == 200, resp.text
    assert resp.headers["x-helix-context"] == "injected"
    sent = stub.last_chat()["json"]
    assert "48213" in _system_texts(sent)[0]
    assert sent["messages"][-1]["content"] == "\ud800 " + QUESTION


def test_num_ctx_grows_with_a_long_prompt(stub, start):
    server, client = start(stub.url)
    long_text = " ".join(f"word{i} alpha beta gamma" for i in range(2500))  # ~10k tokens
    client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": long_text}])
    sent = stub.last_chat()["json"]
    prompt = estimate_messages_tokens(sent["messages"])
    assert prompt > 8000
    assert sent["options"]["num_ctx"] >= prompt + 1024  # the answer reserve when max_tokens is not given


def test_caller_system_message_stays_first(stub, start):
    server, client = start(stub.url)
    _ingest(server)
    client.chat.completions.create(model="llama3.1:8b", messages=[
        {"role": "system", "content": "You are terse."}, {"role": "user", "content": QUESTION}])
    messages = stub.last_chat()["json"]["messages"]
    assert messages[0] == {"role": "system", "content": "You are terse."}
    assert messages[1]["role"] == "system" and "<expressed_context>" in messages[1]["content"]
    assert messages[2]["role"] == "user"


def test_small_model_gets_no_think_and_temperature_zero(stub, start):
    server, client = start(stub.url)
    _ingest(server)
    client.chat.completions.create(model="qwen3:0.6b", messages=[{"role": "user", "content": QUESTION}])
    sent = stub.last_chat()["json"]
    system = _system_texts(sent)
    assert any(s.rstrip().endswith("/no_think") for s in system)
    assert sent["options"]["temperature"] == 0

    # the caller's temperature wins; /no_think goes on the caller's system prompt, once
    client.chat.completions.create(model="qwen3:0.6b", temperature=0.7, messages=[
        {"role": "system", "content": "Be nice. /no_think"}, {"role": "user", "content": "hello there"}])
    sent = stub.last_chat()["json"]
    assert sent["options"]["temperature"] == 0.7
    assert sent["messages"][0]["content"].count("/no_think") == 1


def test_injection_can_be_turned_off_per_request(stub, start):
    server, client = start(stub.url)
    _ingest(server)
    client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": QUESTION}],
                                   extra_headers={"X-Helix-Inject": "off"})
    assert not any("<expressed_context>" in s for s in _system_texts(stub.last_chat()["json"]))
    client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": QUESTION}],
                                   extra_body={"helix_inject": False})
    sent = stub.last_chat()["json"]
    assert not any("<expressed_context>" in s for s in _system_texts(sent))
    assert "helix_inject" not in sent


def test_nothing_relevant_means_nothing_injected(stub, start):
    server, client = start(stub.url)
    _ingest(server)
    client.chat.completions.create(model="llama3.1:8b",
                                   messages=[{"role": "user", "content": "banana bread recipe please"}])
    assert _system_texts(stub.last_chat()["json"]) == []


def test_stream_from_ollama_arrives_in_order_in_several_chunks(stub, start):
    server, client = start(stub.url)
    _ingest(server)
    stream = client.chat.completions.create(model="llama3.1:8b", stream=True,
                                            stream_options={"include_usage": True},
                                            messages=[{"role": "user", "content": QUESTION}])
    pieces, finish, usage = [], None, None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.content:
                pieces.append(choice.delta.content)
            finish = choice.finish_reason or finish
    assert len(pieces) >= 5
    assert "".join(pieces) == stub.reply
    assert finish == "stop"
    assert usage is not None and usage.completion_tokens == len(stub.reply.split(" "))
    sent = stub.last_chat()["json"]
    assert sent["stream"] is True and "48213" in _system_texts(sent)[0]


def test_stream_is_relayed_as_it_arrives(stub, start):
    """The first chunk reaches the caller long before the upstream has finished."""
    server, client = start(stub.url)
    stub.chunk_delay = 0.15
    t0 = time.perf_counter()
    stream = client.chat.completions.create(model="llama3.1:8b", stream=True,
                                            messages=[{"role": "user", "content": "hi"}])
    first_at = None
    for chunk in stream:
        if first_at is None and chunk.choices and chunk.choices[0].delta.content:
            first_at = time.perf_counter() - t0
    total = time.perf_counter() - t0
    words = len(stub.reply.split(" "))
    assert total >= 0.15 * (words - 1)
    assert first_at is not None and first_at < total / 2


# ── OpenAI-compatible upstream over HTTP ──


def test_openai_upstream_passthrough_stream_and_not(openai_stub, start):
    server, client = start(openai_stub.url)
    _ingest(server)
    completion = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": QUESTION}],
        extra_body={"session_id": "s-openai", "frobnicate": {"x": 1}},
        tools=[{"type": "function", "function": {"name": "noop", "parameters": {"type": "object"}}}])
    assert completion.choices[0].message.content == openai_stub.reply
    sent = openai_stub.last_chat()
    assert sent["path"] == "/v1/chat/completions"
    body = sent["json"]
    assert "<expressed_context>" in _system_texts(body)[0] and "48213" in _system_texts(body)[0]
    assert body["frobnicate"] == {"x": 1} and body["tools"][0]["function"]["name"] == "noop"  # passed through
    assert "session_id" not in body and "options" not in body  # Helix's own fields stay home

    stream = client.chat.completions.create(model="gpt-4o-mini", stream=True,
                                            messages=[{"role": "user", "content": QUESTION}])
    pieces = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert len(pieces) >= 5 and "".join(pieces) == openai_stub.reply
    assert openai_stub.last_chat()["json"]["stream"] is True
    assert not openai_stub.seen("/api/chat")


def test_models_are_listed_in_openai_shape_for_both_kinds(stub, openai_stub, start):
    for upstream in (stub, openai_stub):
        _, client = start(upstream.url)
        ids = [m.id for m in client.models.list()]
        assert ids == upstream.models


def test_upstream_kind_is_probed_once(stub, start):
    _, client = start(stub.url)
    for _ in range(3):
        client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": "hi"}])
    assert len(stub.seen("/api/version")) == 1
    assert len(stub.seen("/api/chat")) == 3


# ── failures ──


def _dead_url() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_upstream_down_is_a_502_that_says_what_to_check(start):
    url = _dead_url()
    server, client = start(url)
    for stream in (False, True):
        with pytest.raises(openai.APIStatusError) as info:
            client.chat.completions.create(model="llama3.1:8b", stream=stream,
                                           messages=[{"role": "user", "content": "hi"}])
        assert info.value.status_code == 502
        error = info.value.body
        assert url in error["message"] and "ollama serve" in error["message"]
        assert error["type"] == "upstream_error" and error["code"] == "upstream_unreachable"
    with pytest.raises(openai.APIStatusError) as info:
        client.models.list()
    assert info.value.status_code == 502
    with server.client() as http:
        assert http.get("/health").status_code == 200


def test_upstream_500_and_timeout_are_502(stub, start):
    server, client = start(stub.url, timeout_s=1.0)
    client.models.list()  # probe the kind while the stub is healthy
    stub.mode = "fail"
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": "hi"}])
    assert info.value.status_code == 502 and info.value.body["code"] == "upstream_http_500"
    assert "stub upstream failure" in info.value.body["message"] and stub.url in info.value.body["message"]

    stub.mode = "hang"
    t0 = time.perf_counter()
    for stream in (False, True):
        with pytest.raises(openai.APIStatusError) as info:
            client.chat.completions.create(model="llama3.1:8b", stream=stream,
                                           messages=[{"role": "user", "content": "hi"}])
        assert info.value.status_code == 502 and info.value.body["code"] == "upstream_timeout"
        assert "timed out" in info.value.body["message"] and "timeout_s" in info.value.body["message"]
    assert time.perf_counter() - t0 < 10
    stub.mode = "ok"
    with server.client() as http:
        assert http.get("/health").status_code == 200


def test_a_kind_probe_that_times_out_says_its_own_limit_and_how_to_skip_it(start):
    """The probe has its own limit (twice connect_timeout_s); the message named timeout_s and told the user
    to raise it, which does not change the probe. The upstream: a port that accepts and never answers."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        _, client = start(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout_s=30.0)
        with pytest.raises(openai.APIStatusError) as info:
            client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": "hi"}])
    message = info.value.body["message"]
    assert info.value.status_code == 502 and info.value.body["code"] == "upstream_timeout"
    assert "timed out after 2 s" in message and "upstream_kind" in message, message


def test_unknown_model_is_a_clear_404(stub, openai_stub, start):
    _, client = start(stub.url)
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="nosuch:7b", messages=[{"role": "user", "content": "hi"}])
    assert "ollama pull nosuch:7b" in info.value.body["message"]
    assert info.value.body["code"] == "model_not_found"
    _, client = start(openai_stub.url)
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="nosuch", stream=True, messages=[{"role": "user", "content": "hi"}])
    assert "nosuch" in info.value.body["message"]


def test_malformed_bodies_are_422_naming_the_field(stub, start):
    server, _ = start(stub.url)
    with server.client() as http:
        cases = [({"model": "m"}, "messages"),
                 ({"model": "m", "messages": []}, "messages"),
                 ({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}, "messages.0.role"),
                 ({"model": "m", "messages": [{"role": "user"}]}, "messages.0"),
                 ({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 9}, "temperature")]
        for body, field in cases:
            resp = http.post("/v1/chat/completions", json=body)
            assert resp.status_code == 422, body
            assert field in resp.json()["error"]["message"], (body, resp.json())
        resp = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}]})
        assert resp.status_code == 422 and "default_model" in resp.json()["error"]["message"]
        resp = http.post("/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"})
        assert resp.status_code == 422
    assert not stub.chats()


def test_default_model_is_used_when_the_request_names_none(stub, start):
    server, _ = start(stub.url, default_model="llama3.1:8b")
    with server.client() as http:
        resp = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}]})
    assert resp.status_code == 200
    assert stub.last_chat()["json"]["model"] == "llama3.1:8b"


def test_upstream_cut_mid_stream_reaches_the_caller_as_an_error(stub, start):
    server, client = start(stub.url)
    stub.mode = "cut"
    with pytest.raises(openai.APIError, match="broke off"):
        for _ in client.chat.completions.create(model="llama3.1:8b", stream=True,
                                                messages=[{"role": "user", "content": "hi"}]):
            pass
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": "hi"}])
    assert info.value.status_code == 502
    stub.mode = "ok"
    assert client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": "hi"}])


@pytest.mark.parametrize("kinds", [("ollama", "openai"), ("openai",)])
def test_client_disconnect_mid_stream_closes_the_upstream(kinds, start):
    with UpstreamStub(kinds=kinds, reply=" ".join(f"w{i}" for i in range(200))) as upstream:
        server, client = start(upstream.url)
        upstream.chunk_delay = 0.02
        body = {"model": "llama3.1:8b", "stream": True, "messages": [{"role": "user", "content": "count"}]}
        with httpx.Client(base_url=server.url, timeout=10) as http:
            with http.stream("POST", "/v1/chat/completions", json=body) as resp:
                assert resp.status_code == 200
                lines = resp.iter_lines()
                assert next(line for line in lines if line.startswith("data:"))
            # leaving the block closes our connection mid-stream
        assert upstream.wait_aborted(10), "the proxy kept the upstream stream open after the caller left"
        entry = upstream.last_chat()
        assert entry["aborted"] and entry["chunks_sent"] < 200
        # the server is fine and serves the next chat
        upstream.chunk_delay = 0.0
        assert client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": "hi"}])
        with server.client() as h:
            assert h.get("/health").status_code == 200


@pytest.mark.parametrize("stream", [False, True])
def test_caller_hanging_up_on_a_slow_answer_cancels_the_upstream_request(stub, start, stream):
    """A caller that leaves while the upstream still works (a slow answer; for a stream, before its first byte,
    Ollama loading a model) cancels the upstream request: retries must not pile up requests the upstream keeps
    working on until timeout_s."""
    server, client = start(stub.url, timeout_s=60.0)
    client.models.list()  # the kind probe happens while the stub answers
    stub.mode = "hang"
    body = {"model": "llama3.1:8b", "stream": stream, "messages": [{"role": "user", "content": "think hard"}]}
    with httpx.Client(base_url=server.url) as http:
        with pytest.raises(httpx.ReadTimeout):
            http.post("/v1/chat/completions", json=body, timeout=httpx.Timeout(1.0))
    assert stub.wait_aborted(5), "the proxy kept waiting on the upstream after its caller left"
    assert stub.last_chat()["aborted"]
    stub.mode = "ok"
    answer = client.chat.completions.create(model="llama3.1:8b", stream=stream,
                                            messages=[{"role": "user", "content": "hi"}])
    assert "".join(chunk.choices[0].delta.content or "" for chunk in answer) if stream else answer


@pytest.mark.parametrize(("kinds", "odd"), [(("ollama", "openai"), "hello"), (("ollama", "openai"), [1, 2]),
                                            (("ollama", "openai"), None),
                                            (("ollama", "openai"), {"message": "hello", "done": True}),
                                            (("ollama", "openai"), {"message": {"content": 7}, "done": True}),
                                            (("openai",), [1, 2])])
def test_an_upstream_answer_that_is_no_chat_object_is_a_502_or_a_stream_error(kinds, odd, start):
    """A broken or foreign upstream answering a JSON value that is no chat answer: the caller gets a 502
    saying so (a stream: an error event), not a 500 or a stream cut off without a word."""
    with UpstreamStub(kinds=kinds) as upstream:
        server, client = start(upstream.url)
        client.models.list()
        upstream.mode, upstream.odd = "odd", odd
        with pytest.raises(openai.APIStatusError) as info:
            client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": "hi"}])
        assert info.value.status_code == 502, info.value.body
        assert info.value.body["code"] == "upstream_bad_response" and upstream.url in info.value.body["message"]
        with pytest.raises(openai.APIError, match="cannot relay" if "ollama" in kinds else "not server-sent events"):
            for _ in client.chat.completions.create(model="llama3.1:8b", stream=True,
                                                    messages=[{"role": "user", "content": "hi"}]):
                pass
        upstream.mode = "ok"
        assert client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": "hi"}])


def test_a_password_in_the_upstream_url_stays_out_of_errors_and_logs(stub, start, caplog):
    """/health redacted upstream_url's user:password; the proxy's own errors and log lines did not, so every
    chat client that shows an error held the upstream's password."""
    url = stub.url.replace("http://", "http://helix:s3cr3t-pw@")
    server, client = start(url)
    with caplog.at_level("INFO", logger="helix.proxy"):
        client.models.list()
        stub.mode = "fail"
        for stream in (False, True):
            with pytest.raises(openai.APIStatusError) as info:
                client.chat.completions.create(model="llama3.1:8b", stream=stream,
                                               messages=[{"role": "user", "content": "hi"}])
            assert info.value.status_code == 502
            message = info.value.body["message"]
            assert "s3cr3t-pw" not in message and f"***@127.0.0.1:{stub.port}" in message, message
    assert "detected as ollama" in caplog.text and "s3cr3t-pw" not in caplog.text


def test_many_concurrent_streams(stub, start):
    server, client = start(stub.url)
    errors: list[BaseException] = []
    results: list[str] = []

    def one(i: int) -> None:
        try:
            stream = client.chat.completions.create(model="llama3.1:8b", stream=True,
                                                    messages=[{"role": "user", "content": f"q{i}"}],
                                                    extra_headers={"X-Helix-Session": f"conc-{i % 3}"})
            results.append("".join(c.choices[0].delta.content or "" for c in stream if c.choices))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors and results == [stub.reply] * 12
    with server.client() as http:
        sessions = {s["session_id"]: s for s in http.get("/sessions").json()["sessions"]}
    assert sum(sessions[f"conc-{k}"]["requests"] for k in range(3)) == 12


# ── the chat fast path (helix_context.server.fast_path) ──


def test_chat_fast_path_keeps_key_checks_body_limit_and_route_metrics(settings, server_factory, openai_stub):
    server = server_factory(_settings(settings, openai_stub.url).replace(
        api_key="s3cret", server={"max_body_bytes": 20_000}))
    url, auth = server.url + "/v1/chat/completions", {"Authorization": "Bearer s3cret"}
    body = {"model": "llama3.1:8b", "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(url, json=body).status_code == 401
    ok = httpx.post(url, json=body, headers=auth)
    assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"] == openai_stub.reply
    assert ok.headers["content-type"] == "application/json" and ok.headers["x-helix-session"].startswith("anon-")

    big = json.dumps({**body, "messages": [{"role": "user", "content": "z" * 50_000}]}).encode()
    assert httpx.post(url, content=big, headers={**auth, "Content-Type": "application/json"}).status_code == 413
    chunks = (big[i:i + 4096] for i in range(0, len(big), 4096))  # no Content-Length: counted as it arrives
    refused = httpx.post(url, content=chunks, headers={**auth, "Content-Type": "application/json"})
    assert refused.status_code == 413 and "payload_too_large" in refused.text
    # what the fast path does not take (another content type, a body that does not validate) gets the route's answer
    odd = httpx.post(url, content=json.dumps(body), headers={**auth, "Content-Type": "text/plain"})
    assert odd.status_code == 422 and "valid dictionary" in odd.json()["error"]["message"]  # FastAPI's verdict
    bad = httpx.post(url, json={**body, "temperature": 9}, headers=auth)
    assert bad.status_code == 422 and "temperature" in bad.json()["error"]["message"]
    assert len(openai_stub.chats()) == 1

    series = server.app.state.telemetry.snapshot()["histograms"]["http.server.request.duration"]["series"]
    seen = {(s["attrs"].get("http.route"), s["attrs"]["http.response.status_code"]): s["count"] for s in series}
    assert seen[("/v1/chat/completions", 200)] == 1 and seen[("/v1/chat/completions", 422)] == 2
    assert seen[(None, 401)] == 1 and seen[(None, 413)] == 2


# ── sessions and consolidation ──


def test_sessions_are_listed_and_consolidate_into_a_findable_gene(stub, start):
    server, client = start(stub.url)
    _ingest(server)
    stub.reply = "The quokka relay protocol runs on port 7311 with handshake_mode=triple."
    client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": QUESTION}],
                                   extra_headers={"X-Helix-Session": "sess-alpha", "X-Helix-Agent": "pytest-agent"})
    stream = client.chat.completions.create(model="llama3.1:8b", stream=True, user="sess-alpha",
                                            messages=[{"role": "user", "content": "And the quokka relay?"}],
                                            extra_headers={"X-Helix-Agent": "pytest-agent"})
    assert "7311" in "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    stub.reply = "ok"
    client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": "hello"}])

    with server.client() as http:
        sessions = http.get("/sessions").json()["sessions"]
        by_id = {s["session_id"]: s for s in sessions}
        alpha = by_id["sess-alpha"]
        assert alpha["requests"] == 2 and alpha["genes_delivered"] >= 1 and alpha["agent"] == "pytest-agent"
        assert alpha["last_seen"] >= alpha["first_seen"] > 0
        anon = [s for s in sessions if s["session_id"].startswith("anon-")]
        assert len(anon) == 1 and anon[0]["requests"] == 1  # derived from the caller

        report = http.post("/consolidate").json()
        assert report["sessions"] == 2 and report["exchanges"] == 6 and report["genes_added"] >= 2
        assert report["method"]["sess-alpha"] == "notes"
        assert http.post("/consolidate").json()["exchanges"] == 0  # each exchange is consolidated once

    helix = server.app.state.helix
    window = helix.build_context("quokka relay protocol port")
    assert "7311" in window.expressed_context and "sessions/sess-alpha/" in window.expressed_context
    genes = [g for g in helix.genome.iter_genes() if "quokka" in g.content]
    assert genes and all(g.provenance.source_kind == "session" for g in genes)
    assert genes[0].provenance.authority_class == "inferred" and genes[0].provenance.volatility_class == "medium"

    # and the proxy injects it into a later chat
    stub.reply = "ok"
    client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": "quokka relay port?"}])
    assert "7311" in _system_texts(stub.last_chat()["json"])[0]


def test_exchanges_still_queued_at_a_clean_stop_reach_the_genome(stub, start, settings):
    from helix_context.manager import HelixContextManager

    server, client = start(stub.url)
    for i in range(5):
        client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": f"last words {i}"}],
                                       extra_headers={"X-Helix-Session": "at-shutdown", "X-Helix-Inject": "off"})
    server.stop()  # no /sessions call first: nothing has asked the recorder to flush
    assert not server.thread.is_alive()
    helix = HelixContextManager(settings)
    try:
        sessions = {s["session_id"]: s for s in helix.genome.sessions()}
        assert sessions["at-shutdown"]["requests"] == 5
        texts = [content for _, sid, _, content in helix.genome.pending_exchanges() if sid == "at-shutdown"]
        assert texts == [t for i in range(5) for t in (f"last words {i}", stub.reply)]
    finally:
        helix.close()


def test_consolidate_asks_the_ribosome_when_enabled_and_falls_back(stub, start):
    server, client = start(stub.url, ribosome={"enabled": True, "model": "qwen3:0.6b", "timeout_s": 1.0})
    stub.reply = "- the wibble service uses port 9911"
    client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": "wibble port?"}],
                                   extra_headers={"X-Helix-Session": "rib-1"})
    with server.client() as http:
        report = http.post("/consolidate").json()
    assert report["method"] == {"rib-1": "ribosome"}
    summary_call = stub.last_chat()["json"]
    assert "Summarise" in summary_call["messages"][0]["content"] and summary_call["options"]["temperature"] == 0
    assert summary_call["messages"][0]["content"].endswith("/no_think")

    # a hung ribosome times out and the LLM-free notes are written instead
    client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": "again?"}],
                                   extra_headers={"X-Helix-Session": "rib-2", "X-Helix-Inject": "off"})
    stub.mode = "hang"
    t0 = time.perf_counter()
    with server.client() as http:
        report = http.post("/consolidate").json()
    assert report["method"] == {"rib-2": "notes"} and time.perf_counter() - t0 < 8
    stub.mode = "ok"

    # paused: no ribosome call at all
    server.app.state.helix.set_ribosome_paused(True)
    client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": "third"}],
                                   extra_headers={"X-Helix-Session": "rib-3", "X-Helix-Inject": "off"})
    before = len(stub.chats())
    with server.client() as http:
        assert http.post("/consolidate").json()["method"] == {"rib-3": "notes"}
    assert len(stub.chats()) == before


def test_ribosome_expands_the_retrieval_query(stub, start):
    server, client = start(stub.url, ribosome={"enabled": True, "model": "qwen3:0.6b", "timeout_s": 2.0})
    _ingest(server)
    stub.reply = lambda body: ("zorblax, frobnicator" if "keywords" in body["messages"][0]["content"]
                               else "it is 48213")
    client.chat.completions.create(model="llama3.1:8b",
                                   messages=[{"role": "user", "content": "which socket number does the gizmo use?"}])
    chats = stub.chats()
    assert "keywords" in chats[-2]["json"]["messages"][0]["content"]  # the expansion call came first
    assert "48213" in _system_texts(chats[-1]["json"])[0]  # found only thanks to the expansion


def test_prompt_tokens_reported_by_upstream_grow_with_injection(stub, start):
    server, client = start(stub.url)
    _ingest(server)
    msgs = [{"role": "user", "content": QUESTION}]
    with_ctx = client.chat.completions.create(model="llama3.1:8b", messages=msgs)
    without = client.chat.completions.create(model="llama3.1:8b", messages=msgs,
                                             extra_headers={"X-Helix-Inject": "off"})
    assert with_ctx.usage.prompt_tokens > without.usage.prompt_tokens
    assert math.isfinite(with_ctx.usage.total_tokens)
