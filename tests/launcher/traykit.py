"""Driving the real tray under Xvfb the way a user does: find its docked icon, open its menu with a click,
pick an item with the keyboard, start it with a stand-in browser. Shared by the tray tests."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import xkit
from launcher.popup import MENU_WINDOW_NAME
from supkit import free_port, health, wait_until

REPO = Path(__file__).absolute().parents[2]
ARTIFACTS = REPO / "test-artifacts"
_x, _stop = xkit.x, xkit.stop


def icon_window(env: dict) -> str:
    """The icon once it is mapped (docked in trayer's panel): a click before that reaches nothing."""
    ids = _x(env, "xdotool", "search", "--onlyvisible", "--name", "^Helix Context - running$").split()
    return ids[0] if ids else ""


def menu_window(env: dict) -> str:
    ids = _x(env, "xdotool", "search", "--onlyvisible", "--name", f"^({MENU_WINDOW_NAME}|helix-tray)$").split()
    for wid in ids:
        info = _x(env, "xwininfo", "-id", wid)
        width, height = re.search(r"Width: (\d+)", info), re.search(r"Height: (\d+)", info)
        if width is None or height is None:  # closed between the search and this look (a CI run met it)
            continue
        if int(width.group(1)) >= 100 and int(height.group(1)) >= 60:  # the menu, not a 10x10 leader window
            return wid
    return ""


def choose(env: dict, icon: str, button: str, downs: int, shot: Path | None = None) -> None:
    """Open the menu with a click on the icon, then pick the `downs`-th enabled item with the keyboard
    (disabled status lines are skipped by both Tk's and GTK's menus)."""
    for attempt in range(4):
        # a loaded machine may drop the first click (the toolkit is still settling the freshly docked
        # icon); a user clicks again, and so does this test, but only while no menu is open
        if menu_window(env):
            break
        _x(env, "xdotool", "mousemove", "--window", icon, "6", "6", "click", button)
        try:
            wait_until(lambda: menu_window(env), timeout=5, every=0.05)
            break
        except AssertionError:
            if attempt == 3:
                menus = _x(env, "xdotool", "search", "--name", f"^({MENU_WINDOW_NAME}|helix-tray)$").split()
                raise AssertionError(f"four clicks on the icon opened no menu; clicked {icon} at {icon_box(env, icon)}; "
                                     f"pointer {_x(env, 'xdotool', 'getmouselocation', '--shell').split()}; "
                                     f"Helix windows: {helix_windows(env)}; menu windows, shown or not: {menus}") from None
    # the toolkit maps the menu, then takes the keyboard; keys sent in between go elsewhere, and a user
    # reads the menu first anyway (a loaded run lost its keys: the menu stayed open)
    time.sleep(0.3)
    if shot is not None:
        _x(env, "import", "-window", "root", str(shot))
    keys = ["Down"] * downs + ["Return"] if downs else ["Escape"]
    for attempt in range(2):
        _x(env, "xdotool", "key", *keys)
        try:
            wait_until(lambda: not menu_window(env), timeout=5, every=0.05)
            return
        except AssertionError:
            # the menu is still open, so none of the keys reached it (Return or Escape closes it at once):
            # they went to the window under the pointer before the menu held the keyboard. A user presses
            # again; so does this test, once
            if attempt == 1:
                raise AssertionError(f"the menu stayed open after its keys {keys}, sent twice; menu window "
                                     f"{menu_window(env)}; Helix windows: {helix_windows(env)}") from None


def icon_box(env: dict, icon: str) -> tuple[int, ...]:
    """The icon's place on the screen: (x, y, width, height)."""
    info = _x(env, "xwininfo", "-id", icon)
    return tuple(int(m.group(1)) for key in ("Absolute upper-left X", "Absolute upper-left Y", "Width", "Height")
                 if (m := re.search(rf"{key}: *(-?\d+)", info)))


def tray_env(xsession: dict, tmp_path: Path, path: str, request) -> tuple[str, dict]:
    """The interpreter and environment for one path; the stand-in browser writes to tmp_path/urls.txt."""
    env = dict(xsession)
    python = sys.executable
    no_dbus = path == "xorg" or path.endswith("-no-dbus")
    path = path.removesuffix("-no-dbus")
    if path in ("appindicator", "gtk"):
        python = request.getfixturevalue("gi_python")
        env["HELIX_TRAY_BACKEND"] = path
    else:
        try:
            import tkinter  # noqa: F401 - a probe: is tkinter installed at all
        except ImportError:
            pytest.skip(f"{sys.executable} has no tkinter for the XEmbed icon's menu (apt-get install -y python3-tk)")
        # the XEmbed path as a user without gi has it
        env["HELIX_TRAY_BACKEND"] = "xorg"
    if no_dbus:
        env.pop("DBUS_SESSION_BUS_ADDRESS")
        empty_bin = tmp_path / "bin"
        empty_bin.mkdir()
        env["PATH"] = str(empty_bin)  # no dbus-launch to autostart a bus
    browser = tmp_path / "browser.sh"
    browser.write_text(f"#!/bin/sh\necho \"$1\" >> {tmp_path / 'urls.txt'}\n")
    browser.chmod(0o755)
    env.update({"BROWSER": str(browser), "HELIX_HOME": str(tmp_path / "home"), "HELIX_SERVER_PORT": str(free_port()),
                "HELIX_WATCHERS_OLLAMA_URL": f"http://127.0.0.1:{free_port()}",
                "HELIX_SUPERVISOR_HEALTH_INTERVAL_S": "0.2", "PYTHONPATH": str(REPO)})
    return python, env


def start_tray(python: str, env: dict, log_path: Path, xsession: dict) -> tuple[subprocess.Popen, int, str]:
    """The real launcher, until its backend serves and its icon is docked: (process, backend pid, icon).

    First until no icon of an earlier tray of this display is shown, so the icon found is this tray's:
    clicks on a stopped tray's icon that is still being undocked open no menu."""
    wait_until(lambda: not icon_window(xsession), timeout=15, every=0.05)
    with log_path.open("w") as log:
        tray = subprocess.Popen([python, "-m", "launcher.tray"], cwd=REPO, env=env, stdout=log,
                                stderr=subprocess.STDOUT)
    try:
        pid = wait_until(lambda: health(f"http://127.0.0.1:{env['HELIX_SERVER_PORT']}"), timeout=40)["pid"]
        icon = wait_until(lambda: icon_window(xsession), timeout=45, every=0.05)
    except AssertionError:
        seen = helix_windows(xsession)  # before the stop: the icon as it was when the wait gave up
        _stop(tray)
        raise AssertionError(f"tray never served / docked; Helix windows on the display: {seen}\n"
                             + log_path.read_text(errors="replace")) from None
    return tray, pid, icon


def helix_windows(env: dict) -> str:
    """Every window named for Helix (mapped or not), with its name, map state and parent, and whether a
    tray host (trayer's panel) is on the display: what a failed wait for the docked icon needs to say
    (a name left at an earlier state, an icon never embedded, or no tray host at all)."""
    out = []
    for wid in _x(env, "xdotool", "search", "--name", "^Helix").split()[:8]:
        info = _x(env, "xwininfo", "-id", wid, "-children")
        state = re.search(r"Map State: (\w+)", _x(env, "xwininfo", "-id", wid))
        name = re.search(r'xwininfo: Window id: \S+ "(.*)"', info)
        parent = re.search(r"Parent window id: (\S+)", info)
        out.append(f"{wid} {name.group(1) if name else '?'!r} {state.group(1) if state else '?'} "
                   f"parent {parent.group(1) if parent else '?'}")
    panels = _x(env, "xdotool", "search", "--class", "trayer").split()
    return "; ".join(out) + f" (trayer windows: {len(panels)})"
