"""Parsing in worker processes: same genome as parsing in-process, and it survives its workers."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from helix_context import HelixContextManager, load_config
from helix_context.ingest.parallel import Parsed, ParseJob, ParsePool, Scheduler
from helix_context.models import Provenance


def make_repo(root: Path, n: int = 24, tag: str = "v1") -> Path:
    """A small code base: Python modules, a config file and a README (which needs NER)."""
    (root / ".git").mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / f"module_{i:02d}.py").write_text(textwrap.dedent(f'''\
            """Module {i} of the demo service ({tag})."""

            RETRY_LIMIT_{i} = {i + 3}


            def fetch_user_record_{i}(user_id: int) -> dict:
                """Load user {i} from the accountStore."""
                return {{"id": user_id, "shard": {i}}}


            class PaymentGateway{i}:
                timeout_ms = {100 * i}

                def charge(self, amount: float) -> bool:
                    return amount < {i}
            '''), encoding="utf-8")
    (root / "service.toml").write_text(f"[server]\nport = 11437\nworkers = 4\n# {tag}\n", encoding="utf-8")
    (root / "README.md").write_text(f"# Demo\n\nBuilt by Ada Lovelace at Acme Corporation in London ({tag}).\n",
                                    encoding="utf-8")
    return root


def genome_snapshot(helix: HelixContextManager) -> dict[str, tuple]:
    """Every live gene, with what ingest derived for it, keyed by gene id."""
    return {g.gene_id: (g.source_path, g.start_line, g.end_line, g.symbol, g.tags, g.facts, g.content_type)
            for g in helix.genome.iter_genes()}


def ingest(tmp_path: Path, home: str, workers: int, repo: Path) -> tuple[HelixContextManager, object]:
    os.environ["HELIX_HOME"] = str(tmp_path / home)
    helix = HelixContextManager(load_config().replace(ingest={"workers": workers}))
    report = helix.ingest_path(repo, embed=False)
    return helix, report


def test_workers_build_the_same_genome_as_one_process(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    serial, serial_report = ingest(tmp_path, "serial", 1, repo)
    parallel, parallel_report = ingest(tmp_path, "parallel", 3, repo)
    try:
        assert serial.parse_pool is None
        assert parallel.parse_pool is not None and parallel.parse_pool.started, "the workers never ran"
        assert parallel_report.files_ingested == serial_report.files_ingested == 26
        assert parallel_report.genes_added == serial_report.genes_added
        assert genome_snapshot(parallel) == genome_snapshot(serial)
        # the full-text rows written from the workers' stored forms answer like the in-process ones
        for query in ("fetch user record", "PaymentGateway7", "accountStore", "retry limit"):
            got = [h.gene.gene_id for h in parallel.retriever.retrieve(query).items]
            want = [h.gene.gene_id for h in serial.retriever.retrieve(query).items]
            assert got == want and got, query
    finally:
        serial.close()
        parallel.close()


def test_ingest_finishes_when_a_worker_dies(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    repo = make_repo(tmp_path / "repo")
    helix, _ = ingest(tmp_path, "home", 3, repo)
    try:
        pool = helix.parse_pool
        assert pool is not None and pool.started
        for worker in pool._procs:  # the workers die between two ingests (OOM killer, a user's kill)
            worker.proc.kill()
            worker.proc.wait()
        make_repo(repo, tag="v2")  # every file changed
        with caplog.at_level(logging.WARNING, logger="helix.ingest"):
            report = helix.ingest_path(repo, embed=False)
        assert report.files_ingested == 26 and not report.files_skipped
        assert "parse workers stopped" in caplog.text
        assert all("(v2)" in g.content for g in helix.genome.iter_genes() if g.start_line == 1
                   and g.source_path.endswith(".py"))
        # and the ingest after that starts fresh workers
        make_repo(repo, tag="v3")
        again = helix.ingest_path(repo, embed=False)
        assert again.files_ingested == 26 and helix.parse_pool.started
    finally:
        helix.close()


def test_a_script_without_a_main_guard_runs_once(tmp_path: Path) -> None:
    """Workers are not multiprocessing children, so the caller's script is never re-run in them."""
    repo = make_repo(tmp_path / "repo")
    marker = tmp_path / "runs.txt"
    script = tmp_path / "index_my_repo.py"
    script.write_text(textwrap.dedent(f'''\
        from helix_context import HelixContextManager, load_config
        with open({str(marker)!r}, "a") as fh:
            fh.write("ran\\n")
        helix = HelixContextManager(load_config())
        report = helix.ingest_path({str(repo)!r}, embed=False)
        print(report.files_ingested, helix.parse_pool is not None and helix.parse_pool.started)
        helix.close()
        '''), encoding="utf-8")
    env = {**os.environ, "HELIX_HOME": str(tmp_path / "home"), "HELIX_INGEST_WORKERS": "3"}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["26", "True"]
    assert marker.read_text().splitlines() == ["ran"]


def test_workers_setting_is_checked(tmp_path: Path) -> None:
    from helix_context.config import load_config
    from helix_context.errors import ConfigError

    cfg = tmp_path / "helix.toml"
    cfg.write_text("[ingest]\nworkers = -2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[ingest\] workers .* must be at least 0"):
        load_config(cfg)


def _jobs(n: int, payload: object = None) -> list[ParseJob]:
    return [ParseJob(f"/demo/m{i:02d}.py", f"def handler_{i}():\n    return {i}\n", "demo", Provenance(source_kind="file"),
                     payload=payload if payload is not None else i) for i in range(n)]


def test_the_callers_payload_never_travels_to_a_worker() -> None:
    """A payload that cannot be pickled (or would import the genome store in a worker) stays here."""
    pool = ParsePool(load_config(), None, 1)
    try:
        lock = threading.Lock()  # cannot be pickled
        results = list(Scheduler(pool, load_config(), None, start_after=1).run(_jobs(12, payload=lock)))
        assert pool.started
        assert [job.path for job, _ in results] == [job.path for job in _jobs(12)]
        assert all(job.payload is lock for job, _ in results)
        assert all(not isinstance(parsed, BaseException) and parsed.genes for _, parsed in results)
    finally:
        pool.close()


def test_a_worker_gets_its_next_file_while_this_process_is_busy() -> None:
    """Workers pull: each result hands the worker another file at once, even while the main
    process is deep in writing and not looking at the workers at all; and with workers, the
    main process parses none of the files they can take (it has the writes to do)."""
    pool = ParsePool(load_config(), None, 1)
    pool.start()
    parsed_here: list[str] = []

    class Counting(Scheduler):
        def _parse_here(self, job: ParseJob) -> Parsed | BaseException:
            parsed_here.append(job.path)
            return super()._parse_here(job)

    scheduler = Counting(pool, load_config(), None, depth=2)
    try:
        results = []
        done_while_busy = 0
        for job, parsed in scheduler.run(_jobs(40)):
            if not results:  # "writing" the first file until the worker has done the rest
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and done_while_busy < 39:
                    time.sleep(0.01)
                    done_while_busy = sum(1 for s in scheduler._slots if s.future is not None and s.future.done())
            results.append((job, parsed))
        assert done_while_busy == 39, f"the worker stopped getting files: {done_while_busy} of 39 done"
        assert [job.payload for job, _ in results] == list(range(40))
        assert parsed_here == [], f"the main process parsed {len(parsed_here)} files a worker could take"
        assert all(not isinstance(parsed, BaseException) and parsed.genes for _, parsed in results)
    finally:
        pool.close()


def test_a_folder_ingest_starts_the_workers_before_the_ner_model_loads(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Their start-up (importing the parser) then overlaps the model load instead of the ingest."""
    repo = make_repo(tmp_path / "repo")
    monkeypatch.setenv("HELIX_HOME", str(tmp_path / "home"))
    seen: list[bool] = []
    original = HelixContextManager._load_tagger

    def load_tagger(self: HelixContextManager):  # type: ignore[no-untyped-def]  # a stand-in patched onto the class for this test
        seen.append(self._parse_pool is not None and self._parse_pool.started)
        return original(self)

    monkeypatch.setattr(HelixContextManager, "_load_tagger", load_tagger)
    one_file = HelixContextManager(load_config().replace(ingest={"workers": 2}))
    try:
        one_file.ingest_path(repo / "module_00.py", embed=False)
        assert seen == [False] and not one_file.parse_pool.started  # one file: no processes to start
    finally:
        one_file.close()
    monkeypatch.setenv("HELIX_HOME", str(tmp_path / "home2"))
    helix = HelixContextManager(load_config().replace(ingest={"workers": 2}))
    try:
        report = helix.ingest_path(repo, embed=False)
        assert seen == [False, True]
        assert report.files_ingested == 26
    finally:
        helix.close()


def test_the_server_starts_its_workers_at_start_up_when_ingest_parses_on_every_core(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIX_HOME", str(tmp_path / "home"))
    helix = HelixContextManager(load_config().replace(ingest={"workers": 2}, embedding={"enabled": False}))
    try:
        helix.load_parts()  # what the server runs at start
        assert helix.parse_pool is not None and helix.parse_pool.started
        procs = [w.proc for w in helix.parse_pool._procs]
        assert procs and all(proc.poll() is None for proc in procs)
        report = helix.ingest_path(make_repo(tmp_path / "repo"), embed=False)
        assert report.files_ingested == 26 and not report.files_skipped
        if sys.platform != "win32":  # the writes set the pace: workers yield the CPU to them (and the desktop)
            import psutil

            assert all(psutil.Process(proc.pid).nice() > psutil.Process().nice() for proc in procs)
    finally:
        helix.close()
    assert all(proc.poll() is not None for proc in procs)  # closing the manager ends them


def test_a_tree_of_prose_is_read_on_two_cores_with_one_extra_copy_of_the_ner_model(tmp_path: Path) -> None:
    """Prose needs the NER model: the first worker loads it and reads prose beside the main process
    (the kernel's documentation used to be read by one process while the workers waited); the other
    workers never load it, so a many-core machine does not hold one copy per core."""
    psutil = pytest.importorskip("psutil")
    docs = tmp_path / "docs"
    (docs / ".git").mkdir(parents=True)
    for i in range(40):
        (docs / f"guide_{i:02d}.md").write_text(
            f"# Guide {i}\n\nGrace Hopper and Alan Turing met at Bletchley Park in chapter {i}.\n", encoding="utf-8")
    os.environ["HELIX_HOME"] = str(tmp_path / "home")
    helix = HelixContextManager(load_config().replace(ingest={"workers": 3}))
    try:
        if helix.tagger.status == "off":
            pytest.skip("spaCy is not installed: no NER model to place")
        report = helix.ingest_path(docs, embed=False)
        assert report.files_ingested == 40 and not report.files_skipped
        pool = helix.parse_pool
        assert pool is not None and len(pool._procs) == 3

        def loaded_spacy(proc: subprocess.Popen) -> bool:
            return any("spacy" in Path(m.path).parts for m in psutil.Process(proc.pid).memory_maps())

        assert [loaded_spacy(w.proc) for w in pool._procs] == [True, False, False]
        assert any("Hopper" in tag for g in helix.genome.iter_genes() for tag in g.tags)
    finally:
        helix.close()


def test_closed_workers_leave_no_pipe_open() -> None:
    """Every folder ingest starts and closes its workers; a server that re-indexes all day must not keep
    two descriptors per worker per ingest until the garbage collector finds them."""
    pool = ParsePool(load_config(), None, 2)
    results = list(Scheduler(pool, load_config(), None, start_after=1).run(_jobs(8)))
    assert all(not isinstance(parsed, BaseException) and parsed.genes for _, parsed in results)
    workers = list(pool._procs)
    pool.close()
    assert len(workers) == 2
    assert all(w.proc.stdin is not None and w.proc.stdin.closed for w in workers)
    assert all(w.proc.stdout is not None and w.proc.stdout.closed for w in workers)
