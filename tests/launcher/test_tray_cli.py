"""`helix-tray` without a display (falls back to the headless supervisor) and `helix-status`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helix_context import signals
from launcher import status as status_cli
from supkit import free_port, health, wait_until

pytestmark = pytest.mark.timeout(120)
REPO = Path(__file__).absolute().parents[2]


def _tray_env(home: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "PYSTRAY_BACKEND")}
    env.update({"HELIX_HOME": str(home), "HELIX_SERVER_PORT": str(port),
                "HELIX_WATCHERS_OLLAMA_URL": f"http://127.0.0.1:{free_port()}",
                "HELIX_SUPERVISOR_HEALTH_INTERVAL_S": "0.2"})
    return env


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a display-less session is a Linux case")
def test_tray_without_a_display_names_the_cause_and_still_serves(tmp_path):
    port = free_port()
    home = tmp_path / "home"
    proc = subprocess.Popen([sys.executable, "-m", "launcher.tray"], cwd=REPO, env=_tray_env(home, port),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        body = wait_until(lambda: health(f"http://127.0.0.1:{port}"), timeout=40)
        backend_pid = body["pid"]
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "no system tray available" in err and "/dashboard" in err
    # the cause is the missing display, not packages: no apt advice for what is installed (issue 29)
    assert "DISPLAY (X11) and WAYLAND_DISPLAY are unset" in err and "apt install" not in err
    assert health(f"http://127.0.0.1:{port}") is None  # it started the backend, so it stopped it
    snap = signals.read_supervisor_status(home)
    assert snap["backend"]["status"] == "stopped" and snap["supervisor"]["alive"] is False
    assert backend_pid != proc.pid


def test_helix_status_reports_the_snapshot_and_the_live_health(tmp_path, monkeypatch, capsys):
    port = free_port()
    home = tmp_path / "home"
    monkeypatch.setenv("HELIX_HOME", str(home))
    monkeypatch.setenv("HELIX_SERVER_PORT", str(port))

    assert status_cli.main([]) == 1  # nothing running
    out = capsys.readouterr().out
    assert "serving:    NO" in out and "no status snapshot" in out

    flags = subprocess.CREATE_NEW_PROCESS_GROUP if sys.platform == "win32" else 0  # so Ctrl-Break reaches it
    proc = subprocess.Popen([sys.executable, "-m", "launcher.tray", "--headless"], cwd=REPO,
                            env=_tray_env(home, port), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            creationflags=flags)
    try:
        wait_until(lambda: health(f"http://127.0.0.1:{port}"), timeout=40)
        wait_until(lambda: (signals.read_supervisor_status(home) or {}).get("backend", {}).get("status") == "running")
        assert status_cli.main(["--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["live"]["serving"] is True and doc["snapshot_found"] is True
        assert doc["backend"]["status"] == "running" and doc["backend"]["pid"] == doc["live"]["health"]["pid"]
        assert status_cli.main([]) == 0
        text = capsys.readouterr().out
        assert "serving:    yes" in text and "backend:    running" in text and "GPU:" in text
    finally:
        proc.send_signal(signal.SIGTERM if sys.platform != "win32" else signal.CTRL_BREAK_EVENT)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert proc.returncode == 0
    assert status_cli.main([]) == 1
    assert "serving:    NO" in capsys.readouterr().out
