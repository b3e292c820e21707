"""Team semantics against the real embedded server: start errors, version refusal, secrets kept out,
one indexer per source (taken over when its holder dies), two indexers racing, readers told of writes."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from helix_context.config import Settings
from helix_context.errors import ConfigError, GenomeError, GenomeVersionError
from helix_context.genome.pg import connect as pg_connect
from helix_context.genome.pg.store import PgGenome
from helix_context.manager import HelixContextManager, open_genome
from tests.genome.pg.reference import assert_each_gene_once, sqlite_live_genes

REPO = Path(__file__).resolve().parents[3]


def _with_password(url: str, user: str, password: str) -> str:
    parts = urlsplit(url)
    return parts._replace(netloc=f"{user}:{password}@{parts.hostname or ''}").geturl()


def test_a_wrong_url_gets_one_clear_error(pg_url: str) -> None:
    with pytest.raises(ConfigError, match="postgresql://"):
        PgGenome("mysql://root:pw@localhost/db")
    refused = "postgresql://helix:hunter2-secret@127.0.0.1:1/nowhere"
    t = time.monotonic()
    with pytest.raises(GenomeError) as err:
        PgGenome(refused)
    assert time.monotonic() - t < pg_connect.CONNECT_TIMEOUT_S + 5, "a dead server fails, never hangs"
    assert "hunter2-secret" not in str(err.value) and "***@127.0.0.1:1" in str(err.value)
    assert "cannot reach" in str(err.value)


def test_a_database_without_pgvector_says_how_to_add_it(pg_server: str, caplog: pytest.LogCaptureFixture) -> None:
    """A role that may not create the extension, in a database that lacks it: the message names the fix."""
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute("CREATE DATABASE helix_novector")
        admin.execute("CREATE ROLE dev LOGIN PASSWORD 'dev-s3cret-pw'")
    url = _with_password(pg_server.replace("/postgres?", "/helix_novector?"), "dev", "dev-s3cret-pw")
    caplog.set_level(logging.DEBUG)
    with pytest.raises(GenomeError, match="CREATE EXTENSION vector") as err:
        PgGenome(url)
    assert "dev-s3cret-pw" not in str(err.value) + caplog.text


def test_too_old_a_server_is_refused(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg_connect, "MIN_SERVER_VERSION", 990000)
    with pytest.raises(GenomeError, match="upgrade the server"):
        PgGenome(pg_url)


def test_a_schema_from_a_newer_helix_is_read_but_never_written(settings: Settings, pg_url: str,
                                                               tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def settle_invoice(total):\n    return round(total, 2)\n")
    chosen = settings.replace(embedding={"enabled": False}, ner={"enabled": False}, genome={"url": pg_url})
    newer = HelixContextManager(chosen)
    newer.ingest_path(tmp_path)
    newer.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:  # what a newer Helix's migration leaves behind
        conn.execute("UPDATE helix_meta SET value = '99' WHERE key = 'schema_version'")
        before = conn.execute("SELECT count(*), max(id) FROM genes").fetchone()
    older = HelixContextManager(chosen)
    try:
        assert older.fingerprint("settle_invoice", max_results=1)[0]["symbol"] == "settle_invoice"
        (tmp_path / "b.py").write_text("def refund_invoice(total):\n    return -total\n")
        with pytest.raises(GenomeVersionError, match="newer Helix"):
            older.genome.retire_source(str(tmp_path / "a.py"))
    finally:
        older.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*), max(id) FROM genes").fetchone() == before


def test_credentials_never_reach_logs_or_stats(settings: Settings, pg_server: str, pg_url: str,
                                               caplog: pytest.LogCaptureFixture) -> None:
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute("CREATE ROLE teammate LOGIN SUPERUSER PASSWORD 'tm-pass-9921'")
    url = _with_password(pg_url, "teammate", "tm-pass-9921")
    caplog.set_level(logging.DEBUG)
    helix = HelixContextManager(settings.replace(embedding={"enabled": False}, ner={"enabled": False},
                                                 genome={"url": url}))
    try:
        shown = repr(helix.genome.stats()) + repr(helix.genome.path)
        assert "teammate" not in shown and "tm-pass-9921" not in shown
        assert "tm-pass-9921" not in caplog.text
    finally:
        helix.close()


def _hold_claim_script(url: str, source: str) -> str:
    return textwrap.dedent(f"""
        import sys, time
        from helix_context.genome.pg.store import PgGenome
        genome = PgGenome({url!r}, listen=False)
        claim = genome.claim_source({source!r})
        print("held" if claim.acquire() else "refused", flush=True)
        time.sleep(120)
    """)


def test_one_indexer_per_source_and_a_dead_holder_is_taken_over(pg_url: str) -> None:
    holder = subprocess.Popen([sys.executable, "-c", _hold_claim_script(pg_url, "team:monorepo")], cwd=REPO,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        genome = PgGenome(pg_url, listen=False)
        with genome.claim_source("team:monorepo") as claim:
            assert not claim.held, "a second indexer of the same source is refused"
        with genome.claim_source("team:other") as other:
            assert other.held, "another source is free"
        holder.kill()  # the holder dies without releasing: its connection, and so its lock, goes
        holder.wait(timeout=10)
        deadline = time.monotonic() + 10
        taken = False
        while not taken and time.monotonic() < deadline:
            with genome.claim_source("team:monorepo") as again:
                taken = again.held
            time.sleep(0.1)
        assert taken, "the source is taken over once its holder is gone"
        genome.close()
    finally:
        holder.kill()


def _ingest_script(url: str, tree: Path) -> str:
    return textwrap.dedent(f"""
        from helix_context.config import load_config
        from helix_context.manager import HelixContextManager
        settings = load_config().replace(embedding={{"enabled": False}}, ner={{"enabled": False}},
                                         ingest={{"workers": 1}}, genome={{"url": {url!r}}})
        helix = HelixContextManager(settings)
        report = helix.ingest_path({str(tree)!r})
        print(report.genes_added, flush=True)
        helix.close()
    """)


def _tree(root: Path, files: int) -> Path:
    root.mkdir()
    for i in range(files):
        (root / f"mod{i}.py").write_text(
            f'"""Module {i}."""\n\n\ndef compute_{i}(value):\n    """Scale value by {i}."""\n    return value * {i}\n\n\n'
            f"def shared_helper(value):\n    return value + 1\n")  # one chunk shared by every file
    return root


def test_two_indexers_racing_lose_and_duplicate_no_gene(settings: Settings, pg_url: str, tmp_path: Path) -> None:
    tree = _tree(tmp_path / "tree", 40)
    procs = [subprocess.Popen([sys.executable, "-c", _ingest_script(pg_url, tree)], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=240) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    want = sqlite_live_genes(settings, tree)
    assert_each_gene_once(pg_url, want)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM files").fetchone()[0] == 40
        assert conn.execute("SELECT count(*) FROM genes g WHERE NOT EXISTS "
                            "(SELECT 1 FROM gene_sources s WHERE s.gene = g.id)").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM lex_docs").fetchone()[0] == want, "each live gene indexed once"


def test_a_write_by_one_backend_reaches_another_within_two_seconds(settings: Settings, pg_url: str,
                                                                   tmp_path: Path) -> None:
    chosen = settings.replace(embedding={"enabled": False}, ner={"enabled": False}, genome={"url": pg_url})
    writer, reader = HelixContextManager(chosen), HelixContextManager(chosen, genome=open_genome(chosen))
    try:
        (tmp_path / "a.py").write_text("def settle_invoice(total):\n    return round(total, 2)\n")
        writer.ingest_path(tmp_path)
        time.sleep(1.5)
        assert reader.fingerprint("settle_invoice", max_results=1)[0]["symbol"] == "settle_invoice"
        seen = reader.genome.generation()
        (tmp_path / "b.py").write_text("def reconcile_ledger(entries):\n    return sum(entries)\n")
        writer.ingest_path(tmp_path)
        t = time.monotonic()
        while reader.genome.generation() == seen and time.monotonic() - t < 2.0:
            time.sleep(0.02)
        assert reader.genome.generation() != seen, "the reader's caches were told within 2 s"
        assert reader.fingerprint("reconcile_ledger entries", max_results=1)[0]["symbol"] == "reconcile_ledger"
    finally:
        writer.close()
        reader.close()


def test_a_reader_during_a_re_index_is_never_left_empty(settings: Settings, pg_url: str, tmp_path: Path) -> None:
    """Another backend re-indexes every file (each file replaced in one transaction) while this one asks:
    no answer is empty or an error, nearly all name the symbol, and afterwards the new text is served.
    (A question's reads share one snapshot, Retriever.retrieve: a commit between them once emptied one in
    four runs.)"""
    tree = _tree(tmp_path / "tree", 40)
    chosen = settings.replace(embedding={"enabled": False}, ner={"enabled": False}, genome={"url": pg_url})
    reader = HelixContextManager(chosen)
    try:
        reader.ingest_path(tree)
        for i in range(40):  # every file changes: the re-index replaces every gene
            (tree / f"mod{i}.py").write_text(f'"""Module {i}, revised."""\n\n\ndef compute_{i}(value):\n'
                                             f'    """Scale value by {i} and shift it."""\n    return value * {i} - 1\n')
        writer = subprocess.Popen([sys.executable, "-c", _ingest_script(pg_url, tree)], cwd=REPO,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        answers = named = 0
        while writer.poll() is None:
            top = reader.fingerprint("compute_7 scale value", max_results=3)
            assert top, "a reader never gets an empty answer during a re-index"
            answers += 1
            named += top[0]["symbol"] == "compute_7"
        assert writer.returncode == 0, writer.communicate()[1][-2000:]
        assert answers > 0 and named >= 0.8 * answers, (named, answers)
        assert reader.fingerprint("compute_7 scale value", max_results=1)[0]["symbol"] == "compute_7"
        time.sleep(1.5)  # the reader's caches are told within 2 s
        window = reader.build_context("compute_7 scale value and shift it")
        assert "revised" in window.expressed_context or "shift it" in window.expressed_context
    finally:
        reader.close()


def test_a_questions_snapshot_is_one_repeatable_read_only_transaction(pg_url: str) -> None:
    """read_snapshot opens with one BEGIN naming the level: what another backend commits meanwhile is not
    seen until it ends, writes are refused inside, and an error inside leaves the connection usable."""
    genome = PgGenome(pg_url, listen=False)
    try:
        raw = genome._raw()
        with genome.read_snapshot():
            assert raw.execute("SHOW transaction_isolation").fetchone() == ("repeatable read",)
            assert raw.execute("SHOW transaction_read_only").fetchone() == ("on",)
            before = raw.execute("SELECT count(*) FROM helix_meta").fetchone()
            with psycopg.connect(pg_url, autocommit=True) as other:
                other.execute("INSERT INTO helix_meta(key, value) VALUES ('snapshot_probe', 'x')")
            assert raw.execute("SELECT count(*) FROM helix_meta").fetchone() == before, "one snapshot"
        # its COMMIT is not waited for (test_pg_snapshot.py); the next statement sees what others committed
        assert raw.execute("SELECT count(*) FROM helix_meta").fetchone()[0] == before[0] + 1
        assert raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction), genome.read_snapshot():
            raw.execute("DELETE FROM helix_meta WHERE key = 'snapshot_probe'")
        assert raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert raw.execute("SELECT value FROM helix_meta WHERE key = 'snapshot_probe'").fetchone() == ("x",)
    finally:
        genome.close()


def test_only_usage_counts_commit_without_waiting_for_the_disk(pg_url: str) -> None:
    """A question's delivery record (access counts, co-activation) commits with synchronous_commit off,
    for that transaction only; every other write (sources, genes) still waits for the WAL flush, and the
    counts it recorded are there for the next question."""
    genome = PgGenome(pg_url, listen=False)
    try:
        raw = genome._raw()
        with genome.transaction(changes_genes=False, durable=False) as tx:
            assert tx.execute("SHOW synchronous_commit").fetchone() == ("off",)
        with genome.transaction(changes_genes=False) as tx:
            assert tx.execute("SHOW synchronous_commit").fetchone() == ("on",), "SET LOCAL ends with its transaction"
        assert raw.execute("SHOW synchronous_commit").fetchone() == ("on",)
        with genome.transaction() as tx:
            for n in (1, 2):
                tx.execute("INSERT INTO genes(gene_id, content, content_type, source_path, observed_at, last_verified_at) "
                           "VALUES (?, ?, 'text', ?, 0, 0)",
                           (f"g{n}", f"text {n}", f"/f{n}.txt"))
        ids = [r[0] for r in raw.execute("SELECT id FROM genes ORDER BY id").fetchall()]
        genome.record_delivery(ids)
        assert genome.coactivated([ids[0]]) == {ids[1]: 1.0}
    finally:
        genome.close()


def test_backends_recording_overlapping_answers_at_once_lose_no_record(pg_url: str) -> None:
    """Two backends write delivery batches over the same genes at once, each batch counting its genes'
    uses in a different order (one gene used once, the other twice, and the reverse): every batch is
    written, and each gene's access count is the sum of them all. Before the rows were locked in one
    order, the two writers took them in opposite orders and PostgreSQL killed one as a deadlock."""
    import threading

    from helix_context.genome.deliveries import Delivery

    writers = [PgGenome(pg_url, listen=False) for _ in range(2)]
    try:
        with writers[0].transaction() as tx:
            for n in range(6):
                tx.execute("INSERT INTO genes(gene_id, content, content_type, source_path, observed_at, last_verified_at) "
                           "VALUES (?, ?, 'text', ?, 0, 0)", (f"g{n}", f"text {n}", f"/f{n}.txt"))
        ids = [r[0] for r in writers[0]._raw().execute("SELECT id FROM genes ORDER BY id").fetchall()]
        rounds = 150
        errors: list[BaseException] = []
        start = threading.Barrier(2)

        def write(genome: PgGenome, first: int, second: int) -> None:
            start.wait()
            for _ in range(rounds):
                try:  # `first` once and `second` twice: their rows updated in that order
                    genome._write_deliveries([Delivery((ids[first], ids[second], *ids[2:]), time.time()),
                                              Delivery((ids[second],), time.time())])
                except BaseException as exc:  # collected: the assertion names it
                    errors.append(exc)

        threads = [threading.Thread(target=write, args=(writers[0], 0, 1)),
                   threading.Thread(target=write, args=(writers[1], 1, 0))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == [], errors[:3]
        counts = dict(writers[0]._raw().execute("SELECT id, access_count FROM genes").fetchall())
        assert counts[ids[0]] == counts[ids[1]] == 3 * rounds, counts
        assert all(counts[i] == 2 * rounds for i in ids[2:]), counts
    finally:
        for genome in writers:
            genome.close()


def test_an_open_write_holds_off_a_migration_without_locking_a_row(pg_url: str) -> None:
    """A write transaction takes the migration lock shared (one round trip with BEGIN and the version
    check): a migrating backend cannot start until it ends, and two writers never wait on each other."""
    from helix_context.genome.pg.schema import MIGRATE_LOCK

    first, second = PgGenome(pg_url, listen=False), PgGenome(pg_url, listen=False)
    try:
        with psycopg.connect(pg_url, autocommit=True) as migrator:
            with first.transaction(changes_genes=False), second.transaction(changes_genes=False):
                assert migrator.execute("SELECT pg_try_advisory_lock(%s)", (MIGRATE_LOCK,)).fetchone() == (False,)
                locked = migrator.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'tuple' "
                                          "OR (locktype = 'transactionid' AND NOT granted)").fetchone()
                assert locked == (0,), "no row lock, nobody waiting"
            assert migrator.execute("SELECT pg_try_advisory_lock(%s)", (MIGRATE_LOCK,)).fetchone() == (True,)
    finally:
        first.close()
        second.close()


def test_a_pause_is_one_developers_not_the_teams(pg_url: str) -> None:
    """`helix sources pause` (or the tray's pause) on one machine leaves every other backend indexing."""
    ana, bob = PgGenome(pg_url, party="ana@laptop", listen=False), PgGenome(pg_url, party="bob@desk", listen=False)
    try:
        ana.set_sources_paused(True)
        assert ana.sources_paused() and not bob.sources_paused()
        ana.set_sources_paused(False)
        assert not ana.sources_paused()
    finally:
        ana.close()
        bob.close()
