"""The real tray under a virtual display, clicked the way a user clicks it.

One X session (Xvfb + its own D-Bus session bus + trayer as the XEmbed tray
host) serves the paths a Linux user may have:
- xorg: pystray's XEmbed icon, this test's Python (no gi needed), and no D-Bus
  session at all (the tray must say so in plain words and still be clickable);
- appindicator: a venv made from the system Python 3.11+ with
  --system-site-packages (it sees Debian's python3-gi), with a D-Bus session;
- gtk: the GTK status icon, same venv.

For each: the real launcher starts a real supervised backend; the icon is found
in trayer's panel and clicked with xdotool; a menu window must appear (a
screenshot of it lands in test-artifacts/); "Open dashboard" is chosen (a
stand-in browser records the URL), then "Restart backend" (the backend's pid
changes); SIGTERM then ends the tray and its backend within 5 s.

Skips, saying why, only where a piece cannot exist here (tests/run.sh installs
the Debian packages).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import site
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from launcher.icons import STATE_COLORS
from launcher.popup import MENU_WINDOW_NAME
from supkit import free_port, health, wait_until

pytestmark = [pytest.mark.tray, pytest.mark.timeout(120)]
REPO = Path(__file__).absolute().parents[2]
ARTIFACTS = REPO / "test-artifacts"
TOOLS = {"Xvfb": "xvfb", "xdpyinfo": "x11-utils", "xwininfo": "x11-utils", "trayer": "trayer",
         "xdotool": "xdotool", "import": "imagemagick", "dbus-daemon": "dbus"}
GI_PROBE = ("import gi; gi.require_version('Gtk', '3.0'); gi.require_version('AyatanaAppIndicator3', '0.1'); "
            "from gi.repository import Gtk, AyatanaAppIndicator3")


def _session_skip() -> str:
    if not sys.platform.startswith("linux"):
        return "the Xvfb tray tests run on Linux"
    missing = sorted({pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None})
    if missing:
        return f"needs {', '.join(missing)} (apt-get install -y {' '.join(missing)})"
    return ""


def _x(env: dict, *cmd: str) -> str:
    return subprocess.run(list(cmd), env=env, capture_output=True, text=True, timeout=20).stdout


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def xsession(tmp_path_factory):
    """Xvfb + a D-Bus session bus + trayer; yields the environment that reaches them."""
    why = _session_skip()
    if why:
        pytest.skip(why)
    procs: list[subprocess.Popen] = []
    try:
        # Xvfb picks a free display number itself and tells us: no race with other X servers starting now
        xvfb = subprocess.Popen(["Xvfb", "-displayfd", "1", "-screen", "0", "640x360x24", "-nolisten", "tcp"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(xvfb)
        assert xvfb.stdout is not None
        display = f":{xvfb.stdout.readline().strip()}"
        wait_until(lambda: subprocess.run(["xdpyinfo", "-display", display], capture_output=True).returncode == 0,
                   timeout=20, every=0.05)
        bus = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address=1"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(bus)
        assert bus.stdout is not None
        address = bus.stdout.readline().strip()
        assert address, "dbus-daemon printed no address"
        env = {**os.environ, "DISPLAY": display, "DBUS_SESSION_BUS_ADDRESS": address, "NO_AT_BRIDGE": "1"}
        env.pop("PYSTRAY_BACKEND", None)
        env.pop("HELIX_TRAY_BACKEND", None)
        procs.append(subprocess.Popen(["trayer", "--edge", "top", "--align", "right", "--widthtype", "request",
                                       "--height", "40", "--SetDockType", "true"], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        try:
            wait_until(lambda: '"panel"' in _x(env, "xwininfo", "-root", "-tree"), timeout=30, every=0.05)
        except AssertionError:
            raise AssertionError(f"trayer never showed its panel (exit code {procs[-1].poll()})") from None
        yield env
    finally:
        for proc in reversed(procs):
            _stop(proc)


def _system_gi_python() -> tuple[str, str]:
    """(path, '') of a system Python 3.11+ that loads gi, AppIndicator and Tk, with this Python's
    major.minor (so it can load this venv's packages), or ('', why not)."""
    seen = []
    for cand in ("/usr/bin/python3", "/usr/bin/python3.11", "/usr/bin/python3.12", "/usr/bin/python3.13",
                 shutil.which("python3") or ""):
        if not cand or not Path(cand).exists() or cand in seen:
            continue
        seen.append(cand)
        ver = subprocess.run([cand, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True).stdout.strip()
        if ver != "%d.%d" % sys.version_info[:2]:
            continue
        if subprocess.run([cand, "-c", GI_PROBE], capture_output=True).returncode == 0:
            return cand, ""
    return "", ("no system Python %d.%d that loads gi and AyatanaAppIndicator3 (apt-get install -y "
                "python3-gi gir1.2-gtk-3.0 gir1.2-ayatanaappindicator3-0.1); looked at %s"
                % (*sys.version_info[:2], ", ".join(seen) or "nothing"))


@pytest.fixture(scope="module")
def gi_python(tmp_path_factory) -> str:
    """A venv made from the system Python with --system-site-packages (it sees python3-gi), which
    also sees this environment's packages through a .pth file: made in about a second, no downloads."""
    system, why = _system_gi_python()
    if not system:
        pytest.skip(why)
    venv = tmp_path_factory.mktemp("gi-venv") / "venv"
    subprocess.run([system, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    target = subprocess.run([str(py), "-c", "import site; print(site.getsitepackages()[0])"],
                            capture_output=True, text=True, check=True).stdout.strip()
    Path(target, "helix-test-env.pth").write_text("\n".join([str(REPO), *site.getsitepackages()]) + "\n")
    return str(py)


def _icon_window(env: dict) -> str:
    ids = _x(env, "xdotool", "search", "--name", "^Helix Context - running$").split()
    return ids[0] if ids else ""


def _menu_window(env: dict) -> str:
    ids = _x(env, "xdotool", "search", "--onlyvisible", "--name", f"^({MENU_WINDOW_NAME}|helix-tray)$").split()
    for wid in ids:
        info = _x(env, "xwininfo", "-id", wid)
        width = int(re.search(r"Width: (\d+)", info).group(1))
        height = int(re.search(r"Height: (\d+)", info).group(1))
        if width >= 100 and height >= 60:  # the menu, not a 10x10 leader window
            return wid
    return ""


def _colour_pixels(png: Path, colour: tuple[int, int, int], tol: int = 12) -> int:
    from PIL import Image

    img = Image.open(png).convert("RGB")
    return sum(1 for px in img.getdata() if all(abs(px[k] - colour[k]) <= tol for k in range(3)))


def _choose(env: dict, icon: str, button: str, downs: int, shot: Path | None = None) -> None:
    """Open the menu with a click on the icon, then pick the `downs`-th enabled item with the keyboard
    (disabled status lines are skipped by both Tk's and GTK's menus)."""
    _x(env, "xdotool", "mousemove", "--window", icon, "6", "6", "click", button)
    wait_until(lambda: _menu_window(env), timeout=10, every=0.05)
    if shot is not None:
        time.sleep(0.2)  # let the menu draw
        _x(env, "import", "-window", "root", str(shot))
    _x(env, "xdotool", "key", *(["Down"] * downs), "Return")
    wait_until(lambda: not _menu_window(env), timeout=10, every=0.05)


def _tray_env(xsession: dict, tmp_path: Path, path: str, request) -> tuple[str, dict]:
    """The interpreter and environment for one path; the stand-in browser writes to tmp_path/urls.txt."""
    env = dict(xsession)
    python = sys.executable
    if path in ("appindicator", "gtk"):
        python = request.getfixturevalue("gi_python")
        env["HELIX_TRAY_BACKEND"] = path
    else:
        try:
            import tkinter  # noqa: F401
        except ImportError:
            pytest.skip(f"{sys.executable} has no tkinter for the XEmbed icon's menu (apt-get install -y python3-tk)")
        # the XEmbed path as a user without gi and without a D-Bus session has it
        env["HELIX_TRAY_BACKEND"] = "xorg"
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


def _start_tray(python: str, env: dict, log_path: Path, xsession: dict) -> tuple[subprocess.Popen, int, str]:
    """The real launcher, until its backend serves and its icon is docked: (process, backend pid, icon)."""
    with log_path.open("w") as log:
        tray = subprocess.Popen([python, "-m", "launcher.tray"], cwd=REPO, env=env, stdout=log,
                                stderr=subprocess.STDOUT)
    try:
        pid = wait_until(lambda: health(f"http://127.0.0.1:{env['HELIX_SERVER_PORT']}"), timeout=40)["pid"]
        icon = wait_until(lambda: _icon_window(xsession), timeout=20, every=0.05)
    except AssertionError:
        _stop(tray)
        raise AssertionError("tray never served / docked:\n" + log_path.read_text(errors="replace")) from None
    return tray, pid, icon


@pytest.mark.parametrize("path", ["xorg", "appindicator", "gtk"])
def test_clicking_the_tray_icon_opens_its_menu_and_sigterm_ends_everything(path, xsession, tmp_path, request):
    python, env = _tray_env(xsession, tmp_path, path, request)
    urls = tmp_path / "urls.txt"
    base = f"http://127.0.0.1:{env['HELIX_SERVER_PORT']}"
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = tmp_path / "tray.log"
    tray = None
    try:
        tray, first, icon = _start_tray(python, env, log_path, xsession)
        text = log_path.read_text(errors="replace")
        assert f"tray backend: {path}" in text, text
        if path == "xorg":
            assert "no D-Bus session" in text and "right-click it for the menu" in text, text
        # the icon sits in trayer's panel, drawn in the running state's colour
        icon_shot = ARTIFACTS / f"tray-{path}-icon.png"
        _x(xsession, "import", "-window", "root", str(icon_shot))
        assert _colour_pixels(icon_shot, STATE_COLORS["running"]) >= 20, f"no green icon in {icon_shot}"

        # a click opens the menu; "Open dashboard" is its first enabled item
        button = "1" if path == "appindicator" else "3"  # AppIndicator: any click; the others: right-click
        menu_shot = ARTIFACTS / f"tray-{path}-menu.png"
        _choose(xsession, icon, button, 1, shot=menu_shot)
        assert menu_shot.stat().st_size > 0
        wait_until(lambda: urls.exists() and urls.read_text().strip(), timeout=10)
        assert urls.read_text().split() == [f"{base}/dashboard"]

        # "Restart backend" (second enabled item) → a new backend pid serves
        _choose(xsession, icon, button, 2)
        second = wait_until(lambda: (h := health(base)) and h["pid"] != first and h["pid"], timeout=30)
        assert not psutil.pid_exists(first) or psutil.Process(first).status() == psutil.STATUS_ZOMBIE

        # the default action: a left click opens the dashboard (an AppIndicator has none of its own
        # where it falls back to an XEmbed icon: every click opens its menu, checked above)
        if path != "appindicator":
            _x(xsession, "xdotool", "mousemove", "--window", icon, "6", "6", "click", "1")
            wait_until(lambda: len(urls.read_text().split()) == 2, timeout=10)

        # SIGTERM: everything ends within 5 s
        started = time.monotonic()
        tray.send_signal(signal.SIGTERM)
        code = tray.wait(timeout=10)
        took = time.monotonic() - started
        assert code == 0, log_path.read_text(errors="replace")
        assert took < 5.0, f"SIGTERM took {took:.1f} s"
        assert health(base) is None
        assert not psutil.pid_exists(second) or psutil.Process(second).status() == psutil.STATUS_ZOMBIE
        assert not _icon_window(xsession)
    finally:
        _stop(tray)


def test_an_icon_that_dies_ends_the_tray_and_its_backend(xsession, tmp_path, request):
    """The X server drops the icon's connection (xdotool windowkill): no tray left hanging without an
    icon, the backend it started goes too, within 5 s, with a message that says what happened."""
    python, env = _tray_env(xsession, tmp_path, "xorg", request)
    log_path = tmp_path / "tray.log"
    tray = None
    try:
        tray, pid, icon = _start_tray(python, env, log_path, xsession)
        started = time.monotonic()
        _x(xsession, "xdotool", "windowkill", icon)
        code = tray.wait(timeout=15)
        took = time.monotonic() - started
        text = log_path.read_text(errors="replace")
        assert code == 4, text
        assert took < 5.0, f"took {took:.1f} s"
        assert "tray icon's loop ended" in text and "helix supervise" in text
        assert health(f"http://127.0.0.1:{env['HELIX_SERVER_PORT']}") is None
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    finally:
        _stop(tray)


@pytest.mark.parametrize("path", ["appindicator"])
def test_ctrl_c_ends_a_glib_tray_and_its_backend(path, xsession, tmp_path, request):
    """SIGINT on the GLib loop (pystray used to reset it to the default: the tray died, the backend lived)."""
    python, env = _tray_env(xsession, tmp_path, path, request)
    log_path = tmp_path / "tray.log"
    tray = None
    try:
        tray, pid, _icon = _start_tray(python, env, log_path, xsession)
        started = time.monotonic()
        tray.send_signal(signal.SIGINT)
        code = tray.wait(timeout=15)
        took = time.monotonic() - started
        assert code == 0, log_path.read_text(errors="replace")
        assert took < 5.0, f"took {took:.1f} s"
        assert "stopping (SIGINT)" in log_path.read_text(errors="replace")
        assert health(f"http://127.0.0.1:{env['HELIX_SERVER_PORT']}") is None
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    finally:
        _stop(tray)
