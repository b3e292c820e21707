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

import signal
import subprocess
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable

import psutil
import pytest

import traykit
import xkit
from helix_context import signals
from launcher.icons import STATE_COLORS
from supkit import health, wait_until

pytestmark = [pytest.mark.tray, pytest.mark.timeout(120)]
REPO = Path(__file__).absolute().parents[2]
ARTIFACTS = traykit.ARTIFACTS
_x, _stop = xkit.x, xkit.stop


@pytest.fixture(scope="module")
def gi_python(tmp_path_factory) -> str:
    system, why = xkit.system_gi_python()
    if not system:
        pytest.skip(why)
    return xkit.make_gi_venv(system, tmp_path_factory.mktemp("gi-venv") / "venv")


def _colour_pixels(png: Path, colour: tuple[int, int, int], tol: int = 12) -> int:
    from PIL import Image

    img = Image.open(png).convert("RGB")
    return sum(1 for px in img.getdata() if all(abs(px[k] - colour[k]) <= tol for k in range(3)))


def _ends_within_5s(tray: subprocess.Popen, trigger: Callable[[], Any], code: int, log_path: Path, env: dict,
                    backend_pid: int) -> str:
    """Trigger a stop; the tray exits with `code` within 5 s and its backend is gone. The tray's log."""
    started = time.monotonic()
    trigger()
    got = tray.wait(timeout=15)
    took = time.monotonic() - started
    text = log_path.read_text(errors="replace")
    assert got == code, text
    assert took < 5.0, f"the stop took {took:.1f} s\n{text}"
    assert health(f"http://127.0.0.1:{env['HELIX_SERVER_PORT']}") is None
    assert not psutil.pid_exists(backend_pid) or psutil.Process(backend_pid).status() == psutil.STATUS_ZOMBIE
    return text


@pytest.mark.parametrize("path", ["xorg", "appindicator", "gtk"])
def test_clicking_the_tray_icon_opens_its_menu_and_sigterm_ends_everything(path, xsession, tmp_path, request):
    python, env = traykit.tray_env(xsession, tmp_path, path, request)
    urls = tmp_path / "urls.txt"
    base = f"http://127.0.0.1:{env['HELIX_SERVER_PORT']}"
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = tmp_path / "tray.log"
    tray = None
    try:
        tray, first, icon = traykit.start_tray(python, env, log_path, xsession)
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
        traykit.choose(xsession, icon, button, 1, shot=menu_shot)
        assert menu_shot.stat().st_size > 0
        wait_until(lambda: urls.exists() and urls.read_text().strip(), timeout=10)
        assert urls.read_text().split() == [f"{base}/dashboard"]

        # "Restart backend" (second enabled item) → a new backend pid serves
        traykit.choose(xsession, icon, button, 2)
        second = wait_until(lambda: (h := health(base)) and h["pid"] != first and h["pid"], timeout=30)
        assert not psutil.pid_exists(first) or psutil.Process(first).status() == psutil.STATUS_ZOMBIE

        # the default action: a left click opens the dashboard (an AppIndicator has none of its own
        # where it falls back to an XEmbed icon: every click opens its menu, checked above)
        if path != "appindicator":
            # once the supervisor calls the new backend running (until then a left click shows the menu)
            wait_until(lambda: (signals.read_supervisor_status(Path(env["HELIX_HOME"])) or {}).get("backend", {})
                       .get("status") == "running", timeout=20)
            time.sleep(0.2)
            _x(xsession, "xdotool", "mousemove", "--window", icon, "6", "6", "click", "1")
            wait_until(lambda: len(urls.read_text().split()) == 2, timeout=10)

        # SIGTERM: everything ends within 5 s
        _ends_within_5s(tray, lambda: tray.send_signal(signal.SIGTERM), 0, log_path, env, second)
        assert not traykit.icon_window(xsession)
    except AssertionError as exc:  # say what the tray itself logged
        raise AssertionError(f"{exc}\n--- tray log ---\n{log_path.read_text(errors='replace')[-6000:]}") from None
    finally:
        _stop(tray)


def test_the_xembed_icon_keeps_its_size_while_its_state_changes(xsession, monkeypatch):
    """pystray asked the tray host to dock the icon again on every picture change, and trayer then left it
    1 pixel wide now and then, for good: a click missed it (a CI run's four clicks opened no menu). The
    icon's colour follows the backend's state, so it changes often; through twenty changes the docked icon
    keeps the size trayer gave it."""
    from launcher import backends
    from launcher.icons import make_icon

    monkeypatch.setenv("DISPLAY", xsession["DISPLAY"])  # pystray's xorg icon opens the display named here
    candidate = backends.probe("xorg")
    if candidate.icon_class is None:
        pytest.skip(candidate.why)
    icon = candidate.icon_class("helix-size-test", make_icon("starting"), "Helix size test")
    widths: list[int] = []

    def setup(shown: Any) -> None:
        try:
            shown.visible = True
            window = str(shown._window.id)
            try:
                wait_until(lambda: traykit.icon_box(xsession, window)[2] >= 16, timeout=15, every=0.05)
            except AssertionError:
                pass  # docked too narrow: the first width below says so
            widths.append(traykit.icon_box(xsession, window)[2])
            for n in range(20):
                shown.icon = make_icon(("running", "starting", "pressure")[n % 3])
                time.sleep(0.1)
                widths.append(traykit.icon_box(xsession, window)[2])
        finally:
            shown.stop()

    icon.run(setup=setup)
    assert len(widths) == 21 and min(widths) >= 16, f"the docked icon's width, docked and after each change: {widths}"


def test_an_icon_that_dies_ends_the_tray_and_its_backend(xsession, tmp_path, request):
    """The X server drops the icon's connection (xdotool windowkill): no tray left hanging without an
    icon, the backend it started goes too, within 5 s, with a message that says what happened."""
    python, env = traykit.tray_env(xsession, tmp_path, "xorg", request)
    log_path = tmp_path / "tray.log"
    tray = None
    try:
        tray, pid, icon = traykit.start_tray(python, env, log_path, xsession)
        text = _ends_within_5s(tray, lambda: _x(xsession, "xdotool", "windowkill", icon), 4, log_path, env, pid)
        assert "tray icon's loop ended" in text and "helix supervise" in text
    except AssertionError as exc:  # say what the tray itself logged
        raise AssertionError(f"{exc}\n--- tray log ---\n{log_path.read_text(errors='replace')[-6000:]}") from None
    finally:
        _stop(tray)


@pytest.mark.parametrize("path,how", [("appindicator-no-dbus", "SIGINT"), ("xorg", "Quit")])
def test_ctrl_c_and_quit_end_the_tray_and_its_backend(path, how, xsession, tmp_path, request):
    """SIGINT on the GLib loop (pystray used to reset it to the default: the tray died, the backend lived),
    here also without a D-Bus session (the AppIndicator falls back to a clickable XEmbed icon); Quit from
    Helix's own menu (the sixth enabled entry)."""
    python, env = traykit.tray_env(xsession, tmp_path, path, request)
    log_path = tmp_path / "tray.log"
    tray = None
    try:
        tray, pid, icon = traykit.start_tray(python, env, log_path, xsession)
        if how == "SIGINT":
            assert "no D-Bus session" in log_path.read_text(errors="replace")
            traykit.choose(xsession, icon, "1", 0)  # the menu still opens (and Escape closes it)
            trigger = lambda: tray.send_signal(signal.SIGINT)  # noqa: E731 - a one-line helper beside its only use
        else:
            trigger = lambda: traykit.choose(xsession, icon, "3", 6)  # noqa: E731 - a one-line helper beside its only use
        text = _ends_within_5s(tray, trigger, 0, log_path, env, pid)
        assert f"stopping ({how})" in text
    except AssertionError as exc:  # say what the tray itself logged
        raise AssertionError(f"{exc}\n--- tray log ---\n{log_path.read_text(errors='replace')[-6000:]}") from None
    finally:
        _stop(tray)
