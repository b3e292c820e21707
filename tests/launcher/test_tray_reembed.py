"""The tray and the dashboard show the background re-embed after `[embedding] model` changes, while it runs.

Until the job is done, the genes it has not reached answer with less dense evidence, and on a big genome it takes
minutes: a user who switched the model should see how far it is without reading /health. Real parts: a genome
built with plain MiniLM, served by the real app with the code-trained model, its re-embed job held after its
first batch; a supervisor taking the backend's /health as its watcher does, its snapshot, the tray's status lines;
the dashboard page in headless Chromium.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from helix_context.config import load_config
from helix_context.ingest.embed import Embedder
from launcher.menu import status_lines
from supervisor.core import Supervisor
from tests.stdlib_logging import build_genome, copy_logging


def _line(supervisor: Supervisor) -> str:
    """One round of the supervisor's health watcher (its probe, its callback), then the tray's re-embed line."""
    supervisor._on_health(time.monotonic(), supervisor.client.health())
    return status_lines(supervisor.snapshot())["reembed"]


def _dashboard_shows(url: str, counts: str, words: str) -> None:
    """The dashboard, drawn by headless Chromium, shows the re-embed on its "Indexed chunks" tile."""
    from tests.server.test_dashboard import _chromium, _Elements, _run_chromium

    binary = _chromium()
    if binary is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium; tests/run.sh installs it)")
    dom = _run_chromium(binary, url + "/dashboard", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = _Elements()
    page.feed(dom.stdout)
    assert page.body.get("data-ready") == "1", page.body
    assert page.by_id["tile-genome"].get("data-reembed") == counts, page.by_id["tile-genome"]
    assert words in dom.stdout


def test_the_tray_and_the_dashboard_show_how_far_the_reembed_is(server_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    total = build_genome(copy_logging(tmp_path), "minilm")
    assert total > 64  # more than one batch of the job

    first_batch, release = threading.Event(), threading.Event()
    real = Embedder.embed

    def held(self, texts, *args, **kwargs):
        if threading.current_thread().name == "helix-reembed":
            if first_batch.is_set():
                release.wait(60)  # the second batch waits: the job stays running, one batch done
            first_batch.set()
        return real(self, texts, *args, **kwargs)

    monkeypatch.setattr(Embedder, "embed", held)
    server = server_factory(load_config().replace(embedding={"model": "code-minilm"}, ner={"enabled": False}))
    supervisor = Supervisor(load_config().replace(server={"port": server.port}), watchers=False)
    supervisor._set_running()  # as when it adopts a backend already serving on its port
    try:
        deadline = time.monotonic() + 120
        line = ""
        while time.monotonic() < deadline and "64 of" not in line:
            line = _line(supervisor)
            time.sleep(0.1)
        assert line == f"Re-embedding for the new model: 64 of {total:,} chunks ({100 * 64 / total:.0f} %)", line
        _dashboard_shows(server.url, f"64/{total}", f"re-embedding for the new model: 64 of {total}")
    finally:
        release.set()
    while time.monotonic() < deadline and _line(supervisor):
        time.sleep(0.1)
    assert _line(supervisor) == ""  # done: the line is gone
    assert supervisor.client.health().body["reembed"]["state"] == "done"
    supervisor.client.close()
