"""A team genome over TLS: the URL's `sslmode` and certificate settings reach libpq, end to end.

The server is the real PostgreSQL 18 + pgvector of the other team tests, behind a TLS front that
speaks PostgreSQL's own TLS negotiation (tls_proxy.py: the wheel's server is built without TLS), with
a certificate for 127.0.0.1 signed by a test CA made with the `openssl` command. What a user
notices: with `sslmode=verify-full` Helix's connection is encrypted and the server's certificate is
checked; a server whose certificate that CA did not sign, or a URL that asks for no encryption where
the server demands it, is one clear error at start, never a silent plain-text connection.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import pytest

from helix_context.config import Settings
from helix_context.errors import GenomeError
from helix_context.genome.pg.store import PgGenome
from tests.genome.pg.reference import zebracorn_team
from tests.genome.pg.tls_proxy import TlsFront


@dataclass(frozen=True)
class Tls:
    port: int
    database: str
    ca: Path  # the CA that signed the front's certificate
    other_ca: Path  # a CA that did not

    def url(self, **params: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{self.database}?{urlencode(params)}"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _certificates(folder: Path) -> None:
    """ca.crt, server.crt / server.key (for 127.0.0.1, signed by ca.crt), and other.crt (an unrelated CA)."""
    for ca in ("ca", "other"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN=helix test {ca}",
                 "-keyout", f"{ca}.key", "-out", f"{ca}.crt", cwd=folder)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server.key",
             "-out", "server.csr", cwd=folder)
    (folder / "san.ext").write_text("subjectAltName = IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "2", "-extfile", "san.ext", "-out", "server.crt", cwd=folder)


@pytest.fixture
def tls(pg_url: str, tmp_path: Path) -> Iterator[Tls]:
    if shutil.which("openssl") is None:
        pytest.skip("the TLS tests make their certificates with the `openssl` command, which is not installed")
    _certificates(tmp_path)
    with TlsFront(pg_url, tmp_path / "server.crt", tmp_path / "server.key") as front:
        yield Tls(front.port, pg_url.split("?")[0].rsplit("/", 1)[1], tmp_path / "ca.crt", tmp_path / "other.crt")


def test_verify_full_encrypts_and_checks_the_servers_certificate(tls: Tls, settings: Settings,
                                                                   tmp_path: Path) -> None:
    url = tls.url(sslmode="verify-full", sslrootcert=str(tls.ca))
    genome = PgGenome(url, listen=False)
    try:
        row = genome.conn.execute("SELECT current_database()").fetchone()
        assert row is not None and row[0] == tls.database
        assert genome._raw().pgconn.ssl_in_use  # libpq's own word: this connection is encrypted
    finally:
        genome.close()
    helix = zebracorn_team(settings, url, tmp_path / "proj")  # ingest and a question, over TLS
    try:
        assert "settle_zebracorn" in helix.build_context("how is a zebracorn invoice settled?").expressed_context
    finally:
        helix.close()


def test_tls_settings_the_server_cannot_meet_are_one_clear_error(tls: Tls) -> None:
    with pytest.raises(GenomeError, match="cannot reach the team genome.*certificate verify failed"):
        PgGenome(tls.url(sslmode="verify-full", sslrootcert=str(tls.other_ca)), listen=False)
    with pytest.raises(GenomeError, match="cannot reach the team genome.*no encryption"):
        PgGenome(tls.url(sslmode="disable"), listen=False)
