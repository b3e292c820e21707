"""A team genome in the schema its URL names: libpq's `options` pass through, as the docs promise.

What a user notices: a DBA who gives Helix a schema of a shared database (`options=-c
search_path=helix`) finds Helix's tables there and nowhere else; two genomes in two schemas of one
database answer each from its own files and may index a folder of the same name at once; a
statement timeout the user set is the one that applies; a search_path that cannot work is one clear
error at start, not a failed first write.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

from helix_context.config import Settings
from helix_context.errors import GenomeError
from helix_context.genome.pg.store import PgGenome
from helix_context.manager import HelixContextManager


def _with_options(url: str, options: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}options={quote(options)}"


def _schemas(url: str, *names: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for name in names:
            conn.execute(f"CREATE SCHEMA {name}")


def _tree(root: Path, word: str) -> Path:
    root.mkdir(parents=True)
    (root / "ledger.py").write_text(f'def settle_{word}(invoice):\n    """Settle a {word} invoice."""\n'
                                    f"    return invoice.total * 2\n")
    (root / "notes.md").write_text(f"# {word.title()}\n\nHow {word} invoices are settled at month end.\n")
    return root


def _manager(settings: Settings, url: str) -> HelixContextManager:
    return HelixContextManager(settings.replace(embedding={"enabled": False}, ner={"enabled": False},
                                                genome={"url": url}))


def test_a_url_that_names_a_schema_keeps_its_genome_there_apart_from_another(
        settings: Settings, pg_url: str, tmp_path: Path) -> None:
    _schemas(pg_url, "team_b")
    in_public = _manager(settings, pg_url)  # the default: the database's public schema
    in_public.ingest_path(_tree(tmp_path / "a", "zebracorn"))
    # pgvector lives in public here, so the schema's search_path names public after it: the genome in
    # public must not pass for this one's
    in_team_b = _manager(settings, _with_options(pg_url, "-c search_path=team_b,public"))
    in_team_b.ingest_path(_tree(tmp_path / "b", "quokkawave"))
    try:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            counts = {schema: conn.execute(f"SELECT count(*) FROM {schema}.genes").fetchone()[0]
                      for schema in ("public", "team_b")}
        assert counts["public"] > 0 and counts["team_b"] > 0
        answer_b = in_team_b.build_context("how are quokkawave invoices settled?").expressed_context
        answer_a = in_public.build_context("how are zebracorn invoices settled?").expressed_context
        assert "settle_quokkawave" in answer_b and "zebracorn" not in answer_b
        assert "settle_zebracorn" in answer_a and "quokkawave" not in answer_a
        assert "zebracorn" not in in_team_b.build_context("how are zebracorn invoices settled?").expressed_context
    finally:
        in_team_b.close()
        in_public.close()


def test_the_users_own_server_options_win_over_helixs_defaults(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = PgGenome(pg_url, listen=False)
    from_url = PgGenome(_with_options(pg_url, "-c statement_timeout=1234"), listen=False)
    monkeypatch.setenv("PGOPTIONS", "-c statement_timeout=4321")
    from_env = PgGenome(pg_url, listen=False)
    try:
        shown = [g.conn.execute("SHOW statement_timeout").fetchone()[0] for g in (plain, from_url, from_env)]
        assert shown == ["1min", "1234ms", "4321ms"]
    finally:
        for g in (plain, from_url, from_env):
            g.close()


def test_a_search_path_that_cannot_hold_the_genome_is_one_clear_error(pg_url: str) -> None:
    with pytest.raises(GenomeError, match="names no schema that exists.*CREATE SCHEMA"):
        PgGenome(_with_options(pg_url, "-c search_path=nosuch"), listen=False)
    _schemas(pg_url, "team_c")
    with pytest.raises(GenomeError, match=r"installed in schema public.*search_path=team_c,public"):
        PgGenome(_with_options(pg_url, "-c search_path=team_c"), listen=False)
    with psycopg.connect(pg_url, autocommit=True) as conn:  # nothing was left behind in the schema
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'team_c'").fetchone()[0] == 0


def test_genomes_in_two_schemas_each_claim_a_source_of_the_same_name(pg_url: str) -> None:
    """Advisory locks are per database: a folder "@repo" indexed in one schema's genome must not stop
    the other genome's indexer, while two backends of one genome still take turns."""
    _schemas(pg_url, "team_b")
    a = PgGenome(pg_url, listen=False)
    b = PgGenome(_with_options(pg_url, "-c search_path=team_b,public"), listen=False)
    a2 = PgGenome(pg_url, listen=False)
    try:
        with a.claim_source("@repo") as first, b.claim_source("@repo") as other_schema, \
                a2.claim_source("@repo") as same_schema:
            assert (first.held, other_schema.held, same_schema.held) == (True, True, False)
    finally:
        for g in (a, b, a2):
            g.close()
