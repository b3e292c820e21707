"""Backend choice and fallback, the stop deadline, and the plain-words reasons, without a display.

The backends' own loops are exercised for real under Xvfb (test_tray_xvfb.py);
here pystray's base Icon gets a loop that fails before it is ready, or runs until
stopped, so the fallback and the stop paths run through the tray's real code.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest

from launcher import backends
from launcher.backends import Candidate, _HelixIconMixin, dbus_reason, on_click, order
from launcher.stopping import StopDeadline, install_stop_signals
from launcher.tray import TrayApp, run_icon
from supkit import fast_settings

pytestmark = pytest.mark.timeout(60)


def test_backends_are_tried_best_first_and_a_users_choice_leads():
    assert order({}, "linux") == ["appindicator", "gtk", "xorg"]
    assert order({"PYSTRAY_BACKEND": "xorg"}, "linux") == ["xorg", "appindicator", "gtk"]
    assert order({"HELIX_TRAY_BACKEND": "gtk", "PYSTRAY_BACKEND": "xorg"}, "linux") == ["gtk", "appindicator", "xorg"]
    assert order({}, "win32") == ["win32"] and order({}, "darwin") == ["darwin"]
    assert "DISPLAY" in backends.no_display_reason({}, "linux")
    assert backends.no_display_reason({"WAYLAND_DISPLAY": "wayland-0"}, "linux") == ""
    assert backends.no_display_reason({}, "win32") == ""


def test_a_backend_that_cannot_load_says_why_in_words_a_user_can_act_on(monkeypatch):
    def fail(exc):
        def imp(name):
            raise exc
        return imp

    monkeypatch.setattr(backends.importlib, "import_module", fail(ModuleNotFoundError("No module named 'gi'", name="gi")))
    monkeypatch.setattr(backends, "_gtk_base", lambda name: backends.importlib.import_module("pystray._gtk").Icon)
    assert "cannot load gi (python3-gi)" in backends.probe("gtk").why
    monkeypatch.setattr(backends.importlib, "import_module", fail(ModuleNotFoundError("x", name="Xlib")))
    assert "pip install python-xlib" in backends.probe("xorg").why
    monkeypatch.setattr(backends.importlib, "import_module", fail(ValueError("Namespace AppIndicator3 not available")))
    assert "gir1.2-ayatanaappindicator3-0.1" in backends.probe("appindicator").why
    assert "unknown tray backend" in backends.probe("nonsense").why


def test_no_dbus_session_is_explained_in_plain_words():
    assert dbus_reason({"DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1000/bus"}, lambda _: None) == ""
    assert dbus_reason({}, lambda name: "/usr/bin/dbus-launch") == ""  # GLib starts one on demand
    why = dbus_reason({}, lambda _: None)
    assert "no D-Bus session" in why and "sudo apt install dbus-x11" in why and "right-click it for the menu" in why


class _Popup:
    def __init__(self):
        self.shown = []

    def show(self, x, y):
        self.shown.append((x, y))


def test_xembed_clicks_left_runs_the_default_right_opens_the_menu(pystray_dummy, supervisors):
    settings = fast_settings()
    opened = []
    app = TrayApp(settings, supervisors.make(settings, start=False), open_url=opened.append, open_path=print)
    app.snapshot = {"backend": {"status": "running", "pid": 1}}
    icon = app.make_icon(pystray_dummy)
    icon.popup = _Popup()
    icon.update_menu = lambda: None  # the dummy backend has no native menu to refresh
    on_click(icon, 1, 10, 20)
    assert opened == [app.dashboard_url] and icon.popup.shown == []
    on_click(icon, 3, 10, 20)
    assert icon.popup.shown == [(10, 20)]
    # nothing to open while the backend is down: a left click shows the menu (with the reason) instead
    app.snapshot = {"backend": {"status": "starting"}}
    on_click(icon, 1, 5, 6)
    assert icon.popup.shown[-1] == (5, 6) and opened == [app.dashboard_url]
    # no Tk in this Python: every click is the default action
    app.snapshot = {"backend": {"status": "running", "pid": 1}}
    icon.popup = None
    on_click(icon, 3, 1, 1)
    assert opened == [app.dashboard_url] * 2


def _loop_classes(pystray):
    base = sys.modules["pystray._base"].Icon

    class FailsToStart(_HelixIconMixin, base):
        def _run(self):
            raise RuntimeError("Failed to execute child process \u201cdbus-launch\u201d")

        def _update_menu(self):
            pass

    class Runs(_HelixIconMixin, base):
        HAS_MENU = True

        def _run(self):
            self._stopped = threading.Event()
            self._mark_ready()
            self._stopped.wait()

        def _stop(self):
            self._stopped.set()

        def _show(self):
            pass

        def _hide(self):
            pass

        def _update_icon(self):
            pass

        def _update_title(self):
            pass

        def _update_menu(self):
            pass

    class Crashes(Runs):
        def _run(self):
            self._mark_ready()
            time.sleep(0.2)
            raise OSError("connection to the X server lost")

    return FailsToStart, Runs, Crashes


def test_a_backend_that_fails_to_start_gives_way_to_the_next(pystray_dummy, supervisors, caplog):
    FailsToStart, Runs, Crashes = _loop_classes(pystray_dummy)
    settings = fast_settings()
    app = TrayApp(settings, supervisors.make(settings, start=False), open_url=print, open_path=print)
    cands = [Candidate("appindicator", why="this Python cannot load gi (python3-gi)"),
             Candidate("gtk", FailsToStart), Candidate("xorg", Runs)]
    threading.Timer(0.5, lambda: app.request_quit(reason="test")).start()
    started = time.monotonic()
    with caplog.at_level("INFO", logger="helix.tray"):
        assert run_icon(app, pystray_dummy, cands) == ""  # stopped on purpose
    assert time.monotonic() - started < 3.0  # pystray's setup thread did not hold the failed backend for 5 s
    chosen = [r.getMessage() for r in caplog.records if r.getMessage().startswith("tray backend: ")]
    assert chosen == ["tray backend: xorg (skipped: appindicator: this Python cannot load gi (python3-gi); "
                      "gtk: failed to start (RuntimeError: Failed to execute child process \u201cdbus-launch\u201d))"]
    assert isinstance(app.icon, Runs)

    # every backend failing, or one dying once it ran, is a failed icon (the tray then ends)
    app2 = TrayApp(settings, supervisors.make(settings, start=False), open_url=print, open_path=print)
    assert run_icon(app2, pystray_dummy, [Candidate("gtk", FailsToStart)]).startswith("no tray backend could start")
    app3 = TrayApp(settings, supervisors.make(settings, start=False), open_url=print, open_path=print)
    assert "connection to the X server lost" in run_icon(app3, pystray_dummy, [Candidate("xorg", Crashes)])
    # no non-daemon thread of pystray's is left to keep the process alive
    assert not [t for t in threading.enumerate() if not t.daemon and t.name.startswith("helix-tray")]


def test_the_stop_deadline_kills_the_backend_tree_and_exits(tmp_path):
    # a real process tree stands in for the backend: a parent with a child
    tree = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                             "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"])
    try:
        parent = psutil.Process(tree.pid)
        child = None
        deadline_at = time.monotonic() + 10
        while child is None and time.monotonic() < deadline_at:
            kids = parent.children()
            child = kids[0] if kids else None
            time.sleep(0.05)
        assert child is not None
        exits: list[int] = []
        from supervisor.process import kill_all, tree_of

        guard = StopDeadline(lambda: kill_all(tree_of(parent), timeout_s=2), seconds=0.3, exit=exits.append)
        guard.arm("SIGTERM", code=0)
        guard.arm("again", code=9)  # only the first stop request counts
        wait_for = time.monotonic() + 5
        while not exits and time.monotonic() < wait_for:
            time.sleep(0.05)
        assert guard.fired and exits == [0]
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
        tree.wait(timeout=5)

        calm = StopDeadline(lambda: exits.append(-1), seconds=0.2, exit=exits.append)
        calm.arm("Quit")
        calm.disarm()  # the polite stop finished in time
        time.sleep(0.5)
        assert not calm.fired and exits == [0]
    finally:
        if tree.poll() is None:
            tree.kill()


@pytest.mark.skipif(not hasattr(signal, "SIGTERM") or sys.platform == "win32", reason="POSIX signals")
def test_stop_signals_run_the_stop_off_the_signal_handler():
    seen: list[tuple[str, str]] = []
    done = threading.Event()
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        installed = install_stop_signals(lambda name: (seen.append((name, threading.current_thread().name)),
                                                       done.set()))
        assert set(installed) >= {"SIGINT", "SIGTERM"}
        os.kill(os.getpid(), signal.SIGTERM)
        assert done.wait(5)
        assert seen == [("SIGTERM", "helix-tray-stop")]
    finally:
        for s, h in old.items():
            signal.signal(s, h)
