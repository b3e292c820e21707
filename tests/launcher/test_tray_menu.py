"""The tray without a display: menu built from pystray's own Menu/MenuItem, actions invoked
the way a click invokes them (`icon.menu.items[i](icon)`), against a real supervised backend."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from helix_context import signals
from launcher.icons import STATE_COLORS, make_icon
from launcher.menu import build_menu, find_item, ribosome_label, status_lines
from launcher.tray import TrayApp, backend_candidates
from supervisor.status import icon_state
from supkit import fast_settings, health, serving, wait_until

pytestmark = pytest.mark.timeout(120)
GIB = 1024 ** 3


def _snap(status="running", **extra):
    snap = {"backend": {"status": status, "pid": 42, "restarts": 0, "started_at": None},
            "gpu": {"available": False}, "ollama": {"reachable": False}, "resident_models": [],
            "pressure": {"active": False, "reasons": []}, "ribosome_paused": False, "genes": None}
    snap.update(extra)
    return snap


def test_status_lines_are_plain_text_from_the_snapshot():
    lines = status_lines(_snap(genes=12345, gpu={"available": True, "used_bytes": 6 * GIB, "total_bytes": 24 * GIB,
                                                 "used_pct": 25.0},
                               ollama={"reachable": True},
                               resident_models=[{"name": "llama3:8b", "size_vram": 5_000_000_000}]))
    assert lines["backend"].startswith("Backend: running (pid 42")
    assert lines["genes"] == "Genes: 12,345"
    assert lines["gpu"] == "GPU: 6.0 / 24.0 GiB (25%)"
    assert lines["models"] == "Models: llama3:8b (5.0 GB)"
    assert lines["pressure"] == ""
    assert status_lines(_snap())["gpu"] == "GPU: none detected"
    assert status_lines(_snap())["models"] == "Models: Ollama not reachable"
    fatal = status_lines(_snap("fatal", backend={"status": "fatal", "last_error": "crash loop"}))
    assert fatal["backend"] == "Backend: fatal: crash loop"
    assert status_lines(None)["backend"].startswith("Backend: no supervisor status")


def test_icon_state_and_colours():
    assert icon_state(_snap("running")) == "running"
    assert icon_state(_snap("starting")) == "starting" and icon_state(_snap("restarting")) == "starting"
    assert icon_state(_snap("running", pressure={"active": True, "reasons": ["x"]})) == "pressure"
    assert icon_state(_snap("stopped")) == "stopped" and icon_state(None) == "stopped"
    assert icon_state(_snap("fatal", pressure={"active": True})) == "fatal"
    for state, colour in STATE_COLORS.items():
        img = make_icon(state)
        assert img.size == (64, 64) and img.mode == "RGBA"
        assert img.getpixel((12, 32))[:3] == colour  # the disc, left of the "H"
    assert len(set(STATE_COLORS.values())) == len(STATE_COLORS)


def test_backend_choice_on_linux():
    no_display, why = backend_candidates({}, "linux")
    assert no_display == [] and "DISPLAY" in why
    assert backend_candidates({"DISPLAY": ":0"}, "linux", lambda ind: True, lambda: True)[0] == \
        ["appindicator", "gtk", "xorg"]
    assert backend_candidates({"DISPLAY": ":0"}, "linux", lambda ind: not ind, lambda: True)[0] == ["gtk", "xorg"]
    assert backend_candidates({"DISPLAY": ":0"}, "linux", lambda ind: False, lambda: True)[0] == ["xorg"]
    none, why = backend_candidates({"DISPLAY": ":0"}, "linux", lambda ind: False, lambda: False)
    assert none == [] and "gi" in why
    assert backend_candidates({"PYSTRAY_BACKEND": "xorg"}, "linux")[0] == ["xorg"]
    assert backend_candidates({}, "win32")[0] == [""]


class Recorder:
    def __init__(self):
        self.urls: list[str] = []
        self.paths: list[Path] = []


def _app(settings, sup, rec):
    return TrayApp(settings, sup, open_url=rec.urls.append, open_path=rec.paths.append)


def test_menu_layout_and_visibility(pystray_dummy, supervisors):
    settings = fast_settings()
    sup = supervisors.make(settings, start=False)
    app = _app(settings, sup, Recorder())
    icon = app.make_icon(pystray_dummy)
    texts = [item.text for item in icon.menu.items]
    assert texts[6:10] == ["Open dashboard", "Pause ribosome", "Restart backend", "Open logs folder"]
    assert texts[-1] == "Quit"
    assert [i.enabled for i in icon.menu.items[:4]] == [False] * 4
    visible = [i.text for i in icon.menu]  # iteration drops hidden items and extra separators
    assert "Open Grafana" not in visible and not any(t.startswith("Pressure") for t in visible)
    assert icon.menu.items[6].default

    graf = fast_settings(telemetry={"grafana_url": "http://127.0.0.1:3000/d/helix"})
    rec = Recorder()
    app2 = _app(graf, supervisors.make(graf, start=False), rec)
    menu = build_menu(app2, pystray_dummy.Menu, pystray_dummy.MenuItem)
    assert "Open Grafana" in [i.text for i in menu]
    find_item(menu, "Open Grafana")(icon)
    assert rec.urls == ["http://127.0.0.1:3000/d/helix"]
    app2.snapshot = _snap(pressure={"active": True, "reasons": ["phi3 beside llama3"]})
    assert "Pressure: phi3 beside llama3" in [i.text for i in menu]


def test_menu_actions_drive_the_real_backend(pystray_dummy, supervisors):
    settings = fast_settings()
    sup = supervisors.make(settings, start=False)
    rec = Recorder()
    app = _app(settings, sup, rec)
    icon = app.make_icon(pystray_dummy)
    sup.start()
    first = serving(sup)["backend"]["pid"]
    wait_until(lambda: app.snapshot and app.snapshot["backend"]["status"] == "running")
    assert icon.menu.items[0].text.startswith("Backend: running")

    # the icon's default action (a click) opens the dashboard
    icon.menu(icon)
    icon.menu.items[6](icon)
    assert rec.urls == [f"{settings.base_url}/dashboard"] * 2

    # pause → the real backend's ribosome flag is set; the label follows
    assert icon.menu.items[7].text == "Pause ribosome"
    icon.menu.items[7](icon)
    assert httpx.get(f"{settings.base_url}/admin/ribosome", trust_env=False).json()["paused"] is True
    assert signals.ribosome_paused(settings.home)
    assert icon.menu.items[7].text == "Resume ribosome" == ribosome_label(app.snapshot)
    icon.menu.items[7](icon)
    assert httpx.get(f"{settings.base_url}/admin/ribosome", trust_env=False).json()["paused"] is False
    assert icon.menu.items[7].text == "Pause ribosome"

    icon.menu.items[9](icon)
    assert rec.paths == [settings.logs_dir]

    # restart → a new backend serves
    icon.menu.items[8](icon)
    snap = serving(sup, not_pid=first)
    assert snap["backend"]["planned_restarts"] == 1 and snap["backend"]["crashes"] == 0
    wait_until(lambda: app.snapshot["backend"]["pid"] == snap["backend"]["pid"])

    # quit → the backend this tray started is stopped
    icon.menu.items[-1](icon)
    assert not sup.running
    wait_until(lambda: health(settings.base_url) is None)
    assert signals.read_supervisor_status(settings.home)["backend"]["status"] == "stopped"


def test_quit_leaves_an_adopted_backend_running(pystray_dummy, supervisors, tmp_path):
    settings = fast_settings()
    owner = supervisors.make(settings)
    pid = serving(owner)["backend"]["pid"]
    tray_settings = fast_settings(port=settings.server.port).replace(home=tmp_path / "tray-home")
    tray_sup = supervisors.make(tray_settings)
    app = _app(tray_settings, tray_sup, Recorder())
    icon = app.make_icon(pystray_dummy)
    assert serving(tray_sup)["backend"]["adopted"]
    icon.menu.items[-1](icon)
    assert not tray_sup.running
    assert health(settings.base_url)["pid"] == pid
