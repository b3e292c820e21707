"""A full disk (issue 26): the first failed write is shown, reads go on, nothing stored is lost.

HELIX_HOME lives on a small tmpfs mounted for the test (root only: CI and the dev containers run
as root; elsewhere the tests skip with that reason). The watched folder lives on the normal disk,
so only the genome and Helix's own files run out of space — what a user sees when their system
disk fills up while Helix keeps indexing a project on another one.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from helix_context.config import load_config
from security.procs import env_for, free_port, kill_tree, start, wait_health
from tests.sources.conftest import fast_settings, make_tree, wait_until, write

pytestmark = pytest.mark.skipif(os.name == "nt" or os.geteuid() != 0,
                                reason="mounts a small tmpfs to fill: needs root on Linux")


@pytest.fixture
def small_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "home-on-tmpfs"
    home.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(home)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    monkeypatch.setenv("HELIX_HOME", str(home))
    try:
        yield home
    finally:
        subprocess.run(["umount", "-l", str(home)], capture_output=True)


def fill(folder: Path) -> Path:
    """Write until the disk says no: the filler is deleted to free the space again."""
    filler = folder / "filler.bin"
    # unbuffered: a write the disk takes in part leaves no rest behind, for the close to fail on again
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    assert shutil.disk_usage(folder).free < 65536
    return filler


def test_the_first_failed_write_marks_the_source_and_reads_go_on(small_home: Path, server_factory,
                                                                  tmp_path: Path) -> None:
    root = make_tree(tmp_path / "proj", n=5)
    server = server_factory(fast_settings(load_config()))
    service = server.app.state.sources
    with server.client() as client:
        assert client.post("/sources", json={"path": str(root)}).status_code == 202
        assert service.wait_idle(60) and service.wait_watching(10)
        before = client.post("/context", json={"query": "function_3 module 3"}).json()["expressed_context"]
        assert "function_3" in before

        filler = fill(small_home)
        for i in range(60):  # new text the genome has no room for
            write(root / "new" / f"big_{i}.py", "".join(f"def grown_{i}_{j}():\n    return '{'x' * 60}{j}'\n"
                                                        for j in range(60)))

        def failed() -> dict | None:
            status = client.get("/sources").json()
            row = status["sources"][0]
            return status if row["state"] == "error" else None

        status = wait_until(failed, timeout=30, what="the source to show the failed write")
        row = status["sources"][0]
        assert "no space left on the disk" in row["last_error"] and "resume indexing" in row["last_error"]
        assert status["summary"].startswith("Indexing stopped: the disk is full")
        assert status["disk_full"] and "Index up to date" not in status["summary"]
        # reads go on: what was indexed is still served, no 500 anywhere
        assert client.post("/context", json={"query": "function_3 module 3"}).json()["expressed_context"] == before
        for path in ("/health", "/stats", "/sources", "/dashboard/data"):
            assert client.get(path).status_code == 200, path

        filler.unlink()  # space is back: resuming indexes what was missed, and nothing stored was lost
        assert client.post("/sources/resume").status_code == 200
        wait_until(lambda: service.genome.file_record(str(root.resolve() / "new" / "big_59.py")) is not None,
                   timeout=60, what="the files written while the disk was full")
        assert service.wait_idle(60)
        status = client.get("/sources").json()
        assert status["summary"].startswith("Index up to date, 1 folder") and status["sources"][0]["last_error"] is None
        assert service.genome.integrity_check() == []
        assert "function_3" in client.post("/context", json={"query": "function_3 module 3"}).json()[
            "expressed_context"]


def test_supervise_starts_on_a_full_disk_and_serves_reads(small_home: Path, tmp_path: Path) -> None:
    from helix_context.manager import HelixContextManager

    root = make_tree(tmp_path / "proj", n=3)
    helix = HelixContextManager(fast_settings(load_config()))
    helix.ingest_path(root)
    helix.close()
    fill(small_home)

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "supervise.out"
    sup = start(["-m", "helix_context.cli", "supervise"], env_for(port, HELIX_HOME=str(small_home)), log)
    backend_pid = None
    try:
        health = wait_health(url, timeout=90)
        backend_pid = health["pid"]
        assert health["genome"]["disk_full"] and "disk_full" in health["degraded"]
        assert health["genome"]["genes"] > 0
        answer = httpx.post(url + "/context", json={"query": "function_1 module 1"}, timeout=30)
        assert answer.status_code == 200 and "function_1" in answer.json()["expressed_context"]
        sources = httpx.get(url + "/sources", timeout=10).json()
        assert sources["disk_full"] and sources["indexed_genes"] == health["genome"]["genes"]
        time.sleep(1.0)
    finally:
        sup.terminate()
        try:
            sup.wait(timeout=30)
        except subprocess.TimeoutExpired:
            kill_tree(sup.pid)
        if backend_pid is not None:
            kill_tree(backend_pid)
    out = log.read_text(errors="replace")
    assert "Traceback" not in out, out[-3000:]
    assert "no space left" in out.lower() or "disk" in out.lower()


def test_a_reembed_stopped_by_a_full_disk_waits_then_resumes_once_there_is_room(
        small_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The background re-embed after a model change fails when the disk fills: the genes keep their old vectors,
    the server is not asked to start it again at every housekeeping round (one warning, not one a minute),
    and after reembed.RETRY_AFTER_S, with room again, it takes up where it stopped."""
    import threading

    from helix_context.ingest import reembed
    from helix_context.ingest.embed import Embedder
    from helix_context.manager import HelixContextManager
    from tests.stdlib_logging import build_genome, copy_logging

    genes = build_genome(copy_logging(tmp_path), "minilm")

    go = threading.Event()
    real = Embedder.embed

    def held(self, texts, *args, **kwargs):
        if threading.current_thread().name == "helix-reembed":
            go.wait(60)  # the disk fills while the job's first batch is embedded
        return real(self, texts, *args, **kwargs)

    monkeypatch.setattr(Embedder, "embed", held)
    helix = HelixContextManager(load_config().replace(embedding={"model": "code-minilm"}, ner={"enabled": False}))
    try:
        assert helix.embedder is not None and helix.reembed is not None
        assert helix.reembed.progress()["state"] == "running"
        filler = fill(small_home)
        go.set()
        helix.reembed.join(60)
        failed = helix.reembed.progress()
        assert failed["state"] == "failed" and "full" in failed["error"].lower(), failed
        assert helix.genome.stale_vector_count() == genes  # nothing half-written: every gene still waits
        assert helix.resume_reembed() is False  # at once: the disk is still full
        filler.unlink()
        monkeypatch.setattr(reembed, "RETRY_AFTER_S", 0.0)  # the retry time has come
        assert helix.resume_reembed() is True
        helix.reembed.join(60)
        assert helix.reembed.progress()["state"] == "done"
        assert helix.genome.stale_vector_count() == 0 and not helix.genome.has_stale_vectors()
    finally:
        helix.close()


def test_helix_ingest_and_export_on_a_full_disk_say_so_and_exit_4(small_home: Path, tmp_path: Path) -> None:
    """The CLI printed an ingest that stored part of a folder as a success (exit 0), and an export, vacuum or
    checkpoint on a full disk as a traceback."""
    from tests.conftest import REPO

    def helix(*args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONPATH": str(REPO), "HELIX_EMBEDDING_ENABLED": "false", "HELIX_NER_ENABLED": "false",
               "HELIX_HOME": str(small_home)}
        return subprocess.run([sys.executable, "-m", "helix_context.cli", *args], capture_output=True, text=True,
                              env=env, cwd=REPO, timeout=180)

    assert helix("ingest", str(make_tree(tmp_path / "proj", n=5)), "--quiet").returncode == 0
    filler = fill(small_home)
    grown = tmp_path / "grown"
    for i in range(40):
        write(grown / f"big_{i}.py", "".join(f"def grown_{i}_{j}():\n    return '{'x' * 60}{j}'\n" for j in range(60)))
    done = helix("ingest", str(grown), "--quiet")
    assert done.returncode == 4 and "could not be stored" in done.stderr and "Traceback" not in done.stderr, done.stderr
    for args in (("export", str(small_home / "out.helix")), ("vacuum",)):
        done = helix(*args)
        assert done.returncode == 4 and "Traceback" not in done.stderr, (args, done.stderr)
        assert "space" in done.stderr or "full" in done.stderr, (args, done.stderr)
    filler.unlink()
    assert "function_3" in helix("query", "function_3 module 3").stdout  # what was stored is kept


def test_supervise_with_a_new_home_on_a_full_disk_says_so_once(small_home: Path, tmp_path: Path) -> None:
    """An existing genome is served read-only on a full disk (above); a new one cannot even be created. That was
    six crashed starts ending in "no such table: meta", and an empty genome.db left behind."""
    fill(small_home)
    port = free_port()
    log = tmp_path / "supervise.out"
    sup = start(["-m", "helix_context.cli", "supervise"], env_for(port, HELIX_HOME=str(small_home)), log)
    try:
        assert sup.wait(timeout=60) == 1
    finally:
        kill_tree(sup.pid)
    out = log.read_text(errors="replace")
    assert "no space left to create the genome" in out and "Traceback" not in out, out[-3000:]
    assert not (small_home / "genome.db").exists()
    done = subprocess.run([sys.executable, "-m", "helix_context.cli", "stats"], capture_output=True, text=True,
                          env=env_for(port, HELIX_HOME=str(small_home)), timeout=120)
    assert done.returncode == 4 and "no space left to create the genome" in done.stderr, done.stderr
    assert not (small_home / "genome.db").exists()  # no empty file that a later start would take for a genome


def test_a_read_only_home_is_one_line_from_the_tray_launcher(tmp_path: Path) -> None:
    """`start-helix-tray.sh --headless` on a read-only HELIX_HOME ended in a traceback from the first log write."""
    home = tmp_path / "ro-home"
    home.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(home)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        port = free_port()
        run = subprocess.run([sys.executable, "-c", "from launcher.tray import main; raise SystemExit(main(['--headless']))"],
                             capture_output=True, text=True, env=env_for(port, HELIX_HOME=str(home)), timeout=120,
                             cwd=str(Path(__file__).resolve().parents[2]))
    finally:
        subprocess.run(["umount", "-l", str(home)], capture_output=True)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert "must be a writable folder" in run.stderr and str(home) in run.stderr, run.stderr
