"""Shared roots and the local overlay: two developers' checkouts of one repository over one real PostgreSQL genome.

Machine A maps the root `repo` to its checkout and indexes it; the team genome stores `@repo/…`
names, never A's folders. Machine B maps `repo` to its own checkout, which holds an uncommitted
edit: B's answers serve B's text for that file (and say so), the shared text for the others.
Each machine's map is its own HELIX_HOME/roots.json (`helix sources map`), never the database.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import psycopg
import pytest

from helix_context.cli import main as cli_main
from helix_context.config import Settings
from helix_context.manager import HelixContextManager, open_genome
from helix_context.sources.roots import RootMap

SERVER = '''"""The request server."""


def settle_invoice(invoice_id: int) -> str:
    """Mark an invoice as settled in the ledger."""
    return f"settled {invoice_id} in the ledger"


def refund_payment(payment_id: int) -> str:
    """Send the money of a payment back to the card."""
    return f"refunded {payment_id} to the card"
'''
UTIL = '''"""Helpers."""


def normalise_currency_code(code: str) -> str:
    """Upper-case a three-letter currency code such as eur or usd."""
    return code.strip().upper()
'''
EDIT = "quarantine_marker_b"  # a word only machine B's uncommitted edit holds


def _checkout(folder: Path) -> Path:
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "server.py").write_text(SERVER)
    (folder / "src" / "util.py").write_text(UTIL)
    return folder


def _machine(settings: Settings, home: Path, url: str, checkout: Path | None) -> HelixContextManager:
    """One developer's backend: its own HELIX_HOME (and map), the shared database."""
    home.mkdir(parents=True, exist_ok=True)
    if checkout is not None:
        RootMap({}).mapped("repo", checkout).save(home)
    chosen = settings.replace(home=home, genome={"url": url}, embedding={"enabled": False}, ner={"enabled": False})
    return HelixContextManager(chosen, genome=open_genome(chosen))


def _item(packet, needle: str) -> dict:
    items = [i.to_dict() for i in (*packet.verified, *packet.stale_risk)]
    hits = [i for i in items if needle in (i.get("symbol") or "") or needle in i["preview"]]
    assert hits, (needle, items)
    return hits[0]


@pytest.fixture
def two(settings: Settings, pg_url: str, tmp_path: Path):
    a_repo, b_repo = _checkout(tmp_path / "ana" / "code" / "repo"), _checkout(tmp_path / "ben" / "work" / "repo")
    a = _machine(settings, tmp_path / "home-a", pg_url, a_repo)
    a.ingest_path(a_repo)
    # B's uncommitted edit, after A indexed the shared branch (mtime moved, content differs)
    edited = SERVER.replace('"""Mark an invoice as settled in the ledger."""',
                            f'"""Mark an invoice as settled in the ledger ({EDIT})."""')
    (b_repo / "src" / "server.py").write_text(edited)
    os.utime(b_repo / "src" / "server.py", (1_900_000_000, 1_900_000_000))
    b = _machine(settings, tmp_path / "home-b", pg_url, b_repo)
    yield a, b, a_repo, b_repo
    a.close()
    b.close()


def test_the_team_genome_stores_names_relative_to_the_root(two, pg_url: str) -> None:
    a, _, a_repo, _ = two
    with psycopg.connect(pg_url) as conn:
        paths = {r[0] for r in conn.execute("SELECT source_path FROM genes")}
        files = {r[0] for r in conn.execute("SELECT path FROM files")}
    assert paths == {"@repo/src/server.py", "@repo/src/util.py"}
    assert files == paths
    assert not any(str(a_repo) in p for p in paths | files)  # nobody's folder reaches the shared database


def test_a_local_edit_wins_over_the_shared_text_and_the_packet_says_where_each_came_from(two) -> None:
    a, b, a_repo, b_repo = two
    mine = _item(b.packet("refund a payment back to the card"), "refund_payment")
    assert mine["text_from"] == "local"
    assert mine["local_path"] == str((b_repo / "src" / "server.py").resolve())
    assert EDIT in mine["preview"]  # B's own uncommitted text, not the shared one
    shared = _item(b.packet("normalise_currency_code upper-case a three-letter currency code"), "normalise_currency_code")
    assert shared["text_from"] == "shared"
    assert shared["source_check"] == "unchanged"
    assert shared["local_path"] == str((b_repo / "src" / "util.py").resolve())
    # machine A has no edit: the shared text, read against A's own checkout
    theirs = _item(a.packet("refund a payment back to the card"), "refund_payment")
    assert theirs["text_from"] == "shared"
    assert EDIT not in theirs["preview"]
    assert theirs["local_path"] == str((a_repo / "src" / "server.py").resolve())


def test_context_serves_the_local_edit_and_says_so(two) -> None:
    a, b, _, _ = two
    window = b.build_context("refund a payment back to the card")
    assert EDIT in window.expressed_context
    assert any("your local copy" in line for line in window.context_health.live_check)
    assert EDIT not in a.build_context("refund a payment back to the card").expressed_context


def test_a_machine_without_the_root_mapped_serves_the_shared_text_and_says_how_to_map_it(
        two, settings: Settings, pg_url: str, tmp_path: Path) -> None:
    other = _machine(settings, tmp_path / "home-c", pg_url, None)
    try:
        item = _item(other.packet("normalise_currency_code upper-case a three-letter currency code"), "normalise_currency_code")
    finally:
        other.close()
    assert item["text_from"] == "shared" and item["local_path"] is None
    assert item["source_check"] == "unknown"
    assert "helix sources map repo" in item["reason"]


def test_hostile_shared_names_never_reach_a_file_outside_the_checkout(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path / "repo")
    secret = tmp_path / "secret.txt"
    secret.write_text("password")
    (checkout / "src" / "escape.txt").symlink_to(secret)
    roots = RootMap({}).mapped("repo", checkout)
    for hostile in ("@repo/../secret.txt", "@repo/src/../../secret.txt", "@repo//etc/passwd", "@repo/C:/x",
                    "@repo/src\\..\\..\\secret.txt", "@../repo/src/util.py", "@repo/src/escape.txt"):
        assert roots.local_path(hostile) is None, hostile
    assert roots.local_path("@repo/src/util.py") == checkout / "src" / "util.py"


def test_helix_sources_map_is_kept_per_machine(helix_home: Path, tmp_path: Path, capsys) -> None:
    checkout = _checkout(tmp_path / "repo")
    assert cli_main(["sources", "map", "repo", str(checkout)]) == 0
    assert RootMap.load(helix_home).roots == {"repo": checkout.resolve()}
    assert cli_main(["sources", "map"]) == 0
    assert str(checkout.resolve()) in capsys.readouterr().out
    assert cli_main(["sources", "map", "bad name", str(checkout)]) == 2
    assert cli_main(["sources", "map", "other", str(tmp_path / "nowhere")]) == 2
    assert cli_main(["sources", "unmap", "repo"]) == 0
    assert RootMap.load(helix_home).roots == {}
    shutil.rmtree(checkout)


def test_mapping_a_root_renames_what_this_machine_indexed_before(two, settings: Settings, pg_url: str,
                                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Machine C indexed its checkout before mapping the root: absolute names. `helix sources map` renames
    them in place: a file the team already holds under its shared name is retired here (the shared copy
    wins), another takes its `@repo/…` name and is re-indexed (its old folder's words leave the index),
    and the next index pass finds every file unchanged."""
    c_repo = _checkout(tmp_path / "catdir_zq" / "repo")
    (c_repo / "src" / "ledger.py").write_text('def close_the_books(year: int) -> str:\n    return f"closed {year}"\n')
    home = tmp_path / "home-c"
    c = _machine(settings, home, pg_url, None)  # no map yet
    try:
        c.ingest_path(c_repo)
        assert c.genome.fts_search('"catdir"', 10, "path"), "indexed under its absolute name"
    finally:
        c.close()

    monkeypatch.setenv("HELIX_HOME", str(home))
    monkeypatch.setenv("HELIX_GENOME_URL", pg_url)
    assert cli_main(["sources", "map", "repo", str(c_repo)]) == 0
    assert "1 file(s) indexed under" in capsys.readouterr().out
    with psycopg.connect(pg_url) as conn:
        files = {r[0] for r in conn.execute("SELECT path FROM files")}
        live = {r[0] for r in conn.execute("SELECT source_path FROM genes WHERE retired_at IS NULL")}
        named = {r[0] for t, col in (("gene_sources", "path"), ("symbols", "path"))
                 for r in conn.execute(f"SELECT {col} FROM {t}")}
    assert files == live == {"@repo/src/server.py", "@repo/src/util.py", "@repo/src/ledger.py"}
    assert not any("catdir_zq" in p for p in named)

    c = _machine(settings, home, pg_url, c_repo)
    try:
        assert not c.genome.fts_search('"catdir"', 10, "path"), "the old folder's words left the index"
        assert c.fingerprint("close_the_books", max_results=1)[0]["source_id"].endswith("ledger.py")
        again = c.ingest_path(c_repo)
        assert again.files_unchanged == 3 and again.genes_added == 0
    finally:
        c.close()
