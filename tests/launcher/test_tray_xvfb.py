"""The real tray under a virtual display: Xvfb + trayer as the tray host + PYSTRAY_BACKEND=xorg.

Checks the icon docked into the tray (its window is a child of trayer's panel,
named after the state) and shows the state's colour in a screenshot, saved to
test-artifacts/tray.png. Skips, saying why, where Xvfb / trayer / ImageMagick /
python-xlib are missing (tests/run.sh installs them).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helix_context import signals
from launcher.icons import STATE_COLORS
from supkit import free_port, health, wait_until

pytestmark = [pytest.mark.tray, pytest.mark.timeout(120)]
REPO = Path(__file__).absolute().parents[2]
TOOLS = {"Xvfb": "xvfb", "xdpyinfo": "x11-utils", "xwininfo": "x11-utils", "trayer": "trayer",
         "import": "imagemagick"}


def _skip_reason() -> str:
    if not sys.platform.startswith("linux"):
        return "the Xvfb tray test runs on Linux"
    missing = sorted({pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None})
    if missing:
        return f"needs {', '.join(missing)} (apt-get install -y {' '.join(missing)})"
    try:
        import Xlib  # noqa: F401
    except ImportError:
        return "needs python-xlib (pystray's xorg backend)"
    return ""


def _free_display() -> int:
    for n in range(90, 200):
        if not Path(f"/tmp/.X11-unix/X{n}").exists() and not Path(f"/tmp/.X{n}-lock").exists():
            return n
    raise RuntimeError("no free X display number")


def _stop(proc: subprocess.Popen | None, sig: int = signal.SIGTERM) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _icon_pixels(png: Path, colour: tuple[int, int, int], tol: int = 12) -> int:
    from PIL import Image

    img = Image.open(png).convert("RGB")
    data = img.tobytes()
    count = 0
    for i in range(0, len(data), 3):
        if all(abs(data[i + k] - colour[k]) <= tol for k in range(3)):
            count += 1
    return count


@pytest.mark.skipif(bool(_skip_reason()), reason=_skip_reason() or "ok")
def test_tray_icon_docks_under_xvfb_and_shows_the_state(tmp_path):
    display = f":{_free_display()}"
    env = {**os.environ, "DISPLAY": display}
    artifacts = REPO / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    shot = artifacts / "tray.png"
    xvfb = trayer = tray = None
    try:
        xvfb = subprocess.Popen(["Xvfb", display, "-screen", "0", "480x120x24", "-nolisten", "tcp"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: subprocess.run(["xdpyinfo", "-display", display], capture_output=True).returncode == 0,
                   timeout=20, every=0.1)
        trayer = subprocess.Popen(["trayer", "--edge", "top", "--align", "right", "--widthtype", "request",
                                   "--height", "40", "--SetDockType", "true"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: "panel" in subprocess.run(["xwininfo", "-root", "-tree"], env=env, capture_output=True,
                                                    text=True).stdout, timeout=20, every=0.1)

        port = free_port()
        home = tmp_path / "home"
        tray_env = {**env, "PYSTRAY_BACKEND": "xorg", "HELIX_HOME": str(home), "HELIX_SERVER_PORT": str(port),
                    "HELIX_WATCHERS_OLLAMA_URL": f"http://127.0.0.1:{free_port()}"}
        log = (tmp_path / "tray.log").open("w")
        tray = subprocess.Popen([sys.executable, "-m", "launcher.tray"], cwd=REPO, env=tray_env,
                                stdout=log, stderr=subprocess.STDOUT)
        wait_until(lambda: health(f"http://127.0.0.1:{port}"), timeout=40)

        def docked() -> str:
            tree = subprocess.run(["xwininfo", "-root", "-tree"], env=env, capture_output=True, text=True).stdout
            return tree if '"Helix Context - running"' in tree else ""

        try:
            tree = wait_until(docked, timeout=30, every=0.1)
        except AssertionError:
            tray.send_signal(signal.SIGUSR1)  # the tray dumps its threads' stacks into its log
            time.sleep(1.0)
            seen = subprocess.run(["xwininfo", "-root", "-tree"], env=env, capture_output=True, text=True).stdout
            titles = sorted(set(re.findall(r'"Helix Context[^"]*"', seen)))
            log.flush()
            tail = (tmp_path / "tray.log").read_text(errors="replace")[-9000:]
            raise AssertionError(f"tray icon never showed 'running'; titles seen: {titles}\ntray log:\n{tail}") from None
        # the icon window sits inside trayer's panel (it was re-parented by the tray host)
        assert "helix-contextSystemTrayIcon" in tree
        time.sleep(0.3)  # let the first expose draw
        subprocess.run(["import", "-display", display, "-window", "root", str(shot)], check=True, timeout=30)
        assert shot.exists()
        green = _icon_pixels(shot, STATE_COLORS["running"])
        assert green >= 20, f"no icon-coloured pixels in {shot}"
        assert _icon_pixels(shot, STATE_COLORS["fatal"]) == 0

        # SIGTERM: the icon goes, the backend this tray started is stopped, exit code 0
        tray.send_signal(signal.SIGTERM)
        assert tray.wait(timeout=30) == 0, (tmp_path / "tray.log").read_text()
        assert health(f"http://127.0.0.1:{port}") is None
        assert signals.read_supervisor_status(home)["backend"]["status"] == "stopped"
    finally:
        _stop(tray)
        _stop(trayer)
        _stop(xvfb)
