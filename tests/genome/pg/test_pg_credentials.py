"""Where a team genome's password may come from: the URL, PGPASSFILE or PGPASSWORD, never a log line.

The test server trusts local connections; for this test one role must give a password (a
scram-sha-256 line ahead of the others in its pg_hba.conf, taken back afterwards), so each source
of the password is really checked by the server. What a user notices: a password kept out of the
URL, in a password file or the environment, works; a missing or wrong one is one clear error that
names where to put it, and the password is in no message.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from helix_context.errors import GenomeError
from helix_context.genome.pg.store import PgGenome

ROLE, SECRET = "alice_pw", "s3cret-from-elsewhere"


@pytest.fixture
def password_role(pg_url: str) -> Iterator[str]:
    """`pg_url` for a role the server asks a password of (no password in the URL)."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{SECRET}'")
        conn.execute(f"GRANT ALL ON SCHEMA public TO {ROLE}")
        hba = Path(str(conn.execute("SHOW hba_file").fetchone()[0]))  # type: ignore[index]
        before = hba.read_text()
        # a Unix socket on Linux and macOS, 127.0.0.1 on Windows (the wheel's server listens there)
        hba.write_text(f"local all {ROLE} scram-sha-256\nhost all {ROLE} 127.0.0.1/32 scram-sha-256\n{before}")
        conn.execute("SELECT pg_reload_conf()")
    try:
        yield urlsplit(pg_url)._replace(netloc=f"{ROLE}@").geturl()
    finally:
        hba.write_text(before)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("SELECT pg_reload_conf()")


def _opens(url: str) -> None:
    genome = PgGenome(url, listen=False)
    try:
        row = genome.conn.execute("SELECT current_user").fetchone()
        assert row is not None and row[0] == ROLE
    finally:
        genome.close()


def test_the_password_may_come_from_a_password_file_or_the_environment(
        password_role: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "none"))
    with pytest.raises(GenomeError, match="credentials \\(URL, PGPASSFILE or PGPASSWORD\\)"):
        PgGenome(password_role, listen=False)  # the server asks, nothing answers: say where a password goes

    passfile = tmp_path / "pgpass"
    passfile.write_text(f"*:*:*:{ROLE}:{SECRET}\n")
    passfile.chmod(0o600)  # libpq ignores a password file others may read
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    _opens(password_role)

    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "none"))
    monkeypatch.setenv("PGPASSWORD", SECRET)
    _opens(password_role)

    monkeypatch.setenv("PGPASSWORD", "not-" + SECRET)
    with pytest.raises(GenomeError, match="password authentication failed") as wrong:
        PgGenome(password_role, listen=False)
    assert SECRET not in str(wrong.value) + caplog.text
