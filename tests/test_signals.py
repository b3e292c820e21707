"""Atomic JSON signals: the restart announcement protocol and the shared status files."""

from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path

from helix_context import signals


def _writer(home: str, n: int) -> None:
    for i in range(n):
        signals.write_supervisor_status({"i": i, "blob": "x" * 5000}, home=Path(home))


def test_announce_and_read_back(tmp_path: Path) -> None:
    signals.announce_restart("upgrade", "tray", 3.0, 4242, home=tmp_path)
    state, stale, age = signals.read_server_state(tmp_path)
    assert state is not None and state.state == "restarting" and state.pid == 4242
    assert state.reason == "upgrade" and state.actor == "tray"
    assert not stale and 0 <= age < 5


def test_announcement_goes_stale_after_downtime_plus_grace(tmp_path: Path) -> None:
    signals.announce_restart("x", "y", 1.0, 1, home=tmp_path)
    state, stale, _ = signals.read_server_state(tmp_path, now=time.time() + 1.0 + signals.STALE_GRACE_S + 1)
    assert state is not None and stale


def test_default_home_comes_from_helix_home(helix_home: Path) -> None:
    signals.announce_restart("r", "a", 1.0, 7)
    data = json.loads((helix_home / "shared" / "signals" / "server_state.json").read_text())
    assert data["pid"] == 7 and data["state"] == "restarting"


def test_missing_or_garbage_signal_reads_as_none(tmp_path: Path) -> None:
    assert signals.read_server_state(tmp_path)[0] is None
    path = tmp_path / "shared" / "signals" / "server_state.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    state, stale, _ = signals.read_server_state(tmp_path)
    assert state is None and stale
    # nested past the JSON parser's depth: a RecursionError killed the supervisor, helix-status and the MCP server
    for text in ("[" * 100_000, '{"a":' * 100_000, "{}" + " " * (2 << 20)):
        path.write_text(text)
        assert signals.read_server_state(tmp_path)[0] is None
        assert signals.read_json(path) is None


def test_concurrent_writers_never_expose_a_partial_file(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), 150)) for _ in range(2)]
    for p in procs:
        p.start()
    reads = 0
    while any(p.is_alive() for p in procs):
        data = signals.read_supervisor_status(tmp_path)
        if data is not None:
            assert data["blob"] == "x" * 5000
            reads += 1
    for p in procs:
        p.join()
    assert signals.read_supervisor_status(tmp_path)["i"] == 149
    assert not list((tmp_path / "shared" / "signals").glob("*.tmp"))


def test_ribosome_flag_round_trip(tmp_path: Path) -> None:
    assert signals.ribosome_paused(tmp_path) is False
    signals.set_ribosome_paused(True, "test", home=tmp_path)
    assert signals.ribosome_paused(tmp_path) is True
