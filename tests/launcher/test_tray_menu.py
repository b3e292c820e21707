"""The tray without a display: the menu built from its providers, shown through pystray's own
Menu/MenuItem, actions invoked the way a click invokes them, against a real supervised backend."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from helix_context import signals
from launcher.icons import STATE_COLORS, make_icon
from launcher import menu as menu_mod
from launcher.menu import Entry, collect, find_entry, helper_model_label, status_lines, to_pystray
from launcher.tray import TrayApp
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
    assert lines["genes"] == "Indexed chunks: 12,345"
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


class Recorder:
    def __init__(self):
        self.urls: list[str] = []
        self.paths: list[Path] = []


def _app(settings, sup, rec):
    return TrayApp(settings, sup, open_url=rec.urls.append, open_path=rec.paths.append)


def _texts(entries):
    return [e.text if e is not None else "----" for e in entries]


def test_menu_puts_status_first_and_hides_what_cannot_work(pystray_dummy, supervisors):
    settings = fast_settings()
    app = _app(settings, supervisors.make(settings, start=False), Recorder())
    app.snapshot = _snap()
    texts = _texts(collect(app))
    assert texts == ["Backend: running (pid 42)", "Indexed chunks: unknown", "GPU: none detected",
                     "Models: Ollama not reachable", "Indexing: backend not reachable", "----", "Open dashboard",
                     "Restart backend", "----", "Add folder…", "Pause indexing", "----", "Open logs folder", "----",
                     "Quit"]
    # no helper model configured: no pause entry at all, and the old word is gone
    assert not any("ribosome" in t.lower() or "helper" in t.lower() for t in texts)

    # while the backend starts, what cannot work yet is greyed, with the reason in its text
    app.snapshot = _snap("starting")
    entries = collect(app)
    dash, restart = find_entry(entries, "Open dashboard"), find_entry(entries, "Restart backend")
    assert (dash.text, dash.enabled) == ("Open dashboard (backend starting)", False)
    assert (restart.text, restart.enabled) == ("Restart backend (starting…)", False)
    app.snapshot = _snap("fatal", backend={"status": "fatal", "last_error": "crash loop"})
    assert find_entry(collect(app), "Start backend").enabled

    # the same entries through pystray: status lines disabled, the default action is the dashboard
    app.snapshot = _snap()
    menu = to_pystray(app, pystray_dummy.Menu, pystray_dummy.MenuItem)
    items = [i for i in menu.items if i is not pystray_dummy.Menu.SEPARATOR]
    assert [i.text for i in items][:6] == texts[:5] + ["Open dashboard"]
    assert [i.enabled for i in items[:5]] == [False] * 5 and items[5].default


def test_helper_model_entry_only_when_configured_and_grafana_only_with_a_url(pystray_dummy, supervisors):
    settings = fast_settings(ribosome={"enabled": True, "model": "qwen2.5:0.5b"},
                             telemetry={"grafana_url": "http://127.0.0.1:3000/d/helix"})
    rec = Recorder()
    app = _app(settings, supervisors.make(settings, start=False), rec)
    app.snapshot = _snap()
    texts = _texts(collect(app))
    assert texts[6:9] == ["Open dashboard", "Pause helper model", "Restart backend"]
    assert "Open Grafana" in texts
    find_entry(collect(app), "Open Grafana").action()
    assert rec.urls == ["http://127.0.0.1:3000/d/helix"]
    app.snapshot = _snap(ribosome_paused=True, pressure={"active": True, "reasons": ["phi3 beside llama3"]})
    texts = _texts(collect(app))
    assert "Resume helper model" in texts and texts[4] == "Pressure: phi3 beside llama3"
    assert helper_model_label(None) == "Pause helper model"


def test_a_new_provider_adds_entries_in_one_place(supervisors, monkeypatch):
    """What the living-index work will do: one provider, its status line among the status lines,
    its actions beside the others, and a broken provider costs only its own entries."""
    settings = fast_settings()
    app = _app(settings, supervisors.make(settings, start=False), Recorder())
    app.snapshot = _snap()
    added = []

    def indexing(_app):
        return [Entry("Indexing: 3 folders watched", section="status", enabled=False),
                Entry("Add folder…", lambda: added.append("add")), Entry("Pause indexing", lambda: None)]

    def broken(_app):
        raise RuntimeError("boom")

    monkeypatch.setattr(menu_mod, "PROVIDERS", [*menu_mod.PROVIDERS, indexing, broken])
    texts = _texts(app.entries())
    assert texts.index("Indexing: 3 folders watched") < texts.index("----") < texts.index("Add folder…")
    assert texts[texts.index("Restart backend") + 1:texts.index("Restart backend") + 3] == \
        ["Add folder…", "Pause indexing"]
    find_entry(app.entries(), "Add folder").action()
    assert added == ["add"] and texts[-1] == "Quit"


def test_menu_actions_drive_the_real_backend(pystray_dummy, supervisors):
    settings = fast_settings(ribosome={"enabled": True})
    sup = supervisors.make(settings, start=False)
    rec = Recorder()
    app = _app(settings, sup, rec)
    icon = app.make_icon(pystray_dummy)
    sup.start()
    first = serving(sup)["backend"]["pid"]
    wait_until(lambda: app.snapshot and app.snapshot["backend"]["status"] == "running")

    def item(text):
        return next(i for i in icon.menu.items if i is not pystray_dummy.Menu.SEPARATOR and i.text.startswith(text))

    assert icon.menu.items[0].text.startswith("Backend: running")
    # the icon's default action (a click) opens the dashboard, as does the item
    icon.menu(icon)
    item("Open dashboard")(icon)
    assert rec.urls == [f"{settings.base_url}/dashboard"] * 2

    # pause → the real backend's helper-model flag is set; the label follows
    item("Pause helper model")(icon)
    assert httpx.get(f"{settings.base_url}/admin/ribosome", trust_env=False).json()["paused"] is True
    assert signals.ribosome_paused(settings.home)
    assert helper_model_label(app.snapshot) == "Resume helper model"
    item("Resume helper model")(icon)
    assert httpx.get(f"{settings.base_url}/admin/ribosome", trust_env=False).json()["paused"] is False

    item("Open logs folder")(icon)
    assert rec.paths == [settings.logs_dir]

    # restart → a new backend serves
    item("Restart backend")(icon)
    snap = serving(sup, not_pid=first)
    assert snap["backend"]["planned_restarts"] == 1 and snap["backend"]["crashes"] == 0
    wait_until(lambda: app.snapshot["backend"]["pid"] == snap["backend"]["pid"])

    # quit → the backend this tray started is stopped
    item("Quit")(icon)
    assert not sup.running and app.quitting
    wait_until(lambda: health(settings.base_url) is None)
    assert signals.read_supervisor_status(settings.home)["backend"]["status"] == "stopped"


def test_quit_leaves_an_adopted_backend_running(pystray_dummy, supervisors, tmp_path):
    settings = fast_settings()
    owner = supervisors.make(settings)
    pid = serving(owner)["backend"]["pid"]
    tray_settings = fast_settings(port=settings.server.port).replace(home=tmp_path / "tray-home",  # the same genome
                                                                     genome={"path": str(settings.genome_path)})
    tray_sup = supervisors.make(tray_settings)
    app = _app(tray_settings, tray_sup, Recorder())
    app.make_icon(pystray_dummy)
    assert serving(tray_sup)["backend"]["adopted"]
    find_entry(app.entries(), "Quit").action()
    assert not tray_sup.running
    assert app.kill_owned_backend() is None  # never kills what it did not start
    assert health(settings.base_url)["pid"] == pid
