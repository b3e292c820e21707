"""A question's COMMIT is sent without waiting for its answer, and nothing else ever runs inside it.

What a user notices: on a team database across a network every round trip costs the link's delay, and
a question no longer waits one of them for its COMMIT (benchmarks/bench_team_rtt.py). What must not
change with it: the server ends the question's transaction at once (the session holds no snapshot
that would keep VACUUM from cleaning up), a write right after a question commits as it always did,
and a question that failed leaves the connection ready for the next.
"""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest

from helix_context.config import Settings
from tests.genome.pg.reference import zebracorn_team


def _session(url: str, pid: int) -> tuple[str, object, object]:
    """(state, backend_xmin, xact_start) of a backend, once its state is settled (within 2 s)."""
    with psycopg.connect(url, autocommit=True) as other:
        deadline = time.monotonic() + 2
        while True:
            row = other.execute("SELECT state, backend_xmin, xact_start FROM pg_stat_activity WHERE pid = %s",
                                (pid,)).fetchone()
            assert row is not None
            if row[0] == "idle" or time.monotonic() > deadline:
                return row[0], row[1], row[2]
            time.sleep(0.02)


def test_a_question_ends_its_transaction_without_waiting_and_a_write_after_it_commits(
        settings: Settings, pg_url: str, tmp_path: Path) -> None:
    helix = zebracorn_team(settings, pg_url, tmp_path / "proj")
    try:
        assert "settle_zebracorn" in helix.build_context("how is a zebracorn invoice settled?").expressed_context
        raw = helix.genome._raw()  # type: ignore[attr-defined]  # this thread's team connection
        assert raw.lingering is not None, "the COMMIT's answer was waited for (psycopg's pipeline changed?)"
        # the server ended the transaction on arrival: an idle session, no snapshot holding back VACUUM
        assert _session(pg_url, raw.info.backend_pid) == ("idle", None, None)
        helix.genome.conn.execute("INSERT INTO helix_meta(key, value) VALUES ('after_a_question', 'kept')")
        assert raw.lingering is None  # the statement closed the question's pipeline first
        with psycopg.connect(pg_url, autocommit=True) as other:  # committed, not held in an open pipeline
            assert other.execute("SELECT value FROM helix_meta WHERE key = 'after_a_question'").fetchone() == ("kept",)
        for _ in range(3):  # questions back to back, each reading the answers of the one before
            assert "settle_zebracorn" in helix.build_context("zebracorn invoice settled").expressed_context
    finally:
        helix.close()


def test_a_failed_question_leaves_the_connection_ready(settings: Settings, pg_url: str, tmp_path: Path) -> None:
    helix = zebracorn_team(settings, pg_url, tmp_path / "proj")
    try:
        helix.build_context("how is a zebracorn invoice settled?")
        genome = helix.genome
        raw = genome._raw()  # type: ignore[attr-defined]
        assert raw.lingering is not None
        with pytest.raises(psycopg.errors.UndefinedColumn), genome.read_snapshot():  # type: ignore[attr-defined]
            genome.conn.execute("SELECT no_such_column FROM genes").fetchall()
        assert raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE and raw.lingering is None
        assert "settle_zebracorn" in helix.build_context("how is a zebracorn invoice settled?").expressed_context
        with genome.transaction(changes_genes=False) as tx:  # type: ignore[attr-defined]
            tx.execute("INSERT INTO helix_meta(key, value) VALUES ('after_a_failure', 'kept')")
        with psycopg.connect(pg_url, autocommit=True) as other:
            assert other.execute("SELECT value FROM helix_meta WHERE key = 'after_a_failure'").fetchone() == ("kept",)
    finally:
        helix.close()


def test_no_question_waits_on_the_server_for_its_genes_paths_and_marks_alone(
        settings: Settings, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Scope and the returnable window read the ranked genes' paths and marks; across a network a read of
    their own costs the link's delay on every question. They are sent ahead and answered with the
    co-activation read (benchmarks/bench_team_rtt.py: a "def name" question 5.8 → 4.9 round trips)."""
    helix = zebracorn_team(settings, pg_url, tmp_path / "proj")
    waited: list[bytes] = []
    fetch = psycopg.Cursor._fetch_pipeline

    def counted(cursor: psycopg.Cursor) -> None:  # a pipelined read whose answer has not come yet: a round trip
        if cursor._conn._pipeline and not cursor.pgresult:
            waited.append(cursor._query.query if cursor._query is not None else b"")
        fetch(cursor)

    monkeypatch.setattr(psycopg.Cursor, "_fetch_pipeline", counted)
    try:
        for question in ("how is a zebracorn invoice settled?", "settle_zebracorn", "zebracorn invoice total"):
            assert "settle_zebracorn" in helix.build_context(question).expressed_context
        assert waited, "no read waited: the question did not run pipelined, and this test shows nothing"
        alone = [q for q in waited if b"source_path, tier" in q]
        assert not alone, f"{len(alone)} of {len(waited)} waits were for the paths and marks alone"
    finally:
        helix.close()
