"""A lean keep-alive HTTP/1.1 client for plain-``http://`` upstreams: the proxy's hot path.

Why it exists: a proxied chat is one small request to a server on loopback, and on
the 2-core machine the proxy's CPU per chat is its latency under load. httpcore
spent ~0.6 ms of CPU per request there (it scans its whole pool every time), and
httpx's ``AsyncClient`` on top of any transport another ~0.25 ms building and
merging URL, header, cookie and auth objects. Here a request is a precomputed head
plus the body, written to a pooled asyncio connection, and the answer's head is
parsed by hand. Two faces over one pool:

- :meth:`LeanHTTPTransport.send` — bytes in, :class:`RawResponse` out, no httpx
  objects; :class:`helix_context.llm.upstream.UpstreamClient` sends chats this way;
- :meth:`LeanHTTPTransport.handle_async_request` — the same as an
  ``httpx.AsyncBaseTransport`` for everything else (kind probes, model lists, the
  benchmarks' load generator). ``https://`` goes to httpx's own transport.

Errors are httpx's exceptions on both faces, so callers handle one family. The only
network calls made with it are the LLM wing's (``helix_context.llm``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
import zlib
from collections.abc import AsyncIterator, Awaitable
from typing import Any, NamedTuple, Protocol, TypeVar

import httpx

MAX_HEAD_BYTES = 1 << 20
_T = TypeVar("_T")


class Timeouts(NamedTuple):
    """Seconds per phase (None: wait forever), like ``httpx.Timeout``: connect, then each write / read."""

    connect: float | None
    read: float | None
    write: float | None


class _Connection:
    """One keep-alive HTTP/1.1 connection (asyncio streams)."""

    __slots__ = ("reader", "writer", "loop", "idle_since")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.loop = asyncio.get_running_loop()
        self.idle_since = 0.0

    def usable(self, expiry_s: float) -> bool:
        return (self.loop is asyncio.get_running_loop() and not self.reader.at_eof()
                and not self.writer.is_closing() and time.monotonic() - self.idle_since < expiry_s)

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:  # already gone
            pass


class _StaleConnection(Exception):
    """A reused keep-alive connection was closed by the server before it answered."""


async def _timed(awaitable: Awaitable[_T], seconds: float | None, on_timeout: type[httpx.TimeoutException],
                 request: httpx.Request | None) -> _T:
    if seconds is None:
        return await awaitable
    try:
        async with asyncio.timeout(seconds):
            return await awaitable
    except TimeoutError:
        raise on_timeout(f"timed out after {seconds:g} s", request=request) from None


class _ResponseBody(httpx.AsyncByteStream):
    """The body of one answer, read from its connection as it is iterated; closing it returns the
    connection to the pool (when the body was read to its end and the server keeps it alive)."""

    def __init__(self, transport: LeanHTTPTransport, key: tuple[str, int], conn: _Connection,
                 request: httpx.Request | None, length: int | None, chunked: bool, keep_alive: bool,
                 read_timeout: float | None) -> None:
        self._transport = transport
        self._key = key
        self._conn = conn
        self._request = request
        self._length = length
        self._chunked = chunked
        self._keep_alive = keep_alive and (chunked or length is not None)
        self._timeout = read_timeout
        self._complete = length == 0 and not chunked
        self._closed = False

    async def _read(self, awaitable: Awaitable[bytes]) -> bytes:
        try:
            return await _timed(awaitable, self._timeout, httpx.ReadTimeout, self._request)
        except asyncio.IncompleteReadError:
            raise httpx.RemoteProtocolError("peer closed connection without sending complete message body"
                                            + (" (incomplete chunked read)" if self._chunked else ""),
                                            request=self._request) from None
        except (ValueError, asyncio.LimitOverrunError):
            raise httpx.RemoteProtocolError("malformed chunked body", request=self._request) from None
        except OSError as exc:
            raise httpx.ReadError(str(exc) or type(exc).__name__, request=self._request) from None

    async def read_all(self) -> bytes:
        """The whole body. A body with a Content-Length is one read (usually already buffered)."""
        if self._length is not None and not self._chunked and not self._complete and not self._closed:
            data = await self._read(self._conn.reader.readexactly(self._length))
            self._complete = True
            return data
        return b"".join([part async for part in self])

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._complete or self._closed:
            return
        reader = self._conn.reader
        if self._chunked:
            while True:
                line = await self._read(reader.readuntil(b"\r\n"))
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise httpx.RemoteProtocolError(f"bad chunk size line {line[:40]!r}",
                                                    request=self._request) from None
                if size == 0:
                    while (await self._read(reader.readuntil(b"\r\n"))) != b"\r\n":
                        pass  # trailers
                    break
                data = await self._read(reader.readexactly(size + 2))
                yield data[:-2]
        elif self._length is not None:
            remaining = self._length
            while remaining > 0:
                data = await self._read(reader.read(min(remaining, 65536)))
                if not data:
                    raise httpx.RemoteProtocolError("peer closed connection without sending complete message body",
                                                    request=self._request)
                remaining -= len(data)
                yield data
        else:  # delimited by the connection closing
            while data := await self._read(reader.read(65536)):
                yield data
        self._complete = True

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._complete and self._keep_alive:
            self._transport._release(self._key, self._conn)
        else:
            self._conn.close()


class _Decoder(Protocol):
    """What a ``zlib.decompressobj`` offers (its class is not public)."""

    def decompress(self, data: bytes, /) -> bytes: ...

    def flush(self) -> bytes: ...


def _decoder(encoding: bytes) -> _Decoder | None:
    """zlib decoder for a Content-Encoding we may meet despite asking for identity; None for identity."""
    enc = encoding.strip().lower()
    if enc in (b"", b"identity"):
        return None
    if enc in (b"gzip", b"x-gzip"):
        return zlib.decompressobj(zlib.MAX_WBITS | 16)
    if enc == b"deflate":
        return zlib.decompressobj()
    raise httpx.DecodingError(f"unsupported Content-Encoding {encoding[:40]!r}")


def _inflate(decoder: _Decoder, data: bytes, *, final: bool = False) -> bytes:
    try:
        return decoder.decompress(data) + (decoder.flush() if final else b"")
    except zlib.error as exc:
        raise httpx.DecodingError(f"could not inflate the answer: {exc}") from None


class RawResponse:
    """An answer from :meth:`LeanHTTPTransport.send`: status, headers, and the body still on the wire.

    It offers the small part of ``httpx.Response`` that the proxy uses (``status_code``,
    ``reason_phrase``, ``aread``/``content``/``text``/``json``, ``aiter_lines``, ``aclose``),
    so error mapping works on either. Read it to the end or close it, or the connection is lost.
    """

    __slots__ = ("_content", "_encoding", "headers", "http_version", "reason_phrase", "status_code", "stream")

    def __init__(self, status: int, reason: bytes, version: bytes, headers: list[tuple[bytes, bytes]],
                 stream: _ResponseBody, encoding: bytes = b"") -> None:
        self.status_code = status
        self.reason_phrase = reason.decode("latin-1")
        self.http_version = version.decode("latin-1")
        self.headers = headers
        self.stream = stream
        self._content: bytes | None = None
        self._encoding = encoding

    async def aread(self) -> bytes:
        if self._content is None:
            try:
                data = await self.stream.read_all()
            finally:
                await self.stream.aclose()
            decoder = _decoder(self._encoding)
            self._content = data if decoder is None else _inflate(decoder, data, final=True)
        return self._content

    @property
    def content(self) -> bytes:
        if self._content is None:
            raise httpx.ResponseNotRead()
        return self._content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body as it arrives (inflated when the server compressed it anyway)."""
        decoder = _decoder(self._encoding)
        async for part in self.stream:
            yield part if decoder is None else _inflate(decoder, part)
        await self.stream.aclose()  # read to its end: the connection goes back to the pool now, as with httpx
        if decoder is not None:
            tail = _inflate(decoder, b"", final=True)
            if tail:
                yield tail

    async def aiter_lines(self) -> AsyncIterator[str]:
        """Text lines as they arrive (\\n, \\r\\n or \\r ends a line), like ``httpx.Response.aiter_lines``
        but split on bytes: a U+2028 inside a JSON string does not break a line here."""
        pending = b""
        async for part in self.aiter_raw():
            pending += part
            held_cr = pending.endswith(b"\r")  # maybe the first half of \r\n: decide with the next part
            if held_cr:
                pending = pending[:-1]
            if b"\n" in pending or b"\r" in pending:
                *lines, pending = pending.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
                for line in lines:
                    yield line.decode("utf-8", "replace")
            if held_cr:
                pending += b"\r"
        if pending:
            yield pending.rstrip(b"\r").decode("utf-8", "replace")

    async def aclose(self) -> None:
        await self.stream.aclose()


class LeanHTTPTransport(httpx.AsyncBaseTransport):
    """Keep-alive HTTP/1.1 on asyncio streams, for ``http://`` upstreams (see the module docstring)."""

    def __init__(self, *, max_idle_per_host: int = 64, keepalive_expiry_s: float = 4.0,
                 fallback: httpx.AsyncBaseTransport | None = None) -> None:
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._max_idle = max_idle_per_host
        self._expiry = keepalive_expiry_s
        self._fallback = fallback
        self._closed = False

    def _release(self, key: tuple[str, int], conn: _Connection) -> None:
        idle = self._idle.setdefault(key, [])
        if self._closed or len(idle) >= self._max_idle or not conn.usable(float("inf")):
            conn.close()
            return
        conn.idle_since = time.monotonic()
        idle.append(conn)

    async def _acquire(self, key: tuple[str, int], request: httpx.Request | None,
                       timeout: float | None) -> tuple[_Connection, bool]:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if conn.usable(self._expiry):
                return conn, True
            conn.close()
        try:
            reader, writer = await _timed(asyncio.open_connection(key[0], key[1], limit=MAX_HEAD_BYTES), timeout,
                                          httpx.ConnectTimeout, request)
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Connection(reader, writer), False

    # ── the raw face ──

    async def send(self, host: str, port: int, head: bytes, body: bytes, timeouts: Timeouts, *,
                   method: str = "POST", request: httpx.Request | None = None) -> RawResponse:
        """Send ``head`` (request line and headers, ending in a blank line) and ``body`` to host:port on a
        pooled connection; the answer's body is left on the wire (read or close the RawResponse).

        A kept-alive connection that the server closed while idle is retried once on a fresh one.
        ``request`` only labels the httpx exceptions raised."""
        key = (host, port)
        payload = head + body
        for attempt in (0, 1):
            conn, reused = await self._acquire(key, request, timeouts.connect)
            try:
                writer = conn.writer
                writer.write(payload)
                if writer.transport.get_write_buffer_size():  # the socket took it all: nothing to wait for
                    await _timed(writer.drain(), timeouts.write, httpx.WriteTimeout, request)
                try:
                    answer_head = await _timed(conn.reader.readuntil(b"\r\n\r\n"), timeouts.read,
                                               httpx.ReadTimeout, request)
                except asyncio.IncompleteReadError as exc:
                    if reused and not exc.partial:
                        raise _StaleConnection() from None
                    raise httpx.RemoteProtocolError("Server disconnected without sending a response.",
                                                    request=request) from None
                except asyncio.LimitOverrunError:
                    raise httpx.RemoteProtocolError("response headers too large", request=request) from None
            except _StaleConnection:
                conn.close()
                if attempt == 0:
                    continue
                raise httpx.RemoteProtocolError("Server disconnected without sending a response.",
                                                request=request) from None
            except OSError as exc:
                conn.close()
                if reused and attempt == 0 and isinstance(exc, (ConnectionResetError, BrokenPipeError)):
                    continue
                raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from None
            except BaseException:
                conn.close()
                raise
            break
        return self._response(key, conn, answer_head, method, timeouts.read, request)

    def _response(self, key: tuple[str, int], conn: _Connection, head: bytes, method: str,
                  read_timeout: float | None, request: httpx.Request | None) -> RawResponse:
        lines = head[:-4].split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        try:
            version, status = parts[0], int(parts[1])
        except (IndexError, ValueError):
            conn.close()
            raise httpx.RemoteProtocolError(f"bad status line {lines[0][:60]!r}", request=request) from None
        reason = parts[2] if len(parts) > 2 else b""
        headers: list[tuple[bytes, bytes]] = []
        length: int | None = None
        chunked = False
        connection = b""
        encoding = b""
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                continue
            name, value = name.strip(), value.strip()
            headers.append((name, value))
            low = name.lower()
            if low == b"content-length":
                with contextlib.suppress(ValueError):
                    length = int(value)
            elif low == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif low == b"connection":
                connection = value.lower()
            elif low == b"content-encoding":
                encoding = value
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            length, chunked = 0, False
        keep_alive = (b"close" not in connection) if version == b"HTTP/1.1" else (b"keep-alive" in connection)
        stream = _ResponseBody(self, key, conn, request, None if chunked else length, chunked, keep_alive,
                               read_timeout)
        return RawResponse(status, reason, version, headers, stream, encoding)

    # ── the httpx face ──

    @staticmethod
    def _head(request: httpx.Request, body: bytes) -> bytes:
        target = request.url.raw_path or b"/"
        lines = [request.method.encode() + b" " + target + b" HTTP/1.1"]
        has_length = False
        for name, value in request.headers.raw:
            low = name.lower()
            if low == b"transfer-encoding":
                continue  # the body is sent whole, with its length
            if low == b"content-length":
                has_length = True
            lines.append(name + b": " + value)
        if not has_length and (body or request.method in ("POST", "PUT", "PATCH")):
            lines.append(b"Content-Length: " + str(len(body)).encode())
        return b"\r\n".join(lines) + b"\r\n\r\n"

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http":
            if self._fallback is None:
                self._fallback = httpx.AsyncHTTPTransport(trust_env=False)
            return await self._fallback.handle_async_request(request)
        timeouts = request.extensions.get("timeout") or {}
        body = await request.aread()
        raw = await self.send(url.host, url.port or 80, self._head(request, body), body,
                              Timeouts(timeouts.get("connect"), timeouts.get("read"), timeouts.get("write")),
                              method=request.method, request=request)
        # httpx decodes Content-Encoding itself: hand it the body as it came
        return httpx.Response(raw.status_code, headers=raw.headers, stream=raw.stream,
                              extensions={"http_version": raw.http_version.encode("latin-1"),
                                          "reason_phrase": raw.reason_phrase.encode("latin-1")})

    async def aclose(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()
        if self._fallback is not None:
            await self._fallback.aclose()
