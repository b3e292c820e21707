"""Every tray action visibly succeeds or fails: the real tray under a virtual display.

- "Open dashboard" with a browser that cannot start (Chromium run as root without
  --no-sandbox exits at once): the tray reaps it (no zombie under the tray), and the
  menu's top lines, the log and (where the backend has them) a notification say why,
  with the URL to open by hand. Screenshot: test-artifacts/tray-browser-failed-menu.png.
- "Add folder…": the folder dialog opens in the user's home; one Enter adds that folder
  (the backend lists it). Screenshot: test-artifacts/tray-add-folder-dialog.png.
(No display at all: tests/launcher/test_tray_cli.py.)
"""

from __future__ import annotations

import os
import shutil
import time

import httpx
import psutil
import pytest

import xkit
from launcher.sources_menu import DIALOG_TITLE
from supkit import wait_until
from traykit import ARTIFACTS, choose, start_tray, tray_env

pytestmark = [pytest.mark.tray, pytest.mark.timeout(150)]
_x, _stop = xkit.x, xkit.stop


def _zombies_under(pid: int) -> list[str]:
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    out = []
    for child in children:
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                out.append(f"{child.pid} {child.name()}")
        except psutil.NoSuchProcess:
            continue
    return out


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("chromium") is None,
                    reason="needs chromium run as root (it then refuses to start without --no-sandbox)")
def test_a_browser_that_fails_is_reaped_and_the_tray_says_why(xsession, tmp_path, request):
    python, env = tray_env(xsession, tmp_path, "xorg", request)
    env["BROWSER"] = shutil.which("chromium") or "chromium"  # the real one: as root it exits at once
    base = f"http://127.0.0.1:{env['HELIX_SERVER_PORT']}"
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = tmp_path / "tray.log"
    tray = None
    try:
        tray, _pid, icon = start_tray(python, env, log_path, xsession)
        choose(xsession, icon, "3", 1)  # "Open dashboard"
        said = wait_until(lambda: "The browser (chromium) exited" in (t := log_path.read_text(errors="replace"))
                          and t, timeout=30)
        assert f"Open {base}/dashboard in a browser yourself" in said
        assert "without --no-sandbox is not supported" in said  # the browser's own reason
        # reaped: no zombie [chromium] stays under the tray
        wait_until(lambda: not _zombies_under(tray.pid), timeout=10)
        time.sleep(1.0)
        assert _zombies_under(tray.pid) == []

        # the menu now says it, above everything else
        shot = ARTIFACTS / "tray-browser-failed-menu.png"
        choose(xsession, icon, "3", 0, shot=shot)
        assert shot.stat().st_size > 0  # the notice lines above the status lines: see the shot
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- tray log ---\n{log_path.read_text(errors='replace')[-6000:]}") from None
    finally:
        _stop(tray)


def _dialog(xsession: dict) -> list[str]:
    return _x(xsession, "xdotool", "search", "--onlyvisible", "--name", f"^{DIALOG_TITLE}$").split()


def test_add_folder_opens_the_dialog_in_home_and_one_enter_adds_it(xsession, tmp_path, request):
    python, env = tray_env(xsession, tmp_path, "xorg", request)
    home = tmp_path / "userhome"
    (home / "notes").mkdir(parents=True)
    (home / "notes" / "plan.md").write_text("# Plan\n\nShip the tray fixes before the release.\n")
    env["HOME"] = str(home)
    urls = tmp_path / "urls.txt"
    base = f"http://127.0.0.1:{env['HELIX_SERVER_PORT']}"
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = tmp_path / "tray.log"
    tray = None
    try:
        tray, _pid, icon = start_tray(python, env, log_path, xsession)
        # 1. the dialog opens in the home folder, and one Enter confirms what it shows: the home folder
        #    itself, which the backend refuses (pick a project in it) - and the tray says so
        choose(xsession, icon, "3", 3)  # Open dashboard, Restart backend, "Add folder…"
        wait_until(lambda: _dialog(xsession), timeout=30)
        time.sleep(0.5)  # let it draw
        shot = ARTIFACTS / "tray-add-folder-dialog.png"
        _x(xsession, "import", "-window", "root", str(shot))
        assert shot.stat().st_size > 0
        _x(xsession, "xdotool", "key", "Return")  # once
        said = wait_until(lambda: "was not added" in (t := log_path.read_text(errors="replace")) and t, timeout=30)
        assert f"{home.resolve()} was not added" in said and "whole home folder" in said
        assert not _dialog(xsession)
        wait_until(lambda: urls.exists() and f"{base}/dashboard#sources" in urls.read_text(), timeout=10)

        # 2. a folder typed into the dialog (as a user picks one in it): one Enter adds it
        choose(xsession, icon, "3", 3)
        wait_until(lambda: _dialog(xsession), timeout=30)
        time.sleep(0.5)
        _x(xsession, "xdotool", "type", "--delay", "10", str(home / "notes"))
        _x(xsession, "xdotool", "key", "Return")  # once
        listed = wait_until(lambda: [s["path"] for s in httpx.get(f"{base}/sources", timeout=5).json()["sources"]],
                            timeout=30)
        assert listed == [str((home / "notes").resolve())]
        assert not _dialog(xsession)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- tray log ---\n{log_path.read_text(errors='replace')[-6000:]}") from None
    finally:
        _stop(tray)
