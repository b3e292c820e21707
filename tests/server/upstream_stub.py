"""A real HTTP upstream for proxy tests and benchmarks: Ollama's and OpenAI's wire formats.

Serves on 127.0.0.1 (free port) in a background thread:

- Ollama: GET /api/version, GET /api/tags, POST /api/chat (NDJSON stream or one JSON answer);
- OpenAI: GET /v1/models, POST /v1/chat/completions (SSE stream or one JSON answer).

Every request is recorded (method, path, headers, parsed JSON body). Switches:
``mode`` = "ok" | "fail" (500) | "hang" (sleep ``hang_s`` before answering) |
"cut" (close the connection mid-answer) | "odd" (the answer, and the stream's one line, is the
JSON value ``odd``, not even server-sent events for OpenAI's kind: a broken or foreign upstream); ``chunk_delay`` between stream chunks;
``kinds`` = which wire formats answer ({"ollama", "openai"}; the other's routes 404,
like llama.cpp's server has no /api/*). A model not in ``models`` gets each
format's 404. A stream whose reader went away is counted in ``aborted``.

Standalone (benchmarks): ``python tests/server/upstream_stub.py --port 0 [--kinds openai]``
prints ``READY <port>`` and serves until killed.
"""

from __future__ import annotations

import argparse
import collections
import json
import select
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_MODELS = ("qwen3:0.6b", "llama3.1:8b", "smollm2:135m", "gpt-4o-mini")
DEFAULT_REPLY = "The answer is forty two, according to the stub upstream."


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256  # the default 5 drops connections under concurrent load
    stub: UpstreamStub


def _prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """A crude count (chars / 4), enough for tests to see a prompt grow."""
    total = 0
    for m in messages or []:
        content = m.get("content")
        if isinstance(content, list):
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        total += len(str(content or "")) // 4 + 4
    return total


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # ── plumbing ──

    def setup(self) -> None:
        super().setup()
        # headers and body go out in separate writes: without TCP_NODELAY, Nagle + the
        # client's delayed ACK stall every answer by ~40 ms
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    @property
    def stub(self) -> UpstreamStub:
        return self.server.stub

    def _read_json(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return {"_unparsed": raw.decode("utf-8", "replace")}

    def _send_json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _start_chunked(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _record(self, body: Any) -> dict[str, Any]:
        entry = {"method": self.command, "path": self.path, "headers": dict(self.headers.items()),
                 "json": body, "at": time.time(), "aborted": False, "chunks_sent": 0}
        self.stub._record(entry)
        return entry

    def _hang(self, entry: dict[str, Any]) -> bool:
        """Sleep like a stuck model. False when the stub is stopping or the caller hung up
        (then the entry is marked aborted: the caller did not leave the request hanging)."""
        deadline = time.monotonic() + self.stub.hang_s
        while time.monotonic() < deadline:
            if self.stub._stopping.wait(0.05):
                return False
            readable, _, _ = select.select([self.connection], [], [], 0)
            if readable:
                try:
                    gone = self.connection.recv(1, socket.MSG_PEEK) == b""
                except OSError:
                    gone = True
                if gone:
                    entry["aborted"] = True
                    self.stub.aborted += 1
                    self.stub._aborted_event.set()
                    self.close_connection = True
                    return False
        return True

    # ── routes ──

    def do_GET(self) -> None:
        self._record(None)
        stub = self.stub
        if self.path == "/api/version" and "ollama" in stub.kinds:
            self._send_json(200, {"version": "0.12.0-stub"})
        elif self.path == "/api/tags" and "ollama" in stub.kinds:
            self._send_json(200, {"models": [{"name": m, "model": m, "modified_at": "2026-01-02T03:04:05.123456789Z",
                                              "size": 1000, "details": {"family": m.split(":")[0]}}
                                             for m in stub.models]})
        elif self.path == "/v1/models" and "openai" in stub.kinds:
            self._send_json(200, {"object": "list", "data": [{"id": m, "object": "model", "created": 1700000000,
                                                              "owned_by": "stub"} for m in stub.models]})
        elif self.path == "/health":
            self._send_json(200, {"status": "ok"})
        else:
            self._send_json(404, {"error": f"no route {self.path}"} if "ollama" in stub.kinds and
                            self.path.startswith("/api") else {"detail": "Not Found"})

    def do_POST(self) -> None:
        body = self._read_json()
        entry = self._record(body)
        stub = self.stub
        if self.path == "/api/chat" and "ollama" in stub.kinds:
            self._chat(entry, body or {}, ollama=True)
        elif self.path == "/v1/chat/completions" and "openai" in stub.kinds:
            self._chat(entry, body or {}, ollama=False)
        else:
            self._send_json(404, {"detail": "Not Found"})

    def _chat(self, entry: dict[str, Any], body: dict[str, Any], *, ollama: bool) -> None:
        stub = self.stub
        if stub.mode == "hang" and not self._hang(entry):
            return
        if stub.mode == "fail":
            self._send_json(500, {"error": "stub upstream failure (mode=fail)"} if ollama else
                            {"error": {"message": "stub upstream failure (mode=fail)", "type": "server_error"}})
            return
        model = body.get("model", "")
        if model not in stub.models:
            if ollama:
                self._send_json(404, {"error": f'model "{model}" not found, try pulling it first'})
            else:
                self._send_json(404, {"error": {"message": f"The model `{model}` does not exist",
                                                "type": "invalid_request_error", "code": "model_not_found"}})
            return
        if stub.mode == "odd":
            raw = json.dumps(stub.odd).encode()
            if not body.get("stream"):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
                return
            self._start_chunked("application/x-ndjson" if ollama else "text/event-stream")
            self._chunk(raw + b"\n")  # for OpenAI's kind: not server-sent events at all
            self._end_chunked()
            return
        reply = stub.reply_for(body)
        words = [w + " " for w in reply.split(" ")]
        words[-1] = words[-1].rstrip()
        prompt = _prompt_tokens(body.get("messages") or [])
        if not body.get("stream"):
            if stub.mode == "cut":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "100000")
                self.end_headers()
                self.wfile.write(b'{"partial": ')
                self.close_connection = True
                return
            if ollama:
                self._send_json(200, {"model": model, "created_at": "2026-01-02T03:04:05Z",
                                      "message": {"role": "assistant", "content": reply}, "done": True,
                                      "done_reason": "stop", "prompt_eval_count": prompt,
                                      "eval_count": len(words)})
            else:
                self._send_json(200, {"id": "chatcmpl-stub", "object": "chat.completion", "created": int(time.time()),
                                      "model": model,
                                      "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                                                   "finish_reason": "stop", "logprobs": None}],
                                      "usage": {"prompt_tokens": prompt, "completion_tokens": len(words),
                                                "total_tokens": prompt + len(words)}})
            return

        self._start_chunked("application/x-ndjson" if ollama else "text/event-stream")
        try:
            for i, word in enumerate(words):
                if stub.mode == "cut" and i == 2:
                    self.close_connection = True  # no terminating chunk: the reader sees a broken stream
                    return
                if ollama:
                    line = {"model": model, "created_at": "2026-01-02T03:04:05Z",
                            "message": {"role": "assistant", "content": word}, "done": False}
                    self._chunk(json.dumps(line).encode() + b"\n")
                else:
                    delta = {"role": "assistant", "content": word} if i == 0 else {"content": word}
                    chunk = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": int(time.time()),
                             "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
                    self._chunk(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                entry["chunks_sent"] += 1
                if stub.chunk_delay:
                    time.sleep(stub.chunk_delay)
            if ollama:
                final = {"model": model, "created_at": "2026-01-02T03:04:05Z",
                         "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop",
                         "prompt_eval_count": prompt, "eval_count": len(words)}
                self._chunk(json.dumps(final).encode() + b"\n")
            else:
                final = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": int(time.time()),
                         "model": model, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
                self._chunk(b"data: " + json.dumps(final).encode() + b"\n\n")
                if (body.get("stream_options") or {}).get("include_usage"):
                    usage = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": int(time.time()),
                             "model": model, "choices": [],
                             "usage": {"prompt_tokens": prompt, "completion_tokens": len(words),
                                       "total_tokens": prompt + len(words)}}
                    self._chunk(b"data: " + json.dumps(usage).encode() + b"\n\n")
                self._chunk(b"data: [DONE]\n\n")
            self._end_chunked()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError):
            entry["aborted"] = True
            stub.aborted += 1
            stub._aborted_event.set()
            self.close_connection = True


class UpstreamStub:
    def __init__(self, *, kinds: tuple[str, ...] = ("ollama", "openai"), models: tuple[str, ...] = DEFAULT_MODELS,
                 reply: str = DEFAULT_REPLY, port: int = 0, keep: int = 10_000) -> None:
        self.kinds = set(kinds)
        self.models = list(models)
        self.reply = reply
        self.mode = "ok"
        self.odd: Any = None  # what mode "odd" answers
        self.hang_s = 30.0
        self.chunk_delay = 0.0
        self.aborted = 0
        self.requests: collections.deque[dict[str, Any]] = collections.deque(maxlen=keep)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._aborted_event = threading.Event()
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.stub = self
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    # ── control ──

    def start(self) -> UpstreamStub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> UpstreamStub:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
        self.mode = "ok"
        self.chunk_delay = 0.0
        self.aborted = 0
        self._aborted_event.clear()

    def reply_for(self, body: dict[str, Any]) -> str:
        return self.reply(body) if callable(self.reply) else self.reply

    def wait_aborted(self, timeout: float) -> bool:
        return self._aborted_event.wait(timeout)

    # ── what it saw ──

    def _record(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(entry)

    def seen(self, path: str | None = None, method: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests if (path is None or r["path"] == path)
                    and (method is None or r["method"] == method)]

    def chats(self) -> list[dict[str, Any]]:
        return [r for r in self.seen(method="POST") if r["path"] in ("/api/chat", "/v1/chat/completions")]

    def last_chat(self) -> dict[str, Any]:
        chats = self.chats()
        assert chats, "the stub received no chat request"
        return chats[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--kinds", default="ollama,openai", help="comma-separated: ollama,openai")
    parser.add_argument("--reply", default=DEFAULT_REPLY)
    args = parser.parse_args(argv)
    stub = UpstreamStub(kinds=tuple(k.strip() for k in args.kinds.split(",") if k.strip()), reply=args.reply,
                        port=args.port, keep=100)
    stub.start()
    print(f"READY {stub.port}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        stub.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
