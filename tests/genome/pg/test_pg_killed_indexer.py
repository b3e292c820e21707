"""An indexer killed mid-batch on the team genome: its open batch vanishes whole, nothing else does.

What a user notices: a laptop closed or a backend killed during an ingest leaves the shared index
usable and exact (no half-written file, no gene lost or stored twice), and the next ingest finishes
the job. The kill is taken only while the indexer's write transaction is open on the server
(seen in pg_stat_activity), so the test is about a batch cut in the middle, not between batches.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psycopg

from helix_context.config import Settings
from helix_context.genome.pg.store import PgGenome
from tests.genome.pg.reference import sqlite_live_genes

REPO = Path(__file__).resolve().parents[3]

# files committed so far, and whether another connection has a transaction open right now (one query per poll)
_PROGRESS = ("SELECT (SELECT count(*) FROM files), (SELECT count(*) FROM pg_stat_activity WHERE datname = "
             "current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL "
             "AND backend_type = 'client backend')")
_FILES = 1200


def _tree(root: Path, files: int) -> Path:
    for i in range(files):
        path = root / f"pkg{i % 7}" / f"mod{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        body = "\n\n".join(f"def step_{i}_{k}(value):\n    \"\"\"Stage {k} of module {i}.\"\"\"\n    return value * {k} + {i}\n"
                           for k in range(6))
        path.write_text(body + "\n\ndef shared_helper(value):\n    return value + 1\n")  # shared by every file
    return root


def _ingest(url: str, tree: Path) -> list[str]:
    script = textwrap.dedent(f"""
        from helix_context.config import load_config
        from helix_context.manager import HelixContextManager
        settings = load_config().replace(embedding={{"enabled": False}}, ner={{"enabled": False}},
                                         ingest={{"workers": 1}}, genome={{"url": {url!r}}})
        helix = HelixContextManager(settings)
        helix.ingest_path({str(tree)!r})
        helix.close()
    """)
    return [sys.executable, "-c", script]


def _consistent(url: str) -> tuple[int, int]:
    """The schema's own checks pass, and every file row is whole; returns (files, live genes)."""
    genome = PgGenome(url, listen=False)
    try:
        assert genome.integrity_check() == []
    finally:
        genome.close()
    with psycopg.connect(url, autocommit=True) as conn:
        torn = conn.execute("SELECT count(*) FROM files f WHERE f.genes <> (SELECT count(DISTINCT s.gene) "
                            "FROM gene_sources s WHERE s.path = f.path)").fetchone()
        assert torn == (0,), "a file's row and its genes' source rows were committed together"
        orphans = conn.execute("SELECT count(*) FROM gene_sources s WHERE NOT EXISTS "
                               "(SELECT 1 FROM files f WHERE f.path = s.path)").fetchone()
        assert orphans == (0,), "no source row of a file whose batch never committed"
        files, live, distinct = conn.execute(
            "SELECT (SELECT count(*) FROM files), count(*), count(DISTINCT gene_id) FROM genes "
            "WHERE retired_at IS NULL").fetchone()
    assert live == distinct, "no gene stored twice"
    return int(files), int(live)


def test_an_indexer_killed_mid_batch_leaves_the_team_genome_whole(settings: Settings, pg_url: str,
                                                                  tmp_path: Path) -> None:
    tree = _tree(tmp_path / "tree", _FILES)
    log = tmp_path / "indexer.log"  # a file, not a pipe: a full pipe would stall the indexer
    with log.open("wb") as err:
        proc = subprocess.Popen(_ingest(pg_url, tree), cwd=REPO, stdout=subprocess.DEVNULL, stderr=err)
    cut = False
    try:
        with psycopg.connect(pg_url, autocommit=True) as watch:
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline and proc.poll() is None:
                if watch.execute("SELECT to_regclass('files')").fetchone() == (None,):  # not migrated yet
                    time.sleep(0.05)
                    continue
                done, open_now = watch.execute(_PROGRESS).fetchone()
                if done >= 20 and open_now > 0:
                    proc.kill()  # SIGKILL (TerminateProcess on Windows): no handler, no clean close
                    cut = True
                    break
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert cut, f"the indexer was killed while its write transaction was open: {log.read_text()[-2000:]}"

    files, _ = _consistent(pg_url)
    assert 20 <= files < _FILES, files  # some batches were in, the last one cut

    finished = subprocess.run(_ingest(pg_url, tree), cwd=REPO, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr[-2000:]
    files, live = _consistent(pg_url)
    want = sqlite_live_genes(settings, tree)
    assert files == _FILES and live == want, "the next ingest finished the job: no gene lost"
