"""Issue 25, findings 2 and 3: nothing outside the allowed folders is read, whatever races the folder runs,
and no file can stall or flood the reader.

Each test runs the attack for real against the app on uvicorn: a thread swaps files for symlinks or FIFOs
in a loop while the backend ingests over HTTP; a symlink is created after the folder was added; a FIFO
takes a tracked file's place before /admin/compact. A FIFO fed by a writer that never stops stands in
for the FUSE file that reports size 0 and never ends (FUSE is not available here); a FIFO whose writer
never writes stands in for a file whose read blocks.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

SECRET = "quillfeather private key 9931"

pytestmark = pytest.mark.skipif(os.name == "nt", reason="symlinks and FIFOs are made with POSIX calls here")


def _context_has_secret(server) -> bool:
    r = httpx.post(server.url + "/context", json={"query": "quillfeather private key"}, timeout=60)
    assert r.status_code == 200, r.text
    return SECRET in r.text


def _secret(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "id_secret.txt"
    secret.write_text(f"The {SECRET} is here.\n" * 3)
    return secret


def _atomic(path: Path, make) -> None:
    """Put a new entry at `path` in one rename (what an attacker's swap looks like to a reader)."""
    tmp = path.with_name(f".swap-{path.name}-{threading.get_ident()}")
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    make(tmp)
    os.replace(tmp, path)


@contextmanager
def swapping(paths: list[Path], variants: list) -> Iterator[dict[str, int]]:
    """A thread that puts each variant in turn at every path, as fast as it can, until the block ends."""
    stop = threading.Event()
    counts = {"swaps": 0}

    def run() -> None:
        while not stop.is_set():
            for make in variants:
                for path in paths:
                    _atomic(path, make)
                    counts["swaps"] += 1

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield counts
    finally:
        stop.set()
        thread.join(5)


def test_file_swapped_for_a_symlink_while_walked_is_never_read(lean, server_factory, tmp_path) -> None:
    """follow_symlinks = false: swapping regular files and links to a secret, in a loop, while the folder
    is ingested again and again, never lets the secret in (it won the race 3 runs of 3 before)."""
    secret = _secret(tmp_path)
    root = tmp_path / "project"
    root.mkdir()
    (root / "README.md").write_text("# Project\n\nThe inside documentation.\n")
    racing = [root / f"notes_{i}.txt" for i in range(24)]
    for path in racing:
        path.write_text(f"inside notes {path.name}\n")
    server = server_factory(lean.replace(server={"allowed_ingest_roots": (str(root),)},
                                         ingest={"follow_symlinks": False, "workers": 1}))

    def regular(tmp: Path) -> None:
        tmp.write_text(f"inside notes, version {time.monotonic_ns()}\n")

    def link(tmp: Path) -> None:
        os.symlink(secret, tmp)

    deadline = time.monotonic() + 12
    runs = 0
    with swapping(racing, [regular, link]) as counts:
        while time.monotonic() < deadline:
            r = httpx.post(server.url + "/ingest", json={"path": str(root), "embed": False}, timeout=60)
            assert r.status_code == 200, r.text
            runs += 1
            # looked at after every run: a later run retires what a link left, so only "never" counts
            assert not _context_has_secret(server), f"the secret was served after ingest run {runs}"
    assert runs >= 5 and counts["swaps"] > 1000, (runs, counts)


def _source_settings(lean, follow: bool, **ingest):
    return lean.replace(ingest={"follow_symlinks": follow, "workers": 1, **ingest},
                        sources={"watch": True, "debounce_ms": 300, "quiet_ms": 50, "missing_check_s": 1.0})


def _add_source(server, folder: Path) -> None:
    r = httpx.post(server.url + "/sources", json={"path": str(folder)}, timeout=30)
    assert r.status_code == 202, r.text


def _source(server, folder: Path) -> dict:
    listing = httpx.get(server.url + "/sources", timeout=30).json()
    return next(s for s in listing["sources"] if s["path"] == str(folder))


def _wait_idle(server, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listing = httpx.get(server.url + "/sources", timeout=30).json()
        if not listing["indexing"] and all(s.get("watching") for s in listing["sources"]):
            return listing
        time.sleep(0.1)
    raise AssertionError(f"sources still busy after {timeout} s: {listing}")


def test_symlink_created_after_the_folder_was_added_never_reaches_outside(lean, server_factory, tmp_path) -> None:
    """follow_symlinks = true: a link made later, pointing outside every root, is not ingested by the watcher
    (before: ingested about 1 s later)."""
    secret = _secret(tmp_path)
    root = tmp_path / "watched"
    root.mkdir()
    (root / "README.md").write_text("# Watched\n\nThe watched documentation.\n")
    server = server_factory(_source_settings(lean, follow=True))
    _add_source(server, root)
    _wait_idle(server)
    os.symlink(secret, root / "late.txt")
    time.sleep(1.0)  # its own burst: a folder appearing in the same burst would make the watcher walk everything
    (root / "after.md").write_text("A file written after the links, so the watcher surely ran.\n")
    deadline = time.monotonic() + 20
    while "surely ran" not in httpx.post(server.url + "/context", json={"query": "watcher surely ran"},
                                         timeout=60).text:
        assert time.monotonic() < deadline, "the watcher never indexed after.md"
        time.sleep(0.2)
    _wait_idle(server)
    time.sleep(1.5)  # a late event for the links would have been handled by now
    _wait_idle(server)
    assert not _context_has_secret(server)


def _fifo_writer(fifo: Path, *, endless: bool, stop: threading.Event, fed: dict[str, int]) -> threading.Thread:
    """Hold the FIFO's writing end open: feed it forever (an endless file) or never (a read that blocks)."""
    def run() -> None:
        fd = os.open(fifo, os.O_RDWR)  # never blocks, and keeps a writer on the FIFO while readers come and go
        fed["fd"] = fd
        block = b"endless line of a file that never ends\n" * 1600
        try:
            while not stop.is_set():
                if not endless:
                    stop.wait(0.1)
                    continue
                try:
                    fed["bytes"] += os.write(fd, block)
                except OSError:
                    return
        finally:
            os.close(fd)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _linked_fifo(fifo: Path):
    def make(tmp: Path) -> None:
        os.link(fifo, tmp)  # the same FIFO (and its writer) each time it is swapped in
    return make


def test_a_fifo_swapped_in_during_ingest_neither_floods_nor_stalls_it(lean, server_factory, tmp_path) -> None:
    """A file the walk saw as regular becomes a FIFO that never stops talking: the backend reads none of it
    and the ingest ends (before: read until memory ran out; the folder was marked error with 0 files)."""
    root = tmp_path / "project"
    root.mkdir()
    for i in range(20):
        (root / f"doc_{i}.md").write_text(f"# Document {i}\n\nPlain text number {i}.\n")
    racing = [root / f"endless_{i}.log" for i in range(8)]
    for path in racing:
        path.write_text("a log that will become endless\n")
    fifo = tmp_path / "endless.fifo"
    os.mkfifo(fifo)
    stop = threading.Event()
    fed = {"bytes": 0}
    writer = _fifo_writer(fifo, endless=True, stop=stop, fed=fed)
    max_bytes = 200_000
    server = server_factory(lean.replace(server={"allowed_ingest_roots": (str(root),)},
                                         ingest={"max_file_bytes": max_bytes, "workers": 1, "read_timeout_s": 3.0}))

    def regular(tmp: Path) -> None:
        tmp.write_text(f"a log line {time.monotonic_ns()}\n")

    try:
        started = time.monotonic()
        with swapping(racing, [regular, _linked_fifo(fifo)]):
            for _ in range(6):
                before = fed["bytes"]
                r = httpx.post(server.url + "/ingest", json={"path": str(root), "embed": False}, timeout=60)
                assert r.status_code == 200, r.text
                report = r.json()
                # what the reader took from the endless file in this run: at most a pipe buffer beyond the bound
                assert fed["bytes"] - before <= 2 * max_bytes + (1 << 20), fed
                assert report["files_ingested"] + report["files_unchanged"] >= 20, report
        assert time.monotonic() - started < 60
    finally:
        stop.set()
        writer.join(5)


def test_a_folder_whose_file_stalls_does_not_hold_up_another_folder(lean, server_factory, tmp_path) -> None:
    """A file in folder A whose read blocks (a FIFO nobody writes to, swapped in after the walk saw a
    regular file) must not keep folder B queued (before: B stayed queued for as long as A's read blocked),
    and A itself is indexed, not marked error with 0 files."""
    a = tmp_path / "a"
    b = tmp_path / "b"
    a.mkdir()
    b.mkdir()
    for i in range(12):
        (a / f"a_{i}.md").write_text(f"# A {i}\n\nFolder a, note {i}.\n")
    racing = [a / f"stall_{i}.txt" for i in range(40)]
    for path in racing:
        path.write_text("about to stall\n")
    (b / "b.md").write_text("# B\n\nThe bravo folder's own zebrafinch notes.\n")
    fifo = tmp_path / "stall.fifo"
    os.mkfifo(fifo)
    stop = threading.Event()
    fed = {"bytes": 0}
    writer = _fifo_writer(fifo, endless=False, stop=stop, fed=fed)
    server = server_factory(_source_settings(lean, follow=False, read_timeout_s=2.0))

    def regular(tmp: Path) -> None:
        tmp.write_text(f"regular again {time.monotonic_ns()}\n")

    try:
        with swapping(racing, [regular, _linked_fifo(fifo)]):
            _add_source(server, a)
            time.sleep(0.3)
            _add_source(server, b)
            deadline = time.monotonic() + 30
            while "zebrafinch" not in httpx.post(server.url + "/context", json={"query": "zebrafinch notes"},
                                                 timeout=60).text:
                assert time.monotonic() < deadline, f"folder b never indexed: {_source(server, b)}"
                time.sleep(0.2)
        state = _source(server, a)
        assert state["state"] != "error", state
        assert "Folder a, note 3" in httpx.post(server.url + "/context", json={"query": "Folder a note 3"},
                                                timeout=60).text
    finally:
        stop.set()
        writer.join(5)


def test_compact_does_not_hang_on_a_fifo_where_a_tracked_file_was(lean, server_factory, tmp_path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    tracked = root / "tracked.md"
    tracked.write_text("# Tracked\n\nA tracked file.\n")
    (root / "kept.md").write_text("# Kept\n\nStays as it was.\n")
    server = server_factory(lean.replace(server={"allowed_ingest_roots": (str(root),)},
                                         ingest={"read_timeout_s": 3.0}))
    r = httpx.post(server.url + "/ingest", json={"path": str(root), "embed": False}, timeout=60)
    assert r.status_code == 200 and r.json()["files_ingested"] == 2, r.text
    tracked.unlink()
    os.mkfifo(tracked)
    try:
        r = httpx.post(server.url + "/admin/compact", timeout=20)
        assert r.status_code == 200, r.text
        body = r.json()
        assert str(tracked) in body["changed_files"] + body["missing_files"], body
        assert str(root / "kept.md") not in body["changed_files"] + body["missing_files"], body
    finally:
        fd = os.open(tracked, os.O_RDWR)  # a reader blocked on the FIFO (the old code) gets its EOF
        os.close(fd)


def test_refresh_reads_no_file_swapped_for_a_link_outside(lean, server_factory, tmp_path) -> None:
    """/admin/refresh re-reads recorded paths: one that became a link to a secret is not read through."""
    secret = _secret(tmp_path)
    root = tmp_path / "project"
    root.mkdir()
    notes = root / "notes.txt"
    notes.write_text("inside notes\n")
    server = server_factory(lean.replace(server={"allowed_ingest_roots": (str(root),)}))
    r = httpx.post(server.url + "/ingest", json={"path": str(root), "embed": False}, timeout=60)
    assert r.status_code == 200, r.text
    notes.unlink()
    os.symlink(secret, notes)
    r = httpx.post(server.url + "/admin/refresh", timeout=60)
    assert r.status_code == 200, r.text
    assert not _context_has_secret(server)
